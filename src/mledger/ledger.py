"""Deprecated alias of :mod:`mledger.managed_ledger.ledger` and :mod:`~mledger.managed_ledger.factory`
(kept for one release; import from :mod:`mledger.managed_ledger`)."""

from .core.errors import MLedgerError as MLedgerError
from .managed_ledger.factory import ManagedLedgerFactory as ManagedLedgerFactory
from .managed_ledger.ledger import ManagedLedger as ManagedLedger, ManagedLedgerStats as ManagedLedgerStats
from .managed_ledger.ledger_view import (
    ML_ROOT as ML_ROOT,
    InitialPosition as InitialPosition,
    LedgerInfo as LedgerInfo,
    PositionBound as PositionBound,
)
