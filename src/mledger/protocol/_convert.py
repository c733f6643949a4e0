"""Wire <-> domain conversions of the protocol session: message ids, schemas, metadata, error codes.

The session's handlers take protobuf messages apart here and build the broker's values
(:class:`~mledger.core.Position`, :class:`~mledger.broker.SchemaInfo`,
:class:`~mledger.codec.EntryMetadata`), and turn the broker's errors into Pulsar's
``ServerError`` codes. Integers come through the core helpers: a ``uint64`` field Java filled
with a negative ``long`` through :func:`~mledger.core.as_int64`, an ack set's words through
:func:`~mledger.core.words_to_ack_set`.
"""

from __future__ import annotations

import struct

from google.protobuf.message import DecodeError

from ..broker import (
    AlreadyClosedError,
    MessageDupUnknownError,
    MetadataNeeds,
    SchemaInfo,
    Topic,
    TopicFencedError,
)
from ..codec import EntryMetadata
from ..codec.proto import PulsarApi_pb2 as api
from ..core import (
    EARLIEST,
    INT64_MAX,
    LATEST,
    UINT64_MASK,
    EntryTooLargeError,
    ManagedLedgerTerminatedError,
    Position,
    StateCorruptedError,
    as_int64,
    server_error_of,
)

__all__ = [
    "ACCESS_MODES",
    "message_id_data",
    "metadata_for",
    "position_of",
    "reads_from_earliest",
    "schema_info",
    "schema_message",
    "schema_version",
    "schema_version_bytes",
    "seek_target",
    "send_error_code",
    "server_error_code",
    "start_position",
]

ACCESS_MODES = {
    api.Shared: "Shared",
    api.Exclusive: "Exclusive",
    api.WaitForExclusive: "WaitForExclusive",
    api.ExclusiveWithFencing: "ExclusiveWithFencing",
}
"""Pulsar's ``ProducerAccessMode`` names, for the stats' ``accessMode``."""

# -- errors ---------------------------------------------------------------------------------


def server_error_code(exc: BaseException) -> api.ServerError.ValueType:
    """Pulsar's ``ServerError`` for an exception: the ``server_error`` it carries
    (:func:`~mledger.core.server_error_of`; ``UnknownError`` when it is not mledger's)."""
    return api.ServerError.ValueType(server_error_of(exc))


_PUBLISH_REFUSALS = (
    MessageDupUnknownError,
    EntryTooLargeError,
    TopicFencedError,
    AlreadyClosedError,
    ManagedLedgerTerminatedError,
)
"""What ``Topic.publish_entries`` refuses a SEND with before writing it; any other error in
its results is the store's, from a failed write."""


def send_error_code(exc: BaseException) -> api.ServerError.ValueType:
    """The SEND_ERROR code for a refused SEND: a failed write is Pulsar's ``PersistenceError``
    (``PersistentTopic.addFailed``), whatever the store raised (logged by the ledger, once per
    failure episode)."""
    return server_error_code(exc) if isinstance(exc, _PUBLISH_REFUSALS) else api.PersistenceError


# -- message ids ----------------------------------------------------------------------------


def position_of(mid: api.MessageIdData) -> Position:
    """The entry a ``MessageIdData`` names (its ``uint64`` ids read as Java's ``long``)."""
    return Position(as_int64(mid.ledgerId), as_int64(mid.entryId))


def message_id_data(position: Position, partition: int = -1, batch_index: int = -1) -> api.MessageIdData:
    """``MessageIdData`` for ``position`` (a negative id goes out as Java writes it, mod 2**64);
    ``partition`` and ``batch_index`` only when not negative."""
    mid = api.MessageIdData(ledgerId=position.ledger_id & UINT64_MASK, entryId=position.entry_id & UINT64_MASK)
    if partition >= 0:
        mid.partition = partition
    if batch_index >= 0:
        mid.batch_index = batch_index
    return mid


def reads_from_earliest(body: api.CommandSubscribe) -> bool:
    """Whether a reader starts at the earliest message (its first compacted read covers the
    whole compacted view, Pulsar's ``MessageId.earliest`` start id)."""
    return not body.durable and body.HasField("start_message_id") and as_int64(body.start_message_id.ledgerId) < 0


def start_position(mid: api.MessageIdData) -> Position:
    """Where a reader's non-durable cursor starts (exclusive): one entry before the id, so the
    start message itself is delivered. Pulsar takes every start id as a batch message id
    (``ServerCnx.handleSubscribe``) and steps back one entry (``getNonDurableSubscription``):
    a batch may be partly unread, and an inclusive reader wants the start message; the client
    drops what it should not see (the start message of a non-inclusive reader)."""
    ledger, entry = position_of(mid)
    if ledger < 0:
        return EARLIEST
    if ledger >= INT64_MAX:
        return LATEST
    if entry >= 0:
        entry -= 1
    return Position(ledger, entry)


def seek_target(mid: api.MessageIdData) -> Position:
    """Where a SEEK to a message id resets the cursor: the earliest or latest position for
    Pulsar's ``MessageId.earliest`` / ``latest``, else the id's entry."""
    position = position_of(mid)
    if position.ledger_id < 0:
        return EARLIEST
    if position.ledger_id >= INT64_MAX:
        return LATEST
    return position


# -- schemas --------------------------------------------------------------------------------

_SCHEMA_VERSION = struct.Struct(">q")


def schema_info(schema: api.Schema) -> SchemaInfo:
    """The broker's :class:`SchemaInfo` of a protocol ``Schema``."""
    return SchemaInfo(
        int(schema.type), bytes(schema.schema_data), schema.name, tuple((kv.key, kv.value) for kv in schema.properties)
    )


def schema_message(info: SchemaInfo) -> api.Schema:
    """The protocol ``Schema`` of a :class:`SchemaInfo`."""
    return api.Schema(
        name=info.name,
        schema_data=info.data,
        type=info.type,  # type: ignore[arg-type]
        properties=[api.KeyValue(key=k, value=v) for k, v in info.properties],
    )


def schema_version_bytes(version: int) -> bytes:
    """A schema version as the protocol carries it: 8 bytes, big-endian (Java's ``long``)."""
    return _SCHEMA_VERSION.pack(version)


def schema_version(data: bytes) -> int | None:
    """The schema version in a protocol's 8 version bytes; None for anything else (the latest)."""
    return _SCHEMA_VERSION.unpack(data)[0] if len(data) == 8 else None


# -- metadata -------------------------------------------------------------------------------

_UNCHUNKED = EntryMetadata()
_MessageMetadata = api.MessageMetadata
_ALL = MetadataNeeds.ALL
_NOTHING = MetadataNeeds.NOTHING
_CHUNK_FIELDS = MetadataNeeds.CHUNK_FIELDS


def metadata_for(topic: Topic, data: bytes) -> EntryMetadata:
    """The metadata a SEND's publish needs, after checking that ``data`` is a valid
    ``MessageMetadata`` (nothing unparseable is ever stored; ``StateCorruptedError`` names
    what is wrong).

    The topic's deduplication says what it reads (its ``metadata_needs``,
    :class:`~mledger.broker.MetadataNeeds`): nothing gets a shared empty record, the
    chunk fields a record of those alone (a shared empty one for an unchunked message), which
    saves building a full record per message (the stored bytes are the producer's either way).
    A hook that declares nothing gets the full record; a topic being recorded adds each entry's
    deliver-at time, key and chunk fields (what the recorder writes) to what its deduplication
    needs.
    """
    try:
        msg = _MessageMetadata.FromString(data)
    except DecodeError as exc:
        raise StateCorruptedError(f"invalid message metadata: {exc}") from None
    if not msg.IsInitialized():
        # FindInitializationErrors: on every message class at run time, missing from the stubs
        missing = ", ".join(msg.FindInitializationErrors())  # type: ignore[attr-defined]
        raise StateCorruptedError(f"invalid message metadata: missing {missing}")
    needs = getattr(topic.deduplication, "metadata_needs", _ALL)
    journal = topic.journal
    if needs is _NOTHING and journal is None:  # deduplication off, no recording: the usual case
        return _UNCHUNKED
    if needs is not _NOTHING and needs is not _CHUNK_FIELDS:  # ALL, or nothing usable declared
        return EntryMetadata.from_bytes(data)
    fields: dict[str, int | str] = {}
    if needs is _CHUNK_FIELDS and msg.HasField("chunk_id"):
        fields["chunk_id"] = msg.chunk_id
        fields["num_chunks"] = msg.num_chunks_from_msg
    if journal is not None:
        # a recording keeps each entry's deliver-at time and key: read from the message already
        # parsed (a second parse of the whole record per SEND cost a recorded broker ~12 % CPU)
        if msg.HasField("deliver_at_time"):
            fields["deliver_at_ms"] = msg.deliver_at_time
        if msg.HasField("partition_key"):
            fields["partition_key"] = msg.partition_key
        if msg.HasField("chunk_id"):  # which chunk, of how many, of which chunked message
            fields["chunk_id"] = msg.chunk_id
            fields["num_chunks"] = msg.num_chunks_from_msg
            fields["uuid"] = msg.uuid
    return EntryMetadata(**fields) if fields else _UNCHUNKED  # type: ignore[arg-type]
