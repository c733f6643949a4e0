"""The pure core: values and rules, no I/O, no threads, no clock reads.

* :mod:`.position` - :class:`Position` (``ledger_id:entry_id``), ``EARLIEST`` / ``LATEST``;
* :mod:`.ranges` - :class:`AckRangeSet`, Pulsar's ``OpenLongPairRangeSet`` over roaring
  bitmaps, and its ``BitSet.toLongArray()`` word views;
* :mod:`.config` - frozen managed-ledger configuration with Pulsar's names and defaults;
* :mod:`.errors` - one base class, one subclass per condition;
* :mod:`.clock` - the injectable clock protocol (the system clock is read only through it);
* :mod:`.timers` - :class:`TimerQueue`, the broker-semantic timers on an injected clock;
* :mod:`.state_machine` - :class:`TransitionTable`, the one lookup every state machine's
  transitions go through, and :class:`TransitionRefusedError`, the refusal its errors derive from;
* :mod:`.futures` - :class:`InlineExecutor` (background work run at once, for runs that repeat)
  and small future combinators;
* :mod:`.ints` - Java's ``long`` / ``int`` bounds, defined once.

Everything above this layer imports from here; this layer imports nothing else of mledger.
"""

from ._address import format_address as format_address, parse_bind as parse_bind
from ._clock import Clock as Clock, ManualClock as ManualClock, SystemClock as SystemClock
from ._config import (
    ManagedLedgerConfig as ManagedLedgerConfig,
    ManagedLedgerFactoryConfig as ManagedLedgerFactoryConfig,
)
from ._futures import InlineExecutor as InlineExecutor
from ._position import EARLIEST as EARLIEST, LATEST as LATEST, Position as Position
from ._ranges import AckRangeSet as AckRangeSet
from ._state_machine import TransitionRefusedError as TransitionRefusedError, TransitionTable as TransitionTable
from ._timers import TimerQueue as TimerQueue, TimerQueueStats as TimerQueueStats
from ._tls import TlsSettings as TlsSettings

__all__ = [
    "AckRangeSet",
    "Clock",
    "EARLIEST",
    "InlineExecutor",
    "LATEST",
    "ManagedLedgerConfig",
    "ManagedLedgerFactoryConfig",
    "ManualClock",
    "Position",
    "SystemClock",
    "TimerQueue",
    "TimerQueueStats",
    "TlsSettings",
    "TransitionRefusedError",
    "TransitionTable",
    "format_address",
    "parse_bind",
]
