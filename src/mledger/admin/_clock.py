"""``admin.clock``: the broker's manual clock over the admin API (an mledger extension).

==============  ==========================================  ========================
method          REST (``/admin/v2/mledger/clock``)           ``mledger-admin clock``
==============  ==========================================  ========================
clock.now       ``GET``                                     ``now``
clock.advance   ``POST /advance`` (body: milliseconds)      ``advance MS``
==============  ==========================================  ========================

Every call needs a superuser when authorization is on (moving the broker's time is a cluster
operation, as arming a fault is). ``now`` answers on any broker, saying whether its clock is
manual; ``advance`` moves a manual clock (``mledger standalone --deterministic``, the pytest
fixture's broker) and fires, in time order, every broker-semantic timer due on the way, as the
fixture's ``clock.advance(ms)`` does (docs/pulsar/deterministic.md): 400 naming the value unless
it is a positive integer, 409 on a broker that follows the system clock.
"""

from __future__ import annotations

from typing import NamedTuple

from ._context import AdminContext

__all__ = ["ClockAdmin", "ClockReading"]


class ClockReading(NamedTuple):
    """The broker's time (ms since the epoch) and whether its clock is manual."""

    now_ms: int
    manual: bool

    def as_dict(self) -> dict[str, object]:
        """The REST body: ``{"nowMs": ..., "manual": ...}``."""
        return {"nowMs": self.now_ms, "manual": self.manual}


class ClockAdmin:
    """The admin's broker's clock (``admin.clock``; see the module docstring)."""

    def __init__(self, admin: AdminContext) -> None:
        self._admin = admin

    def now(self) -> ClockReading:
        """The broker's time now and whether its clock is manual."""
        self._admin.check_superuser("read the broker's clock")
        broker = self._admin.broker
        return ClockReading(broker.clock.now_ms(), broker.clock_is_manual)

    def advance(self, ms: int) -> ClockReading:
        """Move the manual clock ``ms`` forward, firing the timers due on the way and dispatching
        what came due (blocks until done); the time reached. 400 unless ``ms`` is a positive int,
        409 on the system clock."""
        self._admin.check_superuser("advance the broker's clock")
        return ClockReading(self._admin.broker.advance_clock(ms), True)
