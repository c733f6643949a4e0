"""Failed password checks, counted per (user, address) and per address: who may try again, when.

Theory of operation
-------------------
Guessing a password costs the guesser one CONNECT or one request and the broker one hash
verification (a quarter of a second of CPU for bcrypt at cost 12). :class:`FailureLimiter` keeps
a leaky bucket per key, for two kinds of key:

* the pair (user, address): one client retrying one user's password;
* the address alone: one client trying many users.

Never the user alone: anyone could then lock a user out by failing on purpose. A bucket's level
rises by one per failed check and drains at ``limit / window_seconds`` per second, so over any
long stretch a key gets at most ``limit`` failures per window, and after a burst one more
attempt every ``window_seconds / limit`` seconds. A check is admitted (:meth:`FailureLimiter.admit`)
while, for both of its keys, the level plus the checks of that key still running stays under the
limit: checks in flight count, so that many connections sending wrong passwords at once cannot
all start before the first failure is counted. A refused attempt runs no verification and adds
nothing to the level (it costs nothing; it cannot extend a lockout). A success empties its pair's
bucket and leaves the address's alone: one valid credential must not wash away the address's
guesses at other users.

An address is the peer's IP address as text; IPv6 addresses count by their /64 prefix (what one
host is usually given: one bucket per address would hand it 2^64 buckets), IPv4-mapped IPv6 as
IPv4. None (an in-process caller with no peer) is one address of its own.

Time is :func:`time.monotonic` (real time, as a transport timer keeps it; never the broker's
manual test clock), or the clock a test passes. At most ``max_tracked`` buckets per kind are
kept: buckets that drained are dropped as they are met, and when a table is full the least
recently touched bucket goes. Each key's first refusal of an episode is logged once (WARNING on
``mledger.admin``); refusals are counted (:attr:`FailureLimiter.refused`).

Thread-safe (one lock): :meth:`~FailureLimiter.admit` runs on the event loops, :meth:`~FailureLimiter.finish`
on the workers that verified. Every call is O(1), amortized.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import Enum

__all__ = ["DEFAULT_MAX_TRACKED", "FailureLimiter", "Outcome", "address_key"]

log = logging.getLogger("mledger.admin")

DEFAULT_MAX_TRACKED = 100_000
"""Buckets kept per kind of key (about 150 bytes each)."""


class Outcome(Enum):
    """How an admitted check ended (:meth:`FailureLimiter.finish`)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABANDONED = "abandoned"
    """The check could not run (the pool stopped): counted neither way."""


def address_key(address: str | None) -> str:
    """The key an address counts under: IPv4 as is, IPv6 by its /64 (``2001:db8::/64``),
    IPv4-mapped IPv6 as IPv4, anything that is not an IP address (None, a Unix socket) as given."""
    if not address:
        return ""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


@dataclass
class _Bucket:
    level: float
    at: float
    running: int = 0
    refusing: bool = False
    """A refusal of this episode was logged."""


class _Buckets:
    """The buckets of one kind of key, with their limit (0: no limit)."""

    def __init__(self, kind: str, limit: int, window_seconds: float, max_tracked: int) -> None:
        self.kind = kind
        self.limit = limit
        self.rate = limit / window_seconds if limit else 0.0
        self.max_tracked = max_tracked
        self._buckets: dict[Hashable, _Bucket] = {}

    def _touch(self, key: Hashable, now: float) -> _Bucket:
        """The bucket of ``key`` drained to ``now``, moved to the recent end (created empty)."""
        bucket = self._buckets.pop(key, None)
        if bucket is None:
            bucket = _Bucket(0.0, now)
            if len(self._buckets) >= self.max_tracked:
                del self._buckets[next(iter(self._buckets))]  # the least recently touched
        else:
            bucket.level = max(0.0, bucket.level - (now - bucket.at) * self.rate)
            bucket.at = now
        self._buckets[key] = bucket
        return bucket

    def wait(self, key: Hashable, now: float) -> float:
        """Seconds until ``key`` may start one more check (0: now)."""
        if not self.limit or key not in self._buckets:
            return 0.0
        bucket = self._touch(key, now)
        excess = bucket.level + bucket.running + 1 - self.limit
        if excess <= 0:
            if bucket.level <= 0 and not bucket.running:
                del self._buckets[key]
            else:
                bucket.refusing = False
            return 0.0
        return excess / self.rate

    def refused(self, key: Hashable) -> bool:
        """Note a refusal of ``key``; True for the first one of its episode (to log)."""
        bucket = self._buckets.get(key)
        if bucket is None or bucket.refusing:
            return False
        bucket.refusing = True
        return True

    def start(self, key: Hashable, now: float) -> None:
        if self.limit:
            self._touch(key, now).running += 1

    def finish(self, key: Hashable, now: float, outcome: Outcome, forgive: bool) -> None:
        if not self.limit or (key not in self._buckets and outcome is not Outcome.FAILED):
            return  # nothing to count (or its bucket was pushed out meanwhile)
        bucket = self._touch(key, now)
        bucket.running = max(0, bucket.running - 1)
        if outcome is Outcome.FAILED:
            bucket.level += 1
        elif outcome is Outcome.SUCCEEDED and forgive:
            bucket.level = 0.0
        if bucket.level <= 0 and not bucket.running:
            del self._buckets[key]

    def __len__(self) -> int:
        return len(self._buckets)


class FailureLimiter:
    """Limits failed password checks per (user, address) and per address (see the module
    docstring). ``per_user_and_address`` / ``per_address``: failures allowed per
    ``window_seconds`` (0: that limit is off); ``clock``: seconds, monotonic."""

    def __init__(
        self,
        per_user_and_address: int,
        per_address: int,
        window_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_tracked: int = DEFAULT_MAX_TRACKED,
    ) -> None:
        if per_user_and_address < 0 or per_address < 0 or window_seconds <= 0 or max_tracked < 1:
            raise ValueError(
                "failure limits must be >= 0, the window and max_tracked above 0: got "
                f"{per_user_and_address}, {per_address}, {window_seconds}, {max_tracked}"
            )
        self.window_seconds = window_seconds
        self._pairs = _Buckets("user and address", per_user_and_address, window_seconds, max_tracked)
        self._addresses = _Buckets("address", per_address, window_seconds, max_tracked)
        self._clock = clock
        self._lock = threading.Lock()
        self.refused = 0
        """Checks refused so far (no verification ran)."""

    @property
    def enabled(self) -> bool:
        """Whether either limit is on."""
        return bool(self._pairs.limit or self._addresses.limit)

    def admit(self, user: str, address: str | None) -> int:
        """Start a check of ``user`` from ``address``: 0 when admitted (then call :meth:`finish`
        once it ends), else the whole seconds (at least 1) to wait before the next attempt may
        be admitted: the ``Retry-After`` of a refusal."""
        where = address_key(address)
        pair = (user, where)
        with self._lock:
            now = self._clock()
            waits = {self._pairs: self._pairs.wait(pair, now), self._addresses: self._addresses.wait(where, now)}
            wait = max(waits.values())
            if wait <= 0:
                self._pairs.start(pair, now)
                self._addresses.start(where, now)
                return 0
            self.refused += 1
            first = [
                buckets
                for buckets, key in ((self._pairs, pair), (self._addresses, where))
                if waits[buckets] > 0 and buckets.refused(key)
            ]
        for buckets in first:  # once per episode of each key
            log.warning(
                "refusing password checks of user %r from %s for %.0f s: %d failures per %g s per %s reached",
                user,
                where or "no address",
                waits[buckets],
                buckets.limit,
                self.window_seconds,
                buckets.kind,
            )
        return max(1, math.ceil(wait))

    def finish(self, user: str, address: str | None, outcome: Outcome) -> None:
        """An admitted check of ``user`` from ``address`` ended with ``outcome``."""
        where = address_key(address)
        with self._lock:
            now = self._clock()
            self._pairs.finish((user, where), now, outcome, forgive=True)
            self._addresses.finish(where, now, outcome, forgive=False)

    @property
    def tracked(self) -> int:
        """Buckets held now, both kinds."""
        with self._lock:
            return len(self._pairs) + len(self._addresses)
