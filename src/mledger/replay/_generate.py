"""``mledger generate``: realistic synthetic event logs of any size, seeded, streamed to disk.

Each topic-partition is generated in chunks of entries with numpy and written through one
buffered writer per log (Parquet row groups, or JSON Lines / CSV), so memory stays at one
chunk and one row group per log whatever the total: 100M events need no more than 10M.

What the logs contain, per topic-partition (rates and fractions in :class:`GeneratorConfig`):

* entries at Pulsar-like positions: ledger ids that grow by random steps (ids are global in
  a cluster), ledger rollover after ``max_entries_per_ledger`` entries or earlier;
* batches (``batch_size`` > 1), delayed messages (``deliver_at_ms``), two producers with
  increasing sequence ids, message keys;
* subscriptions cycling through Shared, Key_Shared, Failover, Exclusive, declared in the
  ``subscriptions`` log (one starts ``latest`` on every third topic; one undeclared
  ``adhoc`` subscription on the first topic);
* Shared/Key_Shared acks after delivery with random latency, so acks arrive out of order
  and leave holes that fill later; some are batch-index acks; a few are never sent
  (permanent holes); Failover/Exclusive subscriptions ack cumulatively;
* cancellations of delayed messages, some before and some after the deliver time, for one
  subscription or all; a Shared subscription never acks a message cancelled in time;
* duplicates (a producer retry: the same row twice), acks of unknown positions, cancels of
  messages that were not delayed, and a few invalid rows.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from ._inputs import validate_subscriptions
from ._layout import PREPARED_SCHEMA, PartitionWriter, PreparedPartition, finish_layout, replay_order, start_layout
from ._progress import Progress
from ._schema import (
    ACKED_SCHEMA,
    CANCEL_AFTER_DELIVERY,
    CANCEL_REFUSED,
    CANCELLED_SCHEMA,
    DEDUP_DUPLICATE,
    DELIVERED_BEFORE_CANCEL,
    EVENT_SCHEMA,
    INVALID_ROW,
    PRODUCED_GAP,
    PRODUCED_SCHEMA,
    SEQ_FILE_SHIFT,
    SUBSCRIPTIONS_SCHEMA,
    UNKNOWN_POSITION,
    to_events,
)

SUBSCRIPTION_TYPE_CYCLE = ("SHARED", "KEY_SHARED", "FAILOVER", "EXCLUSIVE")
PLANTED_ANOMALIES: dict[str, str] = {
    DELIVERED_BEFORE_CANCEL: "cancels of delayed messages sent after their deliver time (--cancel-fraction)",
    CANCEL_AFTER_DELIVERY: "cancels of messages that were not delayed",
    DEDUP_DUPLICATE: "producer retries: a produced row written twice (--duplicate-fraction)",
    INVALID_ROW: "invalid rows (--invalid-fraction) and one subscription of type BOGUS",
    CANCEL_REFUSED: "cancels on Failover/Exclusive subscriptions, which ack cumulatively",
    UNKNOWN_POSITION: "acks of positions never produced (--unknown-ack-fraction) or of an invalid produced row",
    PRODUCED_GAP: "the positions of invalid produced rows, missing from the produced log",
}
"""The anomalies the generated logs contain on purpose, so that a replay has each kind to
find: reason -> what the generator wrote to cause it (the ``mledger demo`` summary says so)."""
_SCHEMAS = {
    "produced": PRODUCED_SCHEMA,
    "acked": ACKED_SCHEMA,
    "cancelled": CANCELLED_SCHEMA,
    "subscriptions": SUBSCRIPTIONS_SCHEMA,
}
_EXT = {"parquet": "parquet", "jsonl": "jsonl", "csv": "csv"}


@dataclass(frozen=True)
class GeneratorConfig:
    """What ``mledger generate`` writes; every field is a ``--option``."""

    topics: int = 4
    partitions: int = 3
    """Partitions per topic; 0 makes non-partitioned topics (partition -1)."""
    events: int = 1_000_000
    """Approximate total number of events over all logs."""
    seed: int = 0
    subscriptions: int = 3
    max_entries_per_ledger: int = 5_000
    batch_fraction: float = 0.2
    max_batch_size: int = 10
    batch_index_ack_fraction: float = 0.3
    delayed_fraction: float = 0.1
    max_delay_ms: int = 30_000
    cancel_fraction: float = 0.1
    """Of the delayed messages."""
    duplicate_fraction: float = 0.001
    lost_ack_fraction: float = 0.0005
    unknown_ack_fraction: float = 0.0002
    invalid_fraction: float = 0.0002
    rate_per_s: float = 500.0
    """Entries per second and partition."""
    ack_latency_ms: float = 40.0
    cumulative_every: int = 20
    format: str = "parquet"
    row_group_rows: int = 131_072
    file_rows: int = 2_000_000
    chunk_entries: int = 20_000
    start_ms: int = 1_700_000_000_000
    raw: bool = False
    """Write the raw logs (``produced/``, ``acked/``, ...) instead of a prepared log."""

    def __post_init__(self) -> None:
        if self.format not in _EXT:
            raise ValueError(f"format must be one of {', '.join(_EXT)}, got {self.format!r}")
        if self.topics < 1 or self.partitions < 0 or self.events < 0 or self.subscriptions < 1:
            raise ValueError("topics and subscriptions must be >= 1, partitions and events >= 0")
        if self.max_entries_per_ledger < 1 or self.max_batch_size < 2 or self.cumulative_every < 1:
            raise ValueError("max_entries_per_ledger, cumulative_every >= 1 and max_batch_size >= 2")

    @classmethod
    def option_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


@dataclass(frozen=True)
class GeneratedSummary:
    """What was written."""

    out_dir: str
    events: int
    rows: dict[str, int]
    topic_partitions: int


class _LogWriter:
    """Buffers one log's rows and writes row groups / files of bounded size."""

    def __init__(self, directory: str, log: str, cfg: GeneratorConfig) -> None:
        self.dir = os.path.join(directory, log)
        os.makedirs(self.dir, exist_ok=True)
        self.log = log
        self.schema = _SCHEMAS[log]
        self.cfg = cfg
        self.buffer: list[pa.Table] = []
        self.buffered = 0
        self.rows = 0
        self.file_rows = 0
        self.file_index = 0
        self._writer: Any = None
        self._handle: Any = None

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        self.buffer.append(table)
        self.buffered += table.num_rows
        if self.buffered >= self.cfg.row_group_rows:
            self._flush()

    def _flush(self) -> None:
        if not self.buffered:
            return
        table = pa.concat_tables(self.buffer).combine_chunks()
        self.buffer, self.buffered = [], 0
        start = 0
        while start < table.num_rows:
            room = self.cfg.file_rows - self.file_rows
            part = table.slice(start, min(room, self.cfg.row_group_rows))
            self._sink().write(part)
            self.rows += part.num_rows
            self.file_rows += part.num_rows
            start += part.num_rows
            if self.file_rows >= self.cfg.file_rows:
                self._close_file()

    def _sink(self) -> Any:
        if self._writer is None:
            path = os.path.join(self.dir, f"part-{self.file_index:05d}.{_EXT[self.cfg.format]}")
            fmt = self.cfg.format
            if fmt == "parquet":
                self._writer = _ParquetSink(path, self.schema, self.cfg.row_group_rows)
            elif fmt == "csv":
                self._writer = _CsvSink(path, self.schema)
            else:
                self._writer = _JsonSink(path)
        return self._writer

    def _close_file(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self.file_index += 1
            self.file_rows = 0

    def close(self) -> None:
        self._flush()
        self._close_file()


class _ParquetSink:
    def __init__(self, path: str, schema: pa.Schema, row_group_rows: int) -> None:
        self.w = pq.ParquetWriter(path, schema)
        self.row_group_rows = row_group_rows

    def write(self, table: pa.Table) -> None:
        self.w.write_table(table, row_group_size=self.row_group_rows)

    def close(self) -> None:
        self.w.close()


class _CsvSink:
    def __init__(self, path: str, schema: pa.Schema) -> None:
        self.w = pcsv.CSVWriter(path, schema)

    def write(self, table: pa.Table) -> None:
        self.w.write_table(table)

    def close(self) -> None:
        self.w.close()


class _JsonSink:
    def __init__(self, path: str) -> None:
        self.f = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def write(self, table: pa.Table) -> None:
        for row in table.to_pylist():
            self.f.write(json.dumps(row, separators=(",", ":")))
            self.f.write("\n")

    def close(self) -> None:
        self.f.close()


def _strings(values: list[str], codes: np.ndarray) -> pa.Array:
    """A string column from codes into ``values`` (code -1 = null), without Python loops."""
    mask = codes < 0
    indices = pa.array(np.where(mask, 0, codes).astype(np.int32), mask=mask)
    return pa.DictionaryArray.from_arrays(indices, pa.array(values or [""], pa.string())).cast(pa.string())


def _const(value: str, n: int) -> pa.Array:
    return _strings([value], np.zeros(n, np.int32))


class _Partition:
    """Generation state of one topic-partition."""

    def __init__(
        self, cfg: GeneratorConfig, rng: np.random.Generator, topic: str, partition: int, subs: list[tuple[str, str]]
    ) -> None:
        self.cfg = cfg
        self.rng = rng
        self.topic = topic
        self.partition = partition
        self.subs = subs
        self.ledger = int(rng.integers(1, 100_000))
        self.next_entry = 0
        self.capacity = cfg.max_entries_per_ledger
        self.t = cfg.start_ms + int(rng.integers(0, 10_000))
        self.sequences = np.zeros(2, np.int64)
        self.counter = 0  # entries so far, for cumulative-ack spacing

    def _positions(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        ledgers = np.empty(n, np.int64)
        entries = np.empty(n, np.int64)
        done = 0
        while done < n:
            k = min(n - done, self.capacity - self.next_entry)
            ledgers[done : done + k] = self.ledger
            entries[done : done + k] = np.arange(self.next_entry, self.next_entry + k)
            done += k
            self.next_entry += k
            if self.next_entry >= self.capacity:
                self.ledger += int(self.rng.integers(1, 20))
                self.next_entry = 0
                full = self.rng.random() < 0.8
                self.capacity = (
                    self.cfg.max_entries_per_ledger
                    if full
                    else int(self.rng.integers(1, self.cfg.max_entries_per_ledger + 1))
                )
        return ledgers, entries

    def chunk(self, n: int) -> dict[str, pa.Table]:
        cfg, rng = self.cfg, self.rng
        gaps = np.rint(rng.exponential(1000.0 / cfg.rate_per_s, n)).astype(np.int64)
        ts = self.t + np.cumsum(gaps)
        self.t = int(ts[-1]) if n else self.t
        ledgers, entries = self._positions(n)
        batch = np.where(rng.random(n) < cfg.batch_fraction, rng.integers(2, cfg.max_batch_size + 1, n), 1)
        delayed = rng.random(n) < cfg.delayed_fraction
        deliver = np.where(delayed, ts + rng.integers(1_000, max(cfg.max_delay_ms, 1_001), n), -1)
        producer = rng.integers(0, 2, n)
        seq = np.empty(n, np.int64)
        for p in (0, 1):
            m = producer == p
            seq[m] = self.sequences[p] + np.arange(int(m.sum()))
            self.sequences[p] += int(m.sum())
        delivery = np.where(delayed, deliver, ts)
        produced = self._produced(n, ts, ledgers, entries, batch, deliver, producer, seq)

        # cancels of delayed messages: before or after the deliver time, one sub or all
        shared = [i for i, (_, t) in enumerate(self.subs) if t in ("SHARED", "KEY_SHARED")]
        cumulative = [i for i, (_, t) in enumerate(self.subs) if t not in ("SHARED", "KEY_SHARED")]
        cancel = delayed & (rng.random(n) < cfg.cancel_fraction)
        c_ts = ts + (rng.random(n) * 1.3 * (deliver - ts)).astype(np.int64)
        c_sub = np.where(rng.random(n) < 0.5, -1, rng.choice(shared, n) if shared else -1)
        stray = (~delayed) & (rng.random(n) < cfg.cancel_fraction * cfg.delayed_fraction * 0.1)
        refused = (
            (rng.random(n) < cfg.cancel_fraction * cfg.delayed_fraction * 0.05) if cumulative else np.zeros(n, bool)
        )
        c_rows = cancel | stray | refused
        c_sub = np.where(refused & ~cancel & ~stray, rng.choice(cumulative, n) if cumulative else -1, c_sub)
        c_ts = np.where(cancel, c_ts, ts + 50)
        in_time = cancel & (c_ts <= deliver)
        c_bidx = np.where((batch > 1) & (rng.random(n) < 0.1), rng.integers(0, batch), -1)
        cancelled = pa.table(
            {
                "topic": _const(self.topic, int(c_rows.sum())),
                "partition": pa.array(np.full(int(c_rows.sum()), self.partition, np.int32)),
                "subscription": _strings([s for s, _ in self.subs], c_sub[c_rows]),
                "ledger_id": pa.array(ledgers[c_rows]),
                "entry_id": pa.array(entries[c_rows]),
                "batch_index": pa.array(c_bidx[c_rows].astype(np.int32), mask=c_bidx[c_rows] < 0),
                "ts_ms": pa.array(c_ts[c_rows]),
            },
            schema=CANCELLED_SCHEMA,
        )

        acked = [
            self._acks(i, name, sub_type, n, ts, delivery, ledgers, entries, batch, in_time, c_sub)
            for i, (name, sub_type) in enumerate(self.subs)
        ]
        self.counter += n
        return {"produced": produced, "acked": pa.concat_tables(acked), "cancelled": cancelled}

    def _produced(
        self,
        n: int,
        ts: np.ndarray,
        ledgers: np.ndarray,
        entries: np.ndarray,
        batch: np.ndarray,
        deliver: np.ndarray,
        producer: np.ndarray,
        seq: np.ndarray,
    ) -> pa.Table:
        cfg, rng = self.cfg, self.rng
        dup = np.flatnonzero(rng.random(n) < cfg.duplicate_fraction)
        rows = np.concatenate((np.arange(n), dup))  # a retry: the same row again, later in the file
        batch_out = batch[rows].astype(np.int32)
        invalid = rng.random(rows.size) < cfg.invalid_fraction
        batch_out[invalid] = 0  # batch_size 0: an invalid row (its position becomes a gap)
        names = [f"{self.topic}-{self.partition}-producer-{p}" for p in (0, 1)]
        return pa.table(
            {
                "topic": _const(self.topic, rows.size),
                "partition": pa.array(np.full(rows.size, self.partition, np.int32)),
                "ledger_id": pa.array(ledgers[rows]),
                "entry_id": pa.array(entries[rows]),
                "batch_size": pa.array(batch_out),
                "publish_time_ms": pa.array(ts[rows]),
                "deliver_at_ms": pa.array(deliver[rows], mask=deliver[rows] < 0),
                "producer_name": _strings(names, producer[rows]),
                "sequence_id": pa.array(seq[rows]),
                "key": _strings([f"key-{k}" for k in range(64)], rng.integers(0, 64, rows.size)),
                "chunk_id": pa.nulls(rows.size, pa.int32()),  # no chunked messages
                "num_chunks": pa.nulls(rows.size, pa.int32()),
                "uuid": pa.nulls(rows.size, pa.string()),
            },
            schema=PRODUCED_SCHEMA,
        )

    def _acks(
        self,
        index: int,
        name: str,
        sub_type: str,
        n: int,
        ts: np.ndarray,
        delivery: np.ndarray,
        ledgers: np.ndarray,
        entries: np.ndarray,
        batch: np.ndarray,
        in_time: np.ndarray,
        c_sub: np.ndarray,
    ) -> pa.Table:
        cfg, rng = self.cfg, self.rng
        latency = (rng.exponential(cfg.ack_latency_ms, n) + 1).astype(np.int64)
        if sub_type in ("SHARED", "KEY_SHARED"):
            lost = (rng.random(n) < cfg.lost_ack_fraction) | (in_time & ((c_sub == -1) | (c_sub == index)))
            take = ~lost
            by_index = take & (batch > 1) & (rng.random(n) < cfg.batch_index_ack_fraction)
            whole = np.flatnonzero(take & ~by_index)
            parts = np.flatnonzero(by_index)
            rep = np.repeat(parts, batch[parts])
            bidx = np.concatenate([np.arange(b) for b in batch[parts]]) if parts.size else np.empty(0, np.int64)
            rows = np.concatenate((whole, rep))
            b_index = np.concatenate((np.full(whole.size, -1), bidx))
            a_ts = delivery[rows] + latency[rows] + np.where(b_index >= 0, rng.integers(0, 20, rows.size), 0)
            kinds = np.zeros(rows.size, np.int32)  # individual
        else:
            rows = np.flatnonzero((self.counter + np.arange(n)) % cfg.cumulative_every == cfg.cumulative_every - 1)
            b_index = np.full(rows.size, -1)
            a_ts = ts[rows] + latency[rows]
            kinds = np.ones(rows.size, np.int32)  # cumulative
        m = rows.size
        ack_ledgers, ack_entries = ledgers[rows].copy(), entries[rows].copy()
        unknown = rng.random(m) < cfg.unknown_ack_fraction
        ack_entries[unknown] += 10_000_000
        invalid = rng.random(m) < cfg.invalid_fraction
        which = rng.integers(0, 3, m)
        ack_entries[invalid & (which == 0)] = -5
        b_index = np.where(invalid & (which == 1), batch[rows] + 2, b_index)
        type_codes = np.where(invalid & (which == 2), 2, kinds)
        return pa.table(
            {
                "topic": _const(self.topic, m),
                "partition": pa.array(np.full(m, self.partition, np.int32)),
                "subscription": _const(name, m),
                "ledger_id": pa.array(ack_ledgers),
                "entry_id": pa.array(ack_entries),
                "batch_index": pa.array(b_index.astype(np.int32), mask=b_index < 0),
                "ack_type": _strings(["individual", "cumulative", "sometimes"], type_codes),
                "ts_ms": pa.array(a_ts.astype(np.int64)),
            },
            schema=ACKED_SCHEMA,
        )


def _subscriptions(cfg: GeneratorConfig, topic_index: int) -> list[tuple[str, str, str]]:
    """(name, type, initial position) of a topic's declared subscriptions."""
    subs = []
    for j in range(cfg.subscriptions):
        initial = "latest" if (topic_index % 3 == 2 and j == 0) else "earliest"
        subs.append((f"sub-{j}", SUBSCRIPTION_TYPE_CYCLE[j % len(SUBSCRIPTION_TYPE_CYCLE)], initial))
    return subs


def _events_per_entry(cfg: GeneratorConfig) -> float:
    avg_batch = (2 + cfg.max_batch_size) / 2
    total = 1.0 + cfg.duplicate_fraction + cfg.delayed_fraction * cfg.cancel_fraction
    for j in range(cfg.subscriptions):
        t = SUBSCRIPTION_TYPE_CYCLE[j % len(SUBSCRIPTION_TYPE_CYCLE)]
        if t in ("SHARED", "KEY_SHARED"):
            total += 1 + cfg.batch_fraction * cfg.batch_index_ack_fraction * (avg_batch - 1)
        else:
            total += 1 / cfg.cumulative_every
    return total


def generate(out_dir: str, cfg: GeneratorConfig, progress: Progress | None = None) -> GeneratedSummary:
    """Write the logs under ``out_dir``. Deterministic for a seed.

    By default ``out_dir`` becomes a prepared log (:mod:`.layout`; an earlier prepared log
    there is replaced); with ``cfg.raw`` the four raw logs (``produced/`` ... in
    ``cfg.format``, their directories replaced), exactly what ``mledger prepare`` turns into
    the same prepared log, row for row.
    """
    if cfg.raw:
        if os.path.exists(out_dir):
            for log in _SCHEMAS:
                shutil.rmtree(os.path.join(out_dir, log), ignore_errors=True)
        os.makedirs(out_dir, exist_ok=True)
        sink: _RawSink | _PreparedSink = _RawSink(out_dir, cfg)
    else:
        if cfg.format != "parquet":
            raise ValueError(f"format {cfg.format!r} is for raw logs: add raw=True (--raw)")
        sink = _PreparedSink(out_dir, cfg)
    partitions = list(range(cfg.partitions)) if cfg.partitions > 0 else [-1]
    keys = [(t, p) for t in range(cfg.topics) for p in partitions]
    total_entries = cfg.events / _events_per_entry(cfg)
    events = 0
    sub_rows: list[dict[str, Any]] = []
    for t in range(cfg.topics):
        topic = f"persistent://public/default/topic-{t}"
        for name, sub_type, initial in _subscriptions(cfg, t):
            sub_rows.append({"topic": topic, "subscription": name, "type": sub_type, "initial_position": initial})
    if cfg.invalid_fraction > 0:
        sub_rows.append(
            {
                "topic": "persistent://public/default/topic-0",
                "subscription": "broken",
                "type": "BOGUS",
                "initial_position": "earliest",
            }
        )
    if progress is not None:
        progress.set_total(cfg.events)
    for key_index, (t, p) in enumerate(keys):
        rng = np.random.default_rng([cfg.seed, t, p + 1])
        topic = f"persistent://public/default/topic-{t}"
        subs = [(name, sub_type) for name, sub_type, _ in _subscriptions(cfg, t)]
        if t == 0:
            subs.append(("adhoc", "SHARED"))
        state = _Partition(cfg, rng, topic, p, subs)
        share = len(keys)
        entries_left = round(total_entries * (key_index + 1) / share) - round(total_entries * key_index / share)
        sink.start_partition(topic, p)
        while entries_left > 0:
            n = min(cfg.chunk_entries, entries_left)
            entries_left -= n
            events += sink.write(state.chunk(n))
            if progress is not None:
                progress.update(events, f"topic-{t} partition {p}")
        sink.end_partition()
    rows = sink.close(pa.Table.from_pylist(sub_rows, schema=SUBSCRIPTIONS_SCHEMA))
    if progress is not None:
        progress.update(events)
    return GeneratedSummary(out_dir, events, rows, len(keys))


class _RawSink:
    """The raw layout: one writer per log."""

    def __init__(self, out_dir: str, cfg: GeneratorConfig) -> None:
        self.out_dir = out_dir
        self.cfg = cfg
        self.writers = {log: _LogWriter(out_dir, log, cfg) for log in ("produced", "acked", "cancelled")}

    def start_partition(self, topic: str, partition: int) -> None:
        pass

    def write(self, chunk: dict[str, pa.Table]) -> int:
        n = 0
        for log, table in chunk.items():
            self.writers[log].write(table)
            n += table.num_rows
        return n

    def end_partition(self) -> None:
        pass

    def close(self, subscriptions: pa.Table) -> dict[str, int]:
        for w in self.writers.values():
            w.close()
        sub_writer = _LogWriter(self.out_dir, "subscriptions", self.cfg)
        sub_writer.write(subscriptions)
        sub_writer.close()
        rows = {log: w.rows for log, w in self.writers.items()}
        rows["subscriptions"] = sub_writer.rows
        return rows


class _PreparedSink:
    """The prepared layout, written while generating: each topic-partition's events are
    merged into replay order as chunks come (every event of a later chunk is at or after
    that chunk's first timestamp, so what is before it is final), with the input order
    ``seq`` the raw layout would give each row (its log's running row count cut into files
    of ``file_rows``), so ``prepare`` of the raw logs writes the same rows."""

    def __init__(self, out_dir: str, cfg: GeneratorConfig) -> None:
        self.cfg = cfg
        self.fs, self.path = start_layout(out_dir)
        self.rows = {log: 0 for log in ("produced", "acked", "cancelled")}
        self.parts: list[PreparedPartition] = []
        self.writer: PartitionWriter | None = None
        self.pending: pa.Table | None = None

    def start_partition(self, topic: str, partition: int) -> None:
        self.writer = PartitionWriter(self.fs, self.path, topic, partition, "generate")
        self.pending = None

    def _events(self, log: str, table: pa.Table) -> pa.Table:
        start = self.rows[log]
        self.rows[log] += table.num_rows
        events = pa.Table.from_batches(
            [to_events(log, b, 0, 0) for b in table.combine_chunks().to_batches()], EVENT_SCHEMA
        )
        r = np.arange(start, start + table.num_rows, dtype=np.int64)
        seq = ((r // self.cfg.file_rows) << SEQ_FILE_SHIFT) | (r % self.cfg.file_rows)
        return events.set_column(events.schema.get_field_index("seq"), "seq", pa.array(seq)).select(
            PREPARED_SCHEMA.names
        )

    def write(self, chunk: dict[str, pa.Table]) -> int:
        tables = [self._events(log, table) for log, table in chunk.items() if table.num_rows]
        if not tables:
            return 0
        new = pa.concat_tables(tables)
        watermark = pc.min(new["ts"]).as_py()
        merged = new if self.pending is None else pa.concat_tables([self.pending, new])
        merged = merged.take(pa.array(replay_order(merged)))
        if watermark is None:
            self.pending = merged
        else:
            cut = int(np.searchsorted(np.asarray(pc.fill_null(merged["ts"], -(1 << 63)).to_numpy()), watermark))
            assert self.writer is not None
            self.writer.write(merged.slice(0, cut))
            self.pending = merged.slice(cut)
        return new.num_rows

    def end_partition(self) -> None:
        assert self.writer is not None
        if self.pending is not None:
            self.writer.write(self.pending)
        self.parts.append(self.writer.close())
        self.writer, self.pending = None, None

    def close(self, subscriptions: pa.Table) -> dict[str, int]:
        declared, anomalies = validate_subscriptions(subscriptions, "subscriptions/part-00000.parquet")
        finish_layout(self.fs, self.path, self.parts, declared, anomalies, "mledger generate")
        rows = dict(self.rows)
        rows["subscriptions"] = subscriptions.num_rows
        return rows
