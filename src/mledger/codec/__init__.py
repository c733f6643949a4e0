"""The one serialization seam: every byte format mledger reads or writes, and nothing else.

* :mod:`.varint` - scalar protobuf wire helpers (varints, tags, fields);
* :mod:`.varint_arrays` - the same for repeated records, vectorised with numpy;
* :mod:`.cursor_state` / :mod:`.cursor_info` - a cursor's persisted state and its two records,
  ``PositionInfo`` and ``ManagedCursorInfo`` (MLDataFormats.proto), byte-identical to protobuf;
* :mod:`.ledger_info` - ``ManagedLedgerInfo``, a managed ledger's ledger list;
* :mod:`.compression` - Pulsar's 0x4778 metadata compression envelope;
* :mod:`.chunking` - PIP-381 chunks of a large cursor state and their JSON footer;
* :mod:`.messageid` - :class:`MessageId`, the value Pulsar clients exchange as ``MessageIdData``;
* :mod:`.entry` - :class:`EntryMetadata` (``MessageMetadata``), :class:`Entry` and the entry
  framing; :mod:`.batch` - the batch payload of several messages in one entry.

Pulsar defines these formats; this layer is byte-compatible with them (``PulsarApi.proto``,
``MLDataFormats.proto`` and the Java code that frames them) and owns
the generated protobuf classes. Nothing here does I/O: callers hand in and take back bytes.
It imports only :mod:`mledger.core`.
"""

from .entry import (
    Entry as Entry,
    EntryMetadata as EntryMetadata,
    decode_entry as decode_entry,
    encode_entry as encode_entry,
    stored_entry as stored_entry,
)
from .messageid import (
    InvalidMessageIdError as InvalidMessageIdError,
    MessageId as MessageId,
    as_position as as_position,
)

__all__ = [
    "Entry",
    "EntryMetadata",
    "InvalidMessageIdError",
    "MessageId",
    "as_position",
    "decode_entry",
    "encode_entry",
    "stored_entry",
]
