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

from ._batch import (
    SingleMessage as SingleMessage,
    compact_batch as compact_batch,
    decode_batch as decode_batch,
    encode_batch as encode_batch,
)
from ._chunking import (
    ChunkFooter as ChunkFooter,
    pack_entries as pack_entries,
    parse_footer as parse_footer,
    reassemble as reassemble,
    reassemble_stream as reassemble_stream,
    split_chunks as split_chunks,
    unpack_payload as unpack_payload,
)
from ._compression import (
    CompressionType as CompressionType,
    compress_metadata as compress_metadata,
    compress_payload as compress_payload,
    decompress_message as decompress_message,
    decompress_metadata as decompress_metadata,
    decompress_payload as decompress_payload,
    is_compressed as is_compressed,
    parse_compression_type as parse_compression_type,
)
from ._cursor_info import (
    PositionInfoEntry as PositionInfoEntry,
    PositionInfoRanges as PositionInfoRanges,
    decode_managed_cursor_info as decode_managed_cursor_info,
    decode_position_info as decode_position_info,
    encode_managed_cursor_info as encode_managed_cursor_info,
    encode_position_info as encode_position_info,
    long_list_size as long_list_size,
    range_record_sizes as range_record_sizes,
)
from ._cursor_state import PersistedCursorState as PersistedCursorState, RangeArrays as RangeArrays
from ._entry import (
    Entry as Entry,
    EntryMetadata as EntryMetadata,
    decode_entry as decode_entry,
    encode_entry as encode_entry,
    split_entry as split_entry,
    stored_entry as stored_entry,
)
from ._ledger_info import (
    StoredLedger as StoredLedger,
    decode_managed_ledger_info as decode_managed_ledger_info,
    decode_terminated_position as decode_terminated_position,
    encode_managed_ledger_info as encode_managed_ledger_info,
    looks_like_managed_ledger_info as looks_like_managed_ledger_info,
)
from ._messageid import (
    InvalidMessageIdError as InvalidMessageIdError,
    MessageId as MessageId,
    as_position as as_position,
)

__all__ = [
    "ChunkFooter",
    "CompressionType",
    "Entry",
    "EntryMetadata",
    "InvalidMessageIdError",
    "MessageId",
    "PersistedCursorState",
    "PositionInfoEntry",
    "PositionInfoRanges",
    "RangeArrays",
    "SingleMessage",
    "as_position",
    "compress_metadata",
    "compress_payload",
    "decode_batch",
    "decode_entry",
    "decode_managed_cursor_info",
    "decode_position_info",
    "decompress_metadata",
    "decompress_payload",
    "encode_batch",
    "encode_entry",
    "encode_managed_cursor_info",
    "encode_position_info",
    "is_compressed",
    "pack_entries",
    "parse_compression_type",
    "parse_footer",
    "reassemble",
    "split_chunks",
    "stored_entry",
    "unpack_payload",
]
