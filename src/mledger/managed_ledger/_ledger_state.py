"""A managed ledger's state, with one owner: the ledger list, the current ledger, the last
confirmed entry, the counters, the write state, and their record, ``ManagedLedgerInfo``.

Theory of operation
-------------------
:class:`LedgerState` holds what Pulsar's ``ManagedLedgerImpl`` keeps in ``ledgers``,
``currentLedger``, ``lastConfirmedEntry``, ``state`` and ``ledgersStat``, and nothing else
changes them: the appender (writes, rollovers), the trimmer (deleting consumed ledgers), the
position queries and the managed ledger itself (recovery, termination, close) are each given
this object, read its public attributes and change it through its methods. h11's
``ConnectionState`` is the model: the parts hold the owner, never each other's fields.

Locks. :attr:`~LedgerState.lock` (re-entrant) guards every field; the position queries hold it
briefly. :attr:`~LedgerState.append_lock` is held by the writer across an append (the store
write runs outside ``lock``) and by every other change of the current ledger (rollovers,
termination), taken before ``lock``. The ledger list is read without a lock by the cursors'
O(1) ack validation: a listed ledger's entry count grows only after the last confirmed entry
has moved past what it counts (:meth:`LedgerState.confirm`).

Write state: one machine, the table :data:`WRITE_TRANSITIONS` (the names are Pulsar's
``ManagedLedgerImpl.State`` where Pulsar has the state; ``Closing`` is this model's: the adds
queued before :meth:`~mledger.managed_ledger.ManagedLedger.close` are still written)::

    LedgerOpened --write failed--> WriteFailed --failure reported--> LedgerOpened
    LedgerOpened / WriteFailed --terminate--> Terminated    (also on recovering a terminated ledger)
    LedgerOpened / WriteFailed / Terminated --close--> Closing --close done--> Closed

An ``add`` is a row too: admitted in ``LedgerOpened`` and ``WriteFailed`` (where the pending
adds fail it with the error being reported, Pulsar's ``clearPendingAddEntries``). A move the
table lacks is refused with :class:`WriteStateError`, which the ledger's own errors wrap where
a caller asked for it: ``ManagedLedgerTerminatedError`` for an add once terminated,
``ManagedLedgerClosedError`` for an add or a terminate once closing. A failure reported while
terminated or closing changes nothing (no add is admitted there any more); ``terminate`` and
``close`` are idempotent. Moves happen under ``lock``; the add path reads the state without it
(one attribute), and the pending adds admit and queue an add under their own lock, so an add
admitted before a ``close`` or ``terminate`` is queued before that call waits for the queue.

The termination position is data beside the state, as Pulsar's: ``terminate`` moves to
``Terminated`` at once and records the last confirmed entry once the adds queued before it
completed (:meth:`LedgerState.record_termination`).
"""

from __future__ import annotations

import logging
import threading
from enum import Enum
from typing import NoReturn, cast

from sortedcontainers import SortedDict

from ..codec import StoredLedger, decode_managed_ledger_info, decode_terminated_position, encode_managed_ledger_info
from ..core import (
    Clock,
    ManagedLedgerClosedError,
    ManagedLedgerFactoryConfig,
    ManagedLedgerTerminatedError,
    MLedgerError,
    Position,
    StateCorruptedError,
    TransitionRefusedError,
    TransitionTable,
)
from ..storage import Store
from ._ledger_view import LedgerInfo, ledger_info_path

__all__ = ["WRITE_TRANSITIONS", "LedgerState", "WriteEvent", "WriteState", "WriteStateError"]

log = logging.getLogger(__name__)


class WriteState(Enum):
    """Whether a managed ledger takes adds (Pulsar's ``ManagedLedgerImpl.State``, those this
    model enters, plus ``Closing``). Moved only through :data:`WRITE_TRANSITIONS`."""

    OPEN = "LedgerOpened"
    WRITE_FAILED = "WriteFailed"
    """A failed write is being reported: the adds queued meanwhile fail with its error."""
    TERMINATED = "Terminated"
    CLOSING = "Closing"
    """Refuses adds; the ones queued before the close are still written."""
    CLOSED = "Closed"


class WriteEvent(Enum):
    """What moves the :class:`WriteState` (the arrows of the module docstring's diagram)."""

    ADD = "add"
    """An add asks to be queued (no move: admitted or refused)."""
    WRITE_FAILED = "write failed"
    FAILURE_REPORTED = "failure reported"
    """Every add failed with the error, the failure listener told."""
    TERMINATE = "terminate"
    CLOSE = "close"
    CLOSE_DONE = "close done"


class WriteStateError(TransitionRefusedError):
    """A write-state move :data:`WRITE_TRANSITIONS` does not have; ``state`` and ``event`` name
    it. Raised as such for a bug in the caller; a refused add or terminate raises the ledger's
    own error (``ManagedLedgerClosedError``, ``ManagedLedgerTerminatedError``) from it."""

    machine = "managed ledger write state"


_S, _E = WriteState, WriteEvent
WRITE_TRANSITIONS: TransitionTable[WriteState, WriteEvent] = TransitionTable(
    {
        (_S.OPEN, _E.ADD): _S.OPEN,
        (_S.OPEN, _E.WRITE_FAILED): _S.WRITE_FAILED,
        (_S.OPEN, _E.TERMINATE): _S.TERMINATED,
        (_S.OPEN, _E.CLOSE): _S.CLOSING,
        (_S.WRITE_FAILED, _E.ADD): _S.WRITE_FAILED,
        (_S.WRITE_FAILED, _E.FAILURE_REPORTED): _S.OPEN,
        (_S.WRITE_FAILED, _E.TERMINATE): _S.TERMINATED,
        (_S.WRITE_FAILED, _E.CLOSE): _S.CLOSING,
        (_S.TERMINATED, _E.WRITE_FAILED): _S.TERMINATED,
        (_S.TERMINATED, _E.FAILURE_REPORTED): _S.TERMINATED,
        (_S.TERMINATED, _E.TERMINATE): _S.TERMINATED,
        (_S.TERMINATED, _E.CLOSE): _S.CLOSING,
        (_S.CLOSING, _E.WRITE_FAILED): _S.CLOSING,
        (_S.CLOSING, _E.FAILURE_REPORTED): _S.CLOSING,
        (_S.CLOSING, _E.CLOSE): _S.CLOSING,
        (_S.CLOSING, _E.CLOSE_DONE): _S.CLOSED,
        (_S.CLOSED, _E.WRITE_FAILED): _S.CLOSED,
        (_S.CLOSED, _E.FAILURE_REPORTED): _S.CLOSED,
        (_S.CLOSED, _E.CLOSE): _S.CLOSED,
        (_S.CLOSED, _E.CLOSE_DONE): _S.CLOSED,
    },
    WriteStateError,
)
"""``(state, event) -> new state``: every move of a managed ledger's write state."""
del _S, _E

_OPEN = WriteState.OPEN
_CLOSED = WriteState.CLOSED
_REFUSED_AS: dict[WriteState, tuple[type[MLedgerError], str]] = {
    WriteState.TERMINATED: (ManagedLedgerTerminatedError, "Managed ledger {} was already terminated"),
    WriteState.CLOSING: (ManagedLedgerClosedError, "managed ledger {} is closed"),
    WriteState.CLOSED: (ManagedLedgerClosedError, "managed ledger {} is closed"),
}
"""The ledger's own error for a move refused in a state a caller can meet (Pulsar's messages)."""


class LedgerState:
    """The ledger list, current ledger, last confirmed entry, counters and write state of one
    managed ledger, and their record in the metadata store (module docstring).

    Public attributes are read by the managed ledger's parts and changed only by the methods
    here; every method but the lock-free reads expects ``lock`` held unless it says it takes
    it. Methods that persist block on the store.
    """

    def __init__(self, name: str, store: Store, clock: Clock, config: ManagedLedgerFactoryConfig) -> None:
        self.name = name
        self.store = store
        self.clock = clock
        self._config = config
        self.info_path = ledger_info_path(name)
        """Where the ``ManagedLedgerInfo`` lives in the metadata store."""
        self.lock = threading.RLock()
        self.append_lock = threading.Lock()
        self.ledgers: SortedDict = SortedDict()
        """Ledger id -> :class:`LedgerInfo`, ascending; the last one is :attr:`current`."""
        self.current: LedgerInfo | None = None
        """The ledger appends go to (None only before :meth:`initialize`)."""
        self.current_created_ms = 0
        self.last_confirmed = Position(-1, -1)
        """The last position whose append completed (``L:-1`` for an empty managed ledger)."""
        self.entries_added = 0
        """Entries appended since this managed ledger was opened."""
        self.write = WriteState.OPEN
        """The write state (:data:`WRITE_TRANSITIONS`)."""
        self.terminated_position: Position | None = None
        """The last entry of a terminated ledger, once the adds queued before ``terminate`` completed."""
        self._properties: dict[str, str] = {}
        self._info_version: int | None = None

    # -- recovery and the stored record ----------------------------------------------------------
    def initialize(self) -> None:
        """Recover the ledger list from the stored ``ManagedLedgerInfo`` (if any), seal the last
        ledger and start a new one (Pulsar's recovery). Raises ``StateCorruptedError`` for an
        unreadable record. Blocks on the store."""
        with self.append_lock, self.lock:
            stored = self.store.get(self.info_path)
            if stored is not None:
                self._recover(stored.data, stored.version)
            self._create_ledger()
            if self.last_confirmed.ledger_id == -1:
                assert self.current is not None
                self.last_confirmed = Position(self.current.ledger_id, -1)

    def _recover(self, data: bytes, version: int) -> None:
        max_size = self._config.max_state_size_in_bytes
        try:
            ledgers, properties = decode_managed_ledger_info(data, max_size)
        except StateCorruptedError as exc:
            raise StateCorruptedError(f"managed ledger {self.name}: {exc}") from exc
        self._info_version = version
        self._properties = properties
        terminated = decode_terminated_position(data, max_size)
        if terminated is not None:
            self.fire(WriteEvent.TERMINATE)
            self.terminated_position = Position(*terminated)
        now = self.clock.now_ms()
        store = self.store
        for k, li in enumerate(ledgers):
            entries, size, timestamp = li.entries, li.size or 0, li.timestamp
            if entries is None or k == len(ledgers) - 1:
                # The last ledger was open when the ML closed: the store's LAC and length
                # are the truth, and it is closed now (Pulsar's recovery).
                exists = store.ledger_exists(li.ledger_id)
                entries = store.last_entry_id(li.ledger_id) + 1 if exists else 0
                size = store.ledger_length(li.ledger_id) if exists else 0
                timestamp = now
            # A ledger stored without a timestamp (or 0) gets the current time, as in Pulsar.
            self.ledgers[li.ledger_id] = LedgerInfo(li.ledger_id, entries, size, timestamp or now)
        if self.ledgers:
            last = self.ledgers.peekitem(-1)[1]
            if store.ledger_exists(last.ledger_id):
                store.seal_ledger(last.ledger_id)
            if last.entries == 0:
                del self.ledgers[last.ledger_id]
                store.delete_ledger(last.ledger_id)
        for li in reversed(self.ledgers.values()):
            if li.entries > 0:
                self.last_confirmed = Position(li.ledger_id, li.entries - 1)
                break

    def persist(self) -> None:
        """Write the ``ManagedLedgerInfo`` (compare-and-set on its version): the ledger list,
        the current ledger without counts (its store is the truth), the properties and the
        termination position. Raises what the store raises (``BadVersionError``, ...)."""
        current_id = self.current.ledger_id if self.current is not None else None
        cfg = self._config
        terminated = self.terminated_position
        data = encode_managed_ledger_info(
            (
                StoredLedger(li.ledger_id, li.entries, li.size, li.timestamp)
                if li.ledger_id != current_id
                else StoredLedger(li.ledger_id, None, None, li.timestamp)
                for li in self.ledgers.values()
            ),
            self._properties,
            cfg.managed_ledger_info_compression_type,
            cfg.managed_ledger_info_compression_threshold_in_bytes,
            None if terminated is None else (terminated.ledger_id, terminated.entry_id),
        )
        expected = -1 if self._info_version is None else self._info_version
        self._info_version = self.store.put(self.info_path, data, expected)

    @property
    def properties(self) -> dict[str, str]:
        """A copy of the managed ledger's properties (``ManagedLedgerInfo.properties``)."""
        return dict(self._properties)

    def set_property(self, key: str, value: str) -> None:
        """Set one property and persist the record."""
        self._properties[key] = value
        self.persist()

    # -- the ledger list -------------------------------------------------------------------------
    def _create_ledger(self) -> None:
        ledger_id = self.store.create_ledger()
        li = LedgerInfo(ledger_id, 0, 0, 0)  # timestamp 0 while open, as Pulsar stores it
        self.ledgers[ledger_id] = li
        self.current = li
        self.current_created_ms = self.clock.now_ms()
        self.persist()

    def confirm(self, current: LedgerInfo, last: Position, k: int, size: int) -> None:
        """``k`` entries (``size`` bytes) up to ``last`` are stored in ``current``: make them
        visible. O(1)."""
        # The last confirmed entry first: a listed ledger's entry count never covers an entry
        # beyond it, even for a reader without the lock (the cursors' O(1) ack validation,
        # LedgerView.ledger_list).
        self.last_confirmed = last
        current.entries += k
        current.size += size
        self.entries_added += k

    def roll_over(self) -> None:
        """Seal the current ledger (its timestamp becomes its close time) and create the next
        (the caller holds both locks). An empty current ledger is discarded instead: dropped
        from the list, which is persisted with the next one, then deleted from the store
        (Pulsar's ``ManagedLedgerImpl.ledgerClosed``: "The last ledger was empty, so we can
        discard it", before ``createLedgerAfterClosed``). Blocks on the store."""
        current = self.current
        assert current is not None
        self.store.seal_ledger(current.ledger_id)
        current.timestamp = self.clock.now_ms()
        if current.entries:
            self._create_ledger()
            return
        del self.ledgers[current.ledger_id]
        self._create_ledger()
        self.store.delete_ledger(current.ledger_id)

    def remove_ledgers(self, ledger_ids: list[int]) -> list[int]:
        """Drop the listed ones of ``ledger_ids`` from the list and persist it (never the
        current ledger); returns those dropped, whose data the caller deletes. O(k log n)."""
        removed = [lid for lid in ledger_ids if lid in self.ledgers and self.ledgers[lid] is not self.current]
        if removed:
            for lid in removed:
                del self.ledgers[lid]
            self.persist()
        return removed

    def next_write_position(self) -> Position:
        """Where the next entry will be written. O(1)."""
        current = self.current
        assert current is not None
        if current.entries == 0 and current.ledger_id > self.last_confirmed.ledger_id:
            return Position(current.ledger_id, 0)
        return self.last_confirmed.next()

    # -- the write state -------------------------------------------------------------------------
    def fire(self, event: WriteEvent) -> None:
        """Move the write state by ``event`` (takes ``lock``). O(1). Raises, leaving the state
        as it is, ``ManagedLedgerTerminatedError`` / ``ManagedLedgerClosedError`` for a
        terminate once closing, :class:`WriteStateError` for a move the table lacks otherwise."""
        with self.lock:
            try:
                self.write = WRITE_TRANSITIONS.next_state(self.write, event)
            except WriteStateError as refused:
                self._raise(refused)

    def check_add(self) -> None:
        """Raise as an add would be refused now (``ManagedLedgerTerminatedError``,
        ``ManagedLedgerClosedError``); change nothing. O(1), no lock."""
        state = self.write
        if state is not _OPEN and (state, WriteEvent.ADD) not in WRITE_TRANSITIONS:
            self._raise(WriteStateError(state, WriteEvent.ADD))

    def check_open(self) -> None:
        """Raise ``ManagedLedgerClosedError`` once closed (a closing ledger still writes and
        opens cursors)."""
        if self.write is _CLOSED:
            raise ManagedLedgerClosedError(f"managed ledger {self.name} is closed")

    def _raise(self, refused: WriteStateError) -> NoReturn:
        """Raise the ledger's own error for ``refused`` where a caller of the ledger's API can
        meet it (from ``refused``), else ``refused`` itself."""
        kind = _REFUSED_AS.get(cast(WriteState, refused.state)) if refused.event in _CALLER_EVENTS else None
        if kind is None:
            raise refused
        error, message = kind
        raise error(message.format(self.name)) from refused

    @property
    def is_closed(self) -> bool:
        return self.write is _CLOSED

    @property
    def is_closing(self) -> bool:
        """Closing or closed: no add is admitted any more for that reason."""
        return self.write is WriteState.CLOSING or self.write is _CLOSED

    @property
    def is_terminated(self) -> bool:
        """Whether the ledger was terminated (now or before a restart; a terminated ledger
        that closed still is)."""
        return self.write is WriteState.TERMINATED or self.terminated_position is not None

    def record_termination(self) -> Position:
        """The termination position: the last confirmed entry, recorded and persisted the
        first time (the caller holds both locks, once the adds queued before ``terminate``
        completed). Raises ``ManagedLedgerClosedError`` once closed."""
        self.check_open()
        if self.terminated_position is None:
            self.terminated_position = self.last_confirmed
            self.persist()
            log.info("managed ledger %s terminated at %s", self.name, self.terminated_position)
        return self.terminated_position

    # -- invariants ------------------------------------------------------------------------------
    def _check(self) -> None:
        """Assert the invariants (for tests; O(ledgers)); the caller holds both locks: the
        ledger list is ascending and ends with the current ledger; entry counts and sizes are
        not negative; the last confirmed entry is the last entry of the last non-empty ledger
        (before any, or in a trimmed ledger, when every ledger left is empty); no entry is past
        the next write position; the write state is one the table enters, and a recorded
        termination position is at most the last confirmed entry."""
        name = self.name
        ids = list(self.ledgers.keys())
        infos = list(self.ledgers.values())
        assert ids == sorted(set(ids)), f"{name}: ledger ids out of order: {ids}"
        assert all(li.ledger_id == lid for lid, li in zip(ids, infos, strict=True)), f"{name}: {infos}"
        current = self.current
        assert current is not None and infos and infos[-1] is current, f"{name}: current {current} not last"
        for li in infos:
            assert li.entries >= 0 and li.size >= 0, f"{name}: negative counts in {li}"
        lac = self.last_confirmed
        last = next((li for li in reversed(infos) if li.entries), None)
        if last is not None:
            assert lac == Position(last.ledger_id, last.entries - 1), f"{name}: LAC {lac} but {last}"
        else:
            assert lac.ledger_id <= current.ledger_id, f"{name}: LAC {lac} past {current}"
            assert lac.entry_id == -1 or lac.ledger_id not in self.ledgers, f"{name}: LAC {lac}"
        assert self.entries_added >= 0
        after = self.next_write_position()
        assert after > lac, f"{name}: next write {after} not after LAC {lac}"
        terminated = self.terminated_position
        assert terminated is None or terminated <= lac, f"{name}: terminated at {terminated} past LAC {lac}"
        if self.write is _OPEN or self.write is WriteState.WRITE_FAILED:
            assert terminated is None, f"{name}: {self.write.value} but terminated at {terminated}"


_CALLER_EVENTS = frozenset({WriteEvent.ADD, WriteEvent.TERMINATE})
"""Events a caller of the managed ledger's API fires (the others are the ledger's own)."""
