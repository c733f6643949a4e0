"""Entries: what a managed ledger stores, and Pulsar's byte framing of them.

Pulsar stores each entry as the producer framed it (``Commands.serializeMetadataAndPayload``)::

    [0x0e01][crc32c: 4 bytes]   optional: magic and checksum
    [metadata size: 4 bytes][MessageMetadata][payload]

all integers big-endian; the checksum is the CRC32C of everything after it (size, metadata and
payload). A broker with broker-entry metadata enabled puts
``[0x0e02][size: 4][BrokerEntryMetadata]`` in front of it all. :func:`encode_entry` writes the
plain form (no checksum, no broker prefix); :func:`decode_entry` reads all of them, like
Pulsar's ``Commands.parseMessageMetadata``. The checksum is :func:`crc32c` from the ``crc32c``
package (a C extension using the CPU's CRC instructions, with a software fallback).

:class:`EntryMetadata` is ``MessageMetadata`` (PulsarApi.proto) with friendly names. Its
``to_bytes`` / ``from_bytes`` go through the generated ``PulsarApi_pb2.MessageMetadata``, so the
bytes are Pulsar's: a real broker's entries parse, fields mledger does not model are skipped.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from crc32c import crc32c as crc32c
from google.protobuf.message import DecodeError

from ..core import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    UINT64_MASK,
    InvalidRequestError,
    Position,
    StateCorruptedError,
    as_int64,
    check_int,
)
from .proto.PulsarApi_pb2 import MessageMetadata

__all__ = ["Entry", "EntryMetadata", "crc32c", "decode_entry", "encode_entry", "split_entry", "stored_entry"]

_MAGIC_CRC32C = b"\x0e\x01"
_MAGIC_BROKER_ENTRY_METADATA = b"\x0e\x02"
_SIZE = struct.Struct(">I")

Properties = tuple[tuple[str, str], ...]


def _normalize_properties(props: object) -> Properties:
    items: Iterable[Any]
    if isinstance(props, Mapping):
        items = props.items()
    elif isinstance(props, Iterable) and not isinstance(props, (str, bytes)):
        items = props
    else:
        raise InvalidRequestError(f"invalid properties {props!r}: expected a mapping or pairs")
    out = []
    for item in items:
        try:
            key, value = item
        except (TypeError, ValueError):
            raise InvalidRequestError(f"invalid property {item!r}: expected a (key, value) pair") from None
        if type(key) is not str or type(value) is not str:
            raise InvalidRequestError(f"invalid property {item!r}: key and value must be str")
        out.append((key, value))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class EntryMetadata:
    """The metadata Pulsar keeps with every entry (``MessageMetadata``), immutable.

    ``None`` means "not set" (the field is absent on the wire). ``num_messages`` is the number
    of messages in a batched entry (1 for a plain one). Times are milliseconds since the epoch.
    ``properties`` may be given as a mapping or as (key, value) pairs; it is kept as a tuple of
    pairs in order. Chunk fields follow Pulsar's chunking: ``uuid`` names the chunked message,
    ``chunk_id`` is this chunk's index out of ``num_chunks``.

    Construction raises :class:`~mledger.core.InvalidRequestError` naming the field when a
    value has the wrong type or does not fit its wire type (int64 for ids and times, int32 for
    counts and chunk fields).

    >>> md = EntryMetadata(producer_name="p", sequence_id=7, properties={"k": "v"})
    >>> EntryMetadata.from_bytes(md.to_bytes()) == md
    True
    """

    producer_name: str = ""
    sequence_id: int = 0
    publish_time_ms: int = 0
    num_messages: int = 1
    deliver_at_ms: int | None = None
    partition_key: str | None = None
    highest_sequence_id: int | None = None
    properties: Properties = ()
    event_time_ms: int | None = None
    uuid: str | None = None
    chunk_id: int | None = None
    num_chunks: int | None = None
    total_chunk_msg_size: int | None = None
    batched: bool = False
    """Whether ``num_messages_in_batch`` is on the wire: always when ``num_messages != 1``,
    and for a Pulsar batch of one message (its payload is in batch format)."""

    def __post_init__(self) -> None:
        if type(self.producer_name) is not str:
            raise InvalidRequestError(f"invalid producer_name {self.producer_name!r}: not a str")
        check_int("sequence_id", self.sequence_id, INT64_MIN, INT64_MAX, InvalidRequestError)
        check_int("publish_time_ms", self.publish_time_ms, INT64_MIN, INT64_MAX, InvalidRequestError)
        check_int("num_messages", self.num_messages, INT32_MIN, INT32_MAX, InvalidRequestError)
        if self.num_messages != 1 and not self.batched:
            object.__setattr__(self, "batched", True)  # any other count is on the wire
        for name in ("deliver_at_ms", "highest_sequence_id", "event_time_ms"):
            value = getattr(self, name)
            if value is not None:
                check_int(name, value, INT64_MIN, INT64_MAX, InvalidRequestError)
        for name in ("chunk_id", "num_chunks", "total_chunk_msg_size"):
            value = getattr(self, name)
            if value is not None:
                check_int(name, value, INT32_MIN, INT32_MAX, InvalidRequestError)
        for name in ("partition_key", "uuid"):
            value = getattr(self, name)
            if value is not None and type(value) is not str:
                raise InvalidRequestError(f"invalid {name} {value!r}: not a str")
        props = self.properties
        if type(props) is not tuple or not all(
            type(p) is tuple and len(p) == 2 and type(p[0]) is str and type(p[1]) is str for p in props
        ):
            object.__setattr__(self, "properties", _normalize_properties(props))

    def to_bytes(self) -> bytes:
        """The serialized Pulsar ``MessageMetadata``. O(size of the metadata)."""
        msg = MessageMetadata()
        msg.producer_name = self.producer_name
        # uint64 on the wire; Java keeps these in a signed long, so -1 goes out as 2**64-1.
        msg.sequence_id = self.sequence_id & UINT64_MASK
        msg.publish_time = self.publish_time_ms & UINT64_MASK
        if self.properties:
            add = msg.properties.add
            for key, value in self.properties:
                add(key=key, value=value)
        if self.partition_key is not None:
            msg.partition_key = self.partition_key
        if self.num_messages != 1 or self.batched:
            msg.num_messages_in_batch = self.num_messages
        if self.event_time_ms is not None:
            msg.event_time = self.event_time_ms & UINT64_MASK
        if self.deliver_at_ms is not None:
            msg.deliver_at_time = self.deliver_at_ms
        if self.highest_sequence_id is not None:
            msg.highest_sequence_id = self.highest_sequence_id & UINT64_MASK
        if self.uuid is not None:
            msg.uuid = self.uuid
        if self.num_chunks is not None:
            msg.num_chunks_from_msg = self.num_chunks
        if self.total_chunk_msg_size is not None:
            msg.total_chunk_msg_size = self.total_chunk_msg_size
        if self.chunk_id is not None:
            msg.chunk_id = self.chunk_id
        data: bytes = msg.SerializeToString()
        return data

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> EntryMetadata:
        """Parse a serialized Pulsar ``MessageMetadata``.

        Unknown fields are skipped; a string that is not valid UTF-8 is decoded with U+FFFD
        replacements, as Java does. Raises :class:`~mledger.core.StateCorruptedError` when
        the bytes do not parse or a required field (producer_name, sequence_id, publish_time)
        is missing.
        """
        try:
            msg = MessageMetadata.FromString(data)  # type: ignore[arg-type]  # upb takes any buffer
        except DecodeError as e:
            raise StateCorruptedError(f"invalid entry metadata: {e}") from None
        # One pass over the fields present (the read path runs this for every entry it reads).
        name = seq = publish = key = event_time = deliver_at = highest = uuid = None
        num_chunks = total_chunk_size = chunk_id = None
        props: Any = ()
        num_messages = 1
        batched = False
        for fd, value in msg.ListFields():
            number = fd.number
            if number <= 3:
                if number == 1:
                    name = value
                elif number == 2:
                    seq = value
                else:
                    publish = value
            elif number == 4:
                props = value
            elif number == 6:
                key = value
            elif number == 11:
                num_messages = value
                batched = True
            elif number == 12:
                event_time = value
            elif number == 19:
                deliver_at = value
            elif number == 24:
                highest = value
            elif number == 26:
                uuid = value
            elif number == 27:
                num_chunks = value
            elif number == 28:
                total_chunk_size = value
            elif number == 29:
                chunk_id = value
        # IsInitialized also covers the required key/value of each property.
        if name is None or seq is None or publish is None or (props and not msg.IsInitialized()):
            missing = ", ".join(msg.FindInitializationErrors())  # type: ignore[attr-defined]
            raise StateCorruptedError(f"invalid entry metadata: missing required {missing}")
        md = _object_new(cls)
        _set_producer_name(md, name if type(name) is str else _text(name))
        _set_sequence_id(md, as_int64(seq))
        _set_publish_time_ms(md, as_int64(publish))
        _set_properties(md, tuple((_text(p.key), _text(p.value)) for p in props) if props else ())
        _set_partition_key(md, key if key is None or type(key) is str else _text(key))
        _set_num_messages(md, num_messages)
        _set_event_time_ms(md, None if event_time is None else as_int64(event_time))
        _set_deliver_at_ms(md, deliver_at)
        _set_highest_sequence_id(md, None if highest is None else as_int64(highest))
        _set_uuid(md, uuid if uuid is None or type(uuid) is str else _text(uuid))
        _set_num_chunks(md, num_chunks)
        _set_total_chunk_msg_size(md, total_chunk_size)
        _set_chunk_id(md, chunk_id)
        _set_batched(md, batched)
        return md


_DEFAULT_METADATA = EntryMetadata()


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a managed ledger: where it is, its payload, and its metadata."""

    position: Position
    data: bytes
    metadata: EntryMetadata = _DEFAULT_METADATA
    raw: bytes = b""
    """The entry's stored bytes (framing, metadata and payload) as read from the store; empty
    for an entry built by hand. A Pulsar protocol server sends them back unchanged."""

    @property
    def ledger_id(self) -> int:
        """The ledger the entry is in."""
        return self.position[0]

    @property
    def entry_id(self) -> int:
        """The entry's id inside its ledger."""
        return self.position[1]


def encode_entry(payload: bytes | bytearray | memoryview, metadata: EntryMetadata) -> bytes:
    """Frame an entry as Pulsar stores it: ``[size][MessageMetadata][payload]``, no checksum.

    O(len(payload)) for the copy; the metadata costs a few microseconds.
    """
    md = metadata.to_bytes()
    return b"".join((_SIZE.pack(len(md)), md, payload))


def decode_entry(raw: bytes | bytearray | memoryview, *, verify_checksum: bool = False) -> tuple[EntryMetadata, bytes]:
    """Split a stored entry into its metadata and payload.

    Reads the plain form :func:`encode_entry` writes, the checksummed form Pulsar producers
    write (``0x0e01`` + CRC32C in front), and either one behind a broker-entry-metadata prefix
    (``0x0e02``, skipped). Like Pulsar's broker it does not check the CRC unless
    ``verify_checksum`` is true (the ``crc32c`` package: several GB/s with the CPU's CRC
    instructions).

    Raises :class:`~mledger.core.StateCorruptedError` when the framing is cut short, a size
    runs past the end, the checksum does not match (when verified) or the metadata does not
    parse.
    """
    metadata, payload = split_entry(raw, verify_checksum=verify_checksum)
    return EntryMetadata.from_bytes(metadata), payload


def split_entry(raw: bytes | bytearray | memoryview, *, verify_checksum: bool = False) -> tuple[bytes, bytes]:
    """The serialized ``MessageMetadata`` and the payload of a stored entry, as framed for
    :func:`decode_entry` (which raises the same errors). O(len(raw))."""
    if not isinstance(raw, bytes):
        raw = bytes(raw)
    end = len(raw)
    pos = 0
    if raw.startswith(_MAGIC_BROKER_ENTRY_METADATA):
        if end < 6:
            raise StateCorruptedError(f"entry of {end} bytes: broker entry metadata cut short")
        pos = 6 + _SIZE.unpack_from(raw, 2)[0]
        if pos > end:
            raise StateCorruptedError(f"entry of {end} bytes: broker entry metadata runs past the end (to byte {pos})")
    if raw.startswith(_MAGIC_CRC32C, pos):
        if end < pos + 6:
            raise StateCorruptedError(f"entry of {end} bytes: checksum cut short")
        checksum = _SIZE.unpack_from(raw, pos + 2)[0]
        pos += 6
        if verify_checksum:
            actual = crc32c(memoryview(raw)[pos:])
            if actual != checksum:
                raise StateCorruptedError(f"entry checksum mismatch: stored {checksum:#010x}, computed {actual:#010x}")
    if end < pos + 4:
        raise StateCorruptedError(f"entry of {end} bytes: metadata size cut short")
    size = _SIZE.unpack_from(raw, pos)[0]
    start = pos + 4
    stop = start + size
    if stop > end:
        raise StateCorruptedError(f"entry of {end} bytes: metadata size {size} at byte {pos} runs past the end")
    return raw[start:stop], raw[stop:]


def stored_entry(position: Position, raw: bytes) -> Entry:
    """The :class:`Entry` at ``position`` whose stored bytes are ``raw`` (:func:`decode_entry`
    for its metadata and payload; ``raw`` kept as it is).

    The read path builds one per entry it reads: the instance is filled through its slots,
    without the frozen dataclass's ``__init__`` (about half the cost). Raises as
    :func:`decode_entry` does.
    """
    metadata, payload = decode_entry(raw)
    entry = _object_new(Entry)
    _set_entry_position(entry, position)
    _set_entry_data(entry, payload)
    _set_entry_metadata(entry, metadata)
    _set_entry_raw(entry, raw)
    return entry


def _text(value: str | bytes) -> str:
    # upb hands back bytes for a proto2 string that is not valid UTF-8.
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


# Slot descriptors of the frozen class, called directly: the cheapest way to fill an instance
# on the read path, where the values come from the parser and need no checks.
_object_new = object.__new__
_slots = vars(EntryMetadata)
_set_producer_name = _slots["producer_name"].__set__
_set_sequence_id = _slots["sequence_id"].__set__
_set_publish_time_ms = _slots["publish_time_ms"].__set__
_set_num_messages = _slots["num_messages"].__set__
_set_deliver_at_ms = _slots["deliver_at_ms"].__set__
_set_partition_key = _slots["partition_key"].__set__
_set_highest_sequence_id = _slots["highest_sequence_id"].__set__
_set_properties = _slots["properties"].__set__
_set_event_time_ms = _slots["event_time_ms"].__set__
_set_uuid = _slots["uuid"].__set__
_set_chunk_id = _slots["chunk_id"].__set__
_set_num_chunks = _slots["num_chunks"].__set__
_set_total_chunk_msg_size = _slots["total_chunk_msg_size"].__set__
_set_batched = _slots["batched"].__set__
_entry_slots = vars(Entry)
_set_entry_position = _entry_slots["position"].__set__
_set_entry_data = _entry_slots["data"].__set__
_set_entry_metadata = _entry_slots["metadata"].__set__
_set_entry_raw = _entry_slots["raw"].__set__
