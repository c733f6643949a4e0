"""Why a stop would redeliver what it would: a cursor's crash and unload answers, per rule.

Theory of operation
-------------------
The restart figures (:mod:`._restart_figures`) count what a crash and an unload would redeliver;
this module says which of Pulsar's rules each redelivered acknowledgement falls to, with the
positions, for one cursor at one instant. It works on positions, not counts, from three records
its state store builds or reads back without writing anything
(:meth:`~mledger.managed_ledger.CursorStateStore.explain_records`), each as a recovery under the
``restart_as`` version reads it (:class:`RecordView`):

* **stored**: the record a crash now recovers (the node's state, or the cursor ledger's last
  entry, read back from storage);
* **persist now**: the record a persist of the current state would store
  (``persistPositionToLedger``, or the metadata store without a cursor ledger, or its fallback
  when the entry is over the frame limit);
* **close**: the record the close path would store (``persistPositionWhenClosing``).

A crash redelivers every acknowledged entry above the stored record's mark-delete that the
record does not hold, and the acknowledged batch indexes its batch states lack (the definition
of :func:`~mledger.managed_ledger._restart_figures.redelivered`). What a persist now would
keep is the last second of acknowledgements the limiter or the flush has not written yet
(:attr:`Rule.NOT_PERSISTED`), or, for a partial batch ack with no range in the cursor, what
``asyncDelete`` never schedules (:attr:`Rule.ISSUE_26498`); the rest is lost to a limit, and the
persist-now record says which: the range cap, the long-array cut-off, the frame-limit fallback,
the batch-index cap, batch-index acks off, or batch indexes the metadata store keeps but the
version does not read back. An unload redelivers what the close record lacks, by the same rules,
with the close path's own cap (the metadata store's range format up to
``maxUnackedRangesToPersistInMetadataStore`` ranges) in place of the range cap. Memory and time:
O(span / 64) bitmap words per ledger of the acknowledged state, plus O(batch states).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

import numpy as np

from ..core import AckRangeSet, EntryMessages, Position
from ._ledger_view import LedgerInfo

__all__ = [
    "RecordView",
    "RedeliveryExplanation",
    "Rule",
    "RuleShare",
    "StopExplanation",
    "StopRecords",
    "explain_redelivery",
]

RANGES_SHOWN = 8
"""The redelivered ranges a :class:`RuleShare` lists (the count says how many there are)."""


class Rule(Enum):
    """The reasons a stop redelivers an acknowledged message, in the order they are reported;
    each value names the Java method it follows."""

    RANGE_CAP = "range cap (buildIndividualDeletedMessageRanges: N ranges, N + 1 before #25548)"
    LONG_ARRAY_CUTOFF = "long-array cut-off (toRanges(maxUnackedRangesToPersist))"
    CLOSE_CAP = "close path cap (persistPositionWhenClosing: metadata store, range format, capped)"
    FRAME_LIMIT = "frame-limit fallback (persistPositionToLedger -> metadata store; or a record refused)"
    BATCH_CAP = "batch-index cap (buildBatchEntryDeletionIndexInfoList: maxBatchDeletedIndexToPersist)"
    BATCH_ACKS_OFF = "batch-index acks off (acknowledgmentAtBatchIndexLevelEnabled=false: ack sets ignored)"
    NODE_BATCH_NOT_READ = "metadata-store batch indexes not read back (recover with cursorsLedgerId -1, before #26474)"
    ISSUE_26498 = "#26498 (asyncDelete: a partial batch ack with no range is never persisted by itself)"
    NOT_PERSISTED = "not yet persisted (mark-delete rate limiter, flush every 60 s)"


@dataclass(frozen=True, slots=True)
class RecordView:
    """A record as a recovery reads it back: the mark-delete, the acknowledged entries above it,
    the batch states (position -> remaining un-acknowledged index bits), where it lives
    (``"cursor ledger"``, ``"metadata store"``, ``"empty cursor ledger"``) and why it is
    not where the write meant it to be (``"frame"``: a ``PositionInfo`` over the frame limit went
    to the metadata store; ``"jute"``: the metadata store refused it, the last record stands)."""

    mark_delete: Position
    acked: AckRangeSet
    batch: Mapping[Position, int] = field(default_factory=lambda: MappingProxyType({}))
    where: str = "metadata store"
    fallback: str | None = None
    long_arrays: bool = False
    """The acknowledged entries came from long arrays (``individualDeletedMessageRanges``)."""


@dataclass(frozen=True, slots=True)
class StopRecords:
    """The three records :func:`explain_redelivery` compares (module docstring), and the rules
    that decide how a partial batch ack is treated."""

    stored: RecordView | None
    persist_now: RecordView
    close: RecordView
    batch_acks_on: bool
    """Batch-index acks are on for the writer and the reader (else the broker ignores ack sets)."""
    batch_cap: int
    batch_ack_without_range_persists: bool
    """False under Pulsar's rules (#26498): a partial batch ack with no range is not persisted."""
    node_batches_read: bool
    """The reader reads the metadata store's batch states back (apache/pulsar#26474)."""


@dataclass(frozen=True, slots=True)
class RuleShare:
    """What one rule makes a stop redeliver: acknowledged messages, the entries carrying them,
    and the first :data:`RANGES_SHOWN` ranges in Pulsar's notation (``(3:5..3:7]`` for entries
    3:6 and 3:7; a batch entry as ``3:9 [indexes 0,2]``); ``ranges`` counts them all."""

    rule: Rule
    messages: int
    entries: int
    shown: tuple[str, ...]
    ranges: int


@dataclass(frozen=True, slots=True)
class StopExplanation:
    """One stop (``"crash"`` or ``"unload"``): what it redelivers, per rule (rules with nothing
    left out), and where its record lives."""

    stop: str
    messages: int
    entries: int
    record: str
    rules: tuple[RuleShare, ...]

    def share(self, rule: Rule) -> RuleShare | None:
        """The share of ``rule``, None when it redelivers nothing."""
        return next((s for s in self.rules if s.rule is rule), None)


@dataclass(frozen=True, slots=True)
class RedeliveryExplanation:
    """A cursor's crash and unload answers, per rule (:func:`explain_redelivery`)."""

    cursor: str
    mark_delete: Position
    crash: StopExplanation
    unload: StopExplanation


class _Tally:
    """Redelivered entries and batch indexes collected per rule."""

    def __init__(self) -> None:
        self.messages: dict[Rule, int] = {}
        self.entries: dict[Rule, int] = {}
        self.ranges: dict[Rule, list[str]] = {}

    def add(self, rule: Rule, messages: int, entries: int, ranges: Iterable[str]) -> None:
        if messages <= 0 and entries <= 0:
            return
        self.messages[rule] = self.messages.get(rule, 0) + max(messages, 0)
        self.entries[rule] = self.entries.get(rule, 0) + entries
        self.ranges.setdefault(rule, []).extend(ranges)

    def explanation(self, stop: str, record: str) -> StopExplanation:
        shares = tuple(
            RuleShare(
                rule,
                self.messages[rule],
                self.entries[rule],
                tuple(self.ranges[rule][:RANGES_SHOWN]),
                len(self.ranges[rule]),
            )
            for rule in Rule
            if rule in self.messages
        )
        return StopExplanation(stop, sum(s.messages for s in shares), sum(s.entries for s in shares), record, shares)


def _words(
    acked: AckRangeSet, mark_delete: Position, ledger_id: int, up_to: Position | None, entries: int
) -> np.ndarray:
    """The ledger's entries a record holds (acked or at most its mark-delete), as BitSet words
    over ``entries`` entries; with ``up_to``, also every entry at most ``up_to`` (the cursor's own
    mark-delete)."""
    size = (entries + 63) // 64
    words = np.zeros(size, dtype=np.uint64)
    own = acked.ledger_words(ledger_id).view(np.uint64)[:size]
    words[: len(own)] = own
    for md in (mark_delete, up_to):
        if md is None or ledger_id > md.ledger_id:
            continue
        last = entries - 1 if ledger_id < md.ledger_id else min(md.entry_id, entries - 1)
        if last >= 0:
            full, rest = divmod(last + 1, 64)
            words[:full] = np.uint64(0xFFFFFFFFFFFFFFFF)
            if rest:
                words[full] |= np.uint64((1 << rest) - 1)
    return words


def _runs(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closed runs ``[start, end]`` of the set bits of little-endian words."""
    flat = np.unpackbits(bits.view(np.uint8), bitorder="little").astype(np.int8)
    edges = np.diff(np.concatenate(([0], flat, [0])))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1


def _ranges_text(ledger_id: int, starts: np.ndarray, ends: np.ndarray) -> list[str]:
    return [f"({ledger_id}:{s - 1}..{ledger_id}:{e}]" for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]


def _whole_entries(
    snapshot_md: Position,
    snapshot_acked: AckRangeSet,
    lost_in: RecordView,
    kept_by: RecordView | None,
    ledgers: list[LedgerInfo],
    counts: EntryMessages,
    limit_rule: Rule,
    tally: _Tally,
) -> None:
    """Whole entries acknowledged in the snapshot that ``lost_in`` lacks: those ``kept_by`` holds
    are not yet persisted, the rest fall to ``limit_rule``."""
    for info in ledgers:
        if info.entries <= 0 or info.ledger_id < lost_in.mark_delete.ledger_id:
            continue
        now = _words(snapshot_acked, snapshot_md, info.ledger_id, None, info.entries)
        lost = now & ~_words(lost_in.acked, lost_in.mark_delete, info.ledger_id, None, info.entries)
        if not lost.any():
            continue
        parts = [(limit_rule, lost)]
        if kept_by is not None:
            kept = _words(kept_by.acked, kept_by.mark_delete, info.ledger_id, None, info.entries)
            parts = [(Rule.NOT_PERSISTED, lost & kept), (limit_rule, lost & ~kept)]
        for rule, bits in parts:
            starts, ends = _runs(bits)
            if not len(starts):
                continue
            entries = int((ends - starts + 1).sum())
            messages = entries + (
                counts.extra_in_runs(info.ledger_id, starts, ends) if counts.has(info.ledger_id) else 0
            )
            messages -= _held_of_lost(lost_in.batch, info.ledger_id, bits, counts)
            tally.add(rule, messages, entries, _ranges_text(info.ledger_id, starts, ends))


def _held_of_lost(batch: Mapping[Position, int], ledger_id: int, bits: np.ndarray, counts: EntryMessages) -> int:
    """Indexes a record's batch states hold of entries it otherwise lost (the client skips them)."""
    held = 0
    for position, remaining in batch.items():
        if position.ledger_id != ledger_id or position.entry_id >= len(bits) * 64:
            continue
        word, bit = divmod(position.entry_id, 64)
        if int(bits[word]) >> bit & 1:
            size = counts.of(ledger_id, position.entry_id)
            size = size if size > 1 else max(remaining.bit_length(), 1)
            held += size - (remaining & ((1 << size) - 1)).bit_count()
    return held


def _batch_size(position: Position, remaining: int, sizes: Mapping[Position, int], counts: EntryMessages) -> int:
    size = sizes.get(position) or counts.of(position.ledger_id, position.entry_id)
    return size if size > 1 else max(remaining.bit_length(), 1)


def _lacks(record: RecordView, position: Position, acked_bits: int) -> int:
    """How many of ``acked_bits`` a record's recovery does not hold."""
    if position <= record.mark_delete or record.acked.contains(position.ledger_id, position.entry_id):
        return 0
    stored = record.batch.get(position)
    return acked_bits.bit_count() if stored is None else (acked_bits & stored).bit_count()


def _partial_batches(
    snapshot_batch: tuple[tuple[Position, int], ...],
    sizes: Mapping[Position, int],
    snapshot_has_ranges: bool,
    lost_in: RecordView,
    kept_by: RecordView | None,
    records: StopRecords,
    counts: EntryMessages,
    tally: _Tally,
) -> None:
    """Acknowledged indexes of partially acknowledged batches that ``lost_in`` lacks, each to its
    rule (module docstring)."""
    for i, (position, remaining) in enumerate(snapshot_batch):
        size = _batch_size(position, remaining, sizes, counts)
        acked = ((1 << size) - 1) & ~remaining
        lost = _lacks(lost_in, position, acked)
        if not lost:
            continue
        if not records.batch_acks_on:
            rule = Rule.BATCH_ACKS_OFF
        elif kept_by is not None and not _lacks(kept_by, position, acked):
            no_range = not snapshot_has_ranges and not records.batch_ack_without_range_persists
            rule = Rule.ISSUE_26498 if no_range else Rule.NOT_PERSISTED
        else:
            target = kept_by if kept_by is not None else lost_in
            if target.where == "metadata store" and not records.node_batches_read and target.fallback != "jute":
                rule = Rule.NODE_BATCH_NOT_READ  # loses every state, whatever the cap
            elif i >= records.batch_cap:
                rule = Rule.BATCH_CAP
            elif target.fallback is not None:
                rule = Rule.FRAME_LIMIT
            else:
                rule = Rule.NOT_PERSISTED
        indexes = [str(b) for b in range(size) if acked >> b & 1]
        tally.add(rule, lost, 1, [f"{position} [indexes {','.join(indexes)}]"])


def _limit_rule(record: RecordView, close: bool) -> Rule:
    """The rule that caps a record's whole entries."""
    if record.fallback is not None:
        return Rule.FRAME_LIMIT
    if record.long_arrays:
        return Rule.LONG_ARRAY_CUTOFF
    if close and record.where == "metadata store":
        return Rule.CLOSE_CAP
    return Rule.RANGE_CAP


def explain_redelivery(
    cursor: str,
    mark_delete: Position,
    acked: AckRangeSet,
    batch: tuple[tuple[Position, int], ...],
    batch_sizes: Mapping[Position, int],
    records: StopRecords,
    ledgers: list[LedgerInfo],
    counts: EntryMessages,
) -> RedeliveryExplanation:
    """A cursor's state (mark-delete, acknowledged entries, partial batch states) against the
    records a crash and an unload would recover: what each redelivers, per rule (module
    docstring). Reads only. O(span / 64) per ledger + O(batch states)."""
    crash = _Tally()
    stored = records.stored
    if stored is None:  # nothing stored yet: a crash loses the cursor (Pulsar recreates it)
        stored = RecordView(Position(-1, -1), AckRangeSet(), where="none")
    persist_now = records.persist_now
    _whole_entries(mark_delete, acked, stored, persist_now, ledgers, counts, _limit_rule(persist_now, False), crash)
    _partial_batches(batch, batch_sizes, bool(acked), stored, persist_now, records, counts, crash)
    unload = _Tally()
    close = records.close
    _whole_entries(mark_delete, acked, close, None, ledgers, counts, _limit_rule(close, True), unload)
    _partial_batches(batch, batch_sizes, bool(acked), close, None, records, counts, unload)
    return RedeliveryExplanation(
        cursor,
        mark_delete,
        crash.explanation("crash", stored.where),
        unload.explanation("unload", close.where),
    )
