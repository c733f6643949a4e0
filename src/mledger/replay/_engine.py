"""The replay engine: one topic-partition's events in, cursor states and anomalies out.

Theory of operation
-------------------
:class:`PartitionReplayer` is fed Arrow record batches of :data:`~.schema.EVENT_SCHEMA`
rows of *one* topic-partition in event order: ``(ts, kind, seq)`` strictly increasing, where
``kind`` orders events with equal timestamps as produced (0) < cancelled (1) < acked (2) and
``seq`` is the input order. A batch that goes backwards raises :class:`EventOrderError`; the
engine never reorders, so a broken upstream sort cannot produce quietly wrong results.

Most events commute with their neighbours, so the engine applies them in bulk: the stream is
cut into *steps* and each step is applied with a few vectorised calls. Cuts are made

* before the first ack naming a subscription that does not exist yet (the subscription is
  created there: a ``latest`` one starts after the entries produced so far),
* every ``segment_rows`` events counted from the start of the topic-partition (never inside
  an acknowledgement request: the ``acked`` rows of one ``command``, see below),
* around each timed subscription event of the ``subscriptions`` log (created, reset, deleted:
  :mod:`.subscriptions`), applied after every event of its timestamp and before the later
  ones, as if its kind sorted after ``acked``,

and a step is split further, around one event, where bulk application could not be exact:
a cancel that carries a batch index, names a declared subscription not created yet, or
follows a batch-index event on its entry in the same step is applied alone (a *barrier*).
Cuts and splits depend only on the events (and the state they lead to), never on how the
input was batched, so the results are a function of the event stream alone: Spark and the
single-process replay agree row by row, and steps of one event (``segment_rows=1``, the
sequential reference) give the same results as bulk steps (see "Exact bulk acks" below; both
are tested).

Within a step, in this order:

1. delayed messages due before the step's first timestamp are dispatched;
2. produced rows: deduplication (``model.deduplicate``), then position placement (a run of
   contiguous positions is one ``append`` per ledger; gaps get placeholder entries, positions
   that cannot be placed are reported); the entries' batch sizes and deliver times are
   recorded in an :class:`EntryIndex` (a dense index per position; only batched and
   delayed entries cost memory);
3. acks and cancels: each is checked against the entries produced *before it* (vectorised:
   an ack of a position appended later in the same step is an unknown position), batch
   indexes against the produced batch size, cumulative acks and cancels against the
   subscription type; a cancel becomes one whole-entry individual ack per target
   subscription (PIP-423), counted as a cancel if its entry was not acknowledged yet (the
   state before the step plus the step's earlier events on that entry); then, per
   subscription, one bulk individual ack (``delete_many``, which also takes the entries whose
   every batch index is acked in the step), one cumulative ack (the highest) and one
   batch-index ack per remaining entry;
4. deliveries of delayed messages falling inside the step are decided against the state
   *before* the step's acks; if an individual ack or cancel in the step at or before a
   message's deliver time touches it, the step's acks are cut at that time (deliver, ack,
   deliver) so every delivery sees exactly the events up to its time. A delivery reads only
   whether each Shared or Key_Shared cursor holds the entries it dispatches, so only the
   calls of those subscriptions that name such an entry on the wrong side of the cut (a row
   before it in a call made after it, or after it in a call made before it) end there; the
   others span it. Late cancels are then checked against the deliveries
   (``delivered_before_cancel``, ``cancel_after_delivery``).

A delivery at time T happens after every event with ``ts <= T``: an ack or cancel at
exactly the deliver time prevents it.

Acknowledgement requests
------------------------
The broker applies one ``CommandAck`` as one cursor change with one persist attempt
(``PersistentSubscription.acknowledgeMessage`` -> ``ManagedCursorImpl.asyncDelete``, one
``markDeleteLimiter.tryAcquire()``). A recording numbers the rows of one request (the ``acked``
log's ``command``, carried as the event's ``sequence_id``); consecutive rows of a subscription
with the same ``command`` and time are one request, and the engine never splits one: a step
does not end inside it, and it goes to the model in one call, as one request (with batch-index
deletion disabled too). Rows without a ``command`` (older recordings, captures, generated
logs) are each a request of their own, which is the definition below.

Exact bulk acks
---------------
Every output equals that of steps of one event (``segment_rows=1``, the definition): every
persist a cursor makes, with the state and at the event time it makes it, and every figure's
maximum with the time it was first reached. Three things make bulk steps exact:

* **Calls cut at persists.** Per subscription, a step's acks go to the model in calls, each at
  its own event time, merged over the subscriptions in time order (the clock never goes back;
  cursors do not see each other). A cursor's next persist comes at its limiter's next free
  ticket (``PartitionModel.persist_due_ms``; mledger's throttle or Guava's limiter alike), and
  a refused change leaves it as it is; so the acks before it are all throttled and go in one
  call, and the first ack at or after it goes alone, at its time (it persists, or not, as it
  would alone), after which the next ticket is read again.
* **A run of throttled acks is one call only where that is exact.** Between persists the
  record a crash recovers is fixed and acknowledgements only grow, so the crash total only
  grows: its value after the run is its highest over the run, first reached at the last ack
  that changed the cursor, whose event time the call takes (``_change_stamp``: acks of
  entries or indexes already acknowledged change nothing, where the broker ignores ack sets
  too: the figures count the ack sets it ignored; cumulative acks: the first after
  which the cursor holds every message it holds after the highest, ``_cumulative_stamp``).
  The unload figure can go up and down past a limit, so a run is one call only within the
  cursor's room (``PartitionModel.bulk_ack_room``: acks that leave the close record losing
  nothing new, or whole-entry acks of the ledgers its long-array cut-off leaves out, each only
  adding its messages: ``BulkAckRoom.from_ledger``), else it is split, down to one ack a call;
  within the room, batch-index acks
  whose share the close record loses (batch states it does not keep, or ack sets the broker
  ignores) move it up and down: the run ends where one call leaves its maxima as the acks one
  by one would (``_unload_peak``); and under a Pulsar version's rules,
  an ack of a clean cursor may be one no persist writes (apache/pulsar#26498), which sets the
  limits part by itself: alone too. Cumulative acks only take state away, which never raises
  the unload figure, but for the batch state one naming a batch index leaves (it must fit the
  room) and for a close record that fewer ranges send to a metadata store whose batch states
  are not read back (``BulkAckRoom.shrink_loses_batch``): there each goes alone.
* **Cuts where a persist reads more than its cursor.** A flush tick (under a Pulsar version's
  rules) cuts the step, so it sees exactly the events before it; and a persist of a cursor
  with no cursor ledger reads the entries produced so far (the node or a new ledger), so the
  step is cut before such an ack, and the acks leading the rest are applied before its
  produced rows.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._broker_model import BrokerModel
from ._columns import Codes, Rows, int_values
from ._entries import EntryIndex
from ._mirror import behaviour
from ._model import PartitionModel, SubscriptionResult, SubscriptionSpec
from ._schema import (
    ANOMALY_SCHEMA,
    CANCEL_AFTER_DELIVERY,
    CANCEL_REFUSED,
    CANCEL_WITHOUT_SUBSCRIPTION,
    CUMULATIVE_ACK_REFUSED,
    CURSOR_SCHEMA,
    DEDUP_DUPLICATE,
    DELIVERED_BEFORE_CANCEL,
    DUPLICATE_POSITION,
    INVALID_ROW,
    KIND_ACKED,
    KIND_CANCELLED,
    KIND_NAMES,
    KIND_PRODUCED,
    PARTITION_SCHEMA,
    POSITION_OUT_OF_ORDER,
    PRODUCED_GAP,
    SUBSCRIPTION_CREATED,
    SUBSCRIPTION_DELETED,
    UNKNOWN_POSITION,
    UNKNOWN_SUBSCRIPTION,
    EventOrderError,
    check_events,
    union_batch,
)
from ._settings import ReplaySettings

ModelFactory = Callable[[str, int, ReplaySettings], PartitionModel]


_UNLOAD_WALK = 512
"""How far past the last ack a call may end at ``_unload_peak`` walks looking for a later one."""

_STATE_CHUNK = 256
"""Rows whose entries' acknowledgement state ``_unload_peak`` asks the model for at once."""

_NULL_TS = np.iinfo(np.int64).min
"""Where a missing timestamp sorts: first, as Spark sorts nulls ascending."""


class _SubAcks:
    """One subscription's acks within a step's acks, applied call by call (``_next_call``):
    their columns gathered once, so that a call is a slice ``[p, q)`` of them. Built for every
    subscription of a step at once (:meth:`of_step`: O(rows) numpy work, each plan holding
    views), with no Python object per row: the batch-index acks are cut into runs of one
    entry (:class:`_BatchRuns`) and the cumulative ones listed, once, at the first call that
    has some; what a call reads of it is a few slices and a few prefix counts."""

    __slots__ = (
        "ack",
        "at",
        "batch_before",
        "batch_columns",
        "batch_runs",
        "batch_rows",
        "batch_words",
        "cumulative_before",
        "cumulative_columns",
        "bidx",
        "code",
        "commands",
        "cut_at",
        "cut_entries",
        "cut_g",
        "cut_rows",
        "entry",
        "g",
        "index",
        "last_ts",
        "ledger",
        "name",
        "pos",
        "seqid",
        "size",
        "ts",
        "whole_at",
    )

    def __init__(
        self,
        code: int,
        name: str,
        a: Rows,
        g: np.ndarray,
        at: np.ndarray,
        counts: tuple[np.ndarray, np.ndarray, np.ndarray, int, tuple[_BatchRuns | None, int]],
        index: EntryIndex,
        commands: bool,
    ) -> None:
        """``a``: the subscription's acks (their ``bsize`` as :attr:`size` says), ``g`` and
        ``at`` theirs, ``counts`` :attr:`batch_before` and :attr:`cumulative_before` (as one
        array), :attr:`whole_at`, :attr:`batch_rows`, :attr:`batch_words` and
        :attr:`batch_runs`: views of the step's acks gathered by subscription
        (:meth:`of_step`)."""
        self.code, self.name, self.pos, self.index = code, name, 0, index
        self.ts = a.ts
        """The event times (ascending)."""
        self.last_ts = int(self.ts[-1])
        """The last event time, as an int."""
        self.ledger, self.entry, self.bidx, self.ack = a.ledger, a.entry, a.bidx, a.ack
        self.g = g
        """The entries' indexes in the :class:`EntryIndex`."""
        self.at = at
        """The ``(ledger_id, entry_id)`` rows, as the model's acks take them (read only)."""
        self.size = a.bsize
        """The batch size of each row's entry where the row names a batch index or is
        cumulative, else 1 (a whole-entry individual ack's size is read when needed:
        :meth:`sizes`)."""
        self.batch_runs: tuple[_BatchRuns | None, int]
        before, self.whole_at, self.batch_rows, self.batch_words, self.batch_runs = counts
        """:attr:`batch_runs`: the step's individual batch-index acks as runs of one entry (None
        where batch-index deletion is disabled), and the number of them before this
        subscription's."""
        self.batch_before: np.ndarray = before[0]
        """Individual batch-index acks among the rows before each."""
        self.cumulative_before: np.ndarray = before[1]
        """Cumulative acks among the rows before each."""
        self.seqid = a.seqid
        starts = _command_starts(self.ts, self.seqid) if commands else None
        self.commands: list[int] | None = None if starts is None else starts.tolist()
        """Where each acknowledgement request starts, then the end (None: one row each)."""
        self.cut_at: list[int] | None = None
        """Where a delivery may cut the rows (ascending row numbers; None: nowhere)."""
        self.cut_entries: list[set[int]] = []
        """The entries each of those deliveries dispatches."""
        self.cut_rows: list[int] = []
        """The rows naming an entry some delivery dispatches (ascending), where deliveries may
        cut the rows: no other row can show a delivery a wrong state."""
        self.cut_g: list[int] = []
        """:attr:`g` of :attr:`cut_rows`."""
        self.batch_columns: tuple[np.ndarray, list[int], list[int]] | None = None
        """The individual batch-index acks' rows, as an array, then their batch indexes and
        batch sizes as lists (built at the first call that has some)."""
        self.cumulative_columns: tuple[list[int], ...] | None = None
        """:meth:`cumulative_acks`' lists (built at the first call that has some)."""

    def batch_acks(self, p: int, q: int) -> tuple[np.ndarray, list[int], list[int]]:
        """:attr:`batch_columns` of the individual batch-index acks among rows ``p..q``:
        slices (the ``batch_before[p]``-th to the ``batch_before[q]``-th), no gather. The
        columns are built once, for every call of the step to slice (each such row is in one
        call only)."""
        columns = self.batch_columns
        if columns is None:
            rows = self.batch_rows
            columns = self.batch_columns = (rows, self.bidx[rows].tolist(), self.size[rows].tolist())
        i, j = self.batch_before.item(p), self.batch_before.item(q)
        rows, bidx, size = columns
        return rows[i:j], bidx[i:j], size[i:j]

    def cumulative_acks(self, p: int, q: int) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
        """The entries, batch sizes, batch indexes, ledger ids and entry ids of the cumulative
        acks among rows ``p..q``: slices of lists built once, at the first call that has some."""
        columns = self.cumulative_columns
        if columns is None:
            rows = np.flatnonzero(self.ack == 1)
            columns = self.cumulative_columns = tuple(
                column[rows].tolist() for column in (self.g, self.size, self.bidx, self.ledger, self.entry)
            )
        i, j = self.cumulative_before.item(p), self.cumulative_before.item(q)
        g, size, bidx, ledger, entry = columns
        return g[i:j], size[i:j], bidx[i:j], ledger[i:j], entry[i:j]

    def batch_entries(self, p: int, q: int) -> tuple[list[int], list[int], list[int], list[int]]:
        """The entries the individual batch-index acks among rows ``p..q`` name, by entry:
        the first row of each entry whose every index they acknowledge, then the first row,
        the ack set (the indexes none of them acknowledges) and the batch size of each other
        entry. The step's batch-index acks are cut once into runs of one entry
        (:class:`_BatchRuns`) that a call reads whole (O(runs of the call)), but the two a
        call's bounds may split."""
        runs, base = self.batch_runs
        assert runs is not None  # (built where batch-index deletion is enabled)
        return runs.entries(base + self.batch_before.item(p), base + self.batch_before.item(q))

    def whole_acks(self, p: int, q: int) -> np.ndarray:
        """:attr:`whole_at` of the whole-entry individual acks among rows ``p..q``: a slice (a
        row is a cumulative, a batch-index or a whole-entry individual ack, so the last are
        counted by the first two's prefix counts)."""
        batch, cumulative = self.batch_before, self.cumulative_before
        return self.whole_at[p - batch.item(p) - cumulative.item(p) : q - batch.item(q) - cumulative.item(q)]

    @staticmethod
    def of_step(
        a: Rows, g: np.ndarray, names: list[str], index: EntryIndex, runs: bool
    ) -> tuple[list[_SubAcks], np.ndarray | None]:
        """Each subscription's acks among a step's acks ``a`` (``g``: their entries), in the
        order of the subscriptions' codes, and the rows of ``a`` they hold one after another
        (None: ``a`` as it is). The columns every plan reads are gathered and counted once for
        the step (a pass per subscription, then O(rows) numpy work); each plan holds views.
        ``runs``: the batch-index acks are read as runs of one entry (batch-index deletion
        enabled), cut once for every subscription."""
        counts = np.bincount(a.sub + 1)  # (-1: none, never an ack's)
        codes = (np.flatnonzero(counts) - 1).tolist()
        bounds = np.cumsum([0, *counts[counts > 0].tolist()]).tolist()
        order = None
        if len(codes) > 1:
            order = np.concatenate([np.flatnonzero(a.sub == code) for code in codes])
            a, g = a.take(order), g[order]
        commands = bool((a.seqid >= 0).any())  # acked rows: the request they belong to
        at = np.column_stack((a.ledger, a.entry)).astype(np.int64, copy=False)
        at.flags.writeable = False
        named = a.bidx >= 0  # cumulative ones too: each leaves a batch state
        cumulative = a.ack == 1
        batch = named & ~cumulative
        before = np.zeros((2, len(a) + 1), np.int64)
        np.cumsum(batch, out=before[0, 1:])
        np.cumsum(cumulative, out=before[1, 1:])
        whole_at = np.compress(~(named | cumulative), at, axis=0)
        whole_at.flags.writeable = False
        batch_rows = np.flatnonzero(batch)
        largest = np.maximum.reduceat(np.where(named, a.bsize, 0), bounds[:-1]).tolist()
        at_bounds = before[:, bounds].T.tolist()
        step_runs = None
        if runs and batch_rows.size:
            local = batch_rows - np.repeat(bounds[:-1], np.diff(before[0, bounds]))  # each one's row in its plan
            step_runs = _BatchRuns(local, g[batch_rows], a.bidx[batch_rows], a.bsize[batch_rows])
        plans = []
        for k, code in enumerate(codes):
            s, e = bounds[k], bounds[k + 1]
            (b0, c0), (b1, c1) = at_bounds[k], at_bounds[k + 1]
            plan_counts = (
                before[:, s : e + 1] - np.array([[b0], [c0]]),
                whole_at[s - b0 - c0 : e - b1 - c1],
                batch_rows[b0:b1] - s,
                largest[k] // 64 + 1 if largest[k] else 0,
                (step_runs, b0),
            )
            span = slice(s, e)
            plans.append(_SubAcks(code, names[code], a.take(span), g[span], at[span], plan_counts, index, commands))
        return plans, order

    def sizes(self, p: int, q: int) -> np.ndarray:
        """The batch size of the entry of each row ``p..q``, whole-entry individual acks too."""
        return self.index.batch_size(self.g[p:q])

    def end_of(self, p: int) -> int:
        """The end of the request that row ``p`` starts: every call ends at one."""
        if self.commands is None:
            return p + 1
        return self.commands[bisect.bisect_right(self.commands, p)]

    def request_end(self, q: int, p: int) -> int:
        """The last request end at or before ``q`` after ``p``, else the end of ``p``'s request."""
        if self.commands is None:
            return q
        end = self.commands[bisect.bisect_right(self.commands, q) - 1]
        return end if end > p else self.end_of(p)


class _BatchRuns:
    """A step's individual batch-index acks, cut into runs of consecutive acks of one entry,
    each with its first row (in its subscription's plan) and its acked indexes (O(rows) numpy
    work, once for every subscription), for the calls that read them
    (:meth:`_SubAcks.batch_entries`): a call's acks are whole runs but for the first and the
    last, which the call's bounds may split (a run may also span two subscriptions' acks:
    each call reads only its own part). An entry's acks may form several runs of a call
    (acks of other entries between them): the call merges them."""

    __slots__ = ("bidx", "bits", "end", "g", "row", "rows", "size", "start")

    def __init__(self, rows: np.ndarray, g: np.ndarray, bidx: np.ndarray, size: np.ndarray) -> None:
        """``rows``, ``g``, ``bidx``, ``size``: each ack's row (in its plan), entry, batch
        index and batch size."""
        start = np.flatnonzero(np.concatenate(([True], g[1:] != g[:-1])))
        self.rows, self.bidx = rows, bidx
        self.start: list[int] = start.tolist()
        """The first batch-index ack of each run (numbered among those acks), ascending."""
        self.end: list[int] = [*self.start[1:], rows.size]
        """Where each run ends."""
        self.g: list[int] = g[start].tolist()
        """The entry of each run."""
        self.row: list[int] = rows[start].tolist()
        """The first row of each run."""
        self.size: list[int] = size[start].tolist()
        """The batch size of each run's entry."""
        if size.size and int(size.max()) < 63:
            self.bits: list[int] = np.bitwise_or.reduceat(np.left_shift(1, bidx.astype(np.int64)), start).tolist()
        else:  # a BitSet beyond one int64: Python ints
            self.bits = [_index_bits(bidx[a:b].tolist()) for a, b in zip(self.start, self.end, strict=True)]
        """The indexes each run acknowledges, as a bit set."""

    def entries(self, i: int, j: int) -> tuple[list[int], list[int], list[int], list[int]]:
        """:meth:`_SubAcks.batch_entries` of the batch-index acks ``[i, j)``: the first row
        of each entry they complete, then the first row, the ack set and the batch size of
        each entry they leave partial, by entry. O(runs of the call + rows of its two ends)."""
        start = self.start
        lo, hi = bisect.bisect_right(start, i) - 1, bisect.bisect_left(start, j)
        row, bits = self.row[lo:hi], self.bits[lo:hi]
        if start[lo] < i:  # the call's bounds split the first run or the last: their rows in it
            row[0], bits[0] = self.rows.item(i), _index_bits(self.bidx[i : min(self.end[lo], j)].tolist())
        if self.end[hi - 1] > j:
            bits[-1] = _index_bits(self.bidx[max(start[hi - 1], i) : j].tolist())
        acked: dict[int, int] = {}
        first: dict[int, tuple[int, int]] = {}
        for e, r, n, b in zip(self.g[lo:hi], row, self.size[lo:hi], bits, strict=True):
            seen = acked.get(e)
            if seen is None:
                acked[e], first[e] = b, (r, n)
            else:
                acked[e] = seen | b
        complete: list[int] = []
        partial: list[int] = []
        ack_sets: list[int] = []
        sizes: list[int] = []
        for e in sorted(acked):
            (r, n), b = first[e], acked[e]
            full = (1 << n) - 1
            if b == full:
                complete.append(r)
            else:
                partial.append(r)
                ack_sets.append(full & ~b)
                sizes.append(n)
        return complete, partial, ack_sets, sizes


def _index_bits(indexes: list[int]) -> int:
    """The batch indexes ``indexes`` as a bit set."""
    bits = 0
    for b in indexes:
        bits |= 1 << b
    return bits


# -- the replayer ---------------------------------------------------------------------------------
class PartitionReplayer:
    """Replays one topic-partition; see the module docstring.

    ``feed`` and ``finish`` return batches of :data:`~.schema.OUTPUT_SCHEMA` (anomalies as
    they are found, then the cursor and partition rows). ``declared`` are the
    ``subscriptions``-log entries of the topic. ``model_factory`` builds the
    :class:`~.model.PartitionModel` (default :class:`~.broker_model.BrokerModel`).
    ``also_persist``: settings that differ from ``settings`` only in persistence-only keys
    (:data:`~.mirror.PERSISTENCE_KEYS`); the cursors' state is persisted under each of them
    too and :meth:`finish_variants` returns their outputs (a shared sweep, see :mod:`.mirror`).
    Raises :class:`EventOrderError` when the events go backwards.
    """

    def __init__(
        self,
        topic: str | None,
        partition: int | None,
        settings: ReplaySettings | None = None,
        declared: Iterable[SubscriptionSpec] = (),
        model_factory: ModelFactory | None = None,
        also_persist: Sequence[ReplaySettings] = (),
    ) -> None:
        in_range = partition is not None and -(1 << 31) <= partition < (1 << 31)
        self.topic = topic
        self.partition = partition if in_range else None  # an impossible key is reported per row
        self._given_partition = partition
        self.settings = settings or ReplaySettings()
        self._also = tuple(also_persist)
        for other in self._also:
            if behaviour(other) != behaviour(self.settings):
                raise ValueError("also_persist: settings may differ from the replay's only in persistence-only keys")
        self._declared: dict[str, SubscriptionSpec] = {}
        for spec in declared:
            if not spec.timed:
                self._declared.setdefault(spec.name, spec)
        self._timed = sorted(self._own_timed(declared), key=lambda e: (e.ts_ms, e.seq))
        self._next_timed = 0
        self._index = EntryIndex()
        self._subs = Codes()
        self._producers = Codes()
        self._problems = Codes()
        self._shared: list[bool] = []  # by subscription code; valid once created
        self._created: set[int] = set()
        self._seen: set[int] = set()
        self._acked: dict[int, int] = {}
        self._cancelled: dict[int, int] = {}
        self._last_key: tuple[int, int, int] | None = None
        self._last_request: tuple[int, int, int] | None = None  # (ts, subscription, command) of the last row
        self._ordinal = 0
        self._pending: list[Rows] = []
        self._placeholders = 0
        self._anomaly_buffer = _empty_anomaly_buffer()
        self._anomaly_rows = 0
        self._anomaly_total = 0
        self._finished = False
        self._started = False
        usable = replayable(topic, partition)
        factory = model_factory or BrokerModel
        self._model: PartitionModel | None = None
        if usable:
            assert topic is not None and partition is not None
            self._model = factory(topic, partition, self.settings)
            if self._also:
                self._model.mirror_persistence(self._also)
        if self._model is not None:
            for spec in self._declared.values():
                if spec.initial_position != "latest":
                    self._create(spec)
        self._deleted: set[int] = set()  # declared subscriptions deleted by an event

    # -- public ---------------------------------------------------------------------------------
    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        """Apply one batch of events; returns the output batches ready so far."""
        if self._finished:
            raise RuntimeError("the replay is finished")
        if batch.num_rows:
            rows = self._ingest(batch)
            self._walk(rows)
        return self._take_output(final=False)

    def add_subscription_events(self, events: Iterable[SubscriptionSpec]) -> None:
        """More timed subscription events (declarations are not taken), for a replay fed as
        the events happen (``mledger watch``): each after every event fed or added before it
        (``ValueError`` otherwise: the replay cannot go back)."""
        timed = sorted(self._own_timed(events), key=lambda e: (e.ts_ms, e.seq))
        if not timed:
            return
        first = timed[0]
        last_timed = self._timed[-1] if self._timed else None
        if (self._last_key is not None and first.ts_ms < self._last_key[0]) or (
            last_timed is not None and (first.ts_ms, first.seq) <= (last_timed.ts_ms, last_timed.seq)
        ):
            raise ValueError(f"subscription event at {first.ts_ms} ms comes before events already replayed")
        self._timed.extend(timed)

    def observe(self) -> list[SubscriptionResult]:
        """Every subscription's figures after the events fed so far (the timed subscription
        events added so far applied), the replay going on, as a live broker's cursors are
        between two polls (``mledger watch``): what their rate limits held back is persisted
        first (``PartitionModel.persist_pending``: a broker's flush writes it within a
        minute; a poll's acks carry the poll's instant, not their own), nothing is rewound
        (:meth:`PartitionModel.observe <mledger.replay.PartitionModel.observe>`)."""
        if self._finished:
            raise RuntimeError("the replay is finished")
        self._apply_timed(len(self._timed))
        self._flush()
        if self._model is None:
            return []
        self._model.persist_pending()
        return self._model.observe()

    def forget_ledgers_before(self, ledger_id: int) -> int:
        """Forget the ledgers below ``ledger_id`` but the last one, which the cluster deleted
        (``mledger watch`` passes the first ledger the topic's internal stats list), so that
        memory follows the ledgers that exist; returns how many entries were forgotten.

        The model's managed ledger deletes them (``PartitionModel.forget_ledgers_before``: a
        reset to the earliest position then lands on the first ledger kept, as Pulsar's
        ``ManagedLedgerImpl.getNextValidPosition`` does past a trimmed ledger) and the entry
        index forgets their entries (``EntryIndex.forget_ledgers_before`` says why every later
        output stays what it would have been). The events fed so far are applied
        first, as by :meth:`observe`. Raises :class:`~mledger.core.LedgerNotConsumedError`
        naming ``ledger_id``, forgetting nothing, while a subscription's persisted mark-delete
        is below an entry of those ledgers (the cluster never trims such a ledger: the events
        fed so far have not caught up with it). O(ledgers + subscriptions + facts held)."""
        if self._finished:
            raise RuntimeError("the replay is finished")
        self._apply_timed(len(self._timed))
        self._flush()
        if self._model is not None:
            self._model.forget_ledgers_before(ledger_id)
        return self._index.forget_ledgers_before(ledger_id)

    def cursor_rows(self, results: list[SubscriptionResult]) -> pa.RecordBatch:
        """``results`` (of :meth:`observe`) as the replay's ``cursors`` rows
        (:data:`~mledger.replay.CURSOR_SCHEMA`: what ``mledger replay`` writes). O(len(results))."""
        return self._cursor_batch(results)

    def finish(self) -> list[pa.RecordBatch]:
        """End of the events: final deliveries, cursor and partition rows."""
        return self.finish_variants()[0]

    def finish_variants(self) -> list[list[pa.RecordBatch]]:
        """:meth:`finish` under the replay's own settings and each of ``also_persist``, in that
        order: the same anomaly and partition rows, each setting's own cursor rows."""
        if self._finished:
            return [[] for _ in range(1 + len(self._also))]
        self._finished = True
        self._flush()
        per_setting: list[list[SubscriptionResult]] = [[] for _ in range(1 + len(self._also))]
        self._apply_timed(len(self._timed))
        model = self._model
        if model is not None:
            end = max(self._last_key[0], 0) if self._last_key is not None else 0
            if self._timed:
                end = max(end, self._timed[-1].ts_ms)
            model.dispatch(end + 1)
            for spec in self._declared.values():
                if self._subs.code(spec.name) not in self._deleted:
                    self._create(spec)
            own = model.finish(end, self.settings.emit_state)
            per_setting = [own, *(model.mirror_results(own, self.settings.emit_state) if self._also else [])]
        anomalies = self._take_output(final=True)
        # Rows without a usable topic-partition (a null topic or partition, an impossible
        # partition) are invalid_row anomalies only: they name no topic-partition to report.
        partition = [union_batch("partitions", self._partition_batch(len(per_setting[0])))] if model is not None else []
        return [
            [*anomalies, *([union_batch("cursors", self._cursor_batch(results))] if results else []), *partition]
            for results in per_setting
        ]

    def _own_timed(self, specs: Iterable[SubscriptionSpec]) -> list[SubscriptionSpec]:
        """The timed events of ``specs`` that concern this partition."""
        return [s for s in specs if s.timed and (s.partition is None or s.partition == self._given_partition)]

    # -- ingest and cutting ---------------------------------------------------------------------
    def _ingest(self, batch: pa.RecordBatch) -> Rows:
        n = batch.num_rows
        if batch.column("seq").null_count:
            raise EventOrderError(
                f"events of {self.topic} partition {self.partition}: the input order of some rows is unknown "
                "(a file the plan did not list); the replay cannot establish their order"
            )
        kind = np.asarray(batch.column("kind").to_numpy(zero_copy_only=False))
        seq = np.asarray(batch.column("seq").to_numpy(zero_copy_only=False))
        raw_ts = batch.column("ts")
        order_ts = np.asarray(
            (raw_ts if raw_ts.null_count == 0 else pc.fill_null(raw_ts, _NULL_TS)).to_numpy(zero_copy_only=False)
        )
        self._check_order(order_ts, kind, seq)
        names = batch.column("name")
        produced = kind == KIND_PRODUCED
        none = np.full(n, -1, np.int32)
        if produced.all():
            sub, producer = none, self._producers.encode(names)
        elif not produced.any():
            sub, producer = self._subs.encode(names), none
        else:
            sub, producer = self._encode_apart(names, produced)
        checked = check_events(batch, self.topic, sub, self._subs.ids.get("", -2), self._given_partition)
        problem = none
        if checked.problems is not None:
            problem = np.full(n, -1, np.int32)
            for i, message in checked.problems.items():
                problem[i] = self._problems.code(message)
        produced_batch = np.where(produced, checked.batch, 1).astype(np.int32)
        index_batch = np.where(produced, -1, checked.batch).astype(np.int32)
        return Rows(
            ts=checked.ts,
            kind=kind,
            seq=seq,
            sub=sub,
            ledger=checked.ledger,
            entry=checked.entry,
            bidx=index_batch,
            bsize=produced_batch,
            deliver=checked.deliver,
            ack=checked.ack,
            producer=producer,
            seqid=checked.seqid,
            problem=problem,
        )

    def _encode_apart(self, names: pa.Array, produced: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``names`` as subscription codes where not ``produced`` and as producer codes where
        ``produced`` (-1 elsewhere and for a null), each kind's new names coded in the order
        they first appear among its rows, as :meth:`Codes.encode` of each kind's rows apart
        would code them: from one dictionary encoding of the batch's names. O(rows)."""
        n = len(names)
        encoded = pc.dictionary_encode(names)
        index, present = int_values(encoded.indices)
        values = encoded.dictionary.to_pylist()
        coded = []
        for rows, codes in ((~produced & present, self._subs), (produced & present, self._producers)):
            at = np.flatnonzero(rows)
            first = np.full(len(values), n, np.int64)  # each name's first row among them
            np.minimum.at(first, index[at], at)
            named = np.flatnonzero(first < n)
            lookup = np.full(len(values), -1, np.int32)
            for v in named[np.argsort(first[named])].tolist():
                lookup[v] = codes.code(values[v])
            out = np.full(n, -1, np.int32)
            out[at] = lookup[index[at]]
            coded.append(out)
        return coded[0], coded[1]

    def _check_order(self, ts: np.ndarray, kind: np.ndarray, seq: np.ndarray) -> None:
        kind = kind.astype(np.int64)
        if self._last_key is not None:
            ts = np.concatenate(([self._last_key[0]], ts))
            kind = np.concatenate(([self._last_key[1]], kind))
            seq = np.concatenate(([self._last_key[2]], seq))
        if len(ts) > 1:
            # comparisons, not differences: a missing ts sorts as int64 min
            t0, t1, k0, k1, s0, s1 = ts[:-1], ts[1:], kind[:-1], kind[1:], seq[:-1], seq[1:]
            ok = (t1 > t0) | ((t1 == t0) & ((k1 > k0) | ((k1 == k0) & (s1 > s0))))
            if not ok.all():
                i = int(np.flatnonzero(~ok)[0])
                raise EventOrderError(
                    f"events of {self.topic} partition {self.partition} are out of order: "
                    f"(ts={ts[i]}, kind={KIND_NAMES[kind[i]]}, seq={seq[i]}) is followed by "
                    f"(ts={ts[i + 1]}, kind={KIND_NAMES[kind[i + 1]]}, seq={seq[i + 1]}); each "
                    "topic-partition must be replayed in (ts_ms, kind, input order)"
                )
        self._last_key = (int(ts[-1]), int(kind[-1]), int(seq[-1]))

    def _walk(self, rows: Rows) -> None:
        """Cut the rows around the timed subscription events: an event at ``ts`` comes after
        every row with ``ts`` or before (its kind sorts last) and before the later rows."""
        while self._next_timed < len(self._timed) and len(rows):
            ts = self._timed[self._next_timed].ts_ms
            k = int(np.searchsorted(rows.ts, ts, side="right"))
            if k == len(rows):
                break  # rows of its timestamp may follow in the next batch
            if k:
                self._walk_rows(rows.take(slice(0, k)))
            first_later = int(rows.ts[k])
            end = self._next_timed
            while end < len(self._timed) and self._timed[end].ts_ms < first_later:
                end += 1
            self._apply_timed(end)
            rows = rows.take(slice(k, None))
        if len(rows):
            self._walk_rows(rows)

    def _walk_rows(self, rows: Rows) -> None:
        n = len(rows)
        valid = rows.problem < 0
        first = np.zeros(n, bool)
        acks = np.flatnonzero(valid & (rows.kind == KIND_ACKED))
        if acks.size:
            subs = rows.sub[acks]
            for code in (np.flatnonzero(np.bincount(subs + 1)) - 1).tolist():  # the codes named (-1: none)
                if code not in self._seen:  # its first ack: one search, once per subscription
                    self._seen.add(code)
                    first[acks[int(np.argmax(subs == code))]] = True
        every = self.settings.segment_rows
        cut = np.zeros(n, bool)
        cut[-self._ordinal % every :: every] = True  # the rows whose ordinal is a multiple of it
        self._ordinal += n
        cut &= ~self._continues_request(rows)
        stops = np.flatnonzero(first | cut).tolist()
        pos = 0
        for s in stops:
            if s > pos:
                self._pending.append(rows.take(slice(pos, s)))
            self._flush()
            if first[s]:
                self._first_mention(int(rows.sub[s]))
            pos = s
        if pos < n:
            self._pending.append(rows.take(slice(pos, n)))

    def _continues_request(self, rows: Rows) -> np.ndarray:
        """Which rows continue the acknowledgement request of the row before them (the same
        subscription, ``command`` and time; the row before may be the previous batch's last):
        a step never ends inside a request, as the broker applies one at once."""
        n = len(rows)
        command = rows.seqid
        acked = (rows.kind == KIND_ACKED) & (command >= 0)
        last = self._last_request
        if acked.size:
            end = n - 1
            self._last_request = (int(rows.ts[end]), int(rows.sub[end]), int(command[end])) if acked[end] else None
        if not acked.any():
            return acked
        sub, ts = rows.sub, rows.ts
        same = np.zeros(n, bool)
        same[1:] = acked[1:] & acked[:-1] & (command[1:] == command[:-1]) & (sub[1:] == sub[:-1]) & (ts[1:] == ts[:-1])
        if last is not None and acked[0]:
            same[0] = (int(ts[0]), int(sub[0]), int(command[0])) == last
        return same

    def _flush(self) -> None:
        if self._pending:
            rows = Rows.concat(self._pending)
            self._pending = []
            self._apply_step(rows)

    # -- subscriptions --------------------------------------------------------------------------
    def _create(self, spec: SubscriptionSpec) -> None:
        assert self._model is not None
        code = self._subs.code(spec.name)
        if code in self._created:
            return
        self._model.subscribe(spec)
        self._created.add(code)
        while len(self._shared) <= code:
            self._shared.append(False)
        self._shared[code] = spec.shared
        self._acked.setdefault(code, 0)
        self._cancelled.setdefault(code, 0)

    def _apply_timed(self, end: int) -> None:
        """Apply the timed subscription events before index ``end`` (after the pending rows)."""
        if self._next_timed >= end:
            return
        self._flush()
        while self._next_timed < end:
            event = self._timed[self._next_timed]
            self._next_timed += 1
            self._subscription_event(event)

    def _subscription_event(self, event: SubscriptionSpec) -> None:
        model = self._model
        if model is None:
            return
        t = event.ts_ms
        model.dispatch(t)
        model.set_time(t)
        code = self._subs.code(event.name)
        if event.event == SUBSCRIPTION_CREATED:
            if not self._started and event.ledger_id >= 0:
                model.start(event.ledger_id)  # no entry yet: the topic is on the ledger it started on
                self._started = True
            self._seen.add(code)
            self._deleted.discard(code)
            spec = SubscriptionSpec(event.name, event.type, event.initial_position)
            if code in self._created:  # subscribed again: another type changes it
                model.change_type(event.name, event.type)
                self._shared[code] = spec.shared
            else:
                self._create(spec)
            return
        if code not in self._created:
            self._event_anomaly(event, UNKNOWN_SUBSCRIPTION, f"subscription {event.name!r} does not exist")
            return
        if event.event == SUBSCRIPTION_DELETED:
            model.unsubscribe(event.name)
            self._created.discard(code)
            self._seen.discard(code)  # an ack naming it later creates it again
            self._deleted.add(code)
            self._acked.pop(code, None)
            self._cancelled.pop(code, None)
            return
        model.reset(event.name, event.ledger_id, event.entry_id)

    def _event_anomaly(self, event: SubscriptionSpec, reason: str, detail: str) -> None:
        buf = self._anomaly_buffer
        buf["subscription"].append(event.name)
        buf["event"].append("subscriptions")
        buf["ts_ms"].append(event.ts_ms)
        buf["ledger_id"].append(event.ledger_id if event.ledger_id >= 0 else None)
        buf["entry_id"].append(event.entry_id if event.entry_id >= 0 else None)
        buf["batch_index"].append(None)
        buf["reason"].append(reason)
        buf["detail"].append(f"{event.event}: {detail}")
        self._anomaly_rows += 1
        self._anomaly_total += 1

    def _first_mention(self, code: int) -> None:
        if self._model is None or code in self._created:
            return
        name = self._subs.names[code]
        self._create(self._declared.get(name) or SubscriptionSpec(name))

    def _shared_mask(self, codes: np.ndarray) -> np.ndarray:
        table = np.array(self._shared + [False], bool)  # code -1 reads the False at the end
        return table[codes]

    # -- a step ---------------------------------------------------------------------------------
    def _apply_step(self, rows: Rows) -> None:
        model = self._model
        valid = rows.problem < 0
        if not valid.all():
            bad = rows.take(~valid)
            self._anomaly(INVALID_ROW, bad, [self._problems.names[c] for c in bad.problem.tolist()])
            rows = rows.take(valid)
        if model is None or len(rows) == 0:
            return
        cancels = np.flatnonzero(rows.kind == KIND_CANCELLED)
        if cancels.size == 0:
            self._bulk_step(rows)
            return
        # Split around the cancels applied alone, walking forward: the same cuts as applying
        # the rest of the step again after each one, without re-examining it each time.
        barriers = self._barriers(rows, cancels)
        n, s = len(rows), 0
        while s < n:
            i = self._next_isolated(barriers, s)
            if i < 0:
                self._bulk_step(rows.take(slice(s, n)) if s else rows)
                return
            if i > s:
                self._bulk_step(rows.take(slice(s, i)))
            self._cancel(rows.take(slice(i, i + 1)))
            s = i + 1

    def _bulk_step(self, rows: Rows) -> None:
        """Apply a step without cancels to apply alone, cut where a persist reads what the
        bulk order changes: at a flush tick (it sees exactly the events before it), and before
        the first acknowledgement that may persist a cursor whose persist reads the entries
        produced so far (its acknowledgements up to the next produced row are applied before
        that row's production)."""
        model = self._model
        assert model is not None
        while len(rows):
            tick = model.next_flush_ms()
            if tick is not None and int(rows.ts[-1]) >= tick:
                k = int(np.searchsorted(rows.ts, tick, side="left"))
                if k:
                    self._bulk_step(rows.take(slice(0, k)))
                model.dispatch(tick)
                model.set_time(tick)  # the tick runs, after every event before it
                rows = rows.take(slice(k, None))
                continue
            k = self._lac_cut(rows)
            if k < 0:
                self._apply_rows(rows)
                return
            self._apply_rows(rows.take(slice(0, k)))
            rows = rows.take(slice(k, None))

    def _lac_cut(self, rows: Rows) -> int:
        """Where to cut ``rows`` so that a persist reading the entries produced so far
        (``PartitionModel.writes_read_lac``) sees exactly those before it: the end of the
        leading acknowledgements when one of them may persist such a cursor and entries are
        produced after it, else the first such acknowledgement after a produced row; -1 when
        no cut is needed."""
        model = self._model
        assert model is not None
        produced = np.flatnonzero(rows.kind == KIND_PRODUCED)
        if produced.size == 0:
            return -1
        acting = np.flatnonzero(rows.kind != KIND_PRODUCED)
        if acting.size == 0:
            return -1
        names = self._subs.names
        first = len(rows)
        subs, cancels = rows.sub[acting], rows.kind[acting] == KIND_CANCELLED
        for code in sorted(self._created):
            if not model.writes_read_lac(names[code]):
                continue
            mine = acting[(subs == code) | (cancels & (subs < 0) & self._shared[code])]
            at = int(np.searchsorted(rows.ts[mine], model.persist_due_ms(names[code]), side="left"))
            if at < mine.size:
                first = min(first, int(mine[at]))
        if first >= int(produced[-1]):
            return -1  # nothing is produced after it
        lead = int(produced[0])
        if first < lead:
            return lead  # the leading acks (with it) first, then the rest
        return first

    def _apply_rows(self, rows: Rows) -> None:
        """Produced rows, then acks and cancels."""
        model = self._model
        assert model is not None
        t0, t1 = int(rows.ts[0]), int(rows.ts[-1])
        model.dispatch(t0)
        model.set_time(t0)
        size_before = self._index.size
        produced = rows.kind == KIND_PRODUCED
        limit: np.ndarray | None = None
        n_produced = int(np.count_nonzero(produced))
        if n_produced:
            appended = np.zeros(len(rows), np.int64)
            appended[produced] = self._produce(rows.take(produced) if n_produced < len(rows) else rows)
            limit = size_before + np.cumsum(appended)
        if n_produced < len(rows):
            acting = ~produced
            known = limit[acting] if limit is not None else np.full(len(rows) - n_produced, size_before)
            self._acks(rows.take(acting) if n_produced else rows, known, t1)
        model.set_time(t1)

    def _isolated_cancel(self, rows: Rows) -> int:
        """The first cancel of the step that must be applied alone, or -1.

        A cancel joins the bulk step when its outcome follows from the state before the step
        and the whole-entry acks before it: not when it carries a batch index, names a
        declared subscription not created yet, or follows a batch-index event on its entry.
        """
        cancels = np.flatnonzero(rows.kind == KIND_CANCELLED)
        if cancels.size == 0:
            return -1
        return self._next_isolated(self._barriers(rows, cancels), 0)

    def _barriers(self, rows: Rows, cancels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """What decides, for a step starting at any row ``s``, which of its cancels are applied
        alone (see :meth:`_isolated_cancel`): the cancels' rows, whether each carries a batch
        index, its subscription code, and the last batch-index row (an ack or cancel with a
        batch index) on its entry before it, -1 if none: that row is in the step iff >= ``s``."""
        alone = rows.bidx[cancels] >= 0
        codes = rows.sub[cancels]
        last_partial = np.full(cancels.size, -1, np.int64)
        partial = np.flatnonzero((rows.kind != KIND_PRODUCED) & (rows.bidx >= 0))
        if partial.size:
            partial = partial[np.isin(rows.entry[partial], rows.entry[cancels])]  # others share no entry
        if partial.size:
            both = np.concatenate((partial, cancels))
            is_partial = np.concatenate((np.ones(partial.size, np.int64), np.zeros(cancels.size, np.int64)))
            ledger, entry = rows.ledger[both], rows.entry[both]
            # by entry, then row; at one row (a batch-index cancel) its partial copy first
            order = np.lexsort((1 - is_partial, both, entry, ledger))
            ledger, entry, row, is_p = ledger[order], entry[order], both[order], is_partial[order]
            m = order.size
            start = np.concatenate(([True], (ledger[1:] != ledger[:-1]) | (entry[1:] != entry[:-1])))
            at = np.arange(m)
            group_start = np.maximum.accumulate(np.where(start, at, 0))
            latest = np.maximum.accumulate(np.where(is_p == 1, at, -1))  # the latest partial so far
            found = (latest >= group_start) & (is_p == 0)
            where = np.flatnonzero(found)
            last_partial[order[where] - partial.size] = row[latest[where]]
        return cancels, alone, codes, last_partial

    def _next_isolated(self, barriers: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], s: int) -> int:
        """The first cancel at or after row ``s`` to apply alone in a step starting at ``s``, or -1."""
        cancels, alone, codes, last_partial = barriers
        later = cancels >= s
        hit = later & (alone | (last_partial >= s))
        for code in np.unique(codes[later]).tolist():
            if code >= 0 and code not in self._created and self._subs.names[code] in self._declared:
                hit |= later & (codes == code)
        first = np.flatnonzero(hit)
        return int(cancels[first[0]]) if first.size else -1

    # -- produced -------------------------------------------------------------------------------
    def _produce(self, p: Rows) -> np.ndarray:
        """Place produced rows; returns the entries each row appended (0 if refused)."""
        model = self._model
        assert model is not None
        n = len(p)
        appended = np.zeros(n, np.int64)
        keep = np.ones(n, bool)
        if not self._started:
            # The first produced row is never a duplicate and always placed (ids were validated).
            model.start(int(p.ledger[0]))
            self._started = True
        if self.settings.deduplication:
            dup = model.deduplicate(p.producer, self._producers.names, p.seqid)
            if dup.any():
                d = p.take(dup)
                self._anomaly(
                    DEDUP_DUPLICATE,
                    d,
                    [
                        f"sequence_id {s} of producer {self._producers.names[c]} was already persisted"
                        for c, s in zip(d.producer.tolist(), d.seqid.tolist(), strict=False)
                    ],
                )
                keep = ~dup
        idx = np.flatnonzero(keep)
        if idx.size == 0:
            return appended
        ledgers, entries = p.ledger[idx], p.entry[idx]
        prev_ledger = np.concatenate(([self._index.last_ledger], ledgers[:-1]))
        prev_next = np.concatenate(([self._index.next_entry], entries[:-1] + 1))
        contiguous = ((ledgers == prev_ledger) & (entries == prev_next)) | ((ledgers > prev_ledger) & (entries == 0))
        if contiguous.all():
            bounds = np.flatnonzero(np.diff(ledgers)) + 1
            for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), idx.size], strict=False):
                self._append(int(ledgers[a]), p, idx[a:b], 0)
            appended[idx] = 1
            return appended
        return self._produce_slow(p, idx, appended)

    def _produce_slow(self, p: Rows, idx: np.ndarray, appended: np.ndarray) -> np.ndarray:
        """Rows that are not all contiguous: gaps get placeholders, unplaceable positions are
        reported. Only rows that break contiguity with the row before them (and the row after
        a refused one) are looked at one by one; the stretches between them go in bulk."""
        ledgers, entries = p.ledger[idx], p.entry[idx]
        n = idx.size
        prev_ledger = np.concatenate(([self._index.last_ledger], ledgers[:-1]))
        prev_next = np.concatenate(([self._index.next_entry], entries[:-1] + 1))
        contiguous = ((ledgers == prev_ledger) & (entries == prev_next)) | ((ledgers > prev_ledger) & (entries == 0))
        breaks = np.flatnonzero(~contiguous)
        switches = np.flatnonzero(ledgers[1:] != ledgers[:-1]) + 1  # a new ledger starts a new run
        ledger, nxt = self._index.last_ledger, self._index.next_entry
        run_start, run_ledger, run_fill = -1, -1, 0
        k = 0
        while k < n:
            lid, eid = int(ledgers[k]), int(entries[k])
            if lid == ledger and eid == nxt:
                fill = 0
            elif (lid == ledger and eid > nxt) or lid > ledger:
                start = nxt if lid == ledger else 0
                fill = eid - start
                if fill:
                    self._anomaly(
                        PRODUCED_GAP,
                        p.take([idx[k]]),
                        [
                            (
                                f"entries {lid}:{start}..{lid}:{eid - 1} are missing from the produced log; "
                                f"{fill} placeholder entries keep the later positions"
                            )
                        ],
                    )
            else:
                if run_start >= 0:
                    self._append(run_ledger, p, idx[run_start:k], run_fill)
                    run_start = -1
                exists = self._index.lookup(np.array([lid]), np.array([eid]))[0] >= 0
                reason = DUPLICATE_POSITION if exists else POSITION_OUT_OF_ORDER
                detail = (
                    f"an entry {lid}:{eid} was already produced"
                    if exists
                    else f"{lid}:{eid} is behind the last entry {ledger}:{nxt - 1}: it cannot be placed"
                )
                self._anomaly(reason, p.take([idx[k]]), [detail])
                k += 1  # the next row follows a refused one: looked at one by one too
                continue
            if run_start >= 0 and (fill or lid != run_ledger):
                self._append(run_ledger, p, idx[run_start:k], run_fill)
                run_start = -1
            if run_start < 0:
                run_start, run_ledger, run_fill = k, lid, fill
            appended[idx[k]] = 1 + fill
            # rows up to the next break continue contiguously from this one
            end = int(breaks[np.searchsorted(breaks, k, side="right")]) if breaks.size and breaks[-1] > k else n
            for cut in switches[(switches > k) & (switches < end)].tolist():
                self._append(run_ledger, p, idx[run_start:cut], run_fill)
                run_start, run_ledger, run_fill = cut, int(ledgers[cut]), 0
            appended[idx[k + 1 : end]] = 1
            ledger, nxt = int(ledgers[end - 1]), int(entries[end - 1]) + 1
            k = end
        if run_start >= 0:
            self._append(run_ledger, p, idx[run_start:n], run_fill)
        return appended

    def _append(self, ledger_id: int, p: Rows, rows: np.ndarray, fill: int) -> None:
        model = self._model
        assert model is not None
        bsize = p.bsize[rows]
        deliver = p.deliver[rows]
        delayed = deliver > p.ts[rows]
        deliver = np.where(delayed, deliver, -1)
        if fill:
            self._placeholders += fill
            bsize = np.concatenate((np.ones(fill, np.int32), bsize))
            deliver = np.concatenate((np.full(fill, -1, np.int64), deliver))
            delayed = np.concatenate((np.zeros(fill, bool), delayed))
        model.append(ledger_id, bsize)
        self._index.append(ledger_id, bsize, deliver)
        if delayed.any():
            first_entry = self._index.next_entry - len(bsize)
            offsets = np.flatnonzero(delayed)
            positions = np.column_stack((np.full(offsets.size, ledger_id, np.int64), first_entry + offsets))
            model.schedule(positions, deliver[offsets])

    # -- acks -----------------------------------------------------------------------------------
    def _acks(self, a: Rows, known_limit: np.ndarray, t_limit: int) -> None:
        """Acks and (bulk) cancels of one step, in order; see the module docstring."""
        model = self._model
        assert model is not None
        g = self._index.lookup(a.ledger, a.entry)
        unknown = (g < 0) | (g >= known_limit)
        if unknown.any():
            u = a.take(unknown)
            self._anomaly(
                UNKNOWN_POSITION,
                u,
                [
                    f"no entry {lid}:{eid} was produced before this {'ack' if k == KIND_ACKED else 'cancel'}"
                    for lid, eid, k in zip(u.ledger.tolist(), u.entry.tolist(), u.kind.tolist(), strict=False)
                ],
            )
            a, g = a.take(~unknown), g[~unknown]
        # the batch size of the entry of each row that names a batch index or is cumulative, the
        # rows' ``bsize`` from here on (the calls read it; whole-entry individual acks keep 1)
        sized = np.flatnonzero((a.bidx >= 0) | (a.ack == 1))
        bsize = np.ones(len(a), np.int32)
        if sized.size:
            bsize[sized] = self._index.batch_size(g[sized])
        a.assign(bsize=bsize)
        bad = a.bidx >= bsize  # a whole-entry row is never out of range
        if sized.size and bad.any():
            b = a.take(bad)
            self._anomaly(
                INVALID_ROW,
                b,
                [
                    f"batch_index {i} is out of range for the produced batch_size {s}"
                    for i, s in zip(b.bidx.tolist(), bsize[bad].tolist(), strict=False)
                ],
            )
            a, g = a.take(~bad), g[~bad]
        shared = self._shared_mask(a.sub)
        refused = shared & (a.ack == 1) & (a.kind == KIND_ACKED)
        if refused.any():
            self._anomaly(
                CUMULATIVE_ACK_REFUSED,
                a.take(refused),
                "cumulative acks are not allowed on Shared and Key_Shared subscriptions",
            )
            a, g, shared = a.take(~refused), g[~refused], shared[~refused]
        late: list[tuple[int, int, int, int]] = []  # (row, subscription, g, deliver time)
        new_cancels: dict[int, int] = {}
        if (a.kind == KIND_CANCELLED).any():
            a, g, late, new_cancels = self._expand_cancels(a, g)
            shared = self._shared_mask(a.sub)
        if len(a):
            self._ack_with_deliveries(a, g, shared, t_limit)
        else:
            model.dispatch(t_limit)
        for code, n in new_cancels.items():
            self._acked[code] -= n
            self._cancelled[code] = self._cancelled.get(code, 0) + n
        if late:  # the late cancels whose message was delivered, reported together, in order
            rows = [i for i, _, _, _ in late]
            found: list[tuple[int, int, int]] = []
            names = self._subs.names
            for (i, code, _gi, deliver), lid, eid in zip(
                late, a.ledger[rows].tolist(), a.entry[rows].tolist(), strict=True
            ):
                if model.was_delivered(names[code], lid, eid, deliver):
                    found.append((i, code, deliver))
            if found:
                self._delivery_anomalies(
                    a.take(np.array([i for i, _, _ in found], np.int64)),
                    [code for _, code, _ in found],
                    [deliver for _, _, deliver in found],
                )

    def _expand_cancels(
        self, a: Rows, g: np.ndarray
    ) -> tuple[Rows, np.ndarray, list[tuple[int, int, int, int]], dict[int, int]]:
        """Turn each bulk cancel into one whole-entry individual ack per target subscription.

        Returns the new rows and positions, the late cancels to check for a delivery
        anomaly once the step is applied, and per subscription the cancels that found their
        entry not yet acknowledged (the state before the step plus earlier rows in it).
        """
        model = self._model
        assert model is not None
        shared_subs = [c for c in sorted(self._created) if self._shared[c]]
        whole = (a.kind == KIND_ACKED) & (a.ack == 0) & (a.bidx < 0)
        cancel_rows = np.flatnonzero(a.kind == KIND_CANCELLED)
        deliver_all = np.full(len(a), -1, np.int64)
        deliver_all[cancel_rows] = self._index.deliver_at(g[cancel_rows])  # read for cancels only
        new_cancels: dict[int, int] = {}
        extra_rows: list[int] = []
        extra_subs: list[int] = []
        # (subscription, entry) acked whole by a row before the current cancel, or cancelled by
        # an earlier cancel: one set, filled as the cancels are walked in row order
        if cancel_rows.size:  # only whole acks of a cancelled entry matter
            whole &= np.isin(g, g[cancel_rows], kind="table")
        # whether each cancel's entry was acknowledged before the step, per subscription a
        # cancel may target (no ack is applied while the cancels are expanded): one look each
        cancel_subs = a.sub[cancel_rows].tolist()
        targets_of = {c for c in cancel_subs if c >= 0} | set(shared_subs)
        positions = np.column_stack((a.ledger[cancel_rows], a.entry[cancel_rows]))
        deleted_before = {
            c: model.deleted_rows(self._subs.names[c], positions)
            for c in targets_of
            if c in self._created and self._shared[c]
        }
        whole_rows = np.flatnonzero(whole).tolist()
        whole_keys = list(zip(a.sub[whole].tolist(), g[whole].tolist(), strict=True))
        done: set[tuple[int, int]] = set()
        w = 0
        late_pairs: list[tuple[int, int]] = []
        # the cancels' scalars read as Python ints once (no numpy scalar per row and column)
        cancels = zip(
            cancel_rows.tolist(),
            cancel_subs,
            a.ts[cancel_rows].tolist(),
            deliver_all[cancel_rows].tolist(),
            g[cancel_rows].tolist(),
            strict=True,
        )
        for n_cancel, (i, code, t, deliver, gi) in enumerate(cancels):
            row = slice(i, i + 1)  # taken only for an anomaly
            if code >= 0:
                if code not in self._created:
                    self._anomaly(
                        UNKNOWN_SUBSCRIPTION, a.take(row), [f"subscription {self._subs.names[code]!r} does not exist"]
                    )
                    continue
                if not self._shared[code]:
                    self._anomaly(
                        CANCEL_REFUSED,
                        a.take(row),
                        ["PIP-423 cancels are individual acks: refused on a cumulative-ack subscription type"],
                    )
                    continue
                targets = [code]
            else:
                if not shared_subs:
                    self._anomaly(
                        CANCEL_WITHOUT_SUBSCRIPTION, a.take(row), ["no Shared or Key_Shared subscription exists"]
                    )
                    continue
                targets = shared_subs
            while w < len(whole_rows) and whole_rows[w] < i:
                done.add(whole_keys[w])
                w += 1
            for k, c in enumerate(targets):
                if (c, gi) not in done and not deleted_before[c][n_cancel]:
                    new_cancels[c] = new_cancels.get(c, 0) + 1
                done.add((c, gi))
                extra_rows.append(i)
                extra_subs.append(c)
                if not 0 <= t <= deliver:
                    late_pairs.append((i, k))
        keep = np.flatnonzero(a.kind != KIND_CANCELLED)
        rows_idx = np.concatenate((keep, np.array(extra_rows, np.int64)))
        subs = np.concatenate((a.sub[keep], np.array(extra_subs, np.int32)))
        order = np.argsort(rows_idx, kind="stable")
        rows_idx, subs = rows_idx[order], subs[order]
        out = a.take(rows_idx)
        out.assign(sub=subs.astype(np.int32))
        new_g = g[rows_idx]
        late: list[tuple[int, int, int, int]] = []
        if late_pairs:
            first = np.searchsorted(rows_idx, np.array([i for i, _ in late_pairs]))
            late = [
                (int(f) + k, int(subs[int(f) + k]), int(g[i]), int(deliver_all[i]))
                for f, (i, k) in zip(first.tolist(), late_pairs, strict=False)
            ]
        return out, new_g, late, new_cancels

    def _delivery_anomalies(self, rows: Rows, codes: list[int], delivers: list[int]) -> None:
        """The cancels ``rows`` (each of subscription ``codes[i]``) came after their message
        was delivered (at ``delivers[i]``; -1: not delayed, delivered when produced)."""
        self._anomaly(
            [CANCEL_AFTER_DELIVERY if d < 0 else DELIVERED_BEFORE_CANCEL for d in delivers],
            rows,
            [
                "the message was not delayed: delivered when produced"
                if d < 0
                else f"delivered at {d}, cancelled {t - d} ms later at {t}"
                for t, d in zip(rows.ts.tolist(), delivers, strict=True)
            ],
            subs=np.array(codes, np.int64),
        )

    def _ack_with_deliveries(self, a: Rows, g: np.ndarray, shared: np.ndarray, t_limit: int) -> None:
        """The step's acks with the deliveries of the delayed messages due before ``t_limit``:
        a delivery at time T sees every ack at or before T and none after. An individual ack
        of a Shared or Key_Shared subscription at or before the deliver time of a message due
        in the step (a *hit*) cuts the step at that time (the earliest hit first, then the
        earliest among the acks after it, ...); the messages due from a cut to the next (or
        ``t_limit``) are dispatched after the acks up to it and before the acks after it (no
        ack between the cut and a message's deliver time touches it: it would cut earlier).
        A delivery reads, of each such subscription's cursor, whether the message is
        acknowledged (``PartitionModel.dispatch``), which only an ack of that entry changes
        within a step (a Shared cursor's mark-delete passes an entry only once it is
        acknowledged; cumulative acks are refused there): so a call of a subscription spans a
        delivery unless one of its rows would show the delivery a wrong state of an entry it
        dispatches (``_delivery_cut``)."""
        model = self._model
        assert model is not None
        cuts: list[int] = []
        due_g = np.empty(0, np.int64)
        positions, times = model.due(t_limit)
        relevant = np.flatnonzero(shared & (a.ack == 0)) if times.size else ()
        if len(relevant):
            due_g = self._index.lookup(positions[:, 0], positions[:, 1])
            order = np.argsort(due_g, kind="stable")
            sorted_g, sorted_t = due_g[order], times[order]
            match = relevant[np.isin(g[relevant], due_g, kind="table")]  # the acks of a due entry
            t_match = sorted_t[np.searchsorted(sorted_g, g[match])]  # its first due row's time
            ts_match = a.ts[match]
            hit = ts_match <= t_match
            hit_ts, hit_t = ts_match[hit], t_match[hit]
            while hit_t.size:  # the cuts the acks one delivery time after another make
                t_star = int(hit_t.min())
                cuts.append(t_star)
                later = hit_ts > t_star
                hit_ts, hit_t = hit_ts[later], hit_t[later]
        model.dispatch(cuts[0] if cuts else t_limit)
        # per cut, the entries dispatched after it: those due from it to the next (``due``
        # lists them earliest first; the cuts ascend)
        edges = [*np.searchsorted(times, cuts, side="left").tolist(), len(times)] if cuts else []
        dispatched = [set(due_g[i:j].tolist()) for i, j in zip(edges, edges[1:], strict=False)]
        self._apply_acks(a, g, cuts, dispatched, t_limit)

    def _apply_acks(
        self,
        a: Rows,
        g: np.ndarray,
        cuts: list[int],
        dispatched: list[set[int]],
        t_limit: int,
    ) -> None:
        """The step's acks (and bulk cancels) of every subscription, in calls that leave every
        figure as one call per row would ("Exact bulk acks" in the module docstring), run in
        the order of their event times (each call at its own: the clock never goes back),
        with the deliveries at ``cuts`` (see :meth:`_ack_with_deliveries`; the caller has
        dispatched the messages due before the first): after the calls at or before a cut,
        the messages due up to it and before the next cut (or ``t_limit``) are dispatched
        (``dispatched``: their entries); a call of a Shared or Key_Shared subscription that
        acks one of those entries in the step spans that cut only where the delivery sees the
        same (``_delivery_cut``)."""
        if len(a) == 0:
            for i, t in enumerate(cuts):
                self._deliver_after(t, cuts[i + 1] if i + 1 < len(cuts) else t_limit)
            return
        model = self._model
        assert model is not None
        # the rows naming an entry some delivery dispatches: only those can end a call at a cut
        delivered = np.isin(g, np.fromiter(set().union(*dispatched), np.int64), kind="table") if cuts else None
        runs = self.settings.ledger.deletion_at_batch_index_level_enabled
        plans, order = _SubAcks.of_step(a, g, self._subs.names, self._index, runs)
        if delivered is not None and order is not None:
            delivered = delivered[order]
        start = 0
        for plan in plans:
            code, span = plan.code, slice(start, start + len(plan.ts))
            start = span.stop
            if delivered is not None and code >= 0 and self._shared[code]:
                hit = np.flatnonzero(delivered[span])
                hit_g = plan.g[hit].tolist()
                mine = set(hit_g)
                touched = [
                    (t, entries) for t, entries in zip(cuts, dispatched, strict=True) if not mine.isdisjoint(entries)
                ]
                if touched:
                    times = np.array([t for t, _ in touched], np.int64)
                    plan.cut_at = np.searchsorted(plan.ts, times, side="right").tolist()
                    plan.cut_entries = [entries for _, entries in touched]
                    plan.cut_rows, plan.cut_g = hit.tolist(), hit_g
        # (event time, plan, first row, end); from len(plans) on, the deliveries at a cut instead
        heap: list[tuple[int, int, int, int]] = []
        for k, plan in enumerate(plans):
            call = self._next_call(plan)
            if call is not None:
                heapq.heappush(heap, (call[0], k, call[1], call[2]))
        barrier = len(plans)  # after every call at the same time
        for i, t in enumerate(cuts):
            heapq.heappush(heap, (t, barrier + i, 0, 0))
        while heap:
            t, k, p, q = heapq.heappop(heap)
            if k >= barrier:
                i = k - barrier
                self._deliver_after(t, cuts[i + 1] if i + 1 < len(cuts) else t_limit)
                continue
            plan = plans[k]
            model.set_time(t)
            self._acked[plan.code] = self._acked.get(plan.code, 0) + self._ack_rows(plan, p, q)
            call = self._next_call(plan)
            if call is not None:
                heapq.heappush(heap, (call[0], k, call[1], call[2]))

    def _deliver_after(self, cut: int, until: int) -> None:
        """The acks up to ``cut`` are applied: dispatch the messages due up to it, then those
        due before ``until`` (the next cut or the step's limit: no ack before it touches them
        at or before their deliver time)."""
        model = self._model
        assert model is not None
        model.dispatch(cut + 1)
        model.dispatch(until)

    def _next_call(self, plan: _SubAcks) -> tuple[int, int, int] | None:
        """The next call of one subscription's acks, ``(event time, first row, end)``, advancing past it:
        the acks before the cursor's next persist (all throttled) in as few calls as stay
        exact, then the ack that may persist, alone at its time."""
        p, ts = plan.pos, plan.ts
        n = len(ts)
        if p >= n:
            return None
        model = self._model
        assert model is not None
        due = model.persist_due_ms(plan.name)
        if due > plan.last_ts:
            k = n  # every ack before it (inf: no persist to come)
        elif due <= ts.item(p):
            k = p  # -inf: no cursor yet
        else:
            k = int(ts.searchsorted(int(due)))  # past p: ts[p] < due
        q = plan.end_of(p)  # one request alone: it persists, or not, as in the broker
        at = p
        if k > q:
            cumulative = plan.cumulative_before.item(k) - plan.cumulative_before.item(p)
            if cumulative == k - p:
                if self._cumulative_run_is_exact(plan, p, k):
                    q, at = k, p + self._cumulative_stamp(plan, p, k)
            elif not cumulative:
                q = plan.request_end(self._exact_prefix(plan, p, k), p)
                if q > p + 1:
                    at = p + self._change_stamp(plan, p, q)
                if plan.cut_at is not None and q > p + 1:
                    q, at = self._delivery_cut(plan, p, q, at)
        plan.pos = max(q, p + 1)
        return int(ts[at]), p, plan.pos

    def _delivery_cut(self, plan: _SubAcks, p: int, q: int, at: int) -> tuple[int, int]:
        """Where a call of acks ``p..q`` stamped at row ``at`` must end for the deliveries it
        spans, and its stamp then: a delivery at a cut (``_SubAcks.cut_at``) reads whether
        each entry it dispatches is acknowledged, which only the rows of that entry change
        (see :meth:`_ack_with_deliveries`). The call runs at ``at``'s time: after the cut when
        that row is after it, so the delivery does not see the rows before the cut (nor,
        rightly, those after it), else before it, so the delivery sees the rows after the cut
        too (those after ``at`` change no figure, but they may acknowledge an entry whose
        every index was acknowledged on its own while the broker ignores ack sets). A call
        crossing a cut with a row on the wrong side that names an entry the delivery
        dispatches ends at the cut (the first such) and is looked at again, its stamp that of
        the shorter call. O(rows naming a dispatched entry * cuts crossed)."""
        cut_at, entries, rows, g = plan.cut_at, plan.cut_entries, plan.cut_rows, plan.cut_g
        assert cut_at is not None
        i = bisect.bisect_right(cut_at, p)
        while i < len(cut_at) and cut_at[i] < q:
            c = cut_at[i]
            lo, hi = (p, c) if at >= c else (c, q)  # the rows on the wrong side: those of them
            wrong_side = g[bisect.bisect_left(rows, lo) : bisect.bisect_left(rows, hi)]  # in cut_rows
            if not entries[i].isdisjoint(wrong_side):
                q = c
                at = p + self._change_stamp(plan, p, q) if q > p + 1 else p
                i = bisect.bisect_right(cut_at, p)  # the stamp moved: the cuts before again
                continue
            i += 1
        return q, at

    def _cumulative_run_is_exact(self, plan: _SubAcks, p: int, k: int) -> bool:
        """Whether a run of throttled cumulative acks (rows ``p..k``) may be one call. A cumulative ack takes
        state away (the unload figure never rises) but where the close record would lose the
        batch states it keeps once fewer ranges send it to the metadata store
        (``BulkAckRoom.shrink_loses_batch``), or for the batch state one naming a batch index
        leaves: that one must fit the room (``fits(0, 1)``: the batch cap, the record's size),
        the close record must keep it (``BulkAckRoom.unload`` is None) and the broker must
        not ignore ack sets. Elsewhere a cumulative ack can move that figure both ways, so
        each goes alone."""
        model = self._model
        assert model is not None
        room = model.bulk_ack_room(plan.name, plan.batch_words)
        if room.shrink_loses_batch:
            return False
        if not (plan.bidx[p:k] >= 0).any():
            return True
        if not self.settings.ledger.deletion_at_batch_index_level_enabled:
            return False
        return room.unload is None and room.fits(0, 1)

    def _exact_prefix(self, plan: _SubAcks, p: int, k: int) -> int:
        """The end of the longest run of throttled individual acks from ``p`` (before ``k``)
        that one call applies exactly (``PartitionModel.bulk_ack_room``; where batch-index acks
        move the unload figure, the run ends at its first new maximum: ``_unload_peak``; where
        the room holds from a ledger on, ``BulkAckRoom.from_ledger``, at the first ack of an
        earlier ledger)."""
        model = self._model
        assert model is not None
        batch = plan.batch_before
        room = model.bulk_ack_room(plan.name, plan.batch_words)
        if room.from_ledger >= 0:  # the room holds from that ledger on: the run ends before
            before = np.flatnonzero(plan.ledger[p:k] < room.from_ledger)  # an ack below it
            if before.size:
                k = p + int(before[0])
            if k <= p + 1:
                return p + 1

        def fits(q: int) -> bool:
            b = batch.item(q) - batch.item(p)
            return room.fits(q - p - b, b)

        if fits(k):
            q = k
        elif not fits(p + 1):
            return p + 1
        else:
            lo, hi = p + 1, k  # fits(lo), not fits(hi)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if fits(mid):
                    lo = mid
                else:
                    hi = mid
            q = lo
        if room.unload is not None and batch[q] > batch[p]:
            q = self._unload_peak(plan, p, q, room.unload)
        return q

    def _unload_peak(self, plan: _SubAcks, p: int, q: int, unload: tuple[int, int, int, int]) -> int:
        """Where a run of individual acks ``p..q`` must end so that one call leaves the unload
        figure's maxima as the acks one by one would: the figure is then the acknowledged
        indexes of the partially acknowledged entries, and those entries (``BulkAckRoom.unload``),
        which this follows ack by ack (a new index adds one, an entry acked whole takes its
        indexes away; so does one completed, but where the broker ignores ack sets: its ignored
        acks then stay, every index acknowledged, and count as the others, ``batch_ack_set``
        giving them; an entry of one message is acked whole by its index). The call sets the figure's last value at the event time of its last ack
        that changes the cursor (``_change_stamp``, followed here by the same rules): the run
        ends at the last ack after which, for messages and for entries alike, the figure's
        highest value over the run is not above its maximum so far, or is its last value and
        was first reached at that same time (or at most :data:`_UNLOAD_WALK` acks past the last
        such one: the next call walks from there). O(acks + entries they name)."""
        model = self._model
        assert model is not None
        messages, entries, messages_max, entries_max = unload
        completes = self.settings.ledger.deletion_at_batch_index_level_enabled
        acked: dict[int, int] = {}  # entry -> acknowledged indexes (-1: acknowledged whole)
        gs = plan.g[p:q]
        ts = plan.ts[p:q].tolist()
        sizes = plan.sizes(p, q).tolist()
        indexes = plan.bidx[p:q].tolist()
        end = p + 1
        changed = -1  # the last ack that changes the cursor
        top_m, top_e = messages_max, entries_max  # the highest values so far, and where first
        top_m_at = top_e_at = -1  # reached in the run (-1: not above the maxima before it)
        # the cursor's state before the run (the walk changes nothing) of each entry, asked in
        # bulk where the entries first appear, a chunk of them at a time (the walk may end early)
        g_list = gs.tolist()
        firsts = np.unique(gs, return_index=True)[1]
        firsts.sort()
        first_rows: list[int] = firsts.tolist()
        asked = 0
        before: dict[int, int] = {}  # entry -> acknowledged indexes before the run (-1: whole)
        for j, (e, size, b) in enumerate(zip(g_list, sizes, indexes, strict=True)):
            bits = acked.get(e)
            if bits is None:
                if e not in before:  # j is the next first appearance not asked yet
                    take = first_rows[asked : asked + _STATE_CHUNK]
                    asked += len(take)
                    chunk = plan.at[p + np.array(take, np.int64)]
                    for r, whole, remaining in zip(
                        take,
                        model.deleted_rows(plan.name, chunk),
                        model.batch_ack_sets(plan.name, chunk),
                        strict=True,
                    ):  # an entry of one message has no partial state
                        n = sizes[r]
                        before[g_list[r]] = (
                            -1 if whole else 0 if remaining is None or n <= 1 else ((1 << n) - 1) & ~remaining
                        )
                bits = before[e]
            full = (1 << size) - 1
            if bits < 0:
                pass  # acknowledged whole: nothing changes
            elif b < 0:  # acked whole: its indexes leave the figure
                if bits != full:
                    changed = j
                if bits:
                    messages, entries = messages - bits.bit_count(), entries - 1
                acked[e] = -1
            elif not (bits >> b) & 1:
                changed = j
                new = bits | (1 << b)
                if (completes or size == 1) and new == full:  # completed: acknowledged whole
                    messages, entries = messages - bits.bit_count(), entries - (1 if bits else 0)
                    acked[e] = -1
                else:
                    messages, entries = messages + 1, entries + (0 if bits else 1)
                    acked[e] = new
            else:
                acked[e] = bits
            if messages > top_m:
                top_m, top_m_at = messages, j
            if entries > top_e:
                top_e, top_e_at = entries, j
            stamp = ts[changed if changed >= 0 else j]
            if (top_m_at < 0 or (messages == top_m and ts[top_m_at] == stamp)) and (
                top_e_at < 0 or (entries == top_e and ts[top_e_at] == stamp)
            ):
                end = p + j + 1
            elif p + j + 1 - end >= _UNLOAD_WALK:
                break  # none of the last acks may end the call: it ends at the last that may
        return end

    def _cumulative_stamp(self, plan: _SubAcks, p: int, k: int) -> int:
        """The first of one subscription's cumulative acks ``p..k`` (counted from ``p``) after which the cursor holds
        every message it holds after them all: the crash figure's last value (a function of
        the acknowledged messages between persists) is reached there. An ack acknowledges the
        messages up to its key ``(entry, indexes)``, the indexes ``0..b`` of a batch index
        ``b`` (none where the broker ignores ack sets), every one when acked whole; a lower
        key than the highest reaches the same messages when every message between the two is
        acknowledged already (individually, or by the batch state). O(rows) work over Python
        ints (a run holds tens of acks: fewer calls than numpy's) where the walk down from the
        highest key stops at the next one, as it mostly does; else O(rows log rows) plus the
        entries walked, down to the first message not acknowledged."""
        name = plan.name
        by_index = self.settings.ledger.deletion_at_batch_index_level_enabled
        keys = [
            (g, size if b < 0 or b >= size - 1 else b + 1 if by_index else 0)  # indexes 0..covered-1
            for g, size, b in zip(plan.g[p:k].tolist(), plan.size[p:k].tolist(), plan.bidx[p:k].tolist(), strict=True)
        ]
        low = max(keys)  # the highest key
        below = [key for key in keys if key < low]
        if below and self._all_acknowledged(name, max(below), low):  # the walk mostly stops at
            for key in sorted(set(below), reverse=True):  # the next key: no sort for that one
                if not self._all_acknowledged(name, key, low):
                    break
                low = key
        return next(j for j, key in enumerate(keys) if key >= low)

    def _all_acknowledged(self, name: str, low: tuple[int, int], high: tuple[int, int]) -> bool:
        """Whether the cursor holds every message above key ``low`` up to key ``high`` (keys
        as in :meth:`_cumulative_stamp`), from the highest down. O(entries walked)."""
        model = self._model
        assert model is not None
        (g_low, c_low), (g_high, c_high) = low, high
        for g in range(g_high, g_low - 1, -1):
            first = c_low if g == g_low else 0
            end = c_high if g == g_high else int(self._index.batch_size(np.array([g]))[0])
            if first >= end:
                continue
            ledger_id, entry_id = self._index.position(g)
            if model.is_deleted(name, ledger_id, entry_id):
                continue
            remaining = model.batch_ack_set(name, ledger_id, entry_id)
            wanted = ((1 << end) - 1) & ~((1 << first) - 1)
            if remaining is None or remaining & wanted:
                return False
        return True

    def _change_stamp(self, plan: _SubAcks, p: int, q: int) -> int:
        """The last of one subscription's individual acks ``p..q`` (about to be applied in one
        call; counted from ``p``) that changes what the restart figures count: the event time its figures are
        stamped with, as the acks one by one would reach their last value there (the figures
        only grow between persists). An ack changes nothing when its entry is acknowledged
        already, or acked whole (or completed) by an earlier row, or its batch index is, or it
        acks whole an entry every index of which is acknowledged already: where the broker
        ignores ack sets, each index on its own (the figures count such an entry's batch
        whole, as they count the entry acknowledged whole: ``batch_ack_set`` gives the ack
        sets ignored)."""
        model = self._model
        assert model is not None
        name = plan.name
        gs, bidx = plan.g[p:q], plan.bidx[p:q]
        for j in range(q - p - 1, -1, -1):
            lid, eid = plan.ledger.item(p + j), plan.entry.item(p + j)
            if model.is_deleted(name, lid, eid):
                continue
            same = bidx[:j][gs[:j] == gs.item(j)]  # the earlier rows of its entry
            if same.size and (same < 0).any():
                continue  # acked whole earlier in the call
            b = bidx.item(j)
            if b >= 0 and same.size and (same == b).any():
                continue
            remaining = model.batch_ack_set(name, lid, eid)
            if remaining is None and not same.size:
                return j  # an entry nothing acknowledged yet
            size = plan.size.item(p + j) if b >= 0 else int(plan.sizes(p + j, p + j + 1)[0])
            full = (1 << size) - 1
            acked = full & ~remaining if remaining is not None else 0
            if b >= 0 and (acked >> b) & 1:
                continue
            for k in same.tolist():
                acked |= 1 << k
            if acked == full:
                continue  # every index acknowledged before it (earlier in the call, or before)
            return j
        return q - p - 1

    def _ack_rows(self, plan: _SubAcks, p: int, q: int) -> int:
        """One call's acks of one subscription (rows ``p..q``): the highest cumulative ack, the
        whole-entry individual acks in bulk and one batch-index ack per remaining entry;
        returns the entries newly acknowledged."""
        model = self._model
        assert model is not None
        name = plan.name
        if q == p + 1 and plan.bidx.item(p) < 0:  # one whole-entry ack, the usual call that persists
            if plan.ack.item(p) == 1:
                return model.ack_cumulative(name, plan.ledger.item(p), plan.entry.item(p), -1, plan.size.item(p))
            return model.ack(name, plan.at[p:q])
        n_cumulative = plan.cumulative_before.item(q) - plan.cumulative_before.item(p)
        n_batch = plan.batch_before.item(q) - plan.batch_before.item(p)
        if not n_cumulative and not n_batch:
            return model.ack(name, plan.at[p:q])  # whole-entry individual acks only: no mask to build
        done = 0
        if n_cumulative:
            done += self._highest_cumulative(plan, p, q)
            if n_cumulative == q - p:
                return done
        positions = [plan.whole_acks(p, q)]
        if n_batch:
            done += self._batch_index_acks(plan, p, q, positions)
        if sum(len(rows) for rows in positions):
            done += model.ack(name, positions[0] if len(positions) == 1 else np.concatenate(positions))
        return done

    def _highest_cumulative(self, plan: _SubAcks, p: int, q: int) -> int:
        """The highest of one subscription's cumulative acks among rows ``p..q``, applied:
        the others acknowledge nothing it does not. Keys as in :meth:`_cumulative_stamp`
        (an index below the batch's last acknowledges the indexes up to it, else the entry
        whole); acks of the same key are the same ack. O(cumulative acks of the call), over
        Python ints."""
        model = self._model
        assert model is not None
        g, size, bidx, ledger, entry = plan.cumulative_acks(p, q)
        _, covered, n, b, lid, eid = max(
            (e, n if b < 0 or b >= n - 1 else b, n, b, lid, eid)
            for e, n, b, lid, eid in zip(g, size, bidx, ledger, entry, strict=True)
        )
        return model.ack_cumulative(plan.name, lid, eid, -1 if covered == n else b, n)

    def _batch_index_acks(self, plan: _SubAcks, p: int, q: int, positions: list[np.ndarray]) -> int:
        """Batch-index acks of one subscription (among its rows ``p..q``) in one call: an entry whose every index is acked
        in it joins the whole-entry acks (``positions``); the others go with them, as ack sets,
        in one request (``positions`` is then emptied).

        With batch-index deletion disabled, where the rows carry the acknowledgement request they
        came in (``command``), they go with the whole entries as one request, as the broker
        applies a ``CommandAck``; else each is a request of its own, which the broker ignores
        but for a batch of one (an empty ack set): one ack set per row, in order, with the whole
        entries, leaves the cursor as they do one by one (the ack sets AND-merged into the
        ignored ones, none for an entry acked whole, before or after in the call)."""
        model = self._model
        assert model is not None
        name = plan.name
        done = 0
        if not self.settings.ledger.deletion_at_batch_index_level_enabled:
            rows, bidx_list, size_list = plan.batch_acks(p, q)
            sizes = plan.size[rows]
            whole = np.concatenate(positions)
            positions.clear()
            at = plan.at[rows]
            if (plan.seqid[rows] >= 0).any():
                return model.ack_batch_messages(name, at, plan.bidx[rows], sizes, whole)
            one_each = [((1 << size) - 1) & ~(1 << b) for size, b in zip(size_list, bidx_list, strict=True)]
            return model.ack_batch_sets(name, at, one_each, sizes, whole)
        complete, partial, ack_sets, partial_sizes = plan.batch_entries(p, q)
        if complete:
            positions.append(plan.at.take(complete, axis=0))
        if partial:
            # one request with the whole entries: the cursor changes once, as the acks one by one
            # leave it (two calls would show the batch states before the whole entries)
            whole = np.concatenate(positions)
            positions.clear()
            sizes = np.array(partial_sizes, dtype=np.int64)
            done += model.ack_batch_sets(name, plan.at.take(partial, axis=0), ack_sets, sizes, whole)
        return done

    # -- isolated cancels (barriers) -----------------------------------------------------------------------
    def _cancel(self, row: Rows) -> None:
        model = self._model
        if model is None:
            return
        t = int(row.ts[0])
        model.dispatch(t)
        model.set_time(t)
        lid, eid, bidx, code = int(row.ledger[0]), int(row.entry[0]), int(row.bidx[0]), int(row.sub[0])
        g = int(self._index.lookup(row.ledger, row.entry)[0])
        if g < 0:
            self._anomaly(UNKNOWN_POSITION, row, [f"no entry {lid}:{eid} was produced before this cancel"])
            return
        size = int(self._index.batch_size(np.array([g]))[0])
        if bidx >= size:
            self._anomaly(INVALID_ROW, row, [f"batch_index {bidx} is out of range for the produced batch_size {size}"])
            return
        if code >= 0:
            name = self._subs.names[code]
            if code not in self._created:
                spec = self._declared.get(name)
                if spec is None:
                    self._anomaly(UNKNOWN_SUBSCRIPTION, row, [f"subscription {name!r} does not exist"])
                    return
                self._create(spec)
            if not self._shared[code]:
                self._anomaly(
                    CANCEL_REFUSED,
                    row,
                    ["PIP-423 cancels are individual acks: refused on a cumulative-ack subscription type"],
                )
                return
            targets = [code]
        else:
            targets = [c for c in sorted(self._created) if self._shared[c]]
            if not targets:
                self._anomaly(CANCEL_WITHOUT_SUBSCRIPTION, row, ["no Shared or Key_Shared subscription exists"])
                return
        deliver = int(self._index.deliver_at(np.array([g]))[0])
        for c in targets:
            name = self._subs.names[c]
            in_time = 0 <= t <= deliver
            if not in_time and model.was_delivered(name, lid, eid, deliver):
                self._delivery_anomalies(row, [c], [deliver])
            # a whole-entry cancel is the individual ack it is in a bulk step (and persists as one)
            done = model.cancel(name, lid, eid, bidx, size) if bidx >= 0 else model.ack(name, _position(lid, eid))
            self._cancelled[c] = self._cancelled.get(c, 0) + done

    # -- output ---------------------------------------------------------------------------------
    def _anomaly(
        self, reason: str | list[str], rows: Rows, detail: str | list[str], subs: np.ndarray | None = None
    ) -> None:
        """Buffer an anomaly row for each of ``rows``: ``reason`` and ``detail`` one for all or
        one per row; the subscription of each row, or ``subs``."""
        n = len(rows)
        if n == 0:
            return
        codes = rows.sub if subs is None else subs
        names = self._subs.names
        buf = self._anomaly_buffer
        buf["subscription"].extend(names[c] if c >= 0 else None for c in codes.tolist())
        buf["event"].extend(KIND_NAMES[k] for k in rows.kind.tolist())
        for column, values in (
            ("ts_ms", rows.ts),
            ("ledger_id", rows.ledger),
            ("entry_id", rows.entry),
            ("batch_index", rows.bidx),
        ):
            buf[column].extend(v if v >= 0 else None for v in values.tolist())
        buf["reason"].extend(reason if isinstance(reason, list) else [reason] * n)
        buf["detail"].extend(detail if isinstance(detail, list) else [detail] * n)
        self._anomaly_rows += n
        self._anomaly_total += n

    def _take_output(self, final: bool) -> list[pa.RecordBatch]:
        if not self._anomaly_rows or (not final and self._anomaly_rows < self.settings.anomaly_batch_rows):
            return []
        n = self._anomaly_rows
        buf = self._anomaly_buffer
        columns = {"topic": [self.topic] * n, "partition": [self.partition] * n, **buf}
        batch = pa.RecordBatch.from_pydict(columns, schema=ANOMALY_SCHEMA)
        self._anomaly_buffer = _empty_anomaly_buffer()
        self._anomaly_rows = 0
        return [union_batch("anomalies", batch)]

    def _cursor_batch(self, results: list[SubscriptionResult]) -> pa.RecordBatch:
        rows = []
        for r in results:
            code = self._subs.code(r.subscription)
            rows.append(
                {
                    "topic": self.topic,
                    "partition": self.partition,
                    "subscription": r.subscription,
                    "subscription_type": r.subscription_type,
                    "mark_delete_ledger_id": r.mark_delete[0],
                    "mark_delete_entry_id": r.mark_delete[1],
                    "read_ledger_id": r.read_position[0],
                    "read_entry_id": r.read_position[1],
                    "ack_hole_ranges": r.ack_hole_ranges,
                    "individually_deleted_messages": r.individually_deleted_messages,
                    "backlog": r.backlog,
                    "acked": self._acked.get(code, 0),
                    "cancelled": self._cancelled.get(code, 0),
                    "delayed_delivered": r.delayed_delivered,
                    "delayed_pending": r.delayed_pending,
                    "persisted_state_bytes": r.persisted_state_bytes,
                    "state_chunks": r.state_chunks,
                    "truncated_ranges": r.truncated_ranges,
                    "truncated_batch_indexes": r.truncated_batch_indexes,
                    "state_record": r.state_record,
                    "state": r.state,
                    **dataclasses.asdict(r.answers),
                }
            )
        return pa.RecordBatch.from_pylist(rows, schema=CURSOR_SCHEMA)

    def _partition_batch(self, subscriptions: int) -> pa.RecordBatch:
        index = self._index
        return pa.RecordBatch.from_pylist(
            [
                {
                    "topic": self.topic,
                    "partition": self.partition,
                    "events": self._ordinal,
                    "entries": index.size,
                    "placeholder_entries": self._placeholders,
                    "ledgers": self._model.ledger_count() if self._model is not None else 0,
                    "last_ledger_id": index.last_ledger if index.size else None,
                    "last_entry_id": index.next_entry - 1 if index.size else None,
                    "subscriptions": subscriptions,
                    "anomalies": self._anomaly_total,
                }
            ],
            schema=PARTITION_SCHEMA,
        )


def _command_starts(ts: np.ndarray, command: np.ndarray) -> np.ndarray | None:
    """Where each acknowledgement request among one subscription's acks starts, then their
    end: a row continues the request of the row before it when both carry the same
    ``command`` (-1: none, as for a cancel) at the same time. None when every row is alone."""
    same = (command[1:] >= 0) & (command[1:] == command[:-1]) & (ts[1:] == ts[:-1])
    if not same.any():
        return None
    return np.append(np.flatnonzero(np.concatenate(([True], ~same))), command.size)


def _position(ledger_id: int, entry_id: int) -> np.ndarray:
    """One ``(ledger_id, entry_id)`` row, as the model's bulk acks take positions."""
    return np.array([[ledger_id, entry_id]], np.int64)


def _empty_anomaly_buffer() -> dict[str, list[Any]]:
    return {name: [] for name in ANOMALY_SCHEMA.names if name not in ("topic", "partition")}


def replayable(topic: str | None, partition: int | None) -> bool:
    """Whether a topic-partition key can be replayed (a topic, and a partition in Java's ``int``
    range, -1 or more). Rows of any other key are ``invalid_row`` anomalies only: no cursors,
    no ``partitions`` row; the summary counts their events from the prepared log's manifest."""
    return bool(topic) and partition is not None and -1 <= partition < (1 << 31)


def declared_for(
    subscriptions: Mapping[str, Sequence[SubscriptionSpec]], topic: str | None
) -> Sequence[SubscriptionSpec]:
    """The declared subscriptions of ``topic`` (none for a missing topic)."""
    return subscriptions.get(topic, ()) if topic is not None else ()
