"""The managed ledger: an append-only log split into ledgers, and its factory.

Theory of operation
-------------------
A managed ledger (ML) is a list of ledgers, each an append-only sequence of entries in the
:class:`~mledger.storage.LedgerStore`. Appends go to the *current* ledger; after
``max_entries_per_ledger`` entries (or ``max_size_per_ledger_mb`` bytes, or
``maximum_rollover_time_ms``) the current ledger is sealed and a new one is created at once, so
the next entry lands at ``(newLedger, 0)``. The last confirmed entry (LAC) is the last
position whose append returned.

The ledger list, the current ledger, the LAC, the counters and the write state (open,
terminated, closing, ...: one transition table) have one owner, :mod:`._ledger_state`'s
``LedgerState``; the appender, the trimmer, the pending adds and the position queries
(:mod:`._positions`, a base class of :class:`ManagedLedger`) are each given it and change it
only through its methods. It persists the ledger list as Pulsar's ``ManagedLedgerInfo`` at
``/managed-ledgers/<name>`` with compare-and-set, so a reopened ML recovers every confirmed
entry. On reopen the last ledger is sealed and a new current ledger created, as Pulsar does.

Retention and trimming (:mod:`._trimmer`) follow ``ManagedLedgerImpl.internalTrimConsumedLedgers``;
a pass runs on the factory's executor (a worker thread, or at once on the caller's with an
:class:`~mledger.core.InlineExecutor`, as a deterministic broker's factory has): a persisted mark-delete
that moves the slowest cursor into a later ledger, a rollover, a deleted cursor and the
broker's periodic retention check queue one (:meth:`ManagedLedger.trim_consumed_ledgers_in_background`).
Without durable cursors every closed ledger counts as consumed (Pulsar's slowest reader is
then the ledger after the current one), so retention alone decides what stays.
``retain_without_subscriptions`` keeps instead everything of a ledger without a durable
consumer cursor (system cursors like ``pulsar.dedup`` do not count), for embedded logs that
must not lose data nobody subscribed to.

Sizes follow Pulsar: each ledger's bytes are counted as entries are appended (the current
ledger's from the store on reopen), ``total_size`` is their sum, ``entries_added_counter``
counts the entries appended since this ML was opened; a closed ledger's timestamp is the time
it was closed.

Adds are pipelined (:mod:`._add_pipeline`, Pulsar's pending adds): an add is queued and
completes later; adds complete in the order they were queued, and the adds queued while a
write is in flight share the next store call. Three forms, one name: :meth:`ManagedLedger.add_entries`
blocks, :meth:`~ManagedLedger.add_entries_async` gives a future and
:meth:`~ManagedLedger.add_entries_with_callback` a callback; ``framed=True`` hands entries
already framed as Pulsar stores them. Writes and rollovers are :mod:`._appender`'s.

Locking: one re-entrant lock per ML (the state's) guards the ledger list, LAC, counters, write
state and the cursors; position arithmetic holds it briefly. The writer holds an *append lock*
across an append (rollovers and termination take it too, before the ML lock) and runs the store
write without the ML lock, so readers never wait for a store write. The pending adds have their
own short lock. Callbacks run with no lock held. Cursors take their own lock first and may then
take the ML lock, never the reverse.

Cursors see the ML as a :class:`~mledger.managed_ledger.LedgerView`; the ML sees its
factory as a :class:`LedgerFactoryView`. ``ManagedLedgerInfo`` bytes are
:mod:`mledger.codec`'s.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future

import numpy as np

from ..codec import EntryMetadata, encode_entry
from ..core import (
    Clock,
    EntryMessages,
    InvalidPositionError,
    ManagedLedgerClosedError,
    ManagedLedgerConfig,
    ManagedLedgerFactoryConfig,
    NotFoundError,
    Position,
)
from ..storage import Store, checked_size
from ._add_pipeline import AddCallback, AddPipeline, AddWaiter
from ._appender import Appender
from ._cursor import ManagedCursor
from ._deprecated_adds import DeprecatedAdds
from ._ledger_state import LedgerState, WriteEvent, WriteState
from ._ledger_stats import ManagedLedgerStats
from ._ledger_view import (
    InitialPosition,
    LedgerFactoryView,
    LedgerInfo,
    PositionBound,
    cursor_info_path,
)
from ._positions import LedgerPositions
from ._trimmer import Trimmer

_DEFAULT_METADATA = EntryMetadata()


class ManagedLedger(LedgerPositions, DeprecatedAdds):
    """An append-only log of entries split into ledgers (Pulsar's ``ManagedLedgerImpl``).

    Obtain one with :meth:`ManagedLedgerFactory.open`. Public methods are thread-safe; appends
    and reads may block on the store.
    """

    def __init__(
        self,
        factory: LedgerFactoryView,
        name: str,
        config: ManagedLedgerConfig,
    ) -> None:
        self._factory = factory
        self.name = name
        self.config = config
        self._store: Store = factory.store
        self._clock: Clock = factory.clock
        # The ledger list, current ledger, last confirmed entry, counters and write state: one
        # owner, given to the appender, the trimmer and the position queries.
        state = LedgerState(name, self._store, self._clock, factory.config)
        LedgerPositions.__init__(self, state)
        self._lock = state.lock  # one lock per ML: it guards the cursors here too
        self._cursors: dict[str, ManagedCursor] = {}
        self._non_durable: dict[str, ManagedCursor] = {}
        self._appender = Appender(state, self, self._ledger_closed)
        store = self._store
        self._adds = AddPipeline(
            state, self._appender.write, lambda: factory.write_executor, lambda: getattr(store, "blocking_writes", True)
        )
        self._trimmer = Trimmer(state, self)
        self._entry_messages = EntryMessages()

    # -- lifecycle --------------------------------------------------------------------------
    def initialize(self) -> None:
        """Recover the ledger list (if any), seal the last ledger, start a new one.

        The factory calls this once, right after construction. Raises
        ``StateCorruptedError`` for an unreadable ``ManagedLedgerInfo``."""
        self._state.initialize()

    def close(self) -> None:
        """Close the ML and its cursors (cursors persist their state). Idempotent.

        New adds are refused at once; the queued ones are written first (on the writer's own
        thread, from a callback, they fail with ``ManagedLedgerClosedError`` instead)."""
        state = self._state
        state.fire(WriteEvent.CLOSE)
        self.wait_for_adds()
        with self._lock:
            if state.is_closed:
                return
            # Non-durable cursors close too (Pulsar closes every cursor of the ledger); they
            # persist nothing.
            cursors = list(self._cursors.values()) + list(self._non_durable.values())
        for cursor in cursors:
            cursor.close()
        with self._lock:
            state.fire(WriteEvent.CLOSE_DONE)
            self._factory.managed_ledger_closed(self.name)
        self._trimmer.wait_idle()  # a pass in flight finishes first (it then finds the ML closed)

    @property
    def is_closed(self) -> bool:
        return self._state.is_closed

    @property
    def write_state(self) -> WriteState:
        """Where the ledger's write state stands (Pulsar's ``ManagedLedgerImpl.State`` names):
        ``LedgerOpened``, ``WriteFailed`` while a failed write is reported, ``Terminated``,
        ``Closing``, ``Closed``. Lock-free."""
        return self._state.write

    # -- termination ------------------------------------------------------------------------
    def terminate(self) -> Position:
        """Terminate the ledger (Pulsar's ``asyncTerminate``): adds queued before complete, every
        later add raises ``ManagedLedgerTerminatedError``; the state is persisted in the
        ``ManagedLedgerInfo`` (``terminatedPosition``), so a restart keeps it. Returns the last
        entry's position (entry -1 of the current ledger when the ledger is empty). Idempotent;
        ``ManagedLedgerClosedError`` once closed."""
        state = self._state
        state.fire(WriteEvent.TERMINATE)
        self.wait_for_adds()
        with state.append_lock, state.lock:
            return state.record_termination()

    @property
    def is_terminated(self) -> bool:
        """Whether :meth:`terminate` was called (now or before a restart)."""
        return self._state.is_terminated

    @property
    def terminated_position(self) -> Position | None:
        """The last entry of a terminated ledger, None while it accepts entries."""
        return self._state.terminated_position

    # -- appends ----------------------------------------------------------------------------
    def add_entry(self, data: bytes, metadata: EntryMetadata | None = None) -> Position:
        """Append one entry and return its position. Blocks until it is stored."""
        return self.add_entries((data,), None if metadata is None else (metadata,))[0]

    def add_entries(
        self,
        payloads: Sequence[bytes],
        metadatas: Sequence[EntryMetadata] | None = None,
        *,
        framed: bool = False,
    ) -> list[Position]:
        """Append entries in order, after every add queued before; return their positions.
        Blocks until they are stored: when no write is under way the calling thread performs
        it (with whatever else is queued), else it waits for the writer.

        ``payloads`` are framed here with ``metadatas`` (one per payload; None: an empty
        ``MessageMetadata``); with ``framed=True`` they are entries already framed as Pulsar
        stores them, byte for byte: ``[size][MessageMetadata][payload]``, optionally behind the
        producer's ``[0x0e01][crc32c]`` (the caller vouches for the framing; a protocol server
        checks it before). One store transaction per ledger touched (adds queued together
        share them); a batch that reaches the rollover limit continues in a new ledger.
        Raises ``EntryTooLargeError`` (nothing written) for an entry above the store's
        ``max_entry_size``, ``ManagedLedgerClosedError``, ``ManagedLedgerTerminatedError``.
        """
        waiter = AddWaiter()
        self._adds.queue(self._sized(self._frame(payloads, metadatas, framed)), waiter)
        self._adds.start(inline=True, until=waiter)
        positions = waiter.wait()
        if metadatas is not None and any(m.num_messages > 1 for m in metadatas):
            for position, metadata in zip(positions, metadatas, strict=True):
                if metadata.num_messages > 1:
                    self.record_entry_messages(position, (metadata.num_messages,))
        return positions

    def add_entries_async(
        self,
        payloads: Sequence[bytes],
        metadatas: Sequence[EntryMetadata] | None = None,
        *,
        framed: bool = False,
    ) -> Future[list[Position]]:
        """:meth:`add_entries` without waiting: a future of the positions (or of the error).
        Refusals (oversized, closed, terminated) are raised at once, nothing queued."""
        future: Future[list[Position]] = Future()

        def done(positions: list[Position] | None, error: BaseException | None) -> None:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(positions)  # type: ignore[arg-type]

        self.add_entries_with_callback(self._sized(self._frame(payloads, metadatas, framed)), done, framed=True)
        return future

    def add_entries_with_callback(
        self,
        payloads: Sequence[bytes],
        callback: AddCallback,
        metadatas: Sequence[EntryMetadata] | None = None,
        *,
        framed: bool = False,
        start_writing: bool = True,
    ) -> None:
        """Queue entries (Pulsar's ``asyncAddEntry``); never waits on the store. ``payloads``,
        ``metadatas`` and ``framed`` as for :meth:`add_entries`.

        ``callback(positions, None)`` runs once they are stored, ``callback(None, error)`` once
        they failed, in queue order, on the thread that wrote them (this one when the store's
        writes never block, else one of the factory's writer threads), outside the ledger's
        locks. A callback must not wait for a later add of this ledger (it runs on the
        writer). A failed write fails, with its error, every add queued behind it (nothing
        after a failure is written before the failure is reported, so an owner can fence, as
        Pulsar's ``clearPendingAddEntries``); a write that stored some entries of a
        multi-ledger add reports the error for that add.

        As Pulsar's ``asyncAddEntry``, sizes are the caller's to check (a topic refuses an
        oversized message alone, before it queues): an entry above the store's
        ``max_entry_size`` fails in the store, as a failed write. ``start_writing=False`` only
        queues: the caller calls :meth:`start_writing` once it released its own locks. Raises
        ``ManagedLedgerClosedError`` and ``ManagedLedgerTerminatedError`` at once (nothing
        queued).
        """
        raw = payloads if framed and metadatas is None else self._frame(payloads, metadatas, framed)
        self._adds.queue(raw, callback)
        if start_writing:
            self._adds.start()

    def append_repeated(self, raw: bytes, count: int) -> Position | None:
        """``add_entries([raw] * count, framed=True)`` without an object per entry, for a bulk
        caller that bounds ``count`` itself (:func:`mledger.replay.add_repeated_entries`, the
        replay's payload-less adds, hands it at most 65536 at a time): the adds queued
        before are written first, this thread waits for them and then writes on its own;
        returns the last position (None for 0). O(ledgers touched). Raises ``ValueError`` for
        a negative count and what :meth:`add_entries` raises; a failed store write raises here
        (the entries written before it stay)."""
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        self._sized((raw,))
        self._state.check_add()
        self._adds.wait_idle()
        return self._appender.write_repeated(raw, count)

    def _sized(self, raw: Sequence[bytes]) -> Sequence[bytes]:
        """``raw``, once every entry is within the store's ``max_entry_size``."""
        checked_size(raw, self._store.max_entry_size)
        return raw

    @staticmethod
    def _frame(payloads: Sequence[bytes], metadatas: Sequence[EntryMetadata] | None, framed: bool) -> Sequence[bytes]:
        if framed:
            if metadatas is not None:
                raise ValueError("framed entries carry their metadata: pass metadatas=None")
            return payloads
        if metadatas is not None and len(metadatas) != len(payloads):
            raise ValueError(f"{len(payloads)} payloads but {len(metadatas)} metadata records")
        if metadatas is None:
            # One header for the whole call: framing is [size][metadata][payload].
            header = encode_entry(b"", _DEFAULT_METADATA)
            return [header + p for p in payloads]
        return [encode_entry(p, m) for p, m in zip(payloads, metadatas, strict=True)]

    def start_writing(self, inline: bool = False) -> None:
        """Write the queued adds unless a writer is at work already: on this thread when the
        store's writes never block (``blocking_writes`` False, the memory store) or ``inline``,
        else on one of the factory's writer threads."""
        self._adds.start(inline=inline)

    def wait_for_adds(self, timeout: float | None = None) -> bool:
        """Block until every queued add completed (at once on the writer's own thread).

        Returns False when ``timeout`` seconds passed first.
        """
        return self._adds.wait_idle(timeout)

    @property
    def pending_add_entries(self) -> int:
        """Adds queued or being written (Pulsar's ``pendingAddEntriesCount``)."""
        return self._adds.pending

    @property
    def write_failure(self) -> BaseException | None:
        """The error of the failed write that started the current failure episode; None when
        the last write succeeded (or none failed). See :meth:`check_writable`."""
        return self._adds.write_failure

    def check_writable(self) -> None:
        """After a failed write (:attr:`write_failure` set), find out whether the store accepts
        writes again: persist the ledger's metadata again, unchanged. On success the episode
        ends; otherwise the probe counts as a failed write and its error is raised. Does
        nothing (no write) while writes succeed."""
        if self._adds.write_failure is None:
            return
        try:
            with self._lock:
                self._state.check_open()
                self._state.persist()
        except ManagedLedgerClosedError:
            raise
        except BaseException as exc:
            self._adds.write_failed(exc, 0)
            raise
        self._adds.writes_recovered()

    def set_failure_listener(self, listener: Callable[[], None] | None) -> None:
        """Call ``listener()`` (on the writer thread, no lock held) each time a failed write and
        every add failed with it have been reported to their callbacks. An owner that fences
        on a failure (Pulsar's topic) lifts the fence then: before that, an add it queues
        would be failed with the earlier error."""
        self._adds.set_failure_listener(listener)

    @property
    def adds_failing(self) -> bool:
        """Whether a failed write is being reported (adds queued meanwhile fail with it)."""
        return self._adds.failing

    # -- rollover ---------------------------------------------------------------------------
    def roll_over_if_due(self) -> bool:
        """Roll over the current ledger if its time limit has passed; True if it did."""
        state = self._state
        with state.append_lock, state.lock:
            state.check_open()
            assert state.current is not None
            if self._appender.ledger_is_full(state.current):
                self._appender.roll_over()
                return True
            return False

    def roll_over(self) -> int:
        """Close the current ledger now and continue in a new one; return the new ledger's id.

        A current ledger with entries is sealed and kept; an empty one is discarded (removed
        from the ledger list and deleted), as Pulsar's ``ManagedLedgerImpl.ledgerClosed`` does
        with a ledger closed without entries before ``createLedgerAfterClosed`` opens the next
        (and its recovery with an empty last ledger). A cursor positioned in the discarded
        ledger reads on from the new one (``next_valid_position``). Blocks on the store;
        raises ``ManagedLedgerClosedError`` once closed.
        """
        state = self._state
        with state.append_lock, state.lock:
            state.check_open()
            self._appender.roll_over()
            assert state.current is not None
            return state.current.ledger_id

    def _ledger_closed(self) -> None:
        if self._trimmer.may_trim():
            # Pulsar's ledgerClosed: the closed ledger may be consumed (or expired) already.
            self.trim_consumed_ledgers_in_background()

    # -- cursors ----------------------------------------------------------------------------
    def open_cursor(
        self,
        name: str,
        initial_position: InitialPosition = InitialPosition.LATEST,
        properties: dict[str, int] | None = None,
        cursor_properties: dict[str, str] | None = None,
    ) -> ManagedCursor:
        """Open (recovering, or creating at ``initial_position``) the durable cursor ``name``."""
        if not name or "/" in name:
            raise InvalidPositionError(f"invalid cursor name {name!r}")
        with self._lock:
            self._state.check_open()
            existing = self._cursors.get(name)
            if existing is not None:
                return existing
            cursor = ManagedCursor.open_durable(self, name, initial_position, properties, cursor_properties)
            self._cursors[name] = cursor
            return cursor

    def open_non_durable_cursor(
        self,
        start_position: Position | None = None,
        name: str | None = None,
        initial_position: InitialPosition = InitialPosition.LATEST,
    ) -> ManagedCursor:
        """A cursor kept only in memory (Pulsar's ``newNonDurableCursor``): listed with the
        ledger's cursors while open (:attr:`non_durable_cursors`, :attr:`all_cursors`,
        :meth:`get_cursor`), never persisted, never holding trimming back (it is moved past
        trimmed ledgers). An open cursor of the same name is returned as it is, as Pulsar
        does; without a name one is generated (``non-durable-cursor-<uuid>``)."""
        with self._lock:
            self._state.check_open()
            if name is not None:
                existing = self._cursors.get(name) or self._non_durable.get(name)
                if existing is not None:
                    return existing
            name = name if name is not None else f"non-durable-cursor-{uuid.uuid4()}"
            cursor = ManagedCursor.open_non_durable(self, name, start_position, initial_position)
            self._non_durable[name] = cursor
            return cursor

    def get_cursor(self, name: str) -> ManagedCursor:
        """The open cursor ``name``, durable or not; raises ``NotFoundError``."""
        cursor = self._cursors.get(name) or self._non_durable.get(name)
        if cursor is None:
            raise NotFoundError(f"cursor {name!r} not found on {self.name}")
        return cursor

    @property
    def cursors(self) -> list[ManagedCursor]:
        """The durable cursors, by name."""
        with self._lock:
            return [self._cursors[k] for k in sorted(self._cursors)]

    @property
    def non_durable_cursors(self) -> list[ManagedCursor]:
        """The open non-durable cursors, in the order they were opened."""
        with self._lock:
            return list(self._non_durable.values())

    @property
    def all_cursors(self) -> list[ManagedCursor]:
        """Every open cursor (Pulsar's ``getCursors()``): the durable ones by name, then the
        non-durable ones in the order they were opened."""
        with self._lock:
            return [self._cursors[k] for k in sorted(self._cursors)] + list(self._non_durable.values())

    def flush_cursors(self) -> int:
        """Persist what the mark-delete rate limit held back, cursor by cursor (the per-ledger
        part of Pulsar's ``ManagedLedgerFactoryImpl.flushCursors``: ``ManagedCursorImpl.flush``
        on every cursor); returns how many wrote. May block on storage."""
        return sum(cursor.flush() for cursor in self.cursors)

    def cursor_names(self) -> list[str]:
        """Names of the durable cursors known to this ML (open or stored)."""
        with self._lock:
            stored = set(self._store.children(self.info_path))
            return sorted(stored | set(self._cursors))

    def delete_cursor(self, name: str) -> None:
        """Delete a cursor: a durable one with its stored state, a non-durable one is closed
        and forgotten (Pulsar's ``asyncDeleteCursor``). Raises ``NotFoundError``."""
        with self._lock:
            non_durable = self._non_durable.get(name)
            if non_durable is None:
                cursor = self._cursors.pop(name, None)
                if cursor is None and self._store.get(cursor_info_path(self.name, name)) is None:
                    raise NotFoundError(f"cursor {name!r} not found on {self.name}")
        if non_durable is not None:
            non_durable.close()  # forgets itself
            return
        self._trimmer.forget_cursor(name)
        if cursor is not None:
            cursor.discard()
        else:
            self._store.delete(cursor_info_path(self.name, name))
        self.trim_consumed_ledgers_in_background()  # the slowest cursor may have gone

    def forget_non_durable_cursor(self, cursor: object) -> None:
        """A non-durable cursor closed: it is no longer listed nor advanced before trims (its
        ``close`` calls this)."""
        with self._lock:
            for name, open_cursor in list(self._non_durable.items()):
                if open_cursor is cursor:
                    del self._non_durable[name]

    def slowest_cursor_position(self) -> Position | None:
        """The lowest *persisted* mark-delete position over the durable cursors, None without
        any: what trimming respects (Pulsar's ``getSlowestReaderPosition``), so a crash can
        never recover a cursor into a trimmed ledger."""
        return self._trimmer.slowest_cursor_position()

    # -- retention and trimming ---------------------------------------------------------------
    def request_trim(self, cursor: object, mark_delete: Position) -> None:
        """The durable ``cursor`` persisted ``mark_delete``: queue a trimming pass if that moved
        the slowest cursor into another ledger (Pulsar's ``onCursorMarkDeletePositionUpdated``:
        "only trigger a trimming when switching to the next ledger").

        Called on every persisted ack, so the common case is O(1): a cursor still in the
        ledger it last reported decides nothing; only when it changes ledger are the cursors
        scanned (O(cursors)). The pass itself runs in the background."""
        self._trimmer.request(cursor, mark_delete)

    def trim_consumed_ledgers_in_background(self) -> Future[list[int]]:
        """Queue a trimming pass on the factory's executor (Pulsar's
        ``trimConsumedLedgersInBackground``); the future gives the ids of the ledgers deleted.

        Passes run one at a time; while one is queued and not started, further requests share
        it, so the future always belongs to a pass that starts after the call. Never blocks.
        """
        return self._trimmer.in_background()

    def trim_consumed_ledgers(self) -> list[int]:
        """Run one trimming pass now, on this thread; return the ids of the ledgers deleted.

        The retention rules of ``ManagedLedgerImpl.internalTrimConsumedLedgers``: see
        :mod:`mledger.managed_ledger._trimmer`. Blocks on the store while it deletes. Usually
        called through :meth:`trim_consumed_ledgers_in_background`.
        """
        return self._trimmer.run_pass()

    def delete_ledgers_before(self, ledger_id: int) -> list[int]:
        """Delete every ledger below ``ledger_id`` but the current one, as a trimming pass that
        deleted them would, retention aside: for a model of a topic whose own trimming deleted
        them (``mledger watch`` follows a live topic's ledger list). Returns their ids; a
        reset running meanwhile wins (fewer or none deleted, as a pass gives way to one).

        Afterwards a position in them reads as the first entry that exists (Pulsar's
        ``ManagedLedgerImpl.getNextValidPosition``): a reset to the earliest position lands on
        the first ledger kept. Raises :class:`~mledger.core.LedgerNotConsumedError`, deleting
        nothing, when a durable consumer cursor's persisted mark-delete is below their last
        entry or it is being reset (Pulsar trims only what every such cursor consumed); system
        cursors (``pulsar.dedup``) are left as they are, non-durable ones are moved past them.
        Blocks on the store while it deletes. O(ledgers + cursors)."""
        return self._trimmer.delete_before(ledger_id)

    def estimated_backlog_size(self) -> int:
        """Bytes after the slowest durable cursor's persisted mark-delete (Pulsar's
        ``getEstimatedBacklogSize``): the ledgers after its ledger in full, plus the part of
        its ledger after it at that ledger's average entry size. 0 without durable cursors.
        O(ledgers)."""
        with self._lock:
            slowest = self.slowest_cursor_position()
            if slowest is None:
                return 0
            return self.estimated_size_after(slowest)

    # -- messages per entry -----------------------------------------------------------------
    @property
    def entry_messages(self) -> EntryMessages:
        """How many messages each entry holds (batches), for the restart figures of the cursors'
        state stores: see :mod:`mledger.managed_ledger._entry_messages`."""
        return self._entry_messages

    def record_entry_messages(self, first: Position, counts: Sequence[int] | np.ndarray) -> None:
        """Entries ``first``, the entry after it, ... (one ledger) hold ``counts`` messages each.

        :meth:`add_entries` records this itself from its metadata records; a caller that frames
        its own entries (``framed=True``) says it here, before the entries can be acknowledged,
        so that an entry a restart would redeliver counts its batch's messages. O(len(counts))."""
        with self._lock:
            self._entry_messages.record(first.ledger_id, first.entry_id, counts)

    # -- misc -------------------------------------------------------------------------------
    def set_config(self, config: ManagedLedgerConfig) -> None:
        """Replace the ledger's settings while it is open (Pulsar's ``setConfig``, which the
        broker calls when a topic's policies change, retention included).

        Rollover limits apply from the next append, cursor persistence settings from the next
        persisted state, the cursors' persist throttle from their next change, retention from
        the next trimming pass, which is queued now."""
        if not isinstance(config, ManagedLedgerConfig):
            raise TypeError(f"config must be a ManagedLedgerConfig, got {config!r}")
        with self._lock:
            self.config = config
            self._trimmer.deferred = True  # the limits changed: a pass must look again
            cursors = list(self._cursors.values()) + list(self._non_durable.values())
        for cursor in cursors:  # outside the ledger lock: a cursor takes its own lock first
            cursor.ledger_config_changed()
        self.trim_consumed_ledgers_in_background()

    @property
    def properties(self) -> dict[str, str]:
        """ML properties (``ManagedLedgerInfo.properties``)."""
        return self._state.properties

    def set_property(self, key: str, value: str) -> None:
        """Set and persist one ML property."""
        with self._lock:
            self._state.set_property(str(key), str(value))

    def stats(self) -> ManagedLedgerStats:
        """A consistent snapshot of the ML's counters."""
        state = self._state
        with self._lock:
            current = state.current
            assert current is not None
            ledgers = state.ledgers
            return ManagedLedgerStats(
                name=self.name,
                number_of_ledgers=len(ledgers),
                number_of_entries=sum(li.entries for li in ledgers.values()),
                total_size=sum(li.size for li in ledgers.values()),
                entries_added_counter=state.entries_added,
                last_confirmed_entry=state.last_confirmed,
                current_ledger_id=current.ledger_id,
                cursors=len(self._cursors),
                current_ledger_entries=current.entries,
                current_ledger_size=current.size,
                last_ledger_created_timestamp=state.current_created_ms,
                non_durable_cursors=len(self._non_durable),
                trimmed_ledgers_total=self._trimmer.trimmed_total,
            )

    @property
    def store(self) -> Store:
        return self._store

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def factory(self) -> LedgerFactoryView:
        """The factory that opened this ledger."""
        return self._factory

    @property
    def factory_config(self) -> ManagedLedgerFactoryConfig:
        """The factory's settings (metadata compression)."""
        return self._factory.config

    @property
    def executor(self) -> Executor:
        """The executor that runs asynchronous reads (the factory's)."""
        return self._factory.executor

    @property
    def info_path(self) -> str:
        """Where this ledger's ``ManagedLedgerInfo`` lives in the metadata store."""
        return self._state.info_path

    def _check(self) -> None:
        """Assert the ledger's invariants (for tests; O(ledgers + cursors)), waiting for the
        write in flight: the state's (:class:`~mledger.managed_ledger._ledger_state.LedgerState`:
        the ledger list, the last confirmed entry, the write state), then every open cursor's:
        its mark-delete is at most the last confirmed entry (or the first ledger's entry -1,
        when that is later) and before its read position, which is at most the next write
        position."""
        state = self._state
        with state.append_lock, state.lock:
            state._check()
            lac = state.last_confirmed
            after = state.next_write_position()
            # A cursor reset to the earliest entry of a ledger whose entries are all trimmed
            # marks (first ledger, -1), past a LAC left in a trimmed ledger.
            highest_md = max(lac, Position(state.ledgers.peekitem(0)[0], -1))
            cursors = list(self._cursors.values()) + list(self._non_durable.values())
        for cursor in cursors:
            md, read = cursor.mark_delete_position, cursor.read_position
            assert md <= highest_md, f"{self.name}/{cursor.name}: mark-delete {md} past LAC {lac}"
            assert md < read <= after, f"{self.name}/{cursor.name}: read {read} not in ({md}, {after}]"

    def __repr__(self) -> str:
        return f"ManagedLedger({self.name!r}, lac={self._state.last_confirmed})"


__all__ = [
    "AddCallback",
    "InitialPosition",
    "LedgerFactoryView",
    "LedgerInfo",
    "ManagedLedger",
    "ManagedLedgerStats",
    "PositionBound",
]
