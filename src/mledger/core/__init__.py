"""The pure core: values and rules, no I/O, no threads, no clock reads.

* :mod:`.position` - :class:`Position` (``ledger_id:entry_id``), ``EARLIEST`` / ``LATEST``;
* :mod:`.ranges` - :class:`AckRangeSet`, Pulsar's ``OpenLongPairRangeSet`` over roaring
  bitmaps, and its ``BitSet.toLongArray()`` word views;
* :mod:`.config` - frozen managed-ledger configuration with Pulsar's names and defaults;
* :mod:`.errors` - one base class, one subclass per condition;
* :mod:`.clock` - the injectable clock protocol (the system clock is read only through it);
* :mod:`.ints` - Java's ``long`` / ``int`` bounds, defined once.

Everything above this layer imports from here; this layer imports nothing else of mledger.
"""

from .clock import Clock as Clock, ManualClock as ManualClock, SystemClock as SystemClock
from .config import ManagedLedgerConfig as ManagedLedgerConfig, ManagedLedgerFactoryConfig as ManagedLedgerFactoryConfig
from .position import EARLIEST as EARLIEST, LATEST as LATEST, Position as Position
from .ranges import AckRangeSet as AckRangeSet

__all__ = [
    "EARLIEST",
    "LATEST",
    "AckRangeSet",
    "Clock",
    "ManagedLedgerConfig",
    "ManagedLedgerFactoryConfig",
    "ManualClock",
    "Position",
    "SystemClock",
]
