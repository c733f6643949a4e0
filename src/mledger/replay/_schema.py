"""Schemas of the replay's inputs and outputs, and the validation of both files and rows.

Inputs (docs/replay/inputs.md): three event logs and an optional subscriptions log. A file
is checked up front (:func:`check_file_schema`: every required column present, every column
of a usable type) and a bad file stops the job with an :class:`InputSchemaError` naming the
file, the column and the problem. A bad *row* never stops it: reading turns each input
batch into :data:`EVENT_SCHEMA` rows (:func:`to_events`, or the Spark job's SQL for Parquet),
and the replay checks every row (:func:`check_events`) and sends a bad one to the
``anomalies`` output with reason ``invalid_row`` and the problem as detail. Problems that
need state (a batch index beyond the produced batch size, an unknown position) are found by
the engine.

Event schema (:data:`EVENT_SCHEMA`): what reading hands to the replay, one row per event of
any log; see its docstring. Events of a topic-partition replay in ``(ts, kind, seq)`` order:
``kind`` puts produced before cancelled before acked at equal timestamps, ``seq`` is the
input order (file index in path order, then row in the file).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import MLedgerError
from ._columns import int_values
from ._store import CURSOR_LEDGER_BASE

# -- event kinds and their order at equal timestamps -----------------------------------------
KIND_PRODUCED = 0
KIND_CANCELLED = 1
KIND_ACKED = 2
KIND_NAMES = ("produced", "cancelled", "acked")
"""Index = kind code. Events with equal ``ts`` replay produced, then cancelled, then acked."""

ACK_INDIVIDUAL = 0
ACK_CUMULATIVE = 1
ACK_TYPES = {"individual": ACK_INDIVIDUAL, "cumulative": ACK_CUMULATIVE}

SUBSCRIPTION_TYPES = ("EXCLUSIVE", "SHARED", "FAILOVER", "KEY_SHARED")
INITIAL_POSITIONS = ("earliest", "latest")
SUBSCRIPTION_CREATED = "created"
SUBSCRIPTION_RESET = "reset"
SUBSCRIPTION_DELETED = "deleted"
SUBSCRIPTION_EVENTS = (SUBSCRIPTION_CREATED, SUBSCRIPTION_RESET, SUBSCRIPTION_DELETED)
"""Events of the ``subscriptions`` log with a ``ts_ms``; a row without one declares a subscription."""
KIND_SUBSCRIPTION = 3
"""Where a timed subscription event sorts among the events of its timestamp: after every other kind."""

SEQ_FILE_SHIFT = 40
"""``seq = file_index << 40 | row``: 2^40 rows per file, 2^23 files per log."""

# -- anomaly reasons ----------------------------------------------------------------------------
INVALID_ROW = "invalid_row"
UNKNOWN_POSITION = "unknown_position"
UNKNOWN_SUBSCRIPTION = "unknown_subscription"
DEDUP_DUPLICATE = "dedup_duplicate"
DUPLICATE_POSITION = "duplicate_position"
POSITION_OUT_OF_ORDER = "position_out_of_order"
PRODUCED_GAP = "produced_gap"
DELIVERED_BEFORE_CANCEL = "delivered_before_cancel"
CANCEL_AFTER_DELIVERY = "cancel_after_delivery"
CANCEL_REFUSED = "cancel_refused"
CANCEL_WITHOUT_SUBSCRIPTION = "cancel_without_subscription"
CUMULATIVE_ACK_REFUSED = "cumulative_ack_refused"

REASONS: dict[str, str] = {
    INVALID_ROW: "the row itself is invalid (detail says why); it was not applied",
    UNKNOWN_POSITION: "ack or cancel of a position not produced before it in this topic-partition",
    UNKNOWN_SUBSCRIPTION: "cancel naming a subscription that was never declared nor acked on",
    DEDUP_DUPLICATE: "producer_name/sequence_id already persisted: dropped by deduplication",
    DUPLICATE_POSITION: "a second produced row for an existing position (no producer info)",
    POSITION_OUT_OF_ORDER: "produced position behind the last entry: it cannot be placed",
    PRODUCED_GAP: "entries missing from the produced log; placeholders keep later positions",
    DELIVERED_BEFORE_CANCEL: "delayed message delivered at its deliver time, cancelled later",
    CANCEL_AFTER_DELIVERY: "cancel of a message that was not delayed: it was delivered at once",
    CANCEL_REFUSED: "cancel on an Exclusive/Failover subscription (cumulative acks): refused",
    CANCEL_WITHOUT_SUBSCRIPTION: "cancel for every subscription while none could take it",
    CUMULATIVE_ACK_REFUSED: "cumulative ack on a Shared/Key_Shared subscription: refused",
}


class EventOrderError(MLedgerError, RuntimeError):
    """The events of a topic-partition did not arrive in ``(ts, kind, seq)`` order."""


class InputSchemaError(MLedgerError, ValueError):
    """An input file cannot be used: a column is missing or has an unusable type.

    The message names the file, the column and the problem.
    """


# -- input logs ---------------------------------------------------------------------------------
INT = "integer"
STR = "string"


@dataclass(frozen=True)
class Column:
    """One column of an input log: name, ``integer`` or ``string``, required or not."""

    name: str
    kind: str
    required: bool = True


LOG_COLUMNS: dict[str, tuple[Column, ...]] = {
    "produced": (
        Column("topic", STR),
        Column("partition", INT),
        Column("ledger_id", INT),
        Column("entry_id", INT),
        Column("batch_size", INT, False),
        Column("publish_time_ms", INT),
        Column("deliver_at_ms", INT, False),
        Column("producer_name", STR, False),
        Column("sequence_id", INT, False),
        Column("key", STR, False),
        Column("chunk_id", INT, False),
        Column("num_chunks", INT, False),
        Column("uuid", STR, False),
    ),
    "acked": (
        Column("topic", STR),
        Column("partition", INT),
        Column("subscription", STR),
        Column("ledger_id", INT),
        Column("entry_id", INT),
        Column("batch_index", INT, False),
        Column("ack_type", STR, False),
        Column("ts_ms", INT),
        Column("command", INT, False),
    ),
    "cancelled": (
        Column("topic", STR),
        Column("partition", INT),
        Column("subscription", STR, False),
        Column("ledger_id", INT),
        Column("entry_id", INT),
        Column("batch_index", INT, False),
        Column("ts_ms", INT),
    ),
    "subscriptions": (
        Column("topic", STR),
        Column("subscription", STR),
        Column("type", STR, False),
        Column("initial_position", STR, False),
        Column("partition", INT, False),
        Column("event", STR, False),
        Column("ts_ms", INT, False),
        Column("ledger_id", INT, False),
        Column("entry_id", INT, False),
    ),
}
EVENT_LOGS = ("produced", "cancelled", "acked")
"""The three event logs, in kind order."""

_PA_TYPES = {
    "topic": pa.string(),
    "partition": pa.int32(),
    "batch_size": pa.int32(),
    "batch_index": pa.int32(),
    "chunk_id": pa.int32(),
    "num_chunks": pa.int32(),
}


def input_schema(log: str) -> pa.Schema:
    """The canonical pyarrow schema of an input log (what ``mledger generate`` writes)."""
    fields = []
    for col in LOG_COLUMNS[log]:
        t = _PA_TYPES.get(col.name, pa.int64() if col.kind == INT else pa.string())
        fields.append(pa.field(col.name, t))
    return pa.schema(fields)


PRODUCED_SCHEMA = input_schema("produced")
ACKED_SCHEMA = pa.schema([f for f in input_schema("acked") if f.name != "command"])
"""The ``acked`` log as ``mledger generate`` writes it: each row its own request (no ``command``)."""
RECORDED_ACKED_SCHEMA = input_schema("acked")
"""The ``acked`` log as a recording writes it: the rows of one request share a ``command``."""
CANCELLED_SCHEMA = input_schema("cancelled")
SUBSCRIPTIONS_SCHEMA = input_schema("subscriptions")


def _type_ok(kind: str, t: pa.DataType) -> bool:
    if pa.types.is_null(t):
        return True
    if pa.types.is_dictionary(t):
        t = t.value_type
    if kind == INT:
        return pa.types.is_integer(t) and t != pa.uint64()
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def check_file_schema(log: str, path: str, schema: pa.Schema, *, text_columns: bool = False) -> None:
    """Raise :class:`InputSchemaError` if ``schema`` cannot serve as the ``log`` log.

    ``text_columns``: the format reads every column as text (CSV), so only presence is
    checked here and bad values become invalid rows.
    """
    names = set(schema.names)
    for col in LOG_COLUMNS[log]:
        if col.name not in names:
            if col.required:
                raise InputSchemaError(
                    f"{path}: column '{col.name}' is missing (required in the {log} log; "
                    f"found {', '.join(schema.names) or 'no columns'})"
                )
            continue
        t = schema.field(col.name).type
        if not text_columns and not _type_ok(col.kind, t):
            raise InputSchemaError(f"{path}: column '{col.name}' has type {t}; expected {col.kind}")


# -- the event schema: what reading hands to the replay --------------------------------------------
EVENT_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int64()),
        pa.field("ts", pa.int64()),
        pa.field("kind", pa.int8(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("ledger_id", pa.int64()),
        pa.field("entry_id", pa.int64()),
        pa.field("batch", pa.int64()),
        pa.field("deliver_at_ms", pa.int64()),
        pa.field("sequence_id", pa.int64()),
        pa.field("ack_type", pa.int8()),
        pa.field("problem", pa.string()),
    ]
)
"""One row per event of any log, as read (values unchecked, nulls kept):

* ``ts``: ``publish_time_ms`` (produced) or ``ts_ms``; ``kind``: 0 produced, 1 cancelled,
  2 acked; ``seq``: ``file index << 40 | row index in the file``, files sorted by path;
* ``name``: ``producer_name`` (produced) or ``subscription``;
* ``batch``: ``batch_size`` (produced) or ``batch_index``;
* ``sequence_id``: null for a chunk that is not its message's last (:func:`dedup_sequence_ids`:
  only a chunked message's last chunk is deduplicated, as in Pulsar); for an acked row, its
  ``command`` (the rows of one ``CommandAck`` share it; null when the log does not know);
* ``ack_type``: 0 individual, 1 cumulative, -1 not understood (``problem`` says why);
* ``problem``: what reading found wrong with the row's text, else null.

Thirteen columns on purpose: every column costs time in Spark's shuffle and in the
JVM-to-Python transfer. :func:`check_events` validates the rows in the replay."""

SORT_KEYS = ("topic", "partition", "ts", "kind", "seq")
GROUP_KEYS = ("topic", "partition")
KIND_OF_LOG = {"produced": KIND_PRODUCED, "cancelled": KIND_CANCELLED, "acked": KIND_ACKED}

_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1
_INT_TEXT = r"^ *[+-]?[0-9]{1,19} *$"


class _Problems:
    """Collects the first problem of each row, vectorised (reading side)."""

    def __init__(self, n: int) -> None:
        self.array: pa.Array = pa.nulls(n, pa.string())

    def add(self, mask: pa.Array, message: str | pa.Array) -> None:
        if not pc.any(mask).as_py():
            return
        free = pc.and_(pc.fill_null(mask, False), pc.is_null(self.array))
        self.array = pc.if_else(free, message, self.array)


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    idx = batch.schema.get_field_index(name)
    if idx < 0:
        return None
    arr = batch.column(idx)
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    return arr


def _int_column(batch: pa.RecordBatch, name: str, problems: _Problems) -> pa.Array:
    """An integer column as int64 (nulls kept); text is parsed, bad text is a problem."""
    arr = _column(batch, name)
    n = batch.num_rows
    if arr is None or pa.types.is_null(arr.type):
        return pa.nulls(n, pa.int64())
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        trimmed = pc.utf8_trim(arr, " ")
        trimmed = pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, trimmed.type), trimmed)
        bad = pc.and_(pc.is_valid(trimmed), pc.invert(pc.fill_null(pc.match_substring_regex(trimmed, _INT_TEXT), True)))
        problems.add(bad, pc.binary_join_element_wise(f"{name} is not an integer: '", arr, "'", ""))
        ok = pc.if_else(bad, pa.scalar(None, trimmed.type), trimmed)
        try:
            return pc.cast(ok, pa.int64())
        except pa.ArrowInvalid:  # 19 digits beyond the int64 range
            big = pc.and_(pc.is_valid(ok), pc.greater(pc.utf8_length(ok), 18))
            problems.add(big, f"{name} is out of the 64-bit range")
            return pc.cast(pc.if_else(big, pa.scalar(None, ok.type), ok), pa.int64())
    if arr.type == pa.uint64():
        over = pc.greater(arr, pa.scalar(np.iinfo(np.int64).max, pa.uint64()))
        problems.add(over, f"{name} is out of the 64-bit range")
        arr = pc.if_else(over, pa.scalar(None, pa.uint64()), arr)
    return pc.cast(arr, pa.int64())


def _str_column(batch: pa.RecordBatch, name: str) -> pa.Array:
    arr = _column(batch, name)
    if arr is None or pa.types.is_null(arr.type):
        return pa.nulls(batch.num_rows, pa.string())
    return arr.cast(pa.string())


def ack_type_codes(raw: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(codes, problems) of an ``ack_type`` text column: 0, 1, null when absent, -1 unknown.

    Matching ignores ASCII case and surrounding spaces (Spark's job does the same in SQL):
    no other letter folds to one of "individual" / "cumulative" in both Unicode case
    mappings, and ASCII folding keeps Spark off its ICU case mapping (a second per JVM).
    """
    lowered = pc.ascii_lower(pc.utf8_trim(raw, " "))
    codes = pc.if_else(pc.equal(lowered, "individual"), 0, pc.if_else(pc.equal(lowered, "cumulative"), 1, -1))
    codes = pc.cast(codes, pa.int8())
    bad = pc.equal(codes, -1)
    problem = pc.if_else(
        bad, pc.binary_join_element_wise("unknown ack_type '", raw, "'", ""), pa.scalar(None, pa.string())
    )
    return codes, problem


def dedup_sequence_ids(sequence_id: pa.Array, chunk_id: pa.Array, num_chunks: pa.Array) -> pa.Array:
    """The sequence ids deduplication sees: null for a chunk that is not its message's last.

    Every chunk of a chunked message carries the message's sequence id, and Pulsar checks and
    records only the last one (``MessageDeduplication.isDuplicateNormal``: a chunk whose
    ``chunk_id != num_chunks_from_msg - 1`` is ``NotDup``; ``recordMessagePersistedNormal``
    updates ``highestSequencedPersisted`` only for the last chunk), so the replay's earlier
    chunks go through deduplication without a sequence id: never duplicates, never recorded.
    A missing ``num_chunks`` counts as 0, as Pulsar reads an absent field. The Spark job's
    SQL (``_parquet_events``) applies the same rule. Vectorised.
    """
    if chunk_id.null_count == len(chunk_id):
        return sequence_id
    last = pc.subtract(pc.fill_null(num_chunks, 0), 1)
    earlier = pc.fill_null(pc.not_equal(chunk_id, last), False)
    return pc.if_else(earlier, pa.scalar(None, sequence_id.type), sequence_id)


def to_events(log: str, batch: pa.RecordBatch, file_index: int, row_offset: int) -> pa.RecordBatch:
    """One batch of an input log as :data:`EVENT_SCHEMA` rows. Vectorised; never raises on
    bad values (only text that is not a number becomes a problem here)."""
    if log not in KIND_OF_LOG:
        raise ValueError(f"not an event log: {log!r}")
    n = batch.num_rows
    problems = _Problems(n)
    produced = log == "produced"
    ints = {
        name: _int_column(batch, name, problems)
        for name in (
            "partition",
            "ledger_id",
            "entry_id",
            "publish_time_ms" if produced else "ts_ms",
            *(
                ("batch_size", "deliver_at_ms", "sequence_id", "chunk_id", "num_chunks")
                if produced
                else ("batch_index", "command")
            ),
        )
    }
    ack = pa.nulls(n, pa.int8())
    if log == "acked":
        raw = _str_column(batch, "ack_type")
        ack, ack_problem = ack_type_codes(raw)
        problems.add(pc.is_valid(ack_problem), ack_problem)
    seq = (np.int64(file_index) << SEQ_FILE_SHIFT) | np.arange(row_offset, row_offset + n, dtype=np.int64)
    nulls = pa.nulls(n, pa.int64())
    return pa.RecordBatch.from_arrays(
        [
            _str_column(batch, "topic"),
            ints["partition"],
            ints["publish_time_ms" if produced else "ts_ms"],
            pa.array(np.full(n, KIND_OF_LOG[log], np.int8)),
            pa.array(seq),
            _str_column(batch, "producer_name" if produced else "subscription"),
            ints["ledger_id"],
            ints["entry_id"],
            ints["batch_size" if produced else "batch_index"],
            ints["deliver_at_ms"] if produced else nulls,
            dedup_sequence_ids(ints["sequence_id"], ints["chunk_id"], ints["num_chunks"])
            if produced
            else ints["command"],
            ack,
            problems.array,
        ],
        schema=EVENT_SCHEMA,
    )


# -- row checks: in the replay, the same for every way of reading ---------------------------------
class Checked(NamedTuple):
    """Validated numeric columns of an event batch (sentinels instead of nulls) and the first
    problem of each row that has one (row index to message), None when no row has one. A clean
    column may be a read-only view of the batch's buffer (no copy): copy before writing."""

    ts: np.ndarray
    partition: np.ndarray
    ledger: np.ndarray
    entry: np.ndarray
    batch: np.ndarray
    deliver: np.ndarray
    seqid: np.ndarray
    ack: np.ndarray
    problems: dict[int, str] | None


def _ints(batch: pa.RecordBatch, name: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """(values with nulls as 0, present mask, whether every row is present) of an integer
    column (:func:`~._columns.int_values`)."""
    column = batch.column(name)
    values, has = int_values(column)
    return values, has, column.null_count == 0


def _outside(values: np.ndarray, low: int, high: int) -> bool:
    """Whether a value lies outside ``[low, high]``: two reductions, no mask. A check whose
    values all lie inside (a null's slot holds 0, inside every range tested here) flags nothing,
    so its masks are not built."""
    return bool(len(values)) and (int(values.min()) < low or int(values.max()) > high)


MAX_LEDGER_ID = CURSOR_LEDGER_BASE
"""Ledger ids at or above this (2^62) are invalid rows: the replay store numbers cursor ledgers there."""


def check_events(
    batch: pa.RecordBatch, topic: str | None, name_codes: np.ndarray, empty_code: int, partition: int | None = None
) -> Checked:
    """Validate an :data:`EVENT_SCHEMA` batch of one topic-partition (the same checks for every
    way of reading). ``name_codes``: each row's ``name`` as a code, -1 for null, and
    ``empty_code`` the code of ``""``. A batch without ``topic`` / ``partition`` columns (a
    prepared log's) has the topic-partition's ``topic`` and ``partition`` for every row. Vectorised; a row's problem is the first of: what
    reading found, then the checks below in order. Problems are rare, so flagged rows are
    walked in Python, and a check that cannot flag anything (a column without nulls has no
    missing value; values within range, by :func:`_outside`) builds no mask: skipping a check
    whose mask is empty changes no row's first problem."""
    n = batch.num_rows
    kind = np.asarray(batch.column("kind").to_numpy(zero_copy_only=False))
    produced = kind == KIND_PRODUCED
    reading = batch.column("problem")
    first: dict[int, str] = {}
    if reading.null_count < n:
        at = pc.indices_nonzero(reading.is_valid())
        first = dict(zip(at.to_pylist(), reading.take(at).to_pylist(), strict=True))

    def flag(mask: np.ndarray, message: str) -> None:
        if not mask.any():
            return
        for i in np.flatnonzero(mask).tolist():
            first.setdefault(i, message)

    if topic is None or topic == "":
        flag(np.ones(n, bool), "topic is missing")
    if batch.schema.get_field_index("partition") >= 0:
        part, has, full = _ints(batch, "partition")
        if not full:
            flag(~has, "partition is missing")
        if _outside(part, -1, _INT32_MAX):
            flag(has & (part < -1), "partition is below -1")
            flag(has & (part > _INT32_MAX), "partition is out of range")
    else:  # a prepared topic-partition's rows: the partition is the directory's
        part = np.broadcast_to(np.int64(-1 if partition is None else partition), n)  # read only, no copy
        if partition is None:
            flag(np.ones(n, bool), "partition is missing")
        elif partition < -1:
            flag(np.ones(n, bool), "partition is below -1")
        elif partition > _INT32_MAX:
            flag(np.ones(n, bool), "partition is out of range")
    ids = {}
    for name in ("ledger_id", "entry_id"):
        values, has, full = _ints(batch, name)
        if not full:
            flag(~has, f"{name} is missing")
        if _outside(values, 0, MAX_LEDGER_ID - 1 if name == "ledger_id" else _INT64_MAX):
            flag(has & (values < 0), f"{name} is negative")
            if name == "ledger_id":
                flag(has & (values >= MAX_LEDGER_ID), "ledger_id is 2^62 or more, beyond the replayable range")
            ids[name] = np.where(has & (values >= 0), values, -1)
        else:
            ids[name] = values if full else np.where(has, values, -1)
    ts, has, full = _ints(batch, "ts")
    ts_negative = _outside(ts, 0, _INT64_MAX)
    for mask, ts_name in ((produced, "publish_time_ms"), (~produced, "ts_ms")):
        if not full:
            flag(mask & ~has, f"{ts_name} is missing")
        if ts_negative:
            flag(mask & has & (ts < 0), f"{ts_name} is negative")
    if ts_negative or not full:
        ts = np.where(has & (ts >= 0), ts, -1)
    b, has, _ = _ints(batch, "batch")
    out_of_range = _outside(b, 0, _INT32_MAX)  # a null's 0 is inside: only a present value is out
    flag(produced & has & (b < 1), "batch_size must be at least 1")
    if out_of_range:
        flag(produced & has & (b > _INT32_MAX), "batch_size is out of range")
        flag(~produced & has & (b < 0), "batch_index is negative")
        flag(~produced & has & (b > _INT32_MAX), "batch_index is out of range")
    if out_of_range:
        usable = has & (b <= _INT32_MAX)
        batch_out = np.where(produced, np.where(usable & (b >= 1), b, 1), np.where(usable & (b >= 0), b, -1))
    else:  # every present value in [0, 2^31): the same, with one array
        batch_out = np.where(has, b, -1)
        batch_out[produced & (batch_out < 1)] = 1
    d, has, _ = _ints(batch, "deliver_at_ms")
    if _outside(d, 0, _INT64_MAX):
        flag(produced & has & (d < 0), "deliver_at_ms is negative")
        deliver = np.where(produced & has & (d >= 0), d, -1)
    else:
        deliver = np.where(produced & has, d, -1)
    q, has, _ = _ints(batch, "sequence_id")
    acked = kind == KIND_ACKED
    if _outside(q, 0, _INT64_MAX):
        flag(produced & has & (q < 0), "sequence_id is negative")
        flag(acked & has & (q < 0), "command is negative")
        seqid = np.where((produced | acked) & has & (q >= 0), q, -1)
    else:
        seqid = np.where((produced | acked) & has, q, -1)
    unnamed = name_codes < 0
    if empty_code >= -1:  # -2: "" has no code, no row can have it
        unnamed |= name_codes == empty_code
        flag(acked & unnamed, "subscription is missing")
        flag(
            (kind == KIND_CANCELLED) & (name_codes == empty_code),
            "subscription is empty (leave it null for every subscription)",
        )
    else:
        flag(acked & unnamed, "subscription is missing")
    a, _, _ = _ints(batch, "ack_type")
    ack = (a == 1).astype(np.int8)  # a null's slot holds 0
    return Checked(ts, part, ids["ledger_id"], ids["entry_id"], batch_out, deliver, seqid, ack, first or None)


# -- outputs ---------------------------------------------------------------------------------------
ANSWER_FIELDS = (
    pa.field("redelivered_after_restart", pa.int64()),
    pa.field("redelivered_after_restart_max", pa.int64()),
    pa.field("redelivered_after_restart_max_at_ms", pa.int64()),
    pa.field("state_over_limit_at_ms", pa.int64()),
    pa.field("persist_unacked_ranges_truncated", pa.int64()),
    pa.field("persist_batch_deleted_indexes_truncated", pa.int64()),
    pa.field("persist_long_array_truncated", pa.int64()),
    pa.field("redelivered_after_crash", pa.int64()),
    pa.field("redelivered_after_crash_max", pa.int64()),
    pa.field("redelivered_after_crash_max_at_ms", pa.int64()),
    pa.field("redelivered_after_crash_entries", pa.int64()),
    pa.field("redelivered_after_crash_entries_max", pa.int64()),
    pa.field("redelivered_after_crash_limits", pa.int64()),
    pa.field("redelivered_after_crash_limits_max", pa.int64()),
    pa.field("redelivered_after_crash_limits_max_at_ms", pa.int64()),
    pa.field("redelivered_after_crash_limits_entries", pa.int64()),
    pa.field("redelivered_after_crash_limits_entries_max", pa.int64()),
    pa.field("redelivered_after_unload", pa.int64()),
    pa.field("redelivered_after_unload_max", pa.int64()),
    pa.field("redelivered_after_unload_max_at_ms", pa.int64()),
    pa.field("redelivered_after_unload_entries", pa.int64()),
    pa.field("redelivered_after_unload_entries_max", pa.int64()),
)
"""The operator's answers per cursor (:class:`~.model.RestartAnswers`; docs/replay/layout.md, "Outputs")."""

CURSOR_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("subscription", pa.string()),
        pa.field("subscription_type", pa.string()),
        pa.field("mark_delete_ledger_id", pa.int64()),
        pa.field("mark_delete_entry_id", pa.int64()),
        pa.field("read_ledger_id", pa.int64()),
        pa.field("read_entry_id", pa.int64()),
        pa.field("ack_hole_ranges", pa.int64()),
        pa.field("individually_deleted_messages", pa.string()),
        pa.field("backlog", pa.int64()),
        pa.field("acked", pa.int64()),
        pa.field("cancelled", pa.int64()),
        pa.field("delayed_delivered", pa.int64()),
        pa.field("delayed_pending", pa.int64()),
        pa.field("persisted_state_bytes", pa.int64()),
        pa.field("state_chunks", pa.int32()),
        pa.field("truncated_ranges", pa.int64()),
        pa.field("truncated_batch_indexes", pa.int64()),
        *ANSWER_FIELDS,
        pa.field("state_record", pa.string()),
        pa.field("state", pa.binary()),
    ]
)
"""One row per topic, partition and subscription (docs/replay/layout.md, "Outputs", lists every column)."""

ANOMALY_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("subscription", pa.string()),
        pa.field("event", pa.string()),
        pa.field("ts_ms", pa.int64()),
        pa.field("ledger_id", pa.int64()),
        pa.field("entry_id", pa.int64()),
        pa.field("batch_index", pa.int32()),
        pa.field("reason", pa.string()),
        pa.field("detail", pa.string()),
    ]
)
"""One row per anomaly; ``event`` is the log the row came from (or ``subscriptions``)."""

PARTITION_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("events", pa.int64()),
        pa.field("entries", pa.int64()),
        pa.field("placeholder_entries", pa.int64()),
        pa.field("ledgers", pa.int64()),
        pa.field("last_ledger_id", pa.int64()),
        pa.field("last_entry_id", pa.int64()),
        pa.field("subscriptions", pa.int64()),
        pa.field("anomalies", pa.int64()),
    ]
)
"""One row per topic-partition: what the replay saw and built."""

OUTPUTS = {"cursors": CURSOR_SCHEMA, "anomalies": ANOMALY_SCHEMA, "partitions": PARTITION_SCHEMA}
REPORT_DIR = "report"
"""Where ``mledger report OUT`` writes by default, beside the outputs it draws: a replay into
``OUT`` removes it with the outputs it replaces, so no report outlives its data."""
RECORD_FIELD = "record"


def _union_schema() -> pa.Schema:
    fields: dict[str, pa.Field] = {}
    for schema in OUTPUTS.values():
        for f in schema:
            if f.name in fields and fields[f.name].type != f.type:
                raise AssertionError(f"output column {f.name} has two types")
            fields.setdefault(f.name, f)
    return pa.schema([pa.field(RECORD_FIELD, pa.string()), *fields.values()])


OUTPUT_SCHEMA = _union_schema()
"""What one replay group yields: ``record`` names the output, other columns are its own."""


def union_batch(record: str, batch: pa.RecordBatch) -> pa.RecordBatch:
    """Widen a batch of one output to :data:`OUTPUT_SCHEMA` (absent columns are null)."""
    n = batch.num_rows
    arrays = [pa.array([record] * n, pa.string()) if n < 64 else pa.repeat(record, n)]
    for f in list(OUTPUT_SCHEMA)[1:]:
        idx = batch.schema.get_field_index(f.name)
        arrays.append(batch.column(idx) if idx >= 0 else pa.nulls(n, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=OUTPUT_SCHEMA)


def split_output(table: pa.Table, record: str) -> pa.Table:
    """The rows of one output from a union table, with that output's own schema."""
    rows = table.filter(pc.equal(table[RECORD_FIELD], record))
    return rows.select(OUTPUTS[record].names).cast(OUTPUTS[record])


# -- Spark ---------------------------------------------------------------------------------------
_DDL = {
    pa.string(): "string",
    pa.int8(): "tinyint",
    pa.int32(): "int",
    pa.int64(): "bigint",
    pa.binary(): "binary",
    pa.bool_(): "boolean",
}


def ddl(schema: pa.Schema) -> str:
    """The Spark DDL string of a flat pyarrow schema (``"topic string, partition int, ..."``)."""
    return ", ".join(f"`{f.name}` {_DDL[f.type]}" for f in schema)
