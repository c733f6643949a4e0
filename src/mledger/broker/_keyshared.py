"""Key_Shared routing: the consistent-hash ring and the recently-joined-consumers rule.

Ring (Pulsar's ``ConsistentHashingStickyKeyConsumerSelector``, the default selector): each
consumer puts ``replica_points`` points on a ring of 31-bit hashes, point ``i`` at
``murmur3_32(consumerName + str(i)) & 0x7FFFFFFF``. A message's sticky key hash (see
:func:`~mledger.broker.sticky_key_hash`) goes to the consumer owning the first point at
or after it, wrapping around. A consumer joining or leaving moves only the keys near its points.

Recently joined consumers (Pulsar's ``recentlyJoinedConsumers``): when a
consumer joins a subscription that already has consumers and more than one entry is
outstanding (``number_of_entries_since_first_not_acked > 1``), it is recorded with the cursor's
read position at that moment. Until every message before that position is acknowledged, the
consumer may only receive entries *before* it: the keys it takes over may still be in the hands
(queues) of their previous consumer, and delivering newer messages of those keys would break
per-key order. It is released as soon as the entry after the mark-delete position reaches its
join position. The map is dispatcher state: cleared by every dispatcher reset, together with
the cursor change (docs/library.md, "Safe cursor resets").

Not thread-safe: the dispatcher calls both under its lock.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Generic, TypeVar

from ..core import Position
from ._hashing import murmur3_32

__all__ = ["ConsistentHashRing", "RecentlyJoinedConsumers"]

C = TypeVar("C")


class ConsistentHashRing(Generic[C]):
    """Consumers on a hash ring. ``add``/``remove`` O(points log n), ``select`` O(log n)."""

    def __init__(self, replica_points: int = 100) -> None:
        self._points = replica_points
        self._ring: dict[int, list[C]] = {}  # hash -> consumers (collisions keep join order)
        self._sorted: list[int] = []

    def add(self, name: str, consumer: C) -> None:
        """Put ``consumer`` on the ring under ``name``."""
        for i in range(self._points):
            h = murmur3_32(f"{name}{i}".encode()) & 0x7FFFFFFF
            self._ring.setdefault(h, []).append(consumer)
        self._sorted = sorted(self._ring)

    def remove(self, consumer: C) -> None:
        """Take ``consumer`` off the ring."""
        for h in list(self._ring):
            owners = [c for c in self._ring[h] if c is not consumer]
            if owners:
                self._ring[h] = owners
            else:
                del self._ring[h]
        self._sorted = sorted(self._ring)

    def select(self, key_hash: int) -> C | None:
        """The consumer owning ``key_hash``, None when the ring is empty."""
        if not self._sorted:
            return None
        i = bisect_left(self._sorted, key_hash)
        h = self._sorted[i] if i < len(self._sorted) else self._sorted[0]
        return self._ring[h][0]

    def __len__(self) -> int:
        return len(self._sorted)


class RecentlyJoinedConsumers(Generic[C]):
    """Consumers restricted to entries before the read position at which they joined."""

    def __init__(self) -> None:
        self._joined: dict[C, Position] = {}  # insertion order = join order

    def add(self, consumer: C, read_position: Position) -> None:
        """Restrict ``consumer`` to entries before ``read_position``."""
        self._joined[consumer] = read_position

    def remove(self, consumer: C) -> None:
        """Forget ``consumer`` (it left)."""
        self._joined.pop(consumer, None)

    def max_read_position(self, consumer: C) -> Position | None:
        """The position ``consumer`` may not reach, None when it is unrestricted."""
        return self._joined.get(consumer)

    def allows(self, consumer: C, position: Position) -> bool:
        """Whether ``consumer`` may receive the entry at ``position``."""
        limit = self._joined.get(consumer)
        return limit is None or position < limit

    def release(self, next_after_mark_delete: Position) -> list[C]:
        """Release the consumers whose join position is at or before ``next_after_mark_delete``.

        That is, every message before their join position is acknowledged. Returns them.
        """
        released = [c for c, p in self._joined.items() if p <= next_after_mark_delete]
        for c in released:
            del self._joined[c]
        return released

    def clear(self) -> None:
        """Forget everyone (dispatcher reset)."""
        self._joined.clear()

    def __len__(self) -> int:
        return len(self._joined)

    def __contains__(self, consumer: object) -> bool:
        return consumer in self._joined
