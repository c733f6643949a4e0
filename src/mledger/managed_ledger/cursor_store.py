"""Durable cursor state: Pulsar's two tiers, truncation, PIP-381 chunks, recovery.

Theory of operation
-------------------
A durable cursor's state lives in two places, exactly as in Pulsar's ``ManagedCursorImpl``
(REFERENCE.md §2.5):

* the *cursor ledger*: every persisted mark-delete or delete appends one ``PositionInfo``
  entry; only the last entry matters;
* the metadata store node ``/managed-ledgers/<ml>/<cursor>``: a ``ManagedCursorInfo`` that
  either points at the cursor ledger (``cursorsLedgerId``) or, with ``cursorsLedgerId = -1``,
  carries the state itself (small states, closed cursors, ledger failures).

States (:class:`~mledger.managed_ledger.cursor_snapshot.CursorLifecycle`, which the cursor
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
is counted in the cursor's stats and logged once per crossing, never silently.

The store sees its cursor only through the :class:`CursorSnapshot` values the cursor hands it,
and returns a :class:`RecoveredCursorState`; the byte formats are :mod:`mledger.codec`'s.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np

from ..codec.chunking import pack_entries, parse_footer, reassemble, unpack_payload
from ..codec.compression import compress_metadata, decompress_metadata, parse_compression_type
from ..codec.cursor_info import (
    decode_managed_cursor_info,
    decode_position_info,
    encode_managed_cursor_info,
    encode_position_info,
    long_list_size,
    range_record_sizes,
)
from ..codec.cursor_state import PersistedCursorState, RangeArrays
from ..core.config import ManagedLedgerConfig
from ..core.errors import EntryTooLargeError, LedgerNotFoundError, MLedgerError, StateCorruptedError
from ..core.position import Position
from ..core.ranges import AckRangeSet, ack_set_to_words, words_to_ack_set, words_to_entries
from .cursor_snapshot import CursorSnapshot, RecoveredCursorState
from .cursor_stats import PersistenceStats
from .ledger_view import LedgerView, cursor_info_path

__all__ = ["BACKWARD_SCAN_LIMIT", "MAX_STATE_BYTES", "NO_LEDGER", "CursorStateStore"]

log = logging.getLogger(__name__)

NO_LEDGER = -1
MAX_STATE_BYTES = 1 << 31
"""Upper bound on one reassembled or decompressed state (refuses absurd footers/envelopes)."""
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
        self._config = config if config is not None else ledger.config
        self._path = cursor_info_path(ledger.name, cursor_name)
        self._info_version: int | None = None
        self._ledger_id: int | None = None  # the cursor ledger being written (state Open)
        self._stale_ledger_id: int | None = None  # a recovered ledger to delete on the next switch
        self._ledger_entries = 0
        self._ledger_created_ms = 0
        self._truncating = False
        self._batch_truncating = False
        self._stats = PersistenceStats()

    @property
    def ledger_id(self) -> int | None:
        """The cursor ledger being written (the cursor's ``Open`` state), None without one."""
        return self._ledger_id

    # -- recovery ---------------------------------------------------------------------------
    def recover(self) -> RecoveredCursorState | None:
        """Read the stored state; None when the cursor has never been stored."""
        stored = self._store.get(self._path)
        if stored is None:
            return None
        self._info_version = stored.version
        info = decode_managed_cursor_info(self._decompress(stored.data))
        if info.cursors_ledger_id == NO_LEDGER:
            return self._to_recovered(info, info.cursor_properties)
        ledger_id = info.cursors_ledger_id
        self._stale_ledger_id = ledger_id
        state = self._read_ledger_state(ledger_id)
        if state is None:
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
            return self._to_recovered(fallback, info.cursor_properties)
        return self._to_recovered(state, info.cursor_properties)

    def _read_ledger_state(self, ledger_id: int) -> PersistedCursorState | None:
        """The last complete PositionInfo of a cursor ledger, scanning back past a torn tail.

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
                state = self._decode_ledger_entry(ledger_id, entry_id, part_size)
                if entry_id != last:
                    log.warning(
                        "cursor %s: torn or corrupt tail in ledger %d; recovered entry %d",
                        self._path,
                        ledger_id,
                        entry_id,
                    )
                return state
            except (StateCorruptedError, LedgerNotFoundError) as exc:
                log.warning("cursor %s: ledger %d entry %d unusable: %s", self._path, ledger_id, entry_id, exc)
                entry_id -= 1
        return None

    def _decode_ledger_entry(self, ledger_id: int, entry_id: int, part_size: int | None) -> PersistedCursorState:
        raw = self._read_one(ledger_id, entry_id)
        footer = parse_footer(raw, max_parts=max(entry_id, 0), max_length=MAX_STATE_BYTES)
        if footer is None:
            if part_size is not None and not self._could_be_plain(ledger_id, entry_id, raw, part_size):
                raise StateCorruptedError(f"entry {ledger_id}:{entry_id} looks like a part of a torn chunk sequence")
            return decode_position_info(unpack_payload(raw, MAX_STATE_BYTES))
        first = entry_id - footer.num_parts
        if first < 0:
            raise StateCorruptedError(f"footer at {ledger_id}:{entry_id} names {footer.num_parts} parts before it")
        parts = self._store.read(ledger_id, first, entry_id - 1)
        if len(parts) != footer.num_parts:
            raise StateCorruptedError(
                f"footer at {ledger_id}:{entry_id}: {len(parts)} of {footer.num_parts} parts present"
            )
        payload = reassemble(footer, parts)
        return decode_position_info(unpack_payload(payload, MAX_STATE_BYTES))

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

    def _to_recovered(self, state: PersistedCursorState, cursor_properties: dict[str, str]) -> RecoveredCursorState:
        acked = AckRangeSet()
        if state.ranges is not None and state.ranges.size:
            self._add_stored_ranges(acked, state.ranges)
        if state.long_arrays:
            # Pulsar reads field 6 only when field 3 is empty; "auto" states use both, and
            # for Pulsar-written states the union is the same thing.
            for ledger_id, words in state.long_arrays.items():
                acked.add_many(int(ledger_id), words_to_entries(np.asarray(words, dtype=np.int64)))
        batch: dict[Position, int] = {}
        if self._config.deletion_at_batch_index_level_enabled:
            for position, words in state.batch_deleted:
                bits = words_to_ack_set(words)
                if bits:
                    batch[Position(*position)] = bits
        return RecoveredCursorState(
            mark_delete=Position(*state.mark_delete),
            acked=acked,
            batch=batch,
            properties=dict(state.properties),
            cursor_properties=dict(cursor_properties),
        )

    def _add_stored_ranges(self, acked: AckRangeSet, ranges: RangeArrays) -> None:
        """Add stored ``MessageRange``s, splitting those that cross ledgers by the ledger list."""
        same = ranges.lower_ledger == ranges.upper_ledger
        if same.all() and ranges.size:
            ledgers = ranges.lower_ledger
            order_breaks = np.flatnonzero(np.diff(ledgers)) + 1
            for idx in np.split(np.arange(ranges.size), order_breaks):
                ledger_id = int(ledgers[idx[0]])
                starts = ranges.lower_entry[idx] + 1
                ends = ranges.upper_entry[idx]
                lengths = ends - starts + 1
                if (lengths <= 0).any():
                    raise StateCorruptedError(
                        f"cursor {self._path}: empty or inverted stored range in ledger {ledger_id}"
                    )
                long_runs = lengths > 64
                for s, e in zip(starts[long_runs].tolist(), ends[long_runs].tolist(), strict=True):
                    acked.add_range(ledger_id, s, e)
                short_starts, short_lengths = starts[~long_runs], lengths[~long_runs]
                if short_lengths.size:
                    base = np.repeat(short_starts - np.cumsum(short_lengths) + short_lengths, short_lengths)
                    acked.add_many(ledger_id, base + np.arange(int(short_lengths.sum())))
            return
        infos = {li.ledger_id: li.entries for li in self._ml.ledger_infos()}
        for ll, le, ul, ue in zip(*(a.tolist() for a in ranges), strict=True):
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
        self._write_info(self._record(snapshot, for_info=True), NO_LEDGER)

    def persist(self, snapshot: CursorSnapshot) -> None:
        """Persist ``snapshot`` (Pulsar's ``internalMarkDelete`` write path)."""
        if self._ledger_id is None:
            if snapshot.mark_delete >= self._ml.last_confirmed_entry:  # nothing after MD
                self._write_info(self._record(snapshot, for_info=True), NO_LEDGER)
                self._count_write(0)
                return
            self._switch_ledger(snapshot, self._position_info_bytes(snapshot))
            return
        payload = self._position_info_bytes(snapshot)
        try:
            self._append_state(self._ledger_id, payload)
        except (EntryTooLargeError, LedgerNotFoundError) as exc:
            log.warning("cursor %s: cursor ledger write failed (%s); persisting to the metadata store", self._path, exc)
            self._write_info(self._record(snapshot, for_info=True), NO_LEDGER)
            self._forget_ledger(delete=True)
            return
        if self._rollover_due():
            self._switch_ledger(snapshot, payload)

    def persist_cursor_properties(self, snapshot: CursorSnapshot) -> None:
        """Rewrite ManagedCursorInfo with the snapshot's cursor properties (Pulsar's
        ``setCursorProperties``), keeping it pointed at the cursor ledger if there is one."""
        if self._ledger_id is None:
            self._write_info(self._record(snapshot, for_info=True), NO_LEDGER)
        else:
            self._write_info(self._record(snapshot, for_info=True, with_acks=False), self._ledger_id)

    def close(self, snapshot: CursorSnapshot) -> None:
        """Pulsar's ``persistPositionWhenClosing``: the ledger for big states, else the node."""
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
        self._write_info(self._record(snapshot, for_info=True), NO_LEDGER)
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
        """Persistence figures merged into ``CursorStats``."""
        return self._stats

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
            self._write_info(self._record(snapshot, for_info=True, with_acks=False), new_id)
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

    def _write_info(self, state: PersistedCursorState, ledger_id: int) -> None:
        state.cursors_ledger_id = ledger_id
        raw = encode_managed_cursor_info(state)
        fcfg = self._ml.factory_config
        ctype = parse_compression_type(fcfg.managed_cursor_info_compression_type)
        data = compress_metadata(raw, ctype, fcfg.managed_cursor_info_compression_threshold_in_bytes, "cursor")
        expected = -1 if self._info_version is None else self._info_version
        self._info_version = self._store.put(self._path, data, expected)
        if ledger_id == NO_LEDGER:
            self._stats = replace(self._stats, persisted_state_bytes=len(data))

    def _decompress(self, data: bytes) -> bytes:
        return decompress_metadata(data, MAX_STATE_BYTES)

    def _range_limit(self) -> int | None:
        """``max_unacked_ranges_to_persist``; 0 with chunking on means "no limit"."""
        cfg = self._config
        limit = cfg.max_unacked_ranges_to_persist
        if limit == 0 and cfg.persistent_unacked_ranges_with_multiple_entries_enabled:
            return None
        return limit

    def _position_info_bytes(self, snapshot: CursorSnapshot) -> bytes:
        return encode_position_info(self._record(snapshot, for_info=False))

    def _record(self, snapshot: CursorSnapshot, for_info: bool, with_acks: bool = True) -> PersistedCursorState:
        """The snapshot as a record in the configured format, truncated to the limits."""
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
            limit = self._range_limit()
            fmt = "range" if for_info else cfg.effective_ack_format
            if fmt == "long_array":
                words, dropped = acked.to_long_arrays(limit)
                state.long_arrays = words
            else:
                ledgers, lowers, uppers, dropped = acked.to_range_arrays(limit)
                if fmt == "auto":
                    state.ranges, state.long_arrays = _smaller_per_ledger(acked, ledgers, lowers, uppers)
                else:
                    state.ranges = RangeArrays(ledgers, lowers, ledgers.copy(), uppers)
        self._note_truncation("ranges", dropped)
        if cfg.deletion_at_batch_index_level_enabled and batch:
            limit_b = cfg.max_batch_deleted_index_to_persist
            kept = batch[:limit_b]
            state.batch_deleted = [(p, ack_set_to_words(bits)) for p, bits in kept]
            self._note_truncation("batch", len(batch) - len(kept))
        else:
            self._note_truncation("batch", 0)
        return state

    def _note_truncation(self, kind: str, dropped: int) -> None:
        key, total_key = (
            ("truncated_ranges", "truncated_ranges_total")
            if kind == "ranges"
            else ("truncated_batch_indexes", "truncated_batch_indexes_total")
        )
        self._stats = replace(self._stats, **{key: dropped, total_key: getattr(self._stats, total_key) + dropped})
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
