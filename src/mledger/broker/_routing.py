"""Choosing the partition of a message on a partitioned topic.

Pulsar's default ``MessageRoutingMode.RoundRobinPartition`` (``RoundRobinPartitionMessageRouterImpl``
with the Java client's default ``HashingScheme.JavaStringHash``): a message with a key goes to
partition ``signSafeMod(javaStringHash(key), n)``, so one key always lands on one partition; a
message without a key goes to the next partition in turn. Pulsar starts the turn at a random
partition; mledger starts at 0 so runs are reproducible.
"""

from __future__ import annotations

import threading

from ._hashing import java_string_hash

__all__ = ["RoundRobinPartitionRouter"]


class RoundRobinPartitionRouter:
    """Key hash when the message has a key, else round-robin. Thread-safe; O(len(key))."""

    def __init__(self, num_partitions: int) -> None:
        if num_partitions < 1:
            raise ValueError(f"a partitioned topic needs at least one partition, got {num_partitions}")
        self._n = num_partitions
        self._next = 0
        self._lock = threading.Lock()

    def choose(self, key: str | None) -> int:
        """The partition index for a message with ``key`` (None: no key)."""
        if key is not None:
            return java_string_hash(key) % self._n
        with self._lock:
            index = self._next
            self._next = (index + 1) % self._n
        return index
