"""The delayed-delivery tracker: positions held until their deliver-at time.

Pulsar's ``InMemoryDelayedDeliveryTracker``, per dispatcher. An entry read with a deliver-at
time in the future is added here instead of being dispatched; once the broker clock reaches
that time it is handed back (:meth:`pop_due`) and the dispatcher replays it. The tracker
keeps positions only, never payloads, and keeps no state of its own across restarts: after a
restart (or a dispatcher reset) the cursor reads the entries again and they are re-added.
Whether a held message was acknowledged meanwhile (cancelled, PIP-423) is decided by the cursor
when the message is replayed, so the tracker never needs to be told; :meth:`remove` only keeps
its counts exact.

"Due" follows Pulsar's cutoff: ``deliver_at <= now`` when strict, else
``deliver_at <= now + tick`` (``isDelayedDeliveryDeliverAtTimeStrict`` false). Not
thread-safe: the dispatcher calls it under its lock. Operations are O(log n).
"""

from __future__ import annotations

from sortedcontainers import SortedList

from ..core._position import Position

__all__ = ["DelayedDeliveryTracker"]

_MAX_POSITION = Position((1 << 63) - 1, (1 << 63) - 1)


class DelayedDeliveryTracker:
    """Positions waiting for their deliver-at time, earliest first."""

    def __init__(self, tick_time_ms: int = 1000, strict: bool = True) -> None:
        self._tick = tick_time_ms
        self._strict = strict
        self._queue: SortedList = SortedList()  # (deliver_at_ms, position)
        self._by_position: dict[Position, tuple[int, int | None]] = {}  # -> (deliver_at, key hash)

    def cutoff(self, now_ms: int) -> int:
        """Messages with a deliver-at time at or before this are due."""
        return now_ms if self._strict else now_ms + self._tick

    def is_due(self, deliver_at_ms: int, now_ms: int) -> bool:
        """Whether a message with this deliver-at time may be delivered at ``now_ms``."""
        return deliver_at_ms <= self.cutoff(now_ms)

    def add(self, position: Position, deliver_at_ms: int, key_hash: int | None = None) -> None:
        """Hold ``position`` (with its sticky-key hash) until ``deliver_at_ms``; re-adding moves it."""
        self.remove(position)
        self._by_position[position] = (deliver_at_ms, key_hash)
        self._queue.add((deliver_at_ms, position))

    def remove(self, position: Position) -> bool:
        """Stop holding ``position``; True if it was held."""
        held = self._by_position.pop(position, None)
        if held is None:
            return False
        self._queue.remove((held[0], position))
        return True

    def remove_at_most(self, position: Position) -> int:
        """Stop holding every position at or before ``position`` (they were acknowledged)."""
        gone = [p for p in self._by_position if p <= position]
        for p in gone:
            self.remove(p)
        return len(gone)

    def pop_due(self, now_ms: int, limit: int | None = None) -> list[tuple[Position, int | None]]:
        """Remove and return ``(position, key hash)`` of the messages due at ``now_ms``,
        earliest deliver-at time first."""
        cutoff = self.cutoff(now_ms)
        out: list[tuple[Position, int | None]] = []
        while self._queue and (limit is None or len(out) < limit):
            at, position = self._queue[0]
            if at > cutoff:
                break
            self._queue.pop(0)
            out.append((position, self._by_position.pop(position)[1]))
        return out

    def peek_due(self, now_ms: int) -> list[tuple[int, Position]]:
        """``(deliver_at, position)`` of the messages due at ``now_ms``, earliest first,
        without removing them. O(log n + due)."""
        return list(self._queue.irange(maximum=(self.cutoff(now_ms), _MAX_POSITION)))

    def next_deliver_at(self) -> int | None:
        """The earliest deliver-at time held, None when empty."""
        return self._queue[0][0] if self._queue else None

    def next_due_ms(self) -> int | None:
        """When the earliest message held becomes due (its deliver-at time, one tick earlier
        when not strict), None when empty: when its dispatcher's timer should fire."""
        if not self._queue:
            return None
        at = self._queue[0][0]
        return at if self._strict else at - self._tick

    def positions(self) -> list[Position]:
        """The positions held, earliest deliver-at time first. O(n)."""
        return [position for _, position in self._queue]

    def clear(self) -> None:
        """Forget everything (dispatcher reset)."""
        self._queue.clear()
        self._by_position.clear()

    def _check(self) -> None:
        """Assert that the time-ordered queue and the position index hold the same entries. O(n)."""
        assert len(self._queue) == len(self._by_position), (
            f"{len(self._queue)} queued, {len(self._by_position)} indexed"
        )
        for at, position in self._queue:
            held = self._by_position.get(position)
            assert held is not None and held[0] == at, f"{position} queued at {at}, indexed {held}"

    def __len__(self) -> int:
        return len(self._by_position)

    def __contains__(self, position: object) -> bool:
        return position in self._by_position
