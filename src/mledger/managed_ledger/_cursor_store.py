"""Durable cursor state: Pulsar's two tiers, truncation, PIP-381 chunks, recovery.

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
ledger whose last entry is a complete state (Pulsar moves first and writes later, which can
lose the holes of a crash in between).

Large states (``persistent_unacked_ranges_with_multiple_entries_enabled``) are split into
parts followed by the PIP-381 JSON footer ``{"numParts": N, "length": L}``, all appended in
one store transaction. Recovery reads the last entry; a footer pulls in its parts; a torn or
corrupt tail makes recovery scan backwards for the last complete state (DataStax #282).

What limits drop (``max_unacked_ranges_to_persist``, ``max_batch_deleted_index_to_persist``)
is counted in the cursor's stats and logged once per crossing, never silently; so are the
persists that truncated (Pulsar's #25548 counters).

What a restart would redeliver
------------------------------
The store remembers what its last written state records: the mark-delete and, above it, how
many acknowledged entries the kept ranges (or BitSet words) hold and the kept batch-index ack
sets. After a crash at any moment, a restart recovers exactly that, so the acknowledged
messages the broker would deliver again are the acknowledged entries above the persisted
mark-delete that the record does not hold (each entry counts one) plus, for partially
acknowledged batch entries, the acknowledged batch indexes it does not hold (each index counts
one). The figure is taken after every state change: after each write (what the limits
dropped) and, under throttling, after each change not persisted yet (the cursor calls
:meth:`CursorStateStore.observe`, or :meth:`CursorStateStore.observe_entries_acked` in O(1) after
whole-entry acks only). ``redelivered_after_restart`` is the figure after the last
change, ``redelivered_after_restart_max`` the largest, with the clock time of the change that
reached it. (A write is modelled as done with the change that caused it: the moment between
an ack and the end of its persist is not sampled.) Acks are taken as monotone (a rewind lowers the figure to 0, never
below).

A cursor-ledger entry above the frame limit (``ManagedLedgerFactoryConfig.frame_limit``) or a
``ManagedCursorInfo`` above ``jute_maxbuffer`` is written here as always, but a bookie or
ZooKeeper would refuse it: the first time is recorded (``state_over_limit_at_ms``).

The store sees its cursor only through the :class:`CursorSnapshot` values the cursor hands it,
and returns a :class:`RecoveredCursorState`; the byte formats are :mod:`mledger.codec`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..codec import (
    PersistedCursorState,
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
    AckRangeSet,
    EntryTooLargeError,
    InvalidPositionError,
    LedgerNotFoundError,
    ManagedLedgerConfig,
    MLedgerError,
    Position,
    StateCorruptedError,
    ack_set_to_words,
    words_to_ack_set,
)
from ._cursor_snapshot import CursorSnapshot, RecoveredCursorState
from ._cursor_stats import PersistenceStats
from ._ledger_view import LedgerView, cursor_info_path

__all__ = ["BACKWARD_SCAN_LIMIT", "MAX_STATE_BYTES", "NO_LEDGER", "CursorStateStore"]

log = logging.getLogger(__name__)

NO_LEDGER = -1
MAX_STATE_BYTES = DEFAULT_MAX_STATE_SIZE_IN_BYTES
"""The default bound on one reassembled or decompressed state
(``ManagedLedgerFactoryConfig.max_state_size_in_bytes`` sets it per factory)."""
BACKWARD_SCAN_LIMIT = 1000
"""How many cursor-ledger entries recovery examines when the tail is torn or corrupt."""


@dataclass(frozen=True, slots=True)
class _Recorded:
    """What the last written state records (see "What a restart would redeliver")."""

    mark_delete: Position
    entries: int
    """Acknowledged entries above ``mark_delete`` held by the kept ranges or words."""
    batch: dict[Position, int]
    """Kept batch-index ack sets: position -> remaining (un-acked) index bits."""


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
        self._stats = PersistenceStats()
        # What a restart would redeliver, live (PersistenceStats is built from them on demand):
        # the figure is max(0, entries part) + indexes part, see _redelivered.
        self._redelivered_entries = 0
        self._redelivered_indexes = 0
        self._redelivered_max = 0
        self._redelivered_max_at_ms = -1
        self._recorded: _Recorded | None = None  # what the last written state holds
        self._pending: _Recorded | None = None  # what the record being written holds

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
        stored = self._store.get(self._path)
        if stored is None:
            return None
        self._info_version = stored.version
        node = f"ManagedCursorInfo {self._path}"
        try:
            info = decode_managed_cursor_info(self._decompress(stored.data))
        except StateCorruptedError as exc:
            raise self._corrupt(node, str(exc)) from exc
        if info.cursors_ledger_id == NO_LEDGER:
            return self._to_recovered(info, info.cursor_properties, node)
        ledger_id = info.cursors_ledger_id
        self._stale_ledger_id = ledger_id
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
            fallback = PersistedCursorState(mark_delete=md, cursor_properties=info.cursor_properties)
            return self._to_recovered(fallback, info.cursor_properties, node)
        state, record = found
        return self._to_recovered(state, info.cursor_properties, record)

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

    def _chunk_size(self) -> int | None:
        cfg = self._config
        if not cfg.persistent_unacked_ranges_with_multiple_entries_enabled:
            return None
        return min(cfg.persistent_unacked_ranges_max_entry_size, self._store.max_entry_size)

    def _read_one(self, ledger_id: int, entry_id: int) -> bytes:
        got = self._store.read(ledger_id, entry_id, entry_id)
        if not got:
            raise StateCorruptedError(f"cursor ledger {ledger_id} has no entry {entry_id}")
        return got[0]

    def _to_recovered(
        self, state: PersistedCursorState, cursor_properties: dict[str, str], record: str
    ) -> RecoveredCursorState:
        md = Position(*state.mark_delete)
        if md.entry_id < -1 or md.ledger_id < -1:
            raise self._corrupt(record, f"mark-delete position {md}: an entry id below -1 is no position")
        infos = {li.ledger_id: li.entries for li in self._ml.ledger_infos()}
        acked = AckRangeSet()
        try:
            if state.ranges is not None and state.ranges.size:
                self._add_stored_ranges(acked, state.ranges, md, infos)
            if state.long_arrays:
                # Pulsar reads field 6 only when field 3 is empty; "auto" states use both, and
                # for Pulsar-written states the union is the same thing.
                for ledger_id, words in state.long_arrays.items():
                    self._add_stored_words(acked, int(ledger_id), np.asarray(words, dtype=np.int64), md, infos)
        except (_OutsideLedgers, InvalidPositionError) as exc:
            raise self._corrupt(record, str(exc)) from None
        batch: dict[Position, int] = {}
        if self._config.deletion_at_batch_index_level_enabled:
            for position, words in state.batch_deleted:
                bits = words_to_ack_set(words)
                if bits:
                    batch[Position(*position)] = bits
        self._recorded = _Recorded(md, acked.cardinality(), dict(batch))
        return RecoveredCursorState(
            mark_delete=md,
            acked=acked,
            batch=batch,
            properties=dict(state.properties),
            cursor_properties=dict(cursor_properties),
        )

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
    def initialize(self, snapshot: CursorSnapshot) -> None:
        """Write the node of a new cursor (``cursorsLedgerId = -1``)."""
        self._write_info(snapshot, NO_LEDGER)
        self._commit_recorded(snapshot)

    def persist(self, snapshot: CursorSnapshot) -> None:
        """Persist ``snapshot`` (Pulsar's ``internalMarkDelete`` write path)."""
        self._pending = None
        self._write_state(snapshot)
        self._commit_recorded(snapshot)

    def _write_state(self, snapshot: CursorSnapshot) -> None:
        if self._ledger_id is None:
            if snapshot.mark_delete >= self._ml.last_confirmed_entry:  # nothing after MD
                self._write_info(snapshot, NO_LEDGER)
                self._count_write(0)
                return
            self._switch_ledger(snapshot, self._position_info_bytes(snapshot))
            return
        payload = self._position_info_bytes(snapshot)
        try:
            self._append_state(self._ledger_id, payload)
        except (EntryTooLargeError, LedgerNotFoundError) as exc:
            log.warning("cursor %s: cursor ledger write failed (%s); persisting to the metadata store", self._path, exc)
            self._write_info(snapshot, NO_LEDGER)
            self._forget_ledger(delete=True)
            return
        if self._rollover_due():
            self._switch_ledger(snapshot, payload)

    def persist_cursor_properties(self, snapshot: CursorSnapshot) -> None:
        """Rewrite ManagedCursorInfo with the snapshot's cursor properties (Pulsar's
        ``setCursorProperties``), keeping it pointed at the cursor ledger if there is one."""
        self._pending = None
        if self._ledger_id is None:
            self._write_info(snapshot, NO_LEDGER)
        else:
            self._write_info(snapshot, self._ledger_id, with_acks=False)
        self._commit_recorded(snapshot)

    def close(self, snapshot: CursorSnapshot) -> None:
        """Pulsar's ``persistPositionWhenClosing``: the ledger for big states, else the node."""
        self._pending = None
        self._close_state(snapshot)
        self._commit_recorded(snapshot)

    def _close_state(self, snapshot: CursorSnapshot) -> None:
        ranges = snapshot.acked.size()
        limit = self._range_limit()
        use_ledger = (
            self._ledger_id is not None
            and (limit is None or limit > 0)
            and ranges > self._config.max_unacked_ranges_to_persist_in_metadata_store
        )
        if use_ledger:
            assert self._ledger_id is not None
            try:
                self._append_state(self._ledger_id, self._position_info_bytes(snapshot))
                self._store.seal_ledger(self._ledger_id)
                return
            except MLedgerError as exc:
                log.warning(
                    "cursor %s: closing write to the ledger failed (%s); using the metadata store", self._path, exc
                )
        self._write_info(snapshot, NO_LEDGER)
        self._forget_ledger(delete=True)
        if self._stale_ledger_id is not None:
            self._store.delete_ledger(self._stale_ledger_id)
            self._stale_ledger_id = None

    def delete(self) -> None:
        """Remove the node and every cursor ledger."""
        self._forget_ledger(delete=True)
        if self._stale_ledger_id is not None:
            self._store.delete_ledger(self._stale_ledger_id)
        self._store.delete(self._path)

    def stats(self) -> PersistenceStats:
        """Persistence figures (``CursorStats.persistence``): a frozen snapshot."""
        return replace(
            self._stats,
            redelivered_after_restart=self._redelivered_figure(),
            redelivered_after_restart_max=self._redelivered_max,
            redelivered_after_restart_max_at_ms=self._redelivered_max_at_ms,
        )

    # -- what a restart would redeliver -----------------------------------------------------
    def _redelivered(self, snapshot: CursorSnapshot) -> tuple[int, int]:
        """Acknowledged messages of ``snapshot`` that the last written state does not hold, as
        ``(entries part, batch indexes part)``; the figure is ``max(0, entries) + indexes``."""
        rec = self._recorded
        if rec is None:
            return 0, 0
        md = snapshot.mark_delete
        whole = self._ml.number_of_entries(rec.mark_delete, md, False, True) if md > rec.mark_delete else 0
        entries = whole + snapshot.acked.cardinality() - rec.entries
        indexes = 0
        sizes = snapshot.batch_sizes
        for position, remaining in snapshot.batch:
            kept = rec.batch.get(position)
            if kept is None:
                indexes += (sizes.get(position) or remaining.bit_length()) - remaining.bit_count()
            else:
                indexes += max(0, kept.bit_count() - remaining.bit_count())
        return entries, indexes

    def _redelivered_figure(self) -> int:
        return max(0, self._redelivered_entries) + self._redelivered_indexes

    def observe(self, snapshot: CursorSnapshot, now_ms: int | None = None) -> None:
        """A state change that is not persisted yet (a throttled mark-delete): what a crash
        now would redeliver, counted towards the maximum (stamped ``now_ms``, else the clock's
        time). Reads only; writes nothing."""
        self._redelivered_entries, self._redelivered_indexes = self._redelivered(snapshot)
        self._note_redelivery(now_ms)

    def observe_entries_acked(self, entries: int, now_ms: int) -> None:
        """:meth:`observe` after a change that only acknowledged ``entries`` more whole entries
        with no batch state (the single-ack fast path): the figure's entries part grows by
        exactly that many (mark-delete absorption moves entries from the ranges to below the
        mark-delete, which leaves it unchanged). O(1), allocates nothing; ``now_ms`` is the
        clock reading of the change."""
        if self._recorded is None or not entries:
            return
        self._redelivered_entries = whole = self._redelivered_entries + entries
        value = (whole if whole > 0 else 0) + self._redelivered_indexes
        if value > self._redelivered_max:
            self._redelivered_max = value
            self._redelivered_max_at_ms = now_ms

    def _note_redelivery(self, now_ms: int | None) -> None:
        """The live figure changed; it counts towards the maximum (stamped with ``now_ms``, or a
        clock reading when the caller has none)."""
        value = self._redelivered_figure()
        if value > self._redelivered_max:
            self._redelivered_max = value
            self._redelivered_max_at_ms = self._ml.clock.now_ms() if now_ms is None else now_ms

    def _commit_recorded(self, snapshot: CursorSnapshot) -> None:
        """The write went through: its record is what a restart recovers from now on."""
        if self._pending is not None:
            self._recorded = self._pending
            self._pending = None
        self.observe(snapshot)

    def _note_over_limit(self, size: int, limit: int) -> None:
        if size > limit and self._stats.state_over_limit_at_ms < 0:
            log.warning(
                "cursor %s: a %d-byte state record exceeds the %d-byte limit of its store; it would be lost",
                self._path,
                size,
                limit,
            )
            self._stats = replace(self._stats, state_over_limit_at_ms=self._ml.clock.now_ms())

    # -- internals --------------------------------------------------------------------------
    def _rollover_due(self) -> bool:
        if self._ledger_entries >= self._config.metadata_max_entries_per_ledger:
            return True
        age_ms = self._ml.clock.now_ms() - self._ledger_created_ms
        return age_ms > self._config.ledger_rollover_timeout * 1000

    def _switch_ledger(self, snapshot: CursorSnapshot, payload: bytes) -> None:
        """New ledger with the state in it, then the node, then the old ledger goes."""
        new_id = self._store.create_ledger()
        try:
            self._ledger_entries = 0
            self._append_state(new_id, payload)
            self._write_info(snapshot, new_id, with_acks=False)
        except MLedgerError:
            self._store.delete_ledger(new_id)
            raise
        old = self._ledger_id
        self._ledger_id = new_id
        self._ledger_created_ms = self._ml.clock.now_ms()
        self._stats = replace(self._stats, cursor_ledger_id=new_id)
        for stale in (old, self._stale_ledger_id):
            if stale is not None and stale != new_id:
                self._store.delete_ledger(stale)
        self._stale_ledger_id = None

    def _forget_ledger(self, delete: bool) -> None:
        if self._ledger_id is not None and delete:
            self._store.delete_ledger(self._ledger_id)
        self._ledger_id = None
        self._ledger_entries = 0
        self._stats = replace(self._stats, cursor_ledger_id=NO_LEDGER)

    def _append_state(self, ledger_id: int, payload: bytes) -> None:
        cfg = self._config
        max_size = self._chunk_size()
        if max_size is not None:
            # Compression only for states that would be chunked: small states stay plain
            # single entries that any Pulsar version reads.
            ctype = cfg.cursor_info_compression_type if len(payload) > max_size else "NONE"
            parts = pack_entries(payload, max_size, ctype)
        else:
            parts = [payload]
        self._store.append_many(ledger_id, parts)
        self._note_over_limit(max(len(p) for p in parts), self._ml.factory_config.frame_limit)
        self._ledger_entries += len(parts)
        self._count_write(len(parts))
        self._stats = replace(self._stats, persisted_state_bytes=len(payload))

    def _count_write(self, entries: int) -> None:
        s = self._stats
        self._stats = replace(
            s,
            persist_count=s.persist_count + 1,
            persist_entries_written=s.persist_entries_written + entries,
            last_persist_chunks=entries,
        )

    def _write_info(self, snapshot: CursorSnapshot, ledger_id: int, with_acks: bool = True) -> None:
        """Write ``ManagedCursorInfo`` (pointing at ``ledger_id``, -1 for none) for ``snapshot``."""

        def encode(state: PersistedCursorState) -> bytes:
            state.cursors_ledger_id = ledger_id
            return encode_managed_cursor_info(state)

        raw = self._bounded(snapshot, for_info=True, with_acks=with_acks, encode=encode)
        fcfg = self._ml.factory_config
        ctype = parse_compression_type(fcfg.managed_cursor_info_compression_type)
        data = compress_metadata(raw, ctype, fcfg.managed_cursor_info_compression_threshold_in_bytes, "cursor")
        expected = -1 if self._info_version is None else self._info_version
        self._info_version = self._store.put(self._path, data, expected)
        self._note_over_limit(len(data), fcfg.jute_maxbuffer)
        if ledger_id == NO_LEDGER:
            self._stats = replace(self._stats, persisted_state_bytes=len(data))

    def _decompress(self, data: bytes) -> bytes | bytearray:
        return decompress_metadata(data, self._max_state)

    def _range_limit(self) -> int | None:
        """``max_unacked_ranges_to_persist``; 0 with chunking on means "no limit"."""
        cfg = self._config
        limit = cfg.max_unacked_ranges_to_persist
        if limit == 0 and cfg.persistent_unacked_ranges_with_multiple_entries_enabled:
            return None
        return limit

    def _position_info_bytes(self, snapshot: CursorSnapshot) -> bytes:
        return self._bounded(snapshot, for_info=False, with_acks=True, encode=encode_position_info)

    def _bounded(
        self,
        snapshot: CursorSnapshot,
        for_info: bool,
        with_acks: bool,
        encode: Callable[[PersistedCursorState], bytes],
    ) -> bytes:
        """The snapshot's record, encoded, within the limits: the range and batch limits, and
        ``max_state_size_in_bytes`` (a reader refuses a larger state, so the acks nearest the
        mark-delete that fit are kept and the rest counted as truncated, like the range limit).

        The size check is O(1) for a state that fits; a state over the limit is re-encoded
        with proportionally fewer ranges (then batch states) until it fits, a few rounds.
        Raises ``EntryTooLargeError`` when even a state without acks does not fit (properties
        alone above the limit)."""
        range_limit = self._range_limit()
        batch_limit = self._config.max_batch_deleted_index_to_persist
        limited = False
        while True:
            state, dropped_ranges, dropped_batch = self._record(snapshot, for_info, with_acks, range_limit, batch_limit)
            data = encode(state)
            if len(data) <= self._max_state:
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
        if with_acks:  # a node written beside the cursor ledger carries no acks: nothing dropped
            self._note_truncation("ranges", dropped_ranges)
            self._note_truncation("batch", dropped_batch)
            self._pending = _recorded_by(state)
        return data

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
    ) -> tuple[PersistedCursorState, int, int]:
        """The snapshot as a record in the configured format, truncated to the limits given;
        also returns the ranges and batch states dropped."""
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
        if with_acks and acked:
            fmt = "range" if for_info else cfg.effective_ack_format
            if fmt == "long_array":
                words, dropped = acked.to_long_arrays(range_limit)
                state.long_arrays = words
            if fmt != "long_array" or not state.long_arrays:
                # Pulsar writes individualDeletedMessages (ranges) when toRanges left no
                # ledger: even the first ledger has more acked entries than the limit.
                state.long_arrays = None
                if cfg.unacked_ranges_limit_off_by_one and range_limit is not None and range_limit >= 0:
                    range_limit += 1  # before apache/pulsar#25548: one range over the limit
                ledgers, lowers, uppers, dropped = acked.to_range_arrays(range_limit)
                if fmt == "auto":
                    state.ranges, state.long_arrays = _smaller_per_ledger(acked, ledgers, lowers, uppers)
                else:
                    state.ranges = RangeArrays(ledgers, lowers, ledgers.copy(), uppers)
        dropped_batch = 0
        if cfg.deletion_at_batch_index_level_enabled and batch:
            kept = batch[:batch_limit]
            state.batch_deleted = [(p, ack_set_to_words(bits)) for p, bits in kept]
            dropped_batch = len(batch) - len(kept)
        return state, dropped, dropped_batch

    def _note_truncation(self, kind: str, dropped: int) -> None:
        key, total_key = (
            ("truncated_ranges", "truncated_ranges_total")
            if kind == "ranges"
            else ("truncated_batch_indexes", "truncated_batch_indexes_total")
        )
        self._stats = replace(self._stats, **{key: dropped, total_key: getattr(self._stats, total_key) + dropped})
        if dropped:
            counter = (
                "persist_unacked_ranges_truncated" if kind == "ranges" else "persist_batch_deleted_indexes_truncated"
            )
            self._stats = replace(self._stats, **{counter: getattr(self._stats, counter) + 1})
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


def _recorded_by(state: PersistedCursorState) -> _Recorded:
    """What a written record holds: its mark-delete, acked entries, batch ack sets."""
    entries = 0
    if state.ranges is not None and state.ranges.size:
        entries += int((state.ranges.upper_entry - state.ranges.lower_entry).sum())
    for words in (state.long_arrays or {}).values():
        entries += int(np.unpackbits(np.ascontiguousarray(words, dtype=np.int64).view(np.uint8)).sum())
    batch = {Position(*p): words_to_ack_set(words) for p, words in state.batch_deleted}
    return _Recorded(Position(*state.mark_delete), entries, batch)


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
