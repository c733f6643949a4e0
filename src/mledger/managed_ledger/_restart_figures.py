"""What a broker stop would redeliver, per cursor: the crash and unload figures.

Theory of operation
-------------------
After a stop, Pulsar recovers a cursor from one stored record (``recover`` /
``recoverFromLedger``) and its dispatcher delivers every entry above the recovered mark-delete
that the recovered ranges do not hold, whole, less the batch indexes the recovered batch state
marks acknowledged (``filterEntriesForConsumer`` sends them as the ack set; the client skips
them). So the acknowledged messages a stop redelivers are, per entry ``e`` above the recovered
mark-delete, ``|acked(e) minus held(e)|``, where ``acked(e)`` is every message of ``e`` when it is
acknowledged whole in memory and the indexes acknowledged so far when it is a partially
acknowledged batch, and ``held(e)`` every message when the record holds ``e``, the indexes its
batch state marks acknowledged when it holds one, nothing otherwise. An entry counts in the
``entries`` figure when it brings back at least one acknowledged message; a lost whole entry counts
its batch's messages (:class:`~mledger.managed_ledger._entry_messages.EntryMessages`).

Two stops, two records (:class:`Held`, what a record holds once read back under the reader's
rules, ``restart_as``):

* a **crash** recovers the last record stored; its figure's *total* grows with every
  acknowledgement not persisted yet and falls back at each persist to the part the persist lost
  to the limits (range truncation, the long-array cut-off, the batch-index cap, the frame limit
  and its fallback, batch indexes a metadata-store record loses). The *limits* part is that
  part, as of the last persist;
* an **unload** (or clean restart) first persists the whole state through the close path
  (``persistPositionWhenClosing``), so its figure is all limits: what the close record of the
  state at that instant loses.

Each figure is kept with its maximum over every instant and the clock time it was first
reached (:class:`Redelivery`), since a stop can come at any moment.

Kept incrementally, the crash total as ``fully acked above the record's mark-delete - held`` plus
a batch part: whole-entry acknowledgements add their entries and messages in O(1)
(:meth:`RestartFigures.entries_acked`), and a state change with batch states or a mark-delete
is observed from a snapshot in O(batch states + ledgers) (:meth:`RestartFigures.observe`; the
partial acks a broker without batch-index deletion ignores, which carry a journal of their
changes, in O(changed states + ledgers));
absorption into the mark-delete moves entries from the ranges to below it and changes nothing.
The unload figure is 0 while the state is within every limit (the store
decides in O(1)) and otherwise follows what the close record keeps (``CloseTracker``). :func:`redelivered` is the definition, from scratch (tests check the
incremental figures against it after every step).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from types import MappingProxyType

from ..core import EntryMessages, Position
from ._ack_state import IgnoredBatchStates, IgnoredChanges
from ._close_tracker import CloseTracker
from ._cursor_snapshot import CursorSnapshot, RecoveredCursorState
from ._cursor_stats import Redelivery
from ._ledger_view import LedgerView

__all__ = ["Held", "RestartFigures", "batch_lost", "batch_size_of", "redelivered", "redelivered_messages"]


@dataclass(frozen=True, slots=True)
class Held:
    """What a stored record holds once a recovery has read it back."""

    mark_delete: Position
    entries: int
    """Acknowledged entries above ``mark_delete`` in the kept ranges or BitSet words."""
    extra: int
    """Messages beyond one per entry over those entries (batches)."""
    batch: Mapping[Position, int] = field(default_factory=lambda: MappingProxyType({}))
    """Batch states read back: position -> remaining (un-acknowledged) index bits."""


class _Figure:
    """A live :class:`Redelivery`."""

    __slots__ = ("entries", "entries_max", "entries_max_at", "messages", "messages_max", "messages_max_at")

    def __init__(self) -> None:
        self.messages = self.entries = 0
        self.messages_max = self.entries_max = 0
        self.messages_max_at = self.entries_max_at = -1

    def set(self, messages: int, entries: int, now_ms: int) -> None:
        self.messages, self.entries = messages, entries
        if messages > self.messages_max:
            self.messages_max, self.messages_max_at = messages, now_ms
        if entries > self.entries_max:
            self.entries_max, self.entries_max_at = entries, now_ms

    def frozen(self) -> Redelivery:
        return Redelivery(
            self.messages, self.entries, self.messages_max, self.messages_max_at, self.entries_max, self.entries_max_at
        )


def batch_size_of(position: Position, remaining: int, sizes: Mapping[Position, int], counts: EntryMessages) -> int:
    """The batch size of a partially acknowledged entry: given with its acks, else recorded
    with the entry, else its highest remaining index + 1."""
    size = sizes.get(position)
    if size:
        return size
    recorded = counts.of(position[0], position[1])
    return recorded if recorded > 1 else max(remaining.bit_length(), 1)


def batch_lost(snapshot: CursorSnapshot, held: Held, counts: EntryMessages) -> tuple[int, int]:
    """Acknowledged batch indexes of the snapshot's partial entries that ``held`` lacks:
    ``(messages, entries)``. O(batch states)."""
    tally = _BatchTally()
    tally.count(snapshot, held.batch, counts, 0)
    return tally.lost


class _BatchTally:
    """A snapshot's partial entries counted (:meth:`count`), each total as ``(messages,
    entries)``: the acknowledged indexes a record's batch states lack (``lost``), all of them
    (``all``), those of the entries after the first ``cap`` (``tail``); the BitSet words the
    states take (``words``), and the batch sizes given with acks that the ledger's counts do
    not have yet (``unknown_sizes``).

    Kept as running totals: a count against the same record's states (or none, as the last)
    and cap as the last, with no more states than the cap, adds and takes away only the states
    that changed since (a state is its position, its remaining bits and the batch size given
    with its acks; found by set difference against the states counted, in C), O(changed) in
    Python; otherwise it counts every state again. The ignored partial acks
    (:class:`IgnoredBatchStates`) tell which positions changed since the generation last
    counted: only those are looked at, O(changed) in all (:meth:`_count_changed`)."""

    __slots__ = (
        "_at",
        "_batch",
        "_cap",
        "_generation",
        "_journal",
        "_kept",
        "_known",
        "_parts",
        "all",
        "lost",
        "tail",
        "unknown_sizes",
        "words",
    )

    def __init__(self) -> None:
        self.lost = self.all = self.tail = (0, 0)
        self.words = 0
        self.unknown_sizes: list[tuple[Position, int]] = []
        # batch sizes the ledger's counts were seen to hold (their entries are above the
        # mark-delete, so their ledgers' counts stay): not looked up again
        self._known: dict[Position, int] = {}
        # what each state last counted, ((position, remaining), size given), added to the
        # totals: (messages, lost messages, words); against record ``_kept``
        self._parts: dict[object, tuple[int, int, int]] = {}
        self._kept: Mapping[Position, int] | None = None
        self._cap = -1
        self._batch: tuple[tuple[Position, int], ...] = ()  # the tuple last counted
        # ignored partial acks last counted: their journal and generation, each state's
        # (remaining, size given); ``_parts`` is then keyed by position
        self._journal: IgnoredChanges | None = None
        self._generation = -1
        self._at: dict[Position, tuple[int, int | None]] = {}

    def count(self, snapshot: CursorSnapshot, kept: Mapping[Position, int], counts: EntryMessages, cap: int) -> None:
        """O(batch states) in C and O(states changed since the last count) in Python, or
        O(batch states) in Python when the record or the cap changed or the states pass it."""
        batch = snapshot.batch
        same_record = kept is self._kept or not (kept or self._kept)
        if batch is self._batch and same_record and cap == self._cap and len(batch) <= cap:
            # the very states last counted (a state that keeps its tuple until it changes, the
            # ignored acks': their sizes change with them): the same totals; the sizes the ledger
            # lacked were recorded after that count
            self._kept = kept
            self.unknown_sizes = []
            return
        if not same_record and cap == self._cap and len(batch) <= cap and kept == dict(batch):
            # a record of these very states (a write of this snapshot, within the cap): it
            # loses none of them; the other totals are the same record's
            self._held_all(snapshot, kept, counts)
            return
        if isinstance(batch, IgnoredBatchStates):
            if batch.changes is self._journal and same_record and cap == self._cap and len(batch) <= cap:
                changed = batch.changes.since(self._generation) if batch.is_current else None
                if changed is not None:
                    self._count_changed(batch, changed, snapshot.batch_sizes, kept, counts)
                    return
        elif self._journal is None and cap == self._cap and len(batch) <= cap and same_record:
            self._count_diff(snapshot, kept, counts)
            return
        self._recount(snapshot, kept, counts, cap, list(map(snapshot.batch_sizes.get, map(_first, batch))))

    def _count_diff(self, snapshot: CursorSnapshot, kept: Mapping[Position, int], counts: EntryMessages) -> None:
        """:meth:`count` against the same record and cap, the states found changed by set
        difference against those counted (in C). O(batch states) in C, O(changed) in Python."""
        batch = snapshot.batch
        sizes = list(map(snapshot.batch_sizes.get, map(_first, batch)))
        parts = self._parts
        states = set(zip(batch, sizes, strict=True))
        came = states - parts.keys()
        gone = parts.keys() - states
        self._batch = batch
        self._kept = kept  # the same record's states, or none in either
        self._replace(gone, [(state, state) for state in came], snapshot.batch_sizes, kept, counts)

    def _count_changed(
        self,
        batch: IgnoredBatchStates,
        changed: list[Position],
        sizes: Mapping[Position, int],
        kept: Mapping[Position, int],
        counts: EntryMessages,
    ) -> None:
        """:meth:`count` of ignored partial acks against the same record and cap, with
        ``changed``, the positions whose states changed since the generation last counted
        (``batch`` is current: its live states are the tuple's). Exact as the set difference
        is: a position whose (remaining bits, size given) is as counted keeps its share, any
        other gives its old share back and counts its new one. O(changed)."""
        at, live = self._at, batch.live
        gone: list[object] = []
        came: list[tuple[object, tuple[tuple[Position, int], int | None]]] = []
        for position in set(changed):
            remaining, size = live.get(position), sizes.get(position)
            if remaining is not None and at.get(position) == (remaining, size):
                continue  # changed and back: its share as counted
            if at.pop(position, None) is not None:
                gone.append(position)
            if remaining is not None:
                at[position] = (remaining, size)
                came.append((position, ((position, remaining), size)))
        self._replace(gone, came, sizes, kept, counts)
        self._batch, self._kept, self._generation = batch, kept, batch.generation

    def _replace(
        self,
        gone: Iterable[object],
        came: list[tuple[object, tuple[tuple[Position, int], int | None]]],
        sizes: Mapping[Position, int],
        kept: Mapping[Position, int],
        counts: EntryMessages,
    ) -> None:
        """The running totals less the shares counted under the keys ``gone``, plus those of
        the states ``came`` (each with its key in ``_parts``), with no more states than the
        cap. O(changes)."""
        parts = self._parts
        all_m, all_e = self.all
        lost_m, lost_e = self.lost
        words = self.words
        for key in gone:
            n, lost, w = parts.pop(key)
            words -= w
            if n:
                all_m, all_e = all_m - n, all_e - 1
            if lost:
                lost_m, lost_e = lost_m - lost, lost_e - 1
        unknown: list[tuple[Position, int]] = []
        for key, state in came:
            n, lost, w = parts[key] = self._part(state, sizes, kept, counts, unknown)
            words += w
            if n:
                all_m, all_e = all_m + n, all_e + 1
            if lost:
                lost_m, lost_e = lost_m + lost, lost_e + 1
        self.all, self.lost, self.words = (all_m, all_e), (lost_m, lost_e), words
        self.tail = (0, 0)  # no more states than the cap
        self.unknown_sizes = sorted(unknown)  # in position order, as a full count finds them

    def _held_all(self, snapshot: CursorSnapshot, kept: Mapping[Position, int], counts: EntryMessages) -> None:
        """:meth:`count` against a new record ``kept`` that holds every state of the snapshot
        as it is (so none loses an index): the other totals as against the last record, then
        every state's lost share 0. O(changed states), and O(states) at C speed."""
        if len(self._known) > 2 * len(snapshot.batch) + 64:  # as _recount
            self._known.clear()
        if snapshot.batch is self._batch:
            self.unknown_sizes = []
        else:  # the changed states, counted against the new record (which loses none of them)
            self._kept = kept
            self.count(snapshot, kept, counts, self._cap)
        if self.lost[1]:
            self._parts = {state: (n, 0, w) for state, (n, _, w) in self._parts.items()}
        self.lost = (0, 0)
        self._kept = kept

    def _recount(
        self,
        snapshot: CursorSnapshot,
        kept: Mapping[Position, int],
        counts: EntryMessages,
        cap: int,
        given: list[int | None],
    ) -> None:
        """Every state counted again (``given``: the size given with each state's acks).
        O(batch states)."""
        lost_m = lost_e = all_m = all_e = tail_m = tail_e = words = 0
        sizes = snapshot.batch_sizes
        unknown: list[tuple[Position, int]] = []
        if len(self._known) > 2 * len(snapshot.batch) + 64:  # forget the entries acked whole since
            self._known.clear()
        parts: dict[object, tuple[int, int, int]] = {}
        for i, state in enumerate(zip(snapshot.batch, given, strict=True)):
            n, lost, w = parts[state] = self._part(state, sizes, kept, counts, unknown)
            words += w
            if not n:
                continue
            all_m += n
            all_e += 1
            if i >= cap:
                tail_m += n
                tail_e += 1
            if lost:
                lost_m += lost
                lost_e += 1
        self.lost, self.all, self.tail = (lost_m, lost_e), (all_m, all_e), (tail_m, tail_e)
        self.words = words
        self.unknown_sizes = unknown
        batch = self._batch = snapshot.batch
        self._journal, self._at = None, {}
        if isinstance(batch, IgnoredBatchStates) and batch.is_current:  # kept by position from now
            self._journal, self._generation = batch.changes, batch.generation
            states = zip(batch, given, strict=True)
            self._at = {position: (remaining, size) for (position, remaining), size in states}
            parts = dict(zip(self._at, parts.values(), strict=True))
        self._parts, self._kept, self._cap = parts, kept, cap

    def _part(
        self,
        state: tuple[tuple[Position, int], int | None],
        sizes: Mapping[Position, int],
        kept: Mapping[Position, int],
        counts: EntryMessages,
        unknown: list[tuple[Position, int]],
    ) -> tuple[int, int, int]:
        """One state's share: its acknowledged indexes, those the record lacks, its BitSet
        words; a batch size given with its acks that the ledger's counts lack goes to
        ``unknown``. O(1)."""
        (position, remaining), size = state
        if size and size > 1 and self._known.get(position) != size:
            if counts.of(position[0], position[1]) != size:
                unknown.append((position, size))
            else:
                self._known[position] = size
        if not size:
            size = batch_size_of(position, remaining, sizes, counts)
        acked = ((1 << size) - 1) & ~remaining
        n = acked.bit_count()
        stored = kept.get(position)
        lost = n if stored is None else (acked & stored).bit_count()  # stored set bit: not acked there
        return n, lost, remaining.bit_length() // 64 + 1


_first = itemgetter(0)
_NOTHING_HELD: Mapping[Position, int] = MappingProxyType({})


def _held_batch_of_full(
    snapshot: CursorSnapshot, held: Held, counts: EntryMessages, partial: frozenset[Position] = frozenset()
) -> tuple[int, int]:
    """Batch states of ``held`` whose entries are acknowledged whole in the snapshot: the
    indexes they hold (its batch size recorded with the entry, else its highest remaining
    index + 1), as ``(messages held, entries)`` (each such entry is still redelivered, less
    those indexes). ``partial``: positions of the snapshot's batch states, skipped (a partially
    acknowledged entry is not acknowledged whole). O(batch states of the record); the sizes
    looked up for those entries only."""
    if not held.batch:
        return 0, 0
    md, contains, of = snapshot.mark_delete, snapshot.acked.contains, counts.of
    messages = entries = 0
    for position, remaining in held.batch.items():
        if position in partial:
            continue
        if position <= md or contains(position[0], position[1]):
            size = of(position[0], position[1])
            size = size if size > 1 else max(remaining.bit_length(), 1)
            messages += size - (remaining & ((1 << size) - 1)).bit_count()
            entries += 1
    return messages, entries


def _full_above(snapshot: CursorSnapshot, since: Position, ledger: LedgerView, acked_extra: int) -> tuple[int, int]:
    """Entries acknowledged whole above ``since`` (``since`` <= the snapshot's mark-delete),
    given ``acked_extra``, the messages beyond one of the entries in the snapshot's ranges:
    ``(messages, entries)``. O(ledgers); O(1) in numpy for a span within one ledger."""
    md, acked = snapshot.mark_delete, snapshot.acked
    entries = acked.cardinality()
    extra = acked_extra
    if md > since:
        entries += ledger.number_of_entries(since, md, False, True)
        extra += ledger.entry_messages.extra_between(since, md)
    return entries + extra, entries


def _acked_extra(snapshot: CursorSnapshot, counts: EntryMessages) -> int:
    """Messages beyond one of the entries in the snapshot's ranges (O(ledgers) for a cursor's
    range set, which keeps them: ``AckRangeSet.weigh``)."""
    return snapshot.acked.extra_messages(counts) if counts.batched else 0


def redelivered(snapshot: CursorSnapshot, held: Held, ledger: LedgerView) -> tuple[int, int]:
    """The definition: acknowledged messages of ``snapshot`` a recovery of ``held`` redelivers,
    and the entries carrying them, ``(messages, entries)`` (module docstring). Assumes what the
    record holds was acknowledged in the snapshot too (acknowledgements only grow between
    persists). O(batch states + ledgers + ranges of ledgers with batches)."""
    counts = ledger.entry_messages
    full_m, full_e = _full_above(snapshot, held.mark_delete, ledger, _acked_extra(snapshot, counts))
    part_m, part_e = _held_batch_of_full(snapshot, held, counts)
    batch_m, batch_e = batch_lost(snapshot, held, counts)
    messages = full_m - (held.entries + held.extra) - part_m + batch_m
    entries = full_e - held.entries + batch_e
    return max(messages, 0), max(entries, 0)


def redelivered_messages(
    recovered: RecoveredCursorState, acked: Iterable[tuple[Position, int]]
) -> list[tuple[Position, int]]:
    """The per-message form of :func:`redelivered`: which of the ``acked`` messages
    (``(position, batch index)``, index -1 for an entry of one message) a consumer receives
    again from a cursor recovered as ``recovered`` (``CursorStateStore.recover``), ascending.

    The dispatcher sends every entry above the recovered mark-delete that the recovered ranges
    do not hold, with the batch indexes its recovered batch state marks acknowledged as the
    ack set, which the client skips (``PersistentDispatcherMultipleConsumers`` /
    ``filterEntriesForConsumer``): so a message comes back unless its entry is at or below the
    mark-delete, in the ranges, or it is a batch index the batch state holds. For the
    differential test of a broker restart against the replay, and for a user who wants the ids
    rather than the count. O(messages * log(ranges)).

    >>> from mledger.core import AckRangeSet
    >>> ranges = AckRangeSet(); _ = ranges.add(3, 5)
    >>> state = RecoveredCursorState(Position(3, 2), ranges, {Position(3, 6): 0b100}, {}, {})
    >>> redelivered_messages(state, [(Position(3, 1), -1), (Position(3, 4), -1), (Position(3, 5), -1),
    ...                              (Position(3, 6), 0), (Position(3, 6), 2)])
    [(Position(ledger_id=3, entry_id=4), -1), (Position(ledger_id=3, entry_id=6), 2)]
    """
    md, ranges, batch = recovered.mark_delete, recovered.acked, recovered.batch
    again = []
    for position, index in acked:
        if position <= md or ranges.contains(position.ledger_id, position.entry_id):
            continue
        remaining = batch.get(position)
        if remaining is not None and index >= 0 and not (remaining >> index) & 1:
            continue  # the recovered batch state holds this index: skipped by the client
        again.append((position, index))
    return sorted(again)


class RestartFigures:
    """The live crash and unload figures of one cursor state store (module docstring).

    The store calls :meth:`written` after each write with what a crash now recovers,
    :meth:`observe` after each change it does not persist, :meth:`entries_acked` for whole-entry
    acknowledgements of the single-call path, :meth:`instant` for an instant a crash would find
    another record (the empty cursor ledger of the over-frame sequence), and
    :meth:`set_unload` with what the close path would lose. Not thread-safe (the cursor's lock).
    """

    __slots__ = (
        "_acked_entries",
        "_acked_extra",
        "_base_entries",
        "_base_messages",
        "_batch_all",
        "_batch_entries",
        "_batch_messages",
        "_batch_tail",
        "_crash",
        "_held",
        "_ledger",
        "_limits",
        "_partial",
        "_unload",
        "batch",
    )

    def __init__(self, ledger: LedgerView) -> None:
        self._ledger = ledger
        self._held: Held | None = None
        self._crash = _Figure()
        self._limits = _Figure()
        self._unload = _Figure()
        # crash total = max(base + batch part, 0): the base is the full-entry part, kept
        # incrementally; the batch part changes only with an observed change
        self._base_messages = self._base_entries = 0
        self._batch_messages = self._batch_entries = 0
        # the last snapshot tallied: its acked entries and their extra messages, its batch
        # states' acknowledged indexes (all, and those after the batch cap)
        self._acked_entries = self._acked_extra = 0
        self._batch_all = self._batch_tail = (0, 0)
        self.batch = _BatchTally()
        """The batch states of the snapshot last tallied (the store reads ``words``)."""
        # the positions of the batch states of a snapshot (kept while it is the same tuple)
        self._partial: tuple[tuple[tuple[Position, int], ...], frozenset[Position]] = ((), frozenset())

    @property
    def acked_extra(self) -> int:
        """Messages beyond one of the acked entries of the snapshot last tallied."""
        return self._acked_extra

    @property
    def held(self) -> Held | None:
        """What a crash now recovers (None before anything was stored)."""
        return self._held

    def recovered(self, held: Held) -> None:
        """The cursor was recovered: a crash now recovers ``held`` (the figures are 0 until
        the first change, which observes them)."""
        self._held = held
        self._base_messages = self._base_entries = 0
        self._batch_messages = self._batch_entries = 0

    def written(self, snapshot: CursorSnapshot, held: Held, now_ms: int, batch_cap: int) -> None:
        """A write stored a record of ``snapshot``; a crash now recovers ``held``. The crash
        total falls to what the write lost, which is the limits part until the next write.
        ``batch_cap``: the batch states a record keeps (for :meth:`set_unload_kept`)."""
        self._held = held
        messages, entries = self._tally(snapshot, batch_cap)
        self._crash.set(messages, entries, now_ms)
        self._limits.set(messages, entries, now_ms)

    def instant(self, snapshot: CursorSnapshot, held: Held, now_ms: int) -> None:
        """For an instant a crash would recover ``held`` (then the next write follows): counts
        towards both crash maxima, lost to the limits."""
        messages, entries = redelivered(snapshot, held, self._ledger)
        for figure in (self._crash, self._limits):
            current = (figure.messages, figure.entries)
            figure.set(messages, entries, now_ms)
            figure.messages, figure.entries = current

    def observe(self, snapshot: CursorSnapshot, now_ms: int, batch_cap: int, limits: bool = False) -> None:
        """A change that is not persisted yet: the crash total from the snapshot; with
        ``limits``, one no persist of its own will write (apache/pulsar#26498): the limits
        part is then the crash total too."""
        messages, entries = self._tally(snapshot, batch_cap)
        if self._held is not None:
            self._crash.set(messages, entries, now_ms)
            if limits:
                self._limits.set(messages, entries, now_ms)

    def entries_acked(self, entries: int, messages: int, now_ms: int) -> None:
        """``entries`` more whole entries (holding ``messages``) acknowledged, none of them with
        a batch state: the crash total grows by as much. O(1), allocates nothing."""
        if self._held is None:
            return
        self._base_entries += entries
        self._base_messages += messages
        self._crash.set(
            max(self._base_messages + self._batch_messages, 0), max(self._base_entries + self._batch_entries, 0), now_ms
        )

    def set_unload(self, messages: int, entries: int, now_ms: int) -> None:
        """What the close path would lose now (the unload figure)."""
        self._unload.set(messages, entries, now_ms)

    def set_unload_kept(self, kept: tuple[int, int] | None, keeps_batch: bool, now_ms: int) -> None:
        """The unload figure from what the close record of the snapshot last tallied keeps:
        ``kept`` = (acked entries, their messages beyond one) or None for all of them; the
        first ``batch_cap`` batch states when ``keeps_batch``, else none. O(1)."""
        entries = messages = 0
        if kept is not None:
            entries = self._acked_entries - kept[0]
            messages = entries + self._acked_extra - kept[1]
        batch_m, batch_e = self._batch_tail if keeps_batch else self._batch_all
        self._unload.set(messages + batch_m, entries + batch_e, now_ms)

    def entry_followed(self, messages: int, tracker: CloseTracker, keeps_batch: bool, now_ms: int) -> None:
        """:meth:`entries_acked` for one entry, and the unload figure from ``tracker`` (which
        followed that ack) and the batch states last tallied. O(1), allocates nothing."""
        self._base_entries += 1
        self._base_messages += messages
        if self._held is not None:
            crash = self._crash
            total_m = self._base_messages + self._batch_messages
            total_e = self._base_entries + self._batch_entries
            crash.messages, crash.entries = total_m if total_m > 0 else 0, total_e if total_e > 0 else 0
            if total_m > crash.messages_max:
                crash.messages_max, crash.messages_max_at = total_m, now_ms
            if total_e > crash.entries_max:
                crash.entries_max, crash.entries_max_at = total_e, now_ms
        batch_m, batch_e = self._batch_tail if keeps_batch else self._batch_all
        unload = self._unload
        unload.messages = lost_m = tracker.lost_messages + batch_m
        unload.entries = lost_e = tracker.lost_entries + batch_e
        if lost_m > unload.messages_max:
            unload.messages_max, unload.messages_max_at = lost_m, now_ms
        if lost_e > unload.entries_max:
            unload.entries_max, unload.entries_max_at = lost_e, now_ms

    def set_unload_lost(self, lost: tuple[int, int], keeps_batch: bool, now_ms: int) -> None:
        """The unload figure from ``lost`` = ``(messages, entries)`` of whole entries the close
        record loses, and the batch states last tallied (kept after the first ``batch_cap``
        when ``keeps_batch``, else lost). O(1)."""
        batch_m, batch_e = self._batch_tail if keeps_batch else self._batch_all
        self._unload.set(lost[0] + batch_m, lost[1] + batch_e, now_ms)

    def _tally(self, snapshot: CursorSnapshot, batch_cap: int) -> tuple[int, int]:
        """Count the snapshot once (the crash total against the record held, and what the
        unload figure needs); returns the crash total. Batch sizes given with acks go to the
        ledger's message counts, so that an entry acknowledged whole later still counts its
        batch's messages."""
        ledger = self._ledger
        counts = ledger.entry_messages
        held = self._held
        batch = self.batch
        batch.count(snapshot, _NOTHING_HELD if held is None else held.batch, counts, batch_cap)
        if batch.unknown_sizes:
            for position, size in batch.unknown_sizes:
                ledger.record_entry_messages(position, (size,))
        self._acked_entries = snapshot.acked.cardinality()
        extra = self._acked_extra = _acked_extra(snapshot, counts)
        self._batch_all, self._batch_tail = batch.all, batch.tail
        if held is None:
            return 0, 0
        full_m, full_e = _full_above(snapshot, held.mark_delete, ledger, extra)
        part_m = 0
        if held.batch:
            partial = self._partial_positions(snapshot.batch)
            if not held.batch.keys() <= partial:
                part_m = _held_batch_of_full(snapshot, held, counts, partial)[0]
        base_m = self._base_messages = full_m - (held.entries + held.extra) - part_m
        base_e = self._base_entries = full_e - held.entries
        batch_m, batch_e = self._batch_messages, self._batch_entries = batch.lost
        messages, entries = base_m + batch_m, base_e + batch_e
        return messages if messages > 0 else 0, entries if entries > 0 else 0

    def _partial_positions(self, batch: tuple[tuple[Position, int], ...]) -> frozenset[Position]:
        """The positions of a snapshot's batch states: entries partially acknowledged, so
        neither at or below its mark-delete nor acknowledged whole (``AckState``'s invariant):
        a record's batch state there is of no entry acknowledged whole (:func:`_held_batch_of_full`
        finds none of them). O(1) for the tuple of the last call, else O(batch states) in C."""
        partial = self._partial
        if partial[0] is not batch:
            partial = self._partial = (batch, frozenset(map(_first, batch)))
        return partial[1]

    # -- snapshots ----------------------------------------------------------------------------
    @property
    def crash(self) -> Redelivery:
        """What a crash now would redeliver."""
        return self._crash.frozen()

    @property
    def crash_limits(self) -> Redelivery:
        """The part of :attr:`crash` the last write lost to the limits."""
        return self._limits.frozen()

    @property
    def unload(self) -> Redelivery:
        """What a clean close (unload, clean restart) now would redeliver: all of it limits."""
        return self._unload.frozen()
