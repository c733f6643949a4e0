"""The redelivery queue: positions to deliver again, in position order.

Pulsar's ``MessageRedeliveryController``. Positions arrive here from negative acks, from
consumers that closed with unacknowledged messages, from the delayed-delivery tracker once
they are due, and (Key_Shared) from entries whose consumer could not take them yet. Each
position may carry its sticky-key hash so that Key_Shared can hold back newer entries of a key
while an older one waits here (per-key order). Positions only, never payloads. Not thread-safe:
the dispatcher calls it under its lock. Operations are O(log n).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from sortedcontainers import SortedDict

from ..core import Position

__all__ = ["RedeliveryQueue"]


class RedeliveryQueue:
    """An ordered set of positions, each with an optional sticky-key hash."""

    def __init__(self) -> None:
        self._positions: SortedDict = SortedDict()  # Position -> hash or None
        self._hashes: Counter[int] = Counter()

    def add(self, position: Position, key_hash: int | None = None) -> None:
        """Queue ``position`` (idempotent)."""
        if position in self._positions:
            return
        self._positions[position] = key_hash
        if key_hash is not None:
            self._hashes[key_hash] += 1

    def remove(self, position: tuple[int, int]) -> bool:
        """Drop ``position``; True if it was queued."""
        if position not in self._positions:
            return False
        key_hash = self._positions.pop(position)
        if key_hash is not None:
            self._hashes[key_hash] -= 1
            if self._hashes[key_hash] <= 0:
                del self._hashes[key_hash]
        return True

    def remove_at_most(self, position: Position) -> int:
        """Drop every position at or before ``position``; returns how many."""
        gone = list(self._positions.irange(maximum=position))
        for p in gone:
            self.remove(p)
        return len(gone)

    def key_hash(self, position: Position) -> int | None:
        """The sticky-key hash queued with ``position`` (None when none or not queued)."""
        key_hash: int | None = self._positions.get(position)
        return key_hash

    def first(self, n: int) -> list[Position]:
        """The ``n`` lowest positions, without removing them."""
        return list(self._positions.islice(0, n))

    def contains_hash(self, key_hash: int) -> bool:
        """Whether a queued position carries ``key_hash``."""
        return key_hash in self._hashes

    def clear(self) -> None:
        """Forget everything (dispatcher reset)."""
        self._positions.clear()
        self._hashes.clear()

    def _check(self) -> None:
        """Assert that the per-hash counts are those of the queued positions. O(n)."""
        counts = Counter(h for h in self._positions.values() if h is not None)
        assert counts == self._hashes, f"hash counts {dict(self._hashes)}, queued {dict(counts)}"

    def __len__(self) -> int:
        return len(self._positions)

    def __contains__(self, position: object) -> bool:
        return position in self._positions

    def __iter__(self) -> Iterator[Position]:
        return iter(list(self._positions))
