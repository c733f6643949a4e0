"""The replay's :class:`~mledger.spark.model.PartitionModel` on ``ManagedLedger`` + ``ManagedCursor``.

One :class:`LedgerModel` per topic-partition: a ``ManagedLedgerFactory`` over a
:class:`~mledger.spark.store.ReplayStore` with a ``ManualClock`` that follows event time, one
managed ledger whose entries sit at the log's positions, one durable cursor per subscription
running with the replay's persistence settings. The broker-level rules are kept small and
local here (until ``mledger.broker`` provides them):

* **Types.** Shared and Key_Shared subscriptions take individual acks, honour ``deliver_at``
  and accept PIP-423 cancels; Exclusive and Failover take cumulative acks too, deliver
  delayed messages at once (as Pulsar does) and refuse cancels. The engine enforces the
  refusals and reports them; this class applies what is allowed.
* **Delayed delivery.** A heap of ``(deliver_at, position)``; :meth:`LedgerModel.dispatch`
  delivers what is due to every shared subscription that has not acknowledged it.
* **Deduplication.** Per producer name, the highest sequence id persisted; a row at or below
  it is a duplicate (Pulsar's ``MessageDeduplication`` rule).
* **Reads.** At the end the dispatcher has read everything (an always-connected consumer),
  so each cursor's read position is moved after the last entry.

Placing entries: the first produced position opens the managed ledger on exactly the log's
ledger id (``ReplayStore.expect_ledger``); a higher ledger id rolls the ledger over onto it
(:func:`_roll_over_to`, through ``ManagedLedger.roll_over``). Data-ledger rollover by count, size and time is switched off: the
log decides where ledgers end.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence

import numpy as np

from ..clock import ManualClock
from ..config import ManagedLedgerConfig
from ..cursor import ManagedCursor
from ..errors import MarkDeletingMarkedPositionError
from ..ledger import ML_ROOT, InitialPosition, ManagedLedger, ManagedLedgerFactory
from ..persistence.chunking import parse_footer, reassemble, unpack_payload
from ..persistence.compression import decompress_metadata
from ..position import Position
from .model import SubscriptionResult, SubscriptionSpec
from .settings import ReplaySettings
from .store import ReplayStore

_INT32_MAX = (1 << 31) - 1
_NEVER_MS = 1 << 62
_MAX_STATE = 1 << 31
_NO_LEDGER = -1


def managed_ledger_name(topic: str, partition: int) -> str:
    """Pulsar's managed-ledger name: ``persistent://t/ns/x`` partition 2 is
    ``t/ns/persistent/x-partition-2``.

    >>> managed_ledger_name("persistent://public/default/orders", 2)
    'public/default/persistent/orders-partition-2'
    """
    scheme, sep, rest = topic.partition("://")
    parts = rest.split("/", 2) if sep else []
    base = f"{parts[0]}/{parts[1]}/{scheme}/{parts[2]}" if len(parts) == 3 else topic
    base = "/".join(p for p in base.replace(":", "_").split("/") if p) or "topic"
    return base if partition < 0 else f"{base}-partition-{partition}"


def cursor_name(subscription: str) -> str:
    """A cursor name for a subscription (``/`` is not allowed in cursor names)."""
    return subscription.replace("%", "%25").replace("/", "%2F")


class _Subscription:
    __slots__ = ("cursor", "delivered", "spec", "start", "undelivered")

    def __init__(self, spec: SubscriptionSpec) -> None:
        self.spec = spec
        self.cursor: ManagedCursor | None = None
        self.delivered = 0
        self.start: Position | None = None  # mark-delete when the cursor opened
        self.undelivered: set[tuple[int, int]] = set()  # due but acknowledged before


class LedgerModel:
    """:class:`~mledger.spark.model.PartitionModel` on the managed ledger and cursors.

    Single-threaded. Memory: the cursors' ack state, one small record per data ledger, the
    scheduled delayed messages and one sequence id per producer; entries are not kept.
    """

    def __init__(self, topic: str, partition: int, settings: ReplaySettings) -> None:
        self._clock = ManualClock(0)
        self._store = ReplayStore()
        self._factory = ManagedLedgerFactory(self._store, settings.factory, clock=self._clock)
        self._config: ManagedLedgerConfig = settings.ledger.with_changes(
            max_entries_per_ledger=_INT32_MAX,
            max_size_per_ledger_mb=_INT32_MAX,
            minimum_rollover_time_ms=0,
            maximum_rollover_time_ms=_NEVER_MS,
        )
        self._name = managed_ledger_name(topic, partition)
        self._ml: ManagedLedger | None = None
        self._subs: dict[str, _Subscription] = {}
        self._heap: list[tuple[int, int, int]] = []
        self._staged: list[tuple[int, int, int]] = []  # popped from the heap, ascending
        self._last_sequence: dict[str, int] = {}
        self._ledgers = 0

    # -- time -------------------------------------------------------------------------------
    def set_time(self, now_ms: int) -> None:
        if now_ms > self._clock.now_ms():
            self._clock.set(now_ms)

    # -- producing --------------------------------------------------------------------------
    def append(self, ledger_id: int, count: int) -> None:
        ml = self._ml
        if ml is None:
            ml = self._open(ledger_id)
        elif ledger_id != ml.current_ledger_id:
            _roll_over_to(ml, self._store, ledger_id)
            self._ledgers += 1
        ml.add_entries([b""] * count)

    def _open(self, first_ledger_id: int) -> ManagedLedger:
        self._store.expect_ledger(first_ledger_id)
        ml = self._factory.open(self._name, self._config)
        self._ml = ml
        self._ledgers = 1
        for sub in self._subs.values():
            self._open_cursor(sub)
        return ml

    def deduplicate(self, producers: np.ndarray, names: Sequence[str], sequence_ids: np.ndarray) -> np.ndarray:
        """Vectorised per producer: ``producers`` are codes into ``names`` (-1 = none)."""
        dup = np.zeros(len(sequence_ids), bool)
        has = (producers >= 0) & (sequence_ids >= 0)
        if not has.any():
            return dup
        rows = np.flatnonzero(has)
        codes = producers[rows]
        for code in np.unique(codes).tolist():
            idx = rows[codes == code]
            seqs = sequence_ids[idx]
            name = names[code]
            last = self._last_sequence.get(name, -1)
            running = np.maximum.accumulate(np.concatenate(([last], seqs)))[:-1]
            dup[idx] = seqs <= running
            self._last_sequence[name] = max(last, int(seqs.max()))
        return dup

    # -- subscriptions ----------------------------------------------------------------------
    def subscribe(self, spec: SubscriptionSpec) -> None:
        if spec.name in self._subs:
            return
        sub = _Subscription(spec)
        self._subs[spec.name] = sub
        if self._ml is not None:
            self._open_cursor(sub)

    def _open_cursor(self, sub: _Subscription) -> None:
        assert self._ml is not None
        initial = InitialPosition.LATEST if sub.spec.initial_position == "latest" else InitialPosition.EARLIEST
        sub.cursor = self._ml.open_cursor(cursor_name(sub.spec.name), initial)
        sub.start = sub.cursor.mark_delete_position

    def has_subscription(self, name: str) -> bool:
        return name in self._subs

    def subscription_specs(self) -> list[SubscriptionSpec]:
        return [s.spec for s in self._subs.values()]

    def _cursor(self, name: str) -> ManagedCursor:
        cursor = self._subs[name].cursor
        if cursor is None:
            raise RuntimeError(f"subscription {name!r}: no cursor before the first entry")
        return cursor

    # -- acknowledgements -------------------------------------------------------------------
    def ack(self, subscription: str, positions: np.ndarray) -> int:
        cursor = self._cursor(subscription)
        before = cursor.messages_consumed_counter
        cursor.delete_many(positions)
        return cursor.messages_consumed_counter - before

    def ack_batch_indexes(
        self, subscription: str, ledger_id: int, entry_id: int, indexes: Sequence[int], batch_size: int
    ) -> int:
        cursor = self._cursor(subscription)
        before = cursor.messages_consumed_counter
        cursor.delete_batch_indexes(Position(ledger_id, entry_id), indexes, batch_size)
        return cursor.messages_consumed_counter - before

    def ack_cumulative(
        self, subscription: str, ledger_id: int, entry_id: int, batch_index: int, batch_size: int
    ) -> int:
        cursor = self._cursor(subscription)
        position = Position(ledger_id, entry_id)
        if position <= cursor.mark_delete_position:
            return 0
        before = cursor.messages_consumed_counter
        try:
            if batch_index < 0 or batch_index >= batch_size - 1:
                cursor.mark_delete(position)
            else:
                # Pulsar's cumulative batch ack: indexes after batch_index stay un-acked.
                remaining = ((1 << batch_size) - 1) & ~((1 << (batch_index + 1)) - 1)
                cursor.mark_delete(position, ack_set=remaining)
        except MarkDeletingMarkedPositionError:
            return 0  # behind the mark-delete position: a no-op, as for a broker
        return cursor.messages_consumed_counter - before

    def cancel(self, subscription: str, ledger_id: int, entry_id: int, batch_index: int, batch_size: int) -> int:
        cursor = self._cursor(subscription)
        before = cursor.messages_consumed_counter
        position = Position(ledger_id, entry_id)
        if batch_index < 0:
            cursor.delete(position)
        else:
            cursor.delete_batch_indexes(position, [batch_index], batch_size)
        return cursor.messages_consumed_counter - before

    def is_deleted(self, subscription: str, ledger_id: int, entry_id: int) -> bool:
        return self._cursor(subscription).is_message_deleted(Position(ledger_id, entry_id))

    # -- delayed delivery -------------------------------------------------------------------
    def schedule(self, positions: np.ndarray, deliver_at: np.ndarray) -> None:
        heap = self._heap
        for (ledger_id, entry_id), t in zip(positions.tolist(), deliver_at.tolist()):
            heapq.heappush(heap, (t, ledger_id, entry_id))

    def _stage(self, before_ms: int) -> None:
        heap, staged = self._heap, self._staged
        while heap and heap[0][0] < before_ms:
            staged.append(heapq.heappop(heap))

    def due(self, before_ms: int) -> tuple[np.ndarray, np.ndarray]:
        self._stage(before_ms)
        k = bisect.bisect_left(self._staged, (before_ms,))
        if k == 0:
            return np.empty((0, 2), np.int64), np.empty(0, np.int64)
        items = np.array(self._staged[:k], dtype=np.int64)
        return items[:, 1:], items[:, 0]

    def dispatch(self, before_ms: int) -> None:
        self._stage(before_ms)
        k = bisect.bisect_left(self._staged, (before_ms,))
        if k == 0:
            return
        items, self._staged = self._staged[:k], self._staged[k:]
        for sub in self._subs.values():
            cursor = sub.cursor
            if cursor is None or not sub.spec.shared:
                continue
            deleted = cursor.is_message_deleted
            for _, lid, eid in items:
                if deleted(Position(lid, eid)):
                    sub.undelivered.add((lid, eid))
                else:
                    sub.delivered += 1

    def was_delivered(self, subscription: str, ledger_id: int, entry_id: int, deliver_at_ms: int) -> bool:
        sub = self._subs[subscription]
        if sub.start is not None and Position(ledger_id, entry_id) <= sub.start:
            return False  # before the subscription began
        return deliver_at_ms < 0 or not sub.spec.shared or (ledger_id, entry_id) not in sub.undelivered

    # -- results ----------------------------------------------------------------------------
    def ledger_count(self) -> int:
        return self._ledgers

    def finish(self, end_ms: int, emit_state: bool) -> list[SubscriptionResult]:
        if not self._subs:
            return []
        if self._ml is None:
            self._open(0)  # no entry was ever produced: an empty ledger 0 for the cursors
        ml = self._ml
        assert ml is not None
        self.set_time(end_ms)
        pending = self._staged + sorted(self._heap)
        results = []
        for sub in self._subs.values():
            cursor = sub.cursor
            assert cursor is not None
            waiting = 0
            if sub.spec.shared and pending:
                deleted = cursor.is_message_deleted
                waiting = sum(1 for _, lid, eid in pending if not deleted(Position(lid, eid)))
            # The dispatcher has read everything; the reset also persists the final state.
            cursor.seek(ml.last_confirmed_entry.next())
            stats = cursor.stats()
            record, state = self._persisted_state(cursor, stats.cursor_ledger_id) if emit_state else (None, None)
            md, read = stats.mark_delete_position, stats.read_position
            results.append(SubscriptionResult(
                subscription=sub.spec.name,
                subscription_type=sub.spec.type,
                mark_delete=(md.ledger_id, md.entry_id),
                read_position=(read.ledger_id, read.entry_id),
                ack_hole_ranges=stats.individually_deleted_ranges,
                backlog=stats.backlog,
                delayed_delivered=sub.delivered,
                delayed_pending=waiting,
                persisted_state_bytes=stats.persisted_state_bytes,
                state_chunks=stats.last_persist_chunks,
                truncated_ranges=stats.truncated_ranges,
                truncated_batch_indexes=stats.truncated_batch_indexes,
                state_record=record,
                state=state,
            ))
        return results

    def _persisted_state(self, cursor: ManagedCursor, ledger_id: int) -> tuple[str, bytes]:
        """The last persisted state: a ``PositionInfo`` (reassembled, uncompressed) from the
        cursor ledger, or the ``ManagedCursorInfo`` node when the state went there."""
        if ledger_id != _NO_LEDGER:
            entries = self._store.last_append(ledger_id)
            footer = parse_footer(entries[-1], max_parts=max(len(entries) - 1, 1), max_length=_MAX_STATE)
            payload = entries[-1] if footer is None else reassemble(footer, entries[:-1])
            return "PositionInfo", unpack_payload(payload, _MAX_STATE)
        assert self._ml is not None
        node = self._store.get(f"{ML_ROOT}/{self._ml.name}/{cursor.name}")
        assert node is not None
        return "ManagedCursorInfo", decompress_metadata(node.data, _MAX_STATE)


def _roll_over_to(ml: ManagedLedger, store: ReplayStore, ledger_id: int) -> None:
    """Seal the current ledger and continue in a new one whose id is ``ledger_id``."""
    store.expect_ledger(ledger_id)
    rolled = ml.roll_over() == ledger_id
    if not rolled or ml.current_ledger_id != ledger_id:
        raise RuntimeError(f"{ml.name}: could not roll over to ledger {ledger_id}")
