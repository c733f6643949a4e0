"""Durable cursor state: Pulsar's two tiers per version, truncation, PIP-381 chunks, recovery.

Theory of operation
-------------------
A durable cursor's state lives in two places, exactly as in Pulsar's ``ManagedCursorImpl``
(docs/persistence.md):

* the *cursor ledger*: every persisted mark-delete or delete appends one ``PositionInfo``
  entry; only the last entry matters;
* the metadata store node ``/managed-ledgers/<ml>/<cursor>``: a ``ManagedCursorInfo`` that
  either points at the cursor ledger (``cursorsLedgerId``) or, with ``cursorsLedgerId = -1``,
  carries the state itself (small states, closed cursors, ledger failures).

States (:class:`~mledger.managed_ledger.CursorLifecycle`, which the cursor
derives from :attr:`CursorStateStore.ledger_id`)::

    NoLedger --persist, backlog after MD--> create ledger, write state, point info at it --> Open
    NoLedger --persist, nothing after MD--> ManagedCursorInfo(-1, state)                  --> NoLedger
    Open --persist--> append PositionInfo; if the ledger is full or old: switch           --> Open
    Open --ledger write fails--> ManagedCursorInfo(-1, state)                             --> NoLedger
    any --close--> ranges > metadata limit ? last PositionInfo to the ledger, seal
                                           : ManagedCursorInfo(-1, state), delete ledger  --> Closed

Switching ledgers writes the current state into the *new* ledger before the metadata node is
moved to it and the old ledger deleted, so a crash at any point leaves the node pointing at a
ledger whose last entry is a complete state; Pulsar does the same (``createNewMetadataLedger``
writes, then ``switchToNewLedger`` moves the node) and then appends the pending mark-delete
again (``flushPendingMarkDeletes``), which this store does too under a Pulsar version's rules.

The rules in force (:func:`~mledger.core.rules_for` of ``pulsar_rules``: a row
of :data:`~mledger.core.PULSAR_VERSIONS`, or mledger's own without a preset)
decide what differs between versions: the long-array cut-off (``toRanges``), whether the node's
batch states are read back (#26474), and what happens to a record over a store's limit. Under
mledger's own rules a cursor-ledger entry above the frame limit or a ``ManagedCursorInfo`` above
``jute_maxbuffer`` is written anyway and flagged (``state_over_limit_at_ms``). Under a Pulsar
version's, the bookie refuses the entry and ``persistPositionToLedger`` falls back to the node
(range format, capped) with the cursor ledger forgotten (``NoLedger``); the next persist creates
a ledger, is refused again, falls back, then points the node at that empty ledger
(``switchToNewLedger``: a crash there recovers the mark-delete alone, counted as one instant of
the crash figure) until the pending write is refused and falls back once more. ZooKeeper
refusing a node leaves the last record standing.

PIP-381 (``pip381``, or without a Pulsar version's rules the flag
``persistent_unacked_ranges_with_multiple_entries_enabled``) splits a large state into parts
followed by the JSON footer ``{"numParts": N, "length": L}``, all appended in one store
transaction. Recovery reads the last entry; a footer pulls in its parts; a torn or corrupt tail
makes recovery scan backwards for the last complete state (DataStax #282).

What limits drop (``max_unacked_ranges_to_persist``, ``max_batch_deleted_index_to_persist``)
is counted in the cursor's stats and logged once per crossing, never silently; so are the
builds that dropped something (Pulsar's #25548 counters, each build once: a fallback persist
builds twice) and the long-array cut-offs (``persist_long_array_truncated``).

What a stop would redeliver
---------------------------
After every write the store knows the record a crash would recover (``_stored``, read back as a
recovery under the ``restart_as`` version reads it: :class:`Held`); the cursor tells it every
change it does not persist (:meth:`observe` with a snapshot; :meth:`observe_entries_acked` with
counts, or :meth:`observe_entry_acked` with the position, after whole-entry acks). The crash and
unload figures, in messages and entries with their maxima, are kept by
:class:`~mledger.managed_ledger._restart_figures.RestartFigures`; the unload figure is what
the close path's record would lose: nothing within every limit (checked in O(1):
:attr:`unload_headroom`), else what :class:`~mledger.managed_ledger._close_tracker.CloseTracker`
finds the close record keeps. A write is modelled as done with the change that caused it: the
moment between an ack and the end of its persist is not an instant of the figures.

The store sees its cursor only through the :class:`CursorSnapshot` values the cursor hands it,
and returns a :class:`RecoveredCursorState`; the byte formats are :mod:`mledger.codec`'s.
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple, TypeVar

import numpy as np

from ..codec import (
    PersistedCursorState,
    PositionInfoEntry,
    PositionInfoRanges,
    RangeArrays,
    compress_metadata,
    decode_managed_cursor_info,
    decode_position_info,
    decompress_metadata,
    encode_managed_cursor_info,
    encode_position_info,
    long_list_size,
    pack_entries,
    parse_compression_type,
    parse_footer,
    range_record_sizes,
    reassemble_stream,
    unpack_payload,
)
from ..core import (
    DEFAULT_MAX_STATE_SIZE_IN_BYTES,
    MAX_ENTRY_ID,
    MLEDGER_RULES,
    AckRangeSet,
    EntryMessages,
    EntryTooLargeError,
    InvalidPositionError,
    LedgerNotFoundError,
    LongArrayCutoff,
    ManagedLedgerConfig,
    MLedgerError,
    Position,
    PulsarVersion,
    RangeRuns,
    StateCorruptedError,
    ack_set_to_words,
    pulsar_version,
    rules_for,
    words_to_ack_set,
)
from ._close_tracker import Boundary, CloseTracker
from ._cursor_snapshot import CursorSnapshot, RecoveredCursorState
from ._cursor_stats import BulkAckRoom, PersistenceStats
from ._explain import RecordView, StopRecords
from ._ledger_view import LedgerView, cursor_info_path
from ._restart_figures import Held, RestartFigures, redelivered

__all__ = ["BACKWARD_SCAN_LIMIT", "MAX_STATE_BYTES", "NO_LEDGER", "CursorStateStore"]

log = logging.getLogger(__name__)

_Payload = bytes | PositionInfoEntry
"""A record to append: its bytes, or (for a ``lazy_entries`` store) a PositionInfo encoded and
sized only when asked."""


def _fits(record: _Payload, limit: int) -> bool:
    """``len(record) <= limit``; a :class:`PositionInfoEntry` is sized only when its bound
    reaches ``limit`` (:meth:`PositionInfoEntry.fits`: call it during the persist that built
    the record)."""
    return record.fits(limit) if isinstance(record, PositionInfoEntry) else len(record) <= limit


_P = TypeVar("_P", bytes, _Payload)


@functools.lru_cache(maxsize=1 << 14)
def _words_of(ack_set: int) -> np.ndarray:
    """``ack_set_to_words``, read-only and memoised: every persist writes every partly
    acknowledged batch, and most of them change less often than the cursor persists."""
    words = ack_set_to_words(ack_set)
    words.flags.writeable = False
    return words


NO_LEDGER = -1
MAX_STATE_BYTES = DEFAULT_MAX_STATE_SIZE_IN_BYTES
"""The default bound on one reassembled or decompressed state
(``ManagedLedgerFactoryConfig.max_state_size_in_bytes`` sets it per factory)."""
BACKWARD_SCAN_LIMIT = 1000
"""How many cursor-ledger entries recovery examines when the tail is torn or corrupt."""


class CursorStateStore:
    """Persists one durable cursor's state through its managed ledger's store.

    Called by the cursor under its lock with a :class:`CursorSnapshot`; every method may block
    on storage I/O. ``config`` defaults to the ledger's (a benchmark may compare formats).
    """

    def __init__(self, ledger: LedgerView, cursor_name: str, config: ManagedLedgerConfig | None = None) -> None:
        self._ml = ledger
        self._store = ledger.store
        self._config_override = config
        self._path = cursor_info_path(ledger.name, cursor_name)
        self._cursor_name = cursor_name
        self._max_state = ledger.factory_config.max_state_size_in_bytes
        self._info_version: int | None = None
        self._ledger_id: int | None = None  # the cursor ledger being written (state Open)
        self._stale_ledger_id: int | None = None  # a recovered ledger to delete on the next switch
        self._ledger_entries = 0
        self._ledger_created_ms = 0
        self._truncating = False
        self._batch_truncating = False
        self._size_limited = False
        self._stats = _Counters()  # PersistenceStats' counters, live (stats() freezes them)
        # the last state record written, whose bytes stats() counts (persisted_state_bytes) and
        # then forgets: a lazy_entries store's records are sized only when that asks
        self._state_record: _Payload | None = None
        self._counting = True  # builds count in the truncation figures (not the unload's what-if)
        # the ranges of the PositionInfo records built, encoded: the next reuses what it shares
        self._range_bytes = PositionInfoRanges()
        # the batch states last built into a record, and their (position, words) list: the
        # next record of the same states (the cursor keeps the tuple until they change) shares it
        self._batch_built: tuple[tuple[tuple[Position, int], ...], list[tuple[Position, np.ndarray]]] = ((), [])
        # A store that keeps entries unbuilt (``lazy_entries``: a replay's, which keeps a cursor
        # ledger's last) is given PositionInfo records neither sized nor encoded (PositionInfoEntry)
        self._lazy_entries = bool(getattr(self._store, "lazy_entries", False))
        self._rules_cache: tuple[ManagedLedgerConfig, tuple[tuple[PulsarVersion, _Reader, _Reader], _Limits]] | None = (
            None
        )
        # What a recovery would read (see the writing section), and what the store last wrote
        self._stored: _Stored | None = None
        self._node_ledger = NO_LEDGER
        self._last_appended: tuple[int, _Stored] | None = None
        # What a stop would redeliver, live (PersistenceStats is built from them on demand)
        self._figures = RestartFigures(ledger)
        self._tracker: CloseTracker | None = None  # what the close keeps, past the limits
        self._cut: Boundary | None = None  # where the last tracker built found the range cap's cut
        self._tracker_batch = (False, False)  # batch states read back at all, and from the node
        self.unload_headroom = -1
        # the batch states a record kept, as a recovery reads them back (see _held_of)
        self._kept_read: tuple[object, dict[Position, int]] = (None, {})
        self._properties_bytes: tuple[object, object, int] = (None, None, 0)  # see _properties_bound
        self._unload_keeps_batch = False  # within the headroom: whether the close keeps batch states
        self._unload_branch = False  # whether the close of the state last observed goes to the cursor ledger
        self._unload_ranges = -1  # the range count last observed from a snapshot (-1: unknown since)
        self._bulk_headroom = -1  # unload_headroom for acknowledgements applied at once, now
        """How many more whole-entry acknowledgements (with no batch state) certainly leave the
        unload figure as it is: the cursor tells the store those with counts only
        (:meth:`observe_entries_acked`), any other change with a snapshot (:meth:`observe`)."""

    @property
    def _config(self) -> ManagedLedgerConfig:
        # The ledger's config is read on every use: ManagedLedger.set_config changes it live.
        return self._config_override if self._config_override is not None else self._ml.config

    @property
    def ledger_id(self) -> int | None:
        """The cursor ledger being written (the cursor's ``Open`` state), None without one."""
        return self._ledger_id

    # -- recovery ---------------------------------------------------------------------------
    def recover(self) -> RecoveredCursorState | None:
        """Read the stored state; None when the cursor has never been stored.

        Raises ``StateCorruptedError`` naming the managed ledger, the cursor and the stored
        record when the state does not decode or does not fit the ledger: a mark-delete entry
        id below -1, acknowledged entries outside every ledger (Pulsar's formats carry no
        checksum, so a flipped bit may decode to such a state, or to another valid one).
        """
        found = self._read_record()
        if found is None:
            return None
        record, version, ledger_id = found
        self._info_version = version
        if ledger_id != NO_LEDGER:
            self._stale_ledger_id = ledger_id
        self._stored = record.stored
        assert record.stored.state is not None
        return self._to_recovered(
            record.stored.state, record.cursor_properties, record.where, from_node=record.stored.from_node
        )

    def _read_record(self) -> tuple[_Read, int, int] | None:
        """The record a recovery reads now, the node's version and the ledger it names; reads
        only (None when the cursor was never stored). Raises ``StateCorruptedError`` for a node
        that does not decode."""
        stored = self._store.get(self._path)
        if stored is None:
            return None
        node = f"ManagedCursorInfo {self._path}"
        try:
            info = decode_managed_cursor_info(self._decompress(stored.data))
        except StateCorruptedError as exc:
            raise self._corrupt(node, str(exc)) from exc
        if info.cursors_ledger_id == NO_LEDGER:
            return _Read(_Stored(info, from_node=True), info.cursor_properties, node), stored.version, NO_LEDGER
        ledger_id = info.cursors_ledger_id
        found = self._read_ledger_state(ledger_id)
        if found is None:
            # Pulsar's fallback: the snapshot in ManagedCursorInfo, clamped, no properties.
            first = self._ml.first_position()
            md = max(info.mark_delete, first)
            log.warning(
                "cursor %s: cursor ledger %d unreadable; recovering from the metadata snapshot %s",
                self._path,
                ledger_id,
                md,
            )
            # Pulsar's recoverFromLedger with LAC < 0 (or an unreadable ledger): initialize(
            # getRollbackPosition(info), emptyMap, cursorProperties): the mark-delete alone.
            fallback = PersistedCursorState(mark_delete=md, cursor_properties=info.cursor_properties)
            empty = _Read(_Stored(fallback, from_node=True), info.cursor_properties, node, "empty cursor ledger")
            return empty, stored.version, ledger_id
        state, record = found
        return _Read(_Stored(state, from_node=False), info.cursor_properties, record), stored.version, ledger_id

    def _corrupt(self, record: str, problem: str) -> StateCorruptedError:
        return StateCorruptedError(
            f"managed ledger {self._ml.name}: cursor {self._cursor_name}: stored {record}: {problem}"
        )

    def _read_ledger_state(self, ledger_id: int) -> tuple[PersistedCursorState, str] | None:
        """The last complete PositionInfo of a cursor ledger (and where it was read), scanning
        back past a torn tail.

        A footer record is complete when its parts reassemble to the stated length and parse.
        With chunking on, a plain entry is trusted only if it cannot be a part of a torn
        sequence: parts before the last are exactly the chunk size, so a plain candidate must
        be smaller than that and must not follow a full-size entry.
        """
        try:
            last = self._store.last_entry_id(ledger_id)
        except LedgerNotFoundError:
            return None
        part_size = self._chunk_size()
        entry_id = last
        while entry_id >= 0 and last - entry_id < BACKWARD_SCAN_LIMIT:
            try:
                state, parts = self._decode_ledger_entry(ledger_id, entry_id, part_size)
                if entry_id != last:
                    log.warning(
                        "cursor %s: torn or corrupt tail in ledger %d; recovered entry %d",
                        self._path,
                        ledger_id,
                        entry_id,
                    )
                where = f"PositionInfo in cursor ledger {ledger_id} entry {entry_id}"
                if parts:
                    where += f" (PIP-381 footer after {parts} parts)"
                return state, where
            except (StateCorruptedError, LedgerNotFoundError) as exc:
                log.warning("cursor %s: ledger %d entry %d unusable: %s", self._path, ledger_id, entry_id, exc)
                entry_id -= 1
        return None

    def _decode_ledger_entry(
        self, ledger_id: int, entry_id: int, part_size: int | None
    ) -> tuple[PersistedCursorState, int]:
        raw = self._read_one(ledger_id, entry_id)
        footer = parse_footer(raw, max_parts=max(entry_id, 0), max_length=self._max_state)
        if footer is None:
            if part_size is not None and not self._could_be_plain(ledger_id, entry_id, raw, part_size):
                raise StateCorruptedError(f"entry {ledger_id}:{entry_id} looks like a part of a torn chunk sequence")
            return decode_position_info(unpack_payload(raw, self._max_state)), 0
        first = entry_id - footer.num_parts
        if first < 0:
            raise StateCorruptedError(f"footer at {ledger_id}:{entry_id} names {footer.num_parts} parts before it")
        # Parts are read one at a time and copied into one buffer of the announced length,
        # which the footer check bounds by the state-size limit.
        parts = (self._read_one(ledger_id, part_id) for part_id in range(first, entry_id))
        try:
            payload = reassemble_stream(footer, parts)
        except StateCorruptedError as exc:
            raise StateCorruptedError(f"footer at {ledger_id}:{entry_id}: {exc}") from None
        return decode_position_info(unpack_payload(payload, self._max_state)), footer.num_parts

    def _could_be_plain(self, ledger_id: int, entry_id: int, raw: bytes, part_size: int) -> bool:
        if len(raw) >= part_size:
            return False
        if entry_id == 0:
            return True
        previous = self._read_one(ledger_id, entry_id - 1)
        return len(previous) < part_size or previous[:1] == b"{"

    def _read_one(self, ledger_id: int, entry_id: int) -> bytes:
        got = self._store.read(ledger_id, entry_id, entry_id)
        if not got:
            raise StateCorruptedError(f"cursor ledger {ledger_id} has no entry {entry_id}")
        return got[0]

    def _to_recovered(
        self, state: PersistedCursorState, cursor_properties: dict[str, str], record: str, from_node: bool
    ) -> RecoveredCursorState:
        md, acked, batch = self._decoded(state, record, from_node, self._reader(for_restart=False))
        held = self._held_of(self._stored, for_restart=True)
        assert held is not None and self._stored is not None
        self._stored = _Stored(None, self._stored.from_node, held)
        self._figures.recovered(held)
        return RecoveredCursorState(
            mark_delete=md,
            acked=acked,
            batch=batch,
            properties=dict(state.properties),
            cursor_properties=dict(cursor_properties),
        )

    def _decoded(
        self, state: PersistedCursorState, record: str, from_node: bool, reader: _Reader
    ) -> tuple[Position, AckRangeSet, dict[Position, int]]:
        """A record as ``reader`` recovers it: mark-delete, acknowledged entries, batch states.
        Raises ``StateCorruptedError`` for a state that does not fit the ledger. O(state)."""
        md = Position(*state.mark_delete)
        if md.entry_id < -1 or md.ledger_id < -1:
            raise self._corrupt(record, f"mark-delete position {md}: an entry id below -1 is no position")
        infos = {li.ledger_id: li.entries for li in self._ml.ledger_infos()}
        acked = AckRangeSet()
        try:
            ranges, long_arrays = _acks_read(state, reader)
            if ranges is not None:
                self._add_stored_ranges(acked, ranges, md, infos)
            for ledger_id, words in long_arrays.items():
                self._add_stored_words(acked, int(ledger_id), np.asarray(words, dtype=np.int64), md, infos)
        except (_OutsideLedgers, InvalidPositionError) as exc:
            raise self._corrupt(record, str(exc)) from None
        return md, acked, _batch_read(state, from_node, reader)

    # -- explaining -------------------------------------------------------------------------
    def explain_records(self, snapshot: CursorSnapshot) -> StopRecords:
        """The records a crash and an unload of ``snapshot`` would recover, as the ``restart_as``
        version reads them (:func:`~mledger.managed_ledger._explain.explain_redelivery`): the
        stored one, the one a persist now would store, the close path's. Reads storage; writes
        and counts nothing. O(state)."""
        counting, size_limited = self._counting, self._size_limited
        self._counting = False
        try:
            reader = self._reader(for_restart=True)
            found = self._read_record()
            stored = None if found is None else self._view(found[0], reader)
            frame, jute = self._ml.factory_config.frame_limit, self._ml.factory_config.jute_maxbuffer
            persist_now = close = None
            to_ledger = self._ledger_id is not None or snapshot.mark_delete < self._ml.last_confirmed_entry
            closes_to_ledger = self._closes_to_ledger(snapshot)
            if to_ledger or closes_to_ledger:
                payload, built = self._position_info(snapshot, lazy=False)
                if not (self._rules.over_frame_fails and len(payload) > frame):
                    ledger = self._view(_Read(built, {}, "cursor ledger"), reader)
                    persist_now = ledger if to_ledger else None
                    close = ledger if closes_to_ledger else None
            data, built = self._info_record(snapshot, NO_LEDGER, with_acks=True)
            node = self._view(_Read(built, {}, "metadata store"), reader)
            if self._rules.over_jute_fails and len(data) > jute:  # refused: the last record stands
                last = stored or RecordView(snapshot.mark_delete, AckRangeSet())
                node = RecordView(last.mark_delete, last.acked, last.batch, last.where, "jute", last.long_arrays)
            # a PositionInfo over the frame limit: persistPositionToLedger's fallback to the node
            fell_back = replace(node, fallback=node.fallback or "frame")
            if persist_now is None:
                persist_now = fell_back if to_ledger else node
            if close is None:
                close = fell_back if closes_to_ledger else node
            cfg = self._config
            return StopRecords(
                stored=stored,
                persist_now=persist_now,
                close=close,
                batch_acks_on=reader.batch and cfg.deletion_at_batch_index_level_enabled,
                batch_cap=cfg.max_batch_deleted_index_to_persist,
                batch_ack_without_range_persists=self._rules.behaviour.batch_ack_without_range_persists,
                node_batches_read=reader.rules.batch_indexes_read_from_metadata_store,
            )
        finally:
            self._counting, self._size_limited = counting, size_limited

    def _view(self, read: _Read, reader: _Reader) -> RecordView:
        state = read.stored.state
        assert state is not None
        md, acked, batch = self._decoded(state, read.where, read.stored.from_node, reader)
        long_arrays = bool(state.long_arrays) and not (state.ranges is not None and state.ranges.size)
        where = read.kind or ("metadata store" if read.stored.from_node else "cursor ledger")
        return RecordView(md, acked, batch, where, read.fallback, long_arrays)

    @staticmethod
    def _add_stored_words(
        acked: AckRangeSet, ledger_id: int, words: np.ndarray, md: Position, infos: dict[int, int]
    ) -> None:
        """Add one ledger's stored BitSet words; they must lie inside that ledger above MD."""
        nonzero = np.flatnonzero(words)
        if nonzero.size == 0:
            return
        last = int(nonzero[-1])
        word = int(words[last])
        top = last * 64 + (63 if word < 0 else word.bit_length() - 1)
        if (ledger_id, top) <= md:
            return  # every bit is at or below the mark-delete: dropped on restore
        entries = infos.get(ledger_id)
        if entries is None or top >= entries:
            raise _OutsideLedgers(
                f"acknowledged entry {ledger_id}:{top} (individualDeletedMessageRanges) {_outside(ledger_id, entries)}"
            )
        acked.add_words(ledger_id, words)

    def _add_stored_ranges(self, acked: AckRangeSet, ranges: RangeArrays, md: Position, infos: dict[int, int]) -> None:
        """Add stored ``MessageRange``s, splitting those that cross ledgers by the ledger list.

        Ranges wholly at or below the mark-delete are dropped (restore would drop them); every
        other range must lie inside the ledgers: raises ``_OutsideLedgers`` otherwise."""
        above = (ranges.upper_ledger > md.ledger_id) | (
            (ranges.upper_ledger == md.ledger_id) & (ranges.upper_entry > md.entry_id)
        )
        if not above.all():
            ranges = RangeArrays(*(c[above] for c in ranges))
        if not ranges.size:
            return
        same = ranges.lower_ledger == ranges.upper_ledger
        if same.all():
            ledgers = ranges.lower_ledger
            order_breaks = np.flatnonzero(np.diff(ledgers)) + 1
            for idx in np.split(np.arange(ranges.size), order_breaks):
                ledger_id = int(ledgers[idx[0]])
                starts = ranges.lower_entry[idx] + 1
                ends = ranges.upper_entry[idx]
                lengths = ends - starts + 1
                entries = infos.get(ledger_id)
                bad = (lengths <= 0) | (starts < 0) | (ends >= (entries if entries is not None else 0))
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    raise _OutsideLedgers(
                        _range_problem(
                            ledger_id, int(starts[i]) - 1, ledger_id, int(ends[i]), entries, int(lengths[i]) <= 0
                        )
                    )
                long_runs = lengths > 64
                for s, e in zip(starts[long_runs].tolist(), ends[long_runs].tolist(), strict=True):
                    acked.add_range(ledger_id, s, e)
                short_starts, short_lengths = starts[~long_runs], lengths[~long_runs]
                if short_lengths.size:
                    base = np.repeat(short_starts - np.cumsum(short_lengths) + short_lengths, short_lengths)
                    acked.add_many(ledger_id, base + np.arange(int(short_lengths.sum())))
            return
        for ll, le, ul, ue in zip(*(a.tolist() for a in ranges), strict=True):
            upper_entries = infos.get(ul)
            if (ll, le) >= (ul, ue) or le < -1 or ue < 0 or upper_entries is None or ue >= upper_entries:
                raise _OutsideLedgers(_range_problem(ll, le, ul, ue, upper_entries, (ll, le) >= (ul, ue)))
            if ll == ul:
                acked.add_range(ll, le + 1, ue)
                continue
            if ll in infos:
                acked.add_range(ll, le + 1, infos[ll] - 1)
            for lid, entries in infos.items():
                if ll < lid < ul and entries > 0:
                    acked.add_range(lid, 0, entries - 1)
            acked.add_range(ul, 0, ue)

    # -- writing ----------------------------------------------------------------------------
    # Each public write below runs one of Pulsar's persist paths, as the rules of
    # ``pulsar_rules`` (:func:`~mledger.core._pulsar_versions.rules_for`) have it, then tells the
    # restart figures what a crash now recovers (_after_write). ``_stored`` tracks that record:
    # the node's state while it says cursorsLedgerId = -1, else the last PositionInfo appended to
    # the ledger it names (None for a ledger still empty: recoverFromLedger's LAC < 0 rollback).
    def initialize(self, snapshot: CursorSnapshot) -> None:
        """Write the node of a new cursor (``cursorsLedgerId = -1``)."""
        self._write_info(snapshot, NO_LEDGER)
        self._after_write(snapshot)

    def persist(self, snapshot: CursorSnapshot) -> bool:
        """Persist ``snapshot`` (Pulsar's ``internalMarkDelete`` write path); False when no
        store took it (under a Pulsar version's rules: a ``ManagedCursorInfo`` over
        ``jute.maxbuffer`` after a refused ledger write), the previous record then stands.

        On a ``lazy_entries`` store, a range-format ``PositionInfo`` costs O(batch states +
        ledgers changed since the last persist), plus O(ledgers) at C speed: the record's
        ranges are the set's frozen per-ledger copies (:meth:`AckRangeSet.range_runs
        <mledger.core.AckRangeSet.range_runs>`), checked against the limits by an upper bound
        of its size (:meth:`PositionInfoEntry.fits <mledger.codec.PositionInfoEntry.fits>`:
        sized, per ledger changed since the last record sized, only when the bound reaches a
        limit or ``stats()`` asks) and encoded only if the store reads it back; what a recovery
        holds of it is the set's kept counts."""
        stored = self._write_state(snapshot)
        self._after_write(snapshot)
        return stored

    def _write_state(self, snapshot: CursorSnapshot) -> bool:
        if self._ledger_id is None:
            if snapshot.mark_delete >= self._ml.last_confirmed_entry:  # nothing after MD
                self._count_write(0)
                return self._write_info(snapshot, NO_LEDGER)
            return self._switch_ledger(snapshot, pending=True)
        payload, built = self._position_info(snapshot)
        try:
            appended = self._append_state(self._ledger_id, payload, built)
        except (EntryTooLargeError, LedgerNotFoundError) as exc:
            log.warning("cursor %s: cursor ledger write failed (%s); persisting to the metadata store", self._path, exc)
            appended = False
        if not appended:
            # persistPositionToLedger's failure branch: state Open -> NoLedger, then
            # persistPositionToMetaStore (range format, capped).
            return self._fall_back_to_node(snapshot)
        if self._rollover_due():
            # rolloverLedgerIfNeeded -> createNewMetadataLedger, nothing pending
            self._switch_ledger(snapshot, pending=False, payload=None if self._pulsar else (payload, built))
        return True

    def persist_cursor_properties(self, snapshot: CursorSnapshot) -> None:
        """Rewrite ManagedCursorInfo with the snapshot's cursor properties (Pulsar's
        ``setCursorProperties``), keeping it pointed at the cursor ledger if there is one."""
        if self._ledger_id is None:
            self._write_info(snapshot, NO_LEDGER)
        else:
            self._write_info(snapshot, self._ledger_id, with_acks=False)
        self._after_write(snapshot)

    def close(self, snapshot: CursorSnapshot) -> None:
        """Pulsar's ``persistPositionWhenClosing``: the ledger for big states, else the node."""
        self._close_state(snapshot)
        self._after_write(snapshot)

    def _closes_to_ledger(self, snapshot: CursorSnapshot) -> bool:
        """``shouldPersistUnackRangesToLedger``: a writable cursor ledger (a recovered one is
        read-only until the first switch: mledger holds none then), ranges persisted at all,
        and more ranges than ``max_unacked_ranges_to_persist_in_metadata_store``."""
        return self._closes_to_ledger_at(snapshot.acked.size(), self._derived()[1])

    def _closes_to_ledger_at(self, ranges: int, limits: _Limits) -> bool:
        """:meth:`_closes_to_ledger` of a state of ``ranges`` ranges (``limits``: :meth:`_derived`'s)."""
        cap = limits.range_cap
        return self._ledger_id is not None and (cap is None or cap > 0) and ranges > limits.node_above

    @property
    def counts_keep_room(self) -> bool:
        """Whether whole-entry acknowledgements told by counts with the range count
        (:meth:`observe_entries_acked`) keep :meth:`bulk_ack_room` known: in the range format
        (the long-array format's room for acknowledgements at once follows the entries produced,
        which only a snapshot observes). O(1)."""
        return self._derived()[1].range_format

    def unload_branch_moves(self, ranges: int) -> bool:
        """Whether a state of ``ranges`` ranges would close through the other branch than the
        state last observed (``persistPositionWhenClosing``: the cursor ledger or the metadata
        store, which may keep batch states differently): the unload figure then needs a snapshot
        (:meth:`observe`), whatever the headroom. O(1)."""
        return self._closes_to_ledger_at(ranges, self._derived()[1]) != self._unload_branch

    def _close_state(self, snapshot: CursorSnapshot) -> None:
        if self._closes_to_ledger(snapshot):
            assert self._ledger_id is not None
            try:
                payload, built = self._position_info(snapshot)
                if self._append_state(self._ledger_id, payload, built):
                    self._store.seal_ledger(self._ledger_id)
                    return
            except MLedgerError as exc:
                log.warning(
                    "cursor %s: closing write to the ledger failed (%s); using the metadata store", self._path, exc
                )
        if self._fall_back_to_node(snapshot) and self._stale_ledger_id is not None:
            self._store.delete_ledger(self._stale_ledger_id)
            self._stale_ledger_id = None

    def _fall_back_to_node(self, snapshot: CursorSnapshot) -> bool:
        """The state to the node (``cursorsLedgerId = -1``), the cursor ledger forgotten
        (``NoLedger``): deleted once the node no longer names it; kept for the next switch to
        delete when ZooKeeper refused the node (it still names that ledger, whose last entry a
        recovery reads)."""
        stored = self._write_info(snapshot, NO_LEDGER)
        if not stored and self._ledger_id is not None:
            self._stale_ledger_id = self._ledger_id
        self._forget_ledger(delete=stored)
        return stored

    def delete(self) -> None:
        """Remove the node and every cursor ledger."""
        self._forget_ledger(delete=True)
        if self._stale_ledger_id is not None:
            self._store.delete_ledger(self._stale_ledger_id)
        self._store.delete(self._path)

    def stats(self) -> PersistenceStats:
        """Persistence figures (``CursorStats.persistence``): a frozen snapshot."""
        crash = self._figures.crash
        counters = self._stats
        if self._state_record is not None:  # sized now: a replay's records are not sized when written
            counters.persisted_state_bytes = len(self._state_record)
            self._state_record = None
        return PersistenceStats(
            **{name: getattr(counters, name) for name in _Counters.__slots__},
            redelivered_after_restart=crash.messages,
            redelivered_after_restart_max=crash.messages_max,
            redelivered_after_restart_max_at_ms=crash.messages_max_at_ms,
            redelivered_after_crash=crash,
            redelivered_after_crash_limits=self._figures.crash_limits,
            redelivered_after_unload=self._figures.unload,
            redelivered_after_unload_limits=self._figures.unload,
        )

    # -- what a stop would redeliver --------------------------------------------------------
    def observe(self, snapshot: CursorSnapshot, now_ms: int | None = None, limits: bool = False) -> None:
        """A state change that is not persisted yet (a throttled mark-delete): what a crash or
        an unload now would redeliver, counted towards the maxima (stamped ``now_ms``, else the
        clock's time). ``limits``: no flush will write the change either (apache/pulsar#26498
        with a clean cursor), so the crash total is all lost to the limits. Reads only; writes
        nothing. O(batch states) plus O(ledgers) at C speed while the state is within every
        limit (the range set keeps its counts and extra messages), O(state)
        otherwise (the unload figure's close record)."""
        now = self._ml.clock.now_ms() if now_ms is None else now_ms
        caps = self._derived()[1]
        self._figures.observe(snapshot, now, caps.batch_cap, limits)
        self._observe_unload(snapshot, now, caps)

    def observe_entries_acked(self, entries: int, now_ms: int, messages: int | None = None, ranges: int = -1) -> None:
        """:meth:`observe` after a change that only acknowledged ``entries`` more whole entries
        (holding ``messages``, default one each) with no batch state (the single-call fast
        path): the crash total grows by exactly that much (mark-delete absorption moves entries
        from the ranges to below the mark-delete, which leaves it unchanged). O(1), allocates
        nothing; ``now_ms`` is the clock reading of the change. For at most
        :attr:`unload_headroom` entries since the last observation: the unload figure is then
        unchanged (past that the cursor calls :meth:`observe`). ``ranges``: the range count
        after the change, when known; in the range format, on the same side of
        ``max_unacked_ranges_to_persist_in_metadata_store`` as the count observed (the close's
        branch the same), it keeps :meth:`bulk_ack_room` known: the room for acknowledgements at
        once shrinks by ``entries`` as the headroom does (each adds one range at most)."""
        if not entries:
            return
        self._figures.entries_acked(entries, entries if messages is None else messages, now_ms)
        self.unload_headroom -= entries
        observed, self._unload_ranges = self._unload_ranges, -1
        if ranges >= 0 and observed >= 0:
            limits = self._derived()[1]
            if limits.range_format and (ranges > limits.node_above) == (observed > limits.node_above):
                self._unload_ranges = ranges
                self._bulk_headroom -= entries

    def _after_write(self, snapshot: CursorSnapshot) -> None:
        """A write went through (or was refused): a crash now recovers ``_stored``. The records'
        states are then dropped for what a recovery holds of them (a state's arrays are as
        large as the record)."""
        now = self._ml.clock.now_ms()
        held = self._held_of(self._stored, for_restart=True)
        if self._stored is not None and held is not None:
            compact = _Stored(None, self._stored.from_node, held)
            if self._last_appended is not None:
                ledger_id, appended = self._last_appended
                if appended is self._stored:
                    self._last_appended = (ledger_id, compact)
                elif appended.state is not None:
                    kept = self._held_of(appended, for_restart=True)
                    self._last_appended = (ledger_id, _Stored(None, False, kept))
            self._stored = compact
        caps = self._derived()[1]
        if held is not None:
            self._figures.written(snapshot, held, now, caps.batch_cap)
        else:
            self._figures.observe(snapshot, now, caps.batch_cap)
        self._observe_unload(snapshot, now, caps)

    def _observe_unload(self, snapshot: CursorSnapshot, now_ms: int, limits: _Limits) -> None:
        """The unload figure now, from the snapshot the figures just tallied (``limits``: the
        settings in force, :meth:`_derived`): 0 while within every limit but for batch states
        the close record loses; else what the close record keeps, followed ack by ack from here
        (:class:`CloseTracker`), or, for a record that may not fit its store, read from the
        record itself."""
        headroom = self.unload_headroom = self._unload_headroom_of(snapshot, limits)
        self._tracker = None
        ranges = self._unload_ranges = snapshot.acked.size()
        to_ledger = self._unload_branch = self._closes_to_ledger_at(ranges, limits)
        # whether a recovery after a clean close reads the batch states back: the ledger branch
        # of the close keeps them, the metadata store's only since apache/pulsar#26474 (``recover``
        # with ``cursorsLedgerId == -1``), and the reader must have batch-index acks on
        keeps_batch = limits.close_batch_read and (limits.node_batch_read or to_ledger)
        self._unload_keeps_batch = keeps_batch
        self._bulk_headroom = headroom if limits.range_format else self._unload_headroom_of(snapshot, limits, True)
        if headroom >= 0:
            self._figures.set_unload_kept(None, keeps_batch or not snapshot.batch, now_ms)
            return
        limit = limits.range_cap
        writable = self._ledger_id is not None and (limit is None or limit > 0)
        batch = snapshot.batch
        if len(batch) <= limits.batch_cap:
            # every batch state kept: their words as the figures just counted them
            batch_bytes = len(batch) * _BYTES_PER_BATCH_BOUND + self._figures.batch.words * 10
        else:
            kept = batch[: limits.batch_cap]
            batch_bytes = sum(_BYTES_PER_BATCH_BOUND + (bits.bit_length() // 64 + 1) * 10 for _, bits in kept)
        fixed = _BYTES_PER_RECORD_BOUND + batch_bytes + self._properties_bound(snapshot)
        node_room, ledger_room = limits.store_rooms
        tracker = CloseTracker(
            snapshot.acked,
            self._ml.entry_messages,
            limits.close_cap,
            limits.long_array,
            limits.node_above if writable else None,
            (node_room - fixed, ledger_room - fixed),
            self._figures.acked_extra,  # the snapshot just tallied
            self._cut,
        )
        self._cut = tracker.found
        self._tracker_batch = (limits.close_batch_read, limits.node_batch_read)
        if not tracker.fits():
            held = self._built_close_held(snapshot)
            self._figures.set_unload(*redelivered(snapshot, held, self._ml), now_ms)
            return
        self._tracker = tracker
        on, from_node = self._tracker_batch
        self._figures.set_unload_lost(
            (tracker.lost_messages, tracker.lost_entries), on and (from_node or tracker.to_ledger), now_ms
        )

    def observe_entry_acked(self, ledger_id: int, entry_id: int, messages: int, now_ms: int) -> bool:
        """:meth:`observe_entries_acked` for one whole entry (no batch state, no mark-delete
        moved), with its position, so that the unload figure follows it past the limits too.
        False when the store needs a snapshot instead (:meth:`observe`). O(1) within the
        limits, a few bitmap queries past them (O(ledgers) in the long-array format)."""
        self._unload_ranges = -1
        if self.unload_headroom >= 1:
            self.unload_headroom -= 1
            self._figures.entries_acked(1, messages, now_ms)
            return True
        tracker = self._tracker
        if tracker is None or not tracker.entry_acked(ledger_id, entry_id, messages):
            return False
        on, from_node = self._tracker_batch
        self._figures.entry_followed(messages, tracker, on and (from_node or tracker.to_ledger), now_ms)
        return True

    def bulk_ack_room(self, batch_states: int, batch_words: int) -> BulkAckRoom:
        """How many acknowledgements one change may carry and leave the unload figure as
        acknowledgements one at a time leave it, the cursor holding ``batch_states`` partial
        entries (:class:`BulkAckRoom`): within :attr:`unload_headroom` the close record loses
        nothing it did not lose before (a new batch state of at most ``batch_words`` BitSet
        words costs its bytes in entries' shares); a batch-index acknowledgement moves the
        figure when the close record does not keep batch states (up, then down when the entry
        is complete): the room then gives the figure to follow (``BulkAckRoom.unload``). O(1)
        after an observation; ``shrink_loses_batch`` even past the limits."""
        limits = self._derived()[1]
        ranges, above = self._unload_ranges, limits.node_above
        # the close's branch (ledger or node) decides whether batch states are kept
        branch_decides = self._ledger_id is not None and limits.close_batch_read and not limits.node_batch_read
        shrink_loses_batch = branch_decides and (ranges < 0 or ranges > above)
        headroom = self._bulk_headroom if ranges >= 0 else -1
        if headroom < 0:
            return self._room_past_cut(batch_states, shrink_loses_batch)
        if branch_decides:
            # an individual acknowledgement moves the range count by one at most: stay on this side
            headroom = min(headroom, above - ranges if ranges <= above else ranges - above - 1)
        per_batch = 1 + -(-(_BYTES_PER_BATCH_BOUND + batch_words * 10) // _BYTES_PER_ENTRY_BOUND)
        batch_room = max(limits.batch_cap - batch_states, 0)
        if self._unload_keeps_batch:
            return BulkAckRoom(headroom, per_batch, batch_room, None, shrink_loses_batch)
        u = self._figures.unload
        unload = (u.messages, u.entries, u.messages_max, u.entries_max)
        return BulkAckRoom(headroom, per_batch, batch_room, unload, shrink_loses_batch)

    def _room_past_cut(self, batch_states: int, shrink_loses_batch: bool) -> BulkAckRoom:
        """Past the limits: whole-entry acknowledgements of the ledgers the close record's
        long-array cut-off leaves out (``CloseTracker.past_cut``) each add their messages and
        one entry to the unload figure and change nothing else it counts, while the close
        stays on the cursor ledger's branch, keeps every batch state (the cap not passed, and
        read back: an entry acked whole then takes its kept state into its loss) or there is
        none, and the record's acks do not grow (the kept ledgers' words): the figure then
        only grows over the run, every acknowledgement that changes the cursor raising it, as
        the crash total. None else (one at a time). O(1)."""
        none = BulkAckRoom(0, 0, 0, None, shrink_loses_batch)
        tracker = self._tracker
        past = tracker.past_cut() if tracker is not None and self._unload_ranges >= 0 else None
        if tracker is None or past is None:
            return none
        if batch_states:
            on, from_node = self._tracker_batch
            if not (on and (from_node or tracker.to_ledger)):
                return none  # a whole ack of a partial entry: the figure's entries stay
            if batch_states > self._config.max_batch_deleted_index_to_persist:
                return none  # a state gone pulls a lost one in
        cut_ledger, acks = past
        return BulkAckRoom(acks, 1, 0, None, shrink_loses_batch, cut_ledger)

    def _unload_headroom_of(self, snapshot: CursorSnapshot, limits: _Limits, now_only: bool = False) -> int:
        """How many more whole entries can be acknowledged before the close record of
        ``snapshot`` might lose any (-1: it might now): no more ranges than any range cap (an
        acknowledgement adds at most one), none that could go to the ledger in the long-array
        format (its size follows the span: counted by acked entry there; or the range format's
        while the close goes to the metadata store: :meth:`_node_close_room`), no more batch states
        than the batch cap, and a record certainly within the frame, ``jute.maxbuffer`` and
        state-size limits (at most :data:`_BYTES_PER_ENTRY_BOUND` bytes per range, or per
        acked entry in the long-array format, :data:`_BYTES_PER_BATCH_BOUND`
        per batch state plus its words, and the properties; ``limits``: :meth:`_derived`'s).
        O(properties)."""
        batch_states = len(snapshot.batch)
        if batch_states > limits.batch_cap:
            return -1
        # the range format keeps ranges (an acknowledgement adds at most one); the long-array
        # format's size follows the acknowledged entries' span: counted by entry
        acked = snapshot.acked.cardinality()
        ranges = snapshot.acked.size() if limits.range_format else acked
        size = _BYTES_PER_RECORD_BOUND + ranges * _BYTES_PER_ENTRY_BOUND
        if batch_states:
            size += batch_states * _BYTES_PER_BATCH_BOUND + self._figures.batch.words * 10
        if snapshot.properties or snapshot.cursor_properties:
            size += self._properties_bound(snapshot)
        room = (limits.record_room - size) // _BYTES_PER_ENTRY_BOUND
        cap = limits.range_cap
        if cap is not None and cap - ranges < room:
            room = cap - ranges
        if not limits.range_format and limits.node_above >= 0:
            cfg = self._config
            fcfg = self._ml.factory_config
            ml = self._ml
            # a long-array record of every entry produced so far fits the frame: the ledger's
            # branch loses nothing within the cap either (for a change applied now only: more
            # entries may be produced later)
            span = (ml.entries_added_counter // 64 + 1) * 10 + 26 * len(ml.ledger_list) + size
            if not (now_only and span <= min(fcfg.frame_limit, self._max_state)):
                room = min(room, cfg.max_unacked_ranges_to_persist_in_metadata_store - acked)
            room = max(room, self._node_close_room(snapshot, size - ranges * _BYTES_PER_ENTRY_BOUND, cap))
        return room if room >= 0 else -1

    def _properties_bound(self, snapshot: CursorSnapshot) -> int:
        """A bound on the bytes the snapshot's properties take in a record, kept for the very
        property maps of the last call (a snapshot's maps are copies, never changed: the
        cursor hands the same ones until its properties change). O(properties) in C, else O(1)."""
        props, cursor_props = snapshot.properties, snapshot.cursor_properties
        kept = self._properties_bytes
        if kept[0] is not props or kept[1] is not cursor_props:
            size = 16 * len(props) + sum(map(len, props)) if props else 0
            if cursor_props:
                size += 8 * len(cursor_props) + sum(map(len, cursor_props)) + sum(map(len, cursor_props.values()))
            kept = self._properties_bytes = (props, cursor_props, size)
        return kept[2]

    def _node_close_room(self, snapshot: CursorSnapshot, fixed: int, cap: int | None) -> int:
        """In the long-array format, the headroom while the close goes to the metadata store
        (``persistPositionWhenClosing`` without a writable cursor ledger, or with at most
        ``max_unacked_ranges_to_persist_in_metadata_store`` ranges: an acknowledgement moves the
        count by one at most), which writes the range format: no more ranges than its cap and
        a record certainly within ``jute.maxbuffer`` and the state-size limit (``fixed`` bytes
        besides the ranges). O(1)."""
        ranges = snapshot.acked.size()
        fcfg = self._ml.factory_config
        room = (min(fcfg.jute_maxbuffer, self._max_state) - fixed) // _BYTES_PER_ENTRY_BOUND - ranges
        if cap is not None:
            room = min(room, cap - ranges)
        if self._ledger_id is not None and (cap is None or cap > 0):
            room = min(room, self._config.max_unacked_ranges_to_persist_in_metadata_store - ranges)
        return room

    def _built_close_held(self, snapshot: CursorSnapshot) -> Held:
        """What a recovery after a close of ``snapshot`` now reads back, from the record the
        close path would write (built, not written; counts nothing). O(state)."""
        counting = self._counting
        self._counting = False
        try:
            if self._closes_to_ledger(snapshot):
                payload, built = self._position_info(snapshot)
                if not (self._rules.over_frame_fails and not _fits(payload, self._ml.factory_config.frame_limit)):
                    held = self._held_of(built, for_restart=True)
                    assert held is not None
                    return held
            data, built = self._info_record(snapshot, NO_LEDGER, with_acks=True)
            if self._rules.over_jute_fails and len(data) > self._ml.factory_config.jute_maxbuffer:
                stored = self._stored  # the close fails: the last record stands
            else:
                stored = built
            held = self._held_of(stored, for_restart=True)
            return held if held is not None else Held(snapshot.mark_delete, 0, 0)
        finally:
            self._counting = counting

    def _held_of(self, stored: _Stored | None, for_restart: bool) -> Held | None:
        """What a recovery reads back from ``stored`` under the reader's rules (``restart_as``
        for the restart figures, else this store's own). O(batch states) for a record whose
        acks its build counted (:class:`_Known`), else O(ranges) + O(span / 64) of long
        arrays."""
        if stored is None:
            return None
        if stored.state is None:
            return stored.held
        reader = self._reader(for_restart)
        state = stored.state
        known = stored.known
        if known is not None and known.acks is not None:
            entries, extra = known.acks  # range format: read alike by every reader
        else:
            entries, extra = self._acks_held(state, reader)
        kept = None if known is None else known.batch
        if kept is None or not _reads_batch(stored.from_node, reader):
            batch = _batch_read(state, stored.from_node, reader, kept)
        else:  # one mapping per tuple of kept states: the figures see the same record's states
            last = self._kept_read
            if last[0] is not kept:
                last = self._kept_read = (kept, _batch_read(state, stored.from_node, reader, kept))
            batch = last[1]
        return Held(Position(*state.mark_delete), entries, extra, batch)

    def _acks_held(self, state: PersistedCursorState, reader: _Reader) -> tuple[int, int]:
        """The acknowledged entries a recovery by ``reader`` reads from ``state`` and their
        messages beyond one. O(ranges) + O(span / 64) of long arrays."""
        counts = self._ml.entry_messages
        ranges, long_arrays = _acks_read(state, reader)
        entries = extra = 0
        if ranges is not None and ranges.size:
            entries += int((ranges.upper_entry - ranges.lower_entry).sum())
            if counts.batched:
                same = ranges.lower_ledger == ranges.upper_ledger
                ledgers, lowers, uppers = ranges.lower_ledger[same], ranges.lower_entry[same], ranges.upper_entry[same]
                order = np.argsort(ledgers, kind="stable")  # one slice per ledger, no mask each
                ledgers, lowers, uppers = ledgers[order], lowers[order] + 1, uppers[order]
                cuts = [0, *(np.flatnonzero(np.diff(ledgers)) + 1).tolist(), len(ledgers)]
                for a, b in itertools.pairwise(cuts):
                    ledger_id = int(ledgers[a])
                    if a < b and counts.has(ledger_id):
                        extra += counts.extra_in_runs(ledger_id, lowers[a:b], uppers[a:b])
        for ledger_id, words in long_arrays.items():
            flat = np.ascontiguousarray(words, dtype=np.int64)
            for start in range(0, len(flat), _WORDS_PER_STEP):  # bounded memory for big states
                bits = np.unpackbits(flat[start : start + _WORDS_PER_STEP].view(np.uint8), bitorder="little")
                ids = np.flatnonzero(bits)
                entries += len(ids)
                if counts.batched:
                    ids += start * 64
                    extra += counts.extra_in_runs(int(ledger_id), ids, ids)
        return entries, extra

    def _reader(self, for_restart: bool) -> _Reader:
        """Who recovers: the ``restart_as`` version with its own batch-index default (for the
        restart figures, when set), else this store's rules and settings."""
        readers = self._derived()[0]
        return readers[2] if for_restart else readers[1]

    @property
    def _rules(self) -> PulsarVersion:
        return self._derived()[0][0]

    def _derived(self) -> tuple[tuple[PulsarVersion, _Reader, _Reader], _Limits]:
        """The rules row of the settings in force, this store's reader and the restart
        figures', and the :class:`_Limits` of those settings, derived once per settings object
        (again when it changes: ``ManagedLedger.set_config``)."""
        cfg = self._config
        cached = self._rules_cache
        if cached is not None and cached[0] is cfg:
            return cached[1]
        rules = rules_for(cfg.pulsar_rules)
        own = _Reader(rules, cfg.deletion_at_batch_index_level_enabled)
        restart = own
        if cfg.restart_as is not None:
            row = pulsar_version(cfg.restart_as)
            restart = _Reader(row, row.defaults.get("deletion_at_batch_index_level_enabled", "true") == "true")
        fcfg = self._ml.factory_config
        limit = self._range_limit()
        limits = _Limits(
            cfg.max_batch_deleted_index_to_persist,
            cfg.effective_ack_format == "range",
            limit,
            min(fcfg.frame_limit, fcfg.jute_maxbuffer, self._max_state),
            restart.batch and cfg.deletion_at_batch_index_level_enabled,
            restart.rules.batch_indexes_read_from_metadata_store,
            cfg.max_unacked_ranges_to_persist_in_metadata_store,
            fcfg.frame_limit,
            self._chunk_size(),
            None if limit is None or limit < 0 else limit + (1 if cfg.unacked_ranges_limit_off_by_one else 0),
            (rules.long_array_cutoff, limit) if cfg.effective_ack_format == "long_array" else None,
            (min(fcfg.jute_maxbuffer, self._max_state), min(fcfg.frame_limit, self._max_state)),
        )
        derived = ((rules, own, restart), limits)
        self._rules_cache = (cfg, derived)
        return derived

    @property
    def _pulsar(self) -> bool:
        """Pulsar's own order of writes (a preset is in force), rather than mledger's."""
        return self._config.pulsar_rules is not None

    # -- internals --------------------------------------------------------------------------
    def _rollover_due(self) -> bool:
        if self._ledger_entries >= self._config.metadata_max_entries_per_ledger:
            return True
        age_ms = self._ml.clock.now_ms() - self._ledger_created_ms
        return age_ms > self._config.ledger_rollover_timeout * 1000

    def _switch_ledger(
        self,
        snapshot: CursorSnapshot,
        pending: bool,
        payload: tuple[_Payload, _Stored] | None = None,
    ) -> bool:
        """A new cursor ledger with the state in it, then the node pointing at it, then the old
        ledger goes (``createNewMetadataLedger`` -> ``switchToNewLedger``). Under a Pulsar
        version's rules, the mark-delete that was ``pending`` (a persist in ``NoLedger``) is
        then appended again (``flushPendingMarkDeletes``), and a first write the bookie refuses
        runs the over-frame sequence: the metadata store takes the state, the node is still
        pointed at the new, empty ledger (a crash now recovers the mark-delete alone,
        ``recoverFromLedger`` with LAC < 0), and the pending write fails and falls back again.
        ``payload``: the state already encoded (mledger's own rollover reuses it)."""
        new_id = self._store.create_ledger()
        try:
            self._ledger_entries = 0
            data, built = payload if payload is not None else self._position_info(snapshot)
            written = self._append_state(new_id, data, built)
            if not written and not self._write_info(snapshot, NO_LEDGER):  # persistPositionToMetaStore
                self._store.delete_ledger(new_id)
                return False
            if not self._write_info(snapshot, new_id, with_acks=False):
                self._store.delete_ledger(new_id)
                return False
        except MLedgerError:
            self._store.delete_ledger(new_id)
            raise
        self._switch_to(new_id)
        if written:
            if pending and self._pulsar:
                self._append_state(new_id, *self._position_info(snapshot))
            return True
        # The bookie refused the state: the node points at an empty ledger until the pending
        # mark-delete's own write fails and falls back again.
        held = self._held_of(self._stored, for_restart=True)
        assert held is not None
        self._figures.instant(snapshot, held, self._ml.clock.now_ms())
        if pending:
            data, built = self._position_info(snapshot)
            if not self._append_state(new_id, data, built):
                self._write_info(snapshot, NO_LEDGER)
        return True

    def _switch_to(self, new_id: int) -> None:
        old = self._ledger_id
        self._ledger_id = new_id
        self._ledger_created_ms = self._ml.clock.now_ms()
        self._stats.cursor_ledger_id = new_id
        for stale in (old, self._stale_ledger_id):
            if stale is not None and stale != new_id:
                self._store.delete_ledger(stale)
        self._stale_ledger_id = None

    def _forget_ledger(self, delete: bool) -> None:
        if self._ledger_id is not None and delete:
            self._store.delete_ledger(self._ledger_id)
        self._ledger_id = None
        self._ledger_entries = 0
        self._stats.cursor_ledger_id = NO_LEDGER

    def _append_state(self, ledger_id: int, payload: _Payload, built: _Stored) -> bool:
        """Append one state (its PIP-381 parts when chunking is in force); False when, under a
        Pulsar version's rules, a bookie refuses it (an entry above the frame limit)."""
        limits = self._derived()[1]
        max_size = limits.chunk_size
        parts: list[_Payload]
        if max_size is not None:
            # Compression only for states that would be chunked: small states stay plain
            # single entries that any Pulsar version reads.
            ctype = "NONE" if _fits(payload, max_size) else self._config.cursor_info_compression_type
            parts = list(pack_entries(bytes(payload), max_size, ctype))
        else:
            parts = [payload]
        frame = limits.frame_limit
        if not all(_fits(part, frame) for part in parts):
            self._note_over_limit(max(map(len, parts)), frame)
            if self._rules.over_frame_fails:
                return False
        self._store.append_many(ledger_id, parts)  # type: ignore[arg-type]  # lazy_entries: unsized records
        self._ledger_entries += len(parts)
        self._count_write(len(parts))
        self._state_record = payload
        self._last_appended = (ledger_id, built)
        if self._node_ledger == ledger_id:
            self._stored = self._last_appended[1]
        return True

    def _count_write(self, entries: int) -> None:
        s = self._stats
        s.persist_count += 1
        s.persist_entries_written += entries
        s.last_persist_chunks = entries

    def _write_info(self, snapshot: CursorSnapshot, ledger_id: int, with_acks: bool = True) -> bool:
        """Write ``ManagedCursorInfo`` (pointing at ``ledger_id``, -1 for none) for ``snapshot``;
        False when, under a Pulsar version's rules, ZooKeeper refuses it (above
        ``jute.maxbuffer``): the node stays as it was."""
        data, built = self._info_record(snapshot, ledger_id, with_acks)
        jute = self._ml.factory_config.jute_maxbuffer
        self._note_over_limit(len(data), jute)
        if len(data) > jute and self._rules.over_jute_fails:
            return False
        expected = -1 if self._info_version is None else self._info_version
        self._info_version = self._store.put(self._path, data, expected)
        self._node_ledger = ledger_id
        if ledger_id == NO_LEDGER:
            self._state_record = data
            self._stored = built
        elif self._last_appended is not None and self._last_appended[0] == ledger_id:
            self._stored = self._last_appended[1]
        else:  # a ledger with nothing in it: recoverFromLedger rolls back to the node's mark-delete
            self._stored = _Stored(PersistedCursorState(mark_delete=snapshot.mark_delete), from_node=True)
        return True

    def _info_record(self, snapshot: CursorSnapshot, ledger_id: int, with_acks: bool) -> tuple[bytes, _Stored]:
        """``ManagedCursorInfo`` of ``snapshot`` as stored (compressed), and as the record a
        recovery would read."""

        def encode(build: _Build) -> bytes:
            build.state.cursors_ledger_id = ledger_id
            return encode_managed_cursor_info(build.state)

        raw, build = self._bounded(snapshot, for_info=True, with_acks=with_acks, lazy=False, encode=encode)
        fcfg = self._ml.factory_config
        ctype = parse_compression_type(fcfg.managed_cursor_info_compression_type)
        data = compress_metadata(raw, ctype, fcfg.managed_cursor_info_compression_threshold_in_bytes, "cursor")
        return data, build.stored(from_node=True)

    def _position_info(self, snapshot: CursorSnapshot, lazy: bool = True) -> tuple[_Payload, _Stored]:
        """``PositionInfo`` of ``snapshot``, encoded (for a ``lazy_entries`` store: bounded, and
        sized and encoded when asked), and as the record a recovery would read. ``lazy``
        False: the record's state holds its ranges whatever the store (to be decoded)."""
        lazy = lazy and self._lazy_entries

        def encode(build: _Build) -> _Payload:
            state = build.state
            if lazy:
                runs = build.runs if state.ranges is None else None
                return PositionInfoEntry(state, self._range_bytes, runs, snapshot.acked.ledger_size)
            ranges = state.ranges
            if ranges is None:
                return encode_position_info(state)
            return encode_position_info(state, ranges_bytes=self._range_bytes.encode(ranges))

        data, build = self._bounded(snapshot, for_info=False, with_acks=True, lazy=lazy, encode=encode)
        return data, build.stored(from_node=False)

    def _note_over_limit(self, size: int, limit: int) -> None:
        if size > limit and self._stats.state_over_limit_at_ms < 0:
            log.warning(
                "cursor %s: a %d-byte state record exceeds the %d-byte limit of its store; %s",
                self._path,
                size,
                limit,
                "it is refused" if self._pulsar else "it would be lost",
            )
            self._stats.state_over_limit_at_ms = self._ml.clock.now_ms()

    def _decompress(self, data: bytes) -> bytes | bytearray:
        return decompress_metadata(data, self._max_state)

    def _chunk_size(self) -> int | None:
        cfg = self._config
        if not cfg.pip381_chunking:
            return None
        return min(cfg.persistent_unacked_ranges_max_entry_size, self._store.max_entry_size)

    def _range_limit(self) -> int | None:
        """``max_unacked_ranges_to_persist``; 0 with PIP-381 chunking means "no limit"."""
        cfg = self._config
        limit = cfg.max_unacked_ranges_to_persist
        if limit == 0 and cfg.pip381_chunking:
            return None
        return limit

    def _bounded(
        self,
        snapshot: CursorSnapshot,
        for_info: bool,
        with_acks: bool,
        lazy: bool,
        encode: Callable[[_Build], _P],
    ) -> tuple[_P, _Build]:
        """The snapshot's record, encoded, within the limits: the range and batch limits, and
        ``max_state_size_in_bytes`` (a reader refuses a larger state, so the acks nearest the
        mark-delete that fit are kept and the rest counted as truncated, like the range limit).

        One build of the record, as Pulsar's builders run once per record written: what it
        dropped is counted (:meth:`_note_build`). ``lazy``: the range format's ranges stay the
        set's runs (:class:`~mledger.core.RangeRuns`, ``_Build.runs``), not joined into the
        state's arrays. The size check is O(1) for a state that fits;
        a state over the limit is re-encoded with proportionally fewer ranges (then batch
        states) until it fits, a few rounds. Raises ``EntryTooLargeError`` when even a state
        without acks does not fit (properties alone above the limit)."""
        range_limit = self._range_limit()
        batch_limit = self._config.max_batch_deleted_index_to_persist
        limited = False
        while True:
            build = self._record(snapshot, for_info, with_acks, range_limit, batch_limit, lazy)
            data = encode(build)
            if _fits(data, self._max_state):
                break
            ratio = self._max_state / len(data) * 0.9
            kept_ranges = self._kept_acks(snapshot, for_info, range_limit) if with_acks else 0
            kept_batch = min(batch_limit, len(snapshot.batch))
            if kept_ranges > 0:
                range_limit = min(int(kept_ranges * ratio), kept_ranges - 1)
            elif kept_batch > 0:
                batch_limit = min(int(kept_batch * ratio), kept_batch - 1)
            else:
                raise EntryTooLargeError(
                    f"cursor {self._path}: {len(data)} bytes of properties exceed max_state_size_in_bytes "
                    f"{self._max_state}"
                )
            if not limited and not self._size_limited:
                log.warning(
                    "cursor %s: a %d-byte state exceeds max_state_size_in_bytes %d; the acks "
                    "beyond it are kept in memory only",
                    self._path,
                    len(data),
                    self._max_state,
                )
            limited = True
        self._size_limited = limited
        if with_acks and self._counting:  # a node written beside the cursor ledger builds no acks
            self._note_build(build)
        return data, build

    def _kept_acks(self, snapshot: CursorSnapshot, for_info: bool, range_limit: int | None) -> int:
        """What ``range_limit`` counts in the format in force: ranges, or acked entries for the
        long-array format (Pulsar's cardinality cut-off)."""
        acked = snapshot.acked
        fmt = "range" if for_info else self._config.effective_ack_format
        total = acked.cardinality() if fmt == "long_array" else acked.size()
        return total if range_limit is None else min(range_limit, total)

    def _record(
        self,
        snapshot: CursorSnapshot,
        for_info: bool,
        with_acks: bool,
        range_limit: int | None,
        batch_limit: int,
        lazy: bool = False,
    ) -> _Build:
        """The snapshot as a record in the configured format, truncated to the limits given,
        with what each builder dropped (``lazy``: ranges left as the set's runs, see
        :meth:`_bounded`) and what a recovery holds of it (:class:`_Known`).

        The acks, as ``persistPositionToLedger`` builds them: the long-array format
        (``toRanges(max)``, with the cut-off of the rules in force) unless it left no ledger,
        then the range format (``buildIndividualDeletedMessageRanges``: the first N ranges, N + 1
        before apache/pulsar#25548); a ``ManagedCursorInfo`` (``persistPositionMetaStore``) always
        in the range format. Batch states (``buildBatchEntryDeletionIndexInfoList``): the first
        ``batch_limit`` in position order, with batch-index acks on."""
        md, acked, batch = snapshot.mark_delete, snapshot.acked, snapshot.batch
        cfg = self._config
        state = PersistedCursorState(
            mark_delete=md,
            properties=dict(snapshot.properties),
            cursor_properties=dict(snapshot.cursor_properties) if for_info else {},
        )
        if for_info:
            state.last_active = self._ml.clock.now_ms()
        dropped = 0
        range_builder_dropped = long_array_cut = False
        runs = None
        acks: tuple[int, int] | None = None  # what a recovery holds of the ranges, when known here
        if with_acks and acked:
            fmt = "range" if for_info else cfg.effective_ack_format
            if fmt == "long_array":
                words, dropped = acked.to_long_arrays(range_limit, self._rules.long_array_cutoff)
                state.long_arrays = words
                long_array_cut = bool(words) and dropped > 0
            if fmt != "long_array" or not state.long_arrays:
                # Pulsar writes individualDeletedMessages (ranges) when toRanges left no
                # ledger: even the first ledger has more acked entries than the limit.
                state.long_arrays = None
                if cfg.unacked_ranges_limit_off_by_one and range_limit is not None and range_limit >= 0:
                    range_limit += 1  # before apache/pulsar#25548: one range over the limit
                counts = self._ml.entry_messages
                if lazy and fmt != "auto":  # the set's frozen runs, sized per changed ledger
                    runs = acked.range_runs(range_limit)
                    dropped = runs.dropped
                    acks = runs.entries, _runs_extra(runs, acked, counts)
                else:  # arrays to encode now, from the set's cached runs
                    ledgers, lowers, uppers, dropped = acked.to_range_arrays(range_limit)
                    if fmt == "auto":
                        state.ranges, state.long_arrays = _smaller_per_ledger(acked, ledgers, lowers, uppers)
                    else:
                        state.ranges = RangeArrays(ledgers, lowers, ledgers.copy(), uppers)
                        if not dropped:  # every range of the set: its kept counts
                            acks = acked.cardinality(), acked.extra_messages(counts)
                range_builder_dropped = dropped > 0
        elif not state.long_arrays:
            acks = (0, 0)  # no acks in the record
        dropped_batch = 0
        kept: tuple[tuple[Position, int], ...] = ()
        if cfg.deletion_at_batch_index_level_enabled and batch:
            kept = batch[:batch_limit]
            built = self._batch_built
            if built[0] is not kept:  # records never change their lists: one list per tuple
                built = self._batch_built = (kept, [(p, _words_of(bits)) for p, bits in kept])
            state.batch_deleted = built[1]
            dropped_batch = len(batch) - len(kept)
        known = _Known(acks, kept)
        return _Build(state, dropped, dropped_batch, range_builder_dropped, long_array_cut, runs, known)

    def _note_build(self, build: _Build) -> None:
        """Count one build of a record: what it dropped (``truncated_*``, the last build's and
        the totals), and the builds that dropped something, as Pulsar's #25548 counters count
        them: ``persist_unacked_ranges_truncated`` for the range builder, ``persist_batch_deleted_
        indexes_truncated`` for the batch-index builder, ``persist_long_array_truncated`` for the
        long-array cut-off (which #25548's counter does not see)."""
        s = self._stats
        s.truncated_ranges = build.dropped_ranges
        s.truncated_ranges_total += build.dropped_ranges
        s.truncated_batch_indexes = build.dropped_batch
        s.truncated_batch_indexes_total += build.dropped_batch
        s.persist_unacked_ranges_truncated += build.range_builder_dropped
        s.persist_long_array_truncated += build.long_array_cut
        s.persist_batch_deleted_indexes_truncated += build.dropped_batch > 0
        if not (build.dropped_ranges or build.dropped_batch or self._truncating or self._batch_truncating):
            return  # nothing dropped, now or by the last build: no warning, no flag to clear
        for kind, dropped in (("ranges", build.dropped_ranges), ("batch", build.dropped_batch)):
            flag = "_truncating" if kind == "ranges" else "_batch_truncating"
            if dropped and not getattr(self, flag):
                log.warning(
                    "cursor %s: %d %s beyond the persistence limit are kept in memory only and will be "
                    "redelivered after a restart",
                    self._path,
                    dropped,
                    "ack ranges" if kind == "ranges" else "batch-index states",
                )
            setattr(self, flag, bool(dropped))


class _Counters:
    """:class:`PersistenceStats`' counters, kept up to date in place (field by field the same)."""

    __slots__ = (
        "persisted_state_bytes",
        "persist_count",
        "persist_entries_written",
        "last_persist_chunks",
        "truncated_ranges",
        "truncated_ranges_total",
        "truncated_batch_indexes",
        "truncated_batch_indexes_total",
        "persist_unacked_ranges_truncated",
        "persist_batch_deleted_indexes_truncated",
        "persist_long_array_truncated",
        "state_over_limit_at_ms",
        "cursor_ledger_id",
    )

    persisted_state_bytes: int
    persist_count: int
    persist_entries_written: int
    last_persist_chunks: int
    truncated_ranges: int
    truncated_ranges_total: int
    truncated_batch_indexes: int
    truncated_batch_indexes_total: int
    persist_unacked_ranges_truncated: int
    persist_batch_deleted_indexes_truncated: int
    persist_long_array_truncated: int
    state_over_limit_at_ms: int
    cursor_ledger_id: int

    def __init__(self) -> None:
        defaults = PersistenceStats()
        for name in self.__slots__:
            setattr(self, name, getattr(defaults, name))


class _Limits(NamedTuple):
    """What the observation path reads of the settings in force (``CursorStateStore._derived``)."""

    batch_cap: int
    """``max_batch_deleted_index_to_persist``."""
    range_format: bool
    """The individual-ack format in force is the range format."""
    range_cap: int | None
    """``CursorStateStore._range_limit``."""
    record_room: int
    """The bytes every store takes in one record: the frame, ``jute.maxbuffer`` and the state size."""
    close_batch_read: bool
    """A recovery after a close may read batch states back: the restart reader has batch-index
    acks on, and so do the settings."""
    node_batch_read: bool
    """The restart reader reads the node's batch states (apache/pulsar#26474)."""
    node_above: int
    """``max_unacked_ranges_to_persist_in_metadata_store``."""
    frame_limit: int
    """The largest cursor-ledger entry a bookie takes (``nettyMaxFrameSizeBytes``)."""
    chunk_size: int | None
    """``CursorStateStore._chunk_size``: the PIP-381 part size, None without chunking."""
    close_cap: int | None
    """The ranges the range format keeps: ``range_cap``, one more before apache/pulsar#25548
    (None: all)."""
    long_array: tuple[LongArrayCutoff, int | None] | None
    """The long-array cut-off and its cap when that format is in force (None: ranges)."""
    store_rooms: tuple[int, int]
    """The bytes one record may take in the metadata store and in the cursor ledger (within
    the state-size limit too)."""


class _Known(NamedTuple):
    """What a recovery holds of a record, known when it was built (O(ledgers) from the range
    set's kept counts) rather than read from it (O(ranges))."""

    acks: tuple[int, int] | None
    """The acknowledged entries of its ranges and their messages beyond one; None: read them
    from the record (long arrays)."""
    batch: tuple[tuple[Position, int], ...]
    """Its batch states as ``(position, remaining bits)``."""


class _Build(NamedTuple):
    """One build of a record, what its builders dropped and what a recovery holds of it."""

    state: PersistedCursorState
    dropped_ranges: int
    dropped_batch: int
    range_builder_dropped: bool
    long_array_cut: bool
    runs: RangeRuns | None
    """A lazy build's range-format ranges, as the set's runs (``state.ranges`` is then None)."""
    known: _Known

    def stored(self, from_node: bool) -> _Stored:
        """The record as stored (for the node: ``from_node``)."""
        return _Stored(self.state, from_node, known=self.known)


@dataclass(frozen=True, slots=True)
class _Stored:
    """A record a recovery would read: its state (or, once the figures took it, only what a
    recovery holds of it) and whether it is the node's (-1)."""

    state: PersistedCursorState | None
    from_node: bool
    held: Held | None = None
    known: _Known | None = None
    """What a recovery holds of ``state``, known from its build (None: read from ``state``)."""


class _Read(NamedTuple):
    """A record read back (or built), with the node's cursor properties and where it is."""

    stored: _Stored
    cursor_properties: dict[str, str]
    where: str
    kind: str | None = None
    """``"empty cursor ledger"`` for the LAC < 0 rollback; None: the record's own place."""
    fallback: str | None = None


@dataclass(frozen=True, slots=True)
class _Reader:
    """Who recovers a record: a row of the rules table and its batch-index setting."""

    rules: PulsarVersion
    batch: bool


def _acks_read(state: PersistedCursorState, reader: _Reader) -> tuple[RangeArrays | None, dict[int, np.ndarray]]:
    """The acks a recovery takes from a record: Pulsar's ``recoverIndividualDeletedMessages``
    reads field 3 (ranges) when it is not empty, else field 6 (long arrays); mledger's own
    reader takes both ("auto" states use both, and for Pulsar-written states it is the same)."""
    ranges = state.ranges if state.ranges is not None and state.ranges.size else None
    long_arrays = dict(state.long_arrays or {})
    if reader.rules is not MLEDGER_RULES and ranges is not None:
        long_arrays = {}
    return ranges, long_arrays


def _reads_batch(from_node: bool, reader: _Reader) -> bool:
    """Whether ``reader`` reads a record's batch states back (:func:`_batch_read`)."""
    return reader.batch and (not from_node or reader.rules.batch_indexes_read_from_metadata_store)


def _batch_read(
    state: PersistedCursorState,
    from_node: bool,
    reader: _Reader,
    kept: tuple[tuple[Position, int], ...] | None = None,
) -> dict[Position, int]:
    """The batch states a recovery reads back: with batch-index acks on, from a cursor-ledger
    entry (``recoverFromLedger``), and from the node only where the rules read it
    (``recover`` with ``cursorsLedgerId == -1``: apache/pulsar#26474). ``kept``: the record's
    states as bits, as its build took them (else read from its words)."""
    if not _reads_batch(from_node, reader):
        return {}
    if kept is not None:
        return {position: bits for position, bits in kept if bits}
    batch: dict[Position, int] = {}
    for position, words in state.batch_deleted:
        bits = words_to_ack_set(words)
        if bits:
            batch[Position(*position)] = bits
    return batch


_WORDS_PER_STEP = 1 << 12
"""BitSet words expanded at a time when counting a record's long arrays (256 KiB of bits)."""
_BYTES_PER_RECORD_BOUND = 128
"""At most the bytes of a record's fixed fields (mark-delete, ledger id, last active)."""
_BYTES_PER_ENTRY_BOUND = 48
"""At most the bytes one acknowledged entry adds to a record: a range of its own (two
positions of two varints each, with tags and lengths), or a BitSet word's share."""
_BYTES_PER_BATCH_BOUND = 32
"""At most the bytes of one batch state besides its words (a position, tags, lengths)."""


class _OutsideLedgers(Exception):
    """A stored acknowledgement that points outside every ledger (turned into
    ``StateCorruptedError`` with the ledger, cursor and record named)."""


def _outside(ledger_id: int, entries: int | None) -> str:
    if entries is None:
        return f"lies outside every ledger: the managed ledger has no ledger {ledger_id}"
    return f"lies outside every ledger: ledger {ledger_id} holds entries 0..{entries - 1}"


def _range_problem(ll: int, le: int, ul: int, ue: int, entries: int | None, inverted: bool) -> str:
    stored = f"acknowledged range ({ll}:{le}..{ul}:{ue}] (individualDeletedMessages)"
    if inverted:
        return f"{stored} is empty or inverted"
    if le < -1 or ue > MAX_ENTRY_ID:
        return f"{stored} holds an entry id outside [0, {MAX_ENTRY_ID}]"
    return f"{stored} {_outside(ul, entries)}"


def _runs_extra(runs: RangeRuns, acked: AckRangeSet, counts: EntryMessages) -> int:
    """Messages beyond one of the entries in the kept ranges ``runs`` of ``acked`` (just
    exported from it): the set's kept counts of whole ledgers, the runs of a ledger the limit
    cut. O(ledgers)."""
    if not counts.batched:
        return 0
    if not runs.dropped:
        return acked.extra_messages(counts)
    extra = 0
    for ledger_id, part in zip(runs.ledgers, runs.parts, strict=True):
        if isinstance(part, tuple):  # the ledger the limit cut: its first runs
            extra += counts.extra_in_runs(ledger_id, *part)
        else:
            extra += acked.ledger_extra_messages(ledger_id, counts)
    return extra


def _smaller_per_ledger(
    acked: AckRangeSet, ledgers: np.ndarray, lowers: np.ndarray, uppers: np.ndarray
) -> tuple[RangeArrays, dict[int, np.ndarray]]:
    """``individual_ack_format="auto"``: per ledger, the cheaper of ranges and BitSet words."""
    keep_range = np.ones(len(ledgers), dtype=bool)
    long_arrays: dict[int, np.ndarray] = {}
    if len(ledgers) == 0:
        return RangeArrays.empty(), long_arrays
    breaks = np.flatnonzero(np.diff(ledgers)) + 1
    for idx in np.split(np.arange(len(ledgers)), breaks):
        ledger_id = int(ledgers[idx[0]])
        lo, up = lowers[idx], uppers[idx]
        range_bytes = int(range_record_sizes(ledger_id, lo, up).sum())
        if len(idx) < acked.ledger_size(ledger_id):
            words = _words_for_ranges(lo, up)  # truncated: encode only what is kept
        else:
            words = acked.ledger_words(ledger_id)
        words_bytes = long_list_size(ledger_id, words)
        if words_bytes < range_bytes:
            keep_range[idx] = False
            long_arrays[ledger_id] = words
    kept = RangeArrays(ledgers[keep_range], lowers[keep_range], ledgers[keep_range].copy(), uppers[keep_range])
    return kept, long_arrays


def _words_for_ranges(lowers: np.ndarray, uppers: np.ndarray) -> np.ndarray:
    acked = AckRangeSet()
    for lo, up in zip(lowers.tolist(), uppers.tolist(), strict=True):
        acked.add_range(0, lo + 1, up)
    return acked.ledger_words(0)
