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
is observed from a snapshot in O(batch states + ledgers) (:meth:`RestartFigures.observe`);
absorption into the mark-delete moves entries from the ranges to below it and changes nothing.
The unload figure is 0 while the state is within every limit
(:meth:`RestartFigures.unload_bounded` decides in O(1)) and is otherwise computed from the close
record at each observation. :func:`redelivered` is the definition, from scratch (tests check the
incremental figures against it after every step).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..core._position import Position
from ._cursor_snapshot import CursorSnapshot
from ._cursor_stats import Redelivery
from ._entry_messages import EntryMessages
from ._ledger_view import LedgerView

__all__ = ["Held", "RestartFigures", "batch_lost", "batch_size_of", "redelivered"]


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
    messages = entries = 0
    kept = held.batch
    sizes = snapshot.batch_sizes
    for position, remaining in snapshot.batch:
        size = batch_size_of(position, remaining, sizes, counts)
        mask = (1 << size) - 1
        acked = mask & ~remaining
        stored = kept.get(position)
        lost = acked if stored is None else acked & stored  # a stored set bit: not acked there
        n = lost.bit_count()
        if n:
            messages += n
            entries += 1
    return messages, entries


def _held_batch_of_full(snapshot: CursorSnapshot, held: Held, counts: EntryMessages) -> tuple[int, int]:
    """Batch states of ``held`` whose entries are acknowledged whole in the snapshot: the
    indexes they hold, as ``(messages held, entries)`` (each such entry is still redelivered,
    less those indexes). O(batch states of the record)."""
    if not held.batch:
        return 0, 0
    md, acked = snapshot.mark_delete, snapshot.acked
    messages = entries = 0
    for position, remaining in held.batch.items():
        if position <= md or acked.contains(position[0], position[1]):
            size = counts.of(position[0], position[1])
            size = size if size > 1 else max(remaining.bit_length(), 1)
            messages += size - (remaining & ((1 << size) - 1)).bit_count()
            entries += 1
    return messages, entries


def _full_above(snapshot: CursorSnapshot, since: Position, ledger: LedgerView) -> tuple[int, int]:
    """Entries acknowledged whole above ``since`` (``since`` <= the snapshot's mark-delete):
    ``(messages, entries)``. O(ledgers) + O(ranges of ledgers with batches)."""
    md, acked = snapshot.mark_delete, snapshot.acked
    counts = ledger.entry_messages
    entries = acked.cardinality()
    extra = counts.extra_in(acked) if counts.batched else 0
    if md > since:
        entries += ledger.number_of_entries(since, md, False, True)
        extra += counts.extra_between(since, md)
    return entries + extra, entries


def redelivered(snapshot: CursorSnapshot, held: Held, ledger: LedgerView) -> tuple[int, int]:
    """The definition: acknowledged messages of ``snapshot`` a recovery of ``held`` redelivers,
    and the entries carrying them, ``(messages, entries)`` (module docstring). Assumes what the
    record holds was acknowledged in the snapshot too (acknowledgements only grow between
    persists). O(batch states + ledgers + ranges of ledgers with batches)."""
    counts = ledger.entry_messages
    full_m, full_e = _full_above(snapshot, held.mark_delete, ledger)
    part_m, part_e = _held_batch_of_full(snapshot, held, counts)
    batch_m, batch_e = batch_lost(snapshot, held, counts)
    messages = full_m - (held.entries + held.extra) - part_m + batch_m
    entries = full_e - held.entries + batch_e
    return max(messages, 0), max(entries, 0)


class RestartFigures:
    """The live crash and unload figures of one cursor state store (module docstring).

    The store calls :meth:`written` after each write with what a crash now recovers,
    :meth:`observe` after each change it does not persist, :meth:`entries_acked` for whole-entry
    acknowledgements of the single-call path, :meth:`instant` for an instant a crash would find
    another record (the empty cursor ledger of the over-frame sequence), and
    :meth:`set_unload` with what the close path would lose. Not thread-safe (the cursor's lock).
    """

    __slots__ = (
        "_base_entries",
        "_base_messages",
        "_batch_entries",
        "_batch_messages",
        "_crash",
        "_held",
        "_ledger",
        "_limits",
        "_unload",
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

    def written(self, snapshot: CursorSnapshot, held: Held, now_ms: int) -> None:
        """A write stored a record of ``snapshot``; a crash now recovers ``held``. The crash
        total falls to what the write lost, which is the limits part until the next write."""
        self._held = held
        messages, entries = self._crash_total(snapshot)
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

    def observe(self, snapshot: CursorSnapshot, now_ms: int) -> None:
        """A change that is not persisted yet: the crash total from the snapshot."""
        if self._held is None:
            return
        messages, entries = self._crash_total(snapshot)
        self._crash.set(messages, entries, now_ms)

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

    def _crash_total(self, snapshot: CursorSnapshot) -> tuple[int, int]:
        held = self._held
        assert held is not None
        counts = self._ledger.entry_messages
        full_m, full_e = _full_above(snapshot, held.mark_delete, self._ledger)
        part_m, part_e = _held_batch_of_full(snapshot, held, counts)
        self._base_messages = full_m - (held.entries + held.extra) - part_m
        self._base_entries = full_e - held.entries
        self._batch_messages, self._batch_entries = batch_lost(snapshot, held, counts)
        return (
            max(self._base_messages + self._batch_messages, 0),
            max(self._base_entries + self._batch_entries, 0),
        )

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
