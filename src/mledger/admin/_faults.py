"""``admin.faults``: the broker's fault registry over the admin API (an mledger extension).

==================  ==========================================  ================================
method              REST (``/admin/v2/mledger/faults``)          ``mledger-admin faults``
==================  ==========================================  ================================
faults.list         ``GET``                                     ``list``
faults.arm          ``POST`` (body: one fault)                  ``arm``
faults.load         ``POST /scenario`` (body: a scenario)       ``load``
faults.remove       ``DELETE /{faultId}``                       ``remove``
faults.clear        ``DELETE``                                  ``clear``
faults.fired        ``GET /fired``                              ``fired``
faults.stats        ``GET /stats``                              ``stats``
faults.resume       ``POST /resume``                            ``resume``
==================  ==========================================  ================================

Every call needs a superuser when authorization is on (making the broker misbehave is a cluster
operation), then a broker started with fault injection (``mledger standalone
--fault-injection`` or ``--faults FILE``; the pytest fixture has it on): otherwise 404, as if the
path did not exist, with a reason saying how to turn it on. The faults themselves are
:mod:`mledger.broker`; invalid ones are 400 naming the field.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

from ..broker import ArmedFault, FaultInjectionOffError, Faults, FaultStats, FiredFault
from ._context import AdminContext

if TYPE_CHECKING:
    from ..broker import FaultScenario, FaultSpec

__all__ = ["FaultsAdmin"]


class FaultsAdmin:
    """The admin's broker's faults (``admin.faults``; see the module docstring)."""

    def __init__(self, admin: AdminContext) -> None:
        self._admin = admin

    def _faults(self, action: str) -> Faults:
        self._admin.check_superuser(action)
        faults = self._admin.broker.faults
        if not faults.enabled:
            raise FaultInjectionOffError(
                "fault injection is off on this broker: start it with --fault-injection (or --faults FILE)"
            )
        return faults

    def list(self) -> list[ArmedFault]:
        """The faults armed now, in arming order."""
        return self._faults("list faults").armed()

    def arm(self, fault: FaultSpec) -> int:
        """Arm one fault (one without a command acts at once); its id. 400 for an invalid fault,
        404 for a broker action that finds nothing to act on."""
        return self._faults("inject faults").arm(fault)

    def load(self, scenario: FaultScenario) -> builtins.list[int]:
        """Arm a scenario's faults in order (seeding the draws with its seed, if any); their ids."""
        return self._faults("inject faults").load(scenario)

    def remove(self, fault_id: int) -> None:
        """Disarm one fault. 404 when none with that id is armed."""
        self._faults("remove faults").remove(fault_id)

    def clear(self) -> None:
        """Disarm every fault, end a pause and heal half-open connections."""
        self._faults("clear faults").clear()

    def fired(self) -> builtins.list[FiredFault]:
        """The faults that fired, oldest first (the last 10,000)."""
        return self._faults("list fired faults").fired()

    def stats(self) -> FaultStats:
        """The seed, the faults armed now and the firings by action."""
        return self._faults("read fault stats").stats()

    def resume(self) -> None:
        """End a pause."""
        self._faults("resume the broker").resume()
