"""What the close path's record keeps of a cursor's acknowledged entries, followed ack by ack.

The unload figure (``mledger.managed_ledger._restart_figures``) is what a clean close would lose:
the acknowledged entries beyond what the close record keeps, and the batch states it does not
keep. Past a cap it changes with every acknowledgement, up or down (a new range can push the
last kept range out; an ack that joins two kept ranges pulls the next one in), so its maximum
over every instant needs a value after every ack. :class:`CloseTracker` keeps, for one cursor's
range set, what ``persistPositionWhenClosing`` would keep, and follows a single whole-entry ack
with a few bitmap queries:

* the number of ranges (an ack with no acked neighbour adds one, with two removes one), which
  picks the close's branch (``shouldPersistUnackRangesToLedger``: the cursor ledger past
  ``maxUnackedRangesToPersistInMetadataStore`` ranges, the metadata store otherwise);
* the range format's cap (``buildIndividualDeletedMessageRanges``): the end of the last kept
  range (the boundary) and the entries the kept ranges hold. An ack past the boundary adds a
  lost entry, or extends the last kept range (pulling in the next range when it touches it);
  an ack before it adds a kept entry, and a new range there pushes the last kept one out, a
  joint pulls the next one in;
* the long-array cut-off (``toRanges``), for a close to the cursor ledger in that format: the
  ledgers kept, recounted from the per-ledger counts (O(ledgers)).

The store builds a tracker at each observation, from scratch (O(ledgers + the runs of the
boundary's ledger up to it)) or, when the ledgers up to the last build's boundary hold what they
held then (the range set's :meth:`~mledger.core.AckRangeSet.prefix_token`, proved in
O(those ledgers)), from that build's :class:`Boundary`: the first ``cap`` ranges are then the
same ranges (no range crosses a ledger), so is the end of the last, and so are the entries and
messages they hold while the ledger's message counts keep their generation. Past a small cap
most acknowledgements land after the boundary's ledger. :meth:`CloseTracker.entry_acked`
returns False when it cannot follow an ack (a range count crossing the cap, which moves the
boundary in from nowhere): the store then observes from a snapshot. Not thread-safe (the
cursor's lock).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..core import AckRangeSet, EntryMessages, LedgersToken, LongArrayCutoff

__all__ = ["Boundary", "CloseTracker"]

_BYTES_PER_RANGE = 48
"""At most the bytes of one kept range in a record (two positions of two varints, tags, lengths)."""


class Boundary(NamedTuple):
    """Where the range cap cut a range set at a tracker's build, and what proves it still does
    (module docstring)."""

    cap: int
    weights: EntryMessages
    generation: int
    """``weights.generation`` then: the kept messages hold while it stays."""
    token: LedgersToken
    """The set's :meth:`~mledger.core.AckRangeSet.prefix_token` of the ledgers up to ``end``'s."""
    end: tuple[int, int]
    """The last entry of the last kept range."""
    kept_entries: int
    kept_extra: int


class CloseTracker:
    """What the close record of a range set keeps (module docstring), kept up to date.

    ``range_cap``: the ranges the range format keeps (N, or N + 1 before #25548; None: all);
    ``long_array``: the long-array cut-off and its cap when a close to the cursor ledger writes
    that format (None: it writes ranges); ``ledger_branch_above``: the close writes the cursor
    ledger above this many ranges (None: never, no writable ledger or no ranges persisted);
    ``rooms``: the bytes the acks may take in a record to the metadata store and to the cursor
    ledger (past them the record may not fit its store: :meth:`entry_acked` gives up);
    ``extra``: the range set's extra messages by ``weights`` when the caller has counted them.
    ``boundary``: the last build's :attr:`found`, reused when it still holds.
    :attr:`lost_messages` and :attr:`lost_entries` are what the close record loses now.
    """

    __slots__ = (
        "_acked",
        "_boundary",
        "_cap",
        "_kept_entries",
        "_kept_extra",
        "_la_cap",
        "_la_cut",
        "_la_cutoff",
        "_la_entries",
        "_la_bytes",
        "_la_extra",
        "_ledger_above",
        "_weights",
        "_rooms",
        "card",
        "extra",
        "found",
        "lost_entries",
        "lost_messages",
        "ranges",
    )

    def __init__(
        self,
        acked: AckRangeSet,
        weights: EntryMessages,
        range_cap: int | None,
        long_array: tuple[LongArrayCutoff, int | None] | None,
        ledger_branch_above: int | None,
        rooms: tuple[int, int] = (1 << 62, 1 << 62),
        extra: int | None = None,
        boundary: Boundary | None = None,
    ) -> None:
        self._acked = acked
        self._rooms = rooms
        self._weights = weights
        self._cap = range_cap
        self._ledger_above = ledger_branch_above
        self._la_cutoff: LongArrayCutoff | None = None
        self._la_cap: int | None = None
        if long_array is not None:
            self._la_cutoff, self._la_cap = long_array
        self.ranges = acked.size()
        self.card = acked.cardinality()
        self.extra = acked.extra_messages(weights) if extra is None else extra
        self._boundary: tuple[int, int] | None = None
        self._kept_entries = self._kept_extra = 0
        self._la_entries = self._la_extra = self._la_bytes = 0
        self._la_cut: int | None = None
        self.found: Boundary | None = None
        """Where this build found the cap's cut, for the next build (None: no cut)."""
        self._find_boundary(boundary)
        self._count_long_arrays()
        self.lost_messages, self.lost_entries = self.lost()

    # -- what the close keeps -------------------------------------------------------------------
    @property
    def to_ledger(self) -> bool:
        """Whether the close writes the cursor ledger (else the metadata store)."""
        return self._ledger_above is not None and self.ranges > self._ledger_above

    def kept(self) -> tuple[int, int]:
        """``(entries, messages beyond one)`` the close record keeps now. O(1)."""
        if self._la_cutoff is not None and self.to_ledger and self._la_entries:
            return self._la_entries, self._la_extra
        if self._boundary is None:
            return self.card, self.extra
        return self._kept_entries, self._kept_extra

    def fits(self) -> bool:
        """Whether the close record's acks certainly fit in the room of its store."""
        return self.acks_bytes(_BYTES_PER_RANGE) <= self._rooms[self.to_ledger]

    def acks_bytes(self, per_range: int) -> int:
        """A bound on the bytes of the acks in the close record: ``per_range`` a kept range, or
        the BitSet words of the kept ledgers in the long-array format. O(1)."""
        if self._la_cutoff is not None and self.to_ledger and self._la_entries:
            return self._la_bytes
        kept_ranges = self.ranges if self._cap is None else min(self.ranges, self._cap)
        return kept_ranges * per_range

    def past_cut(self) -> tuple[int, int] | None:
        """``(ledger, acks)`` when the close writes the long-array format and its cut-off leaves
        ``ledger`` and every later one out: a whole-entry acknowledgement of an entry there adds
        its messages to :meth:`lost` and changes nothing kept (``toRanges`` reads only the counts
        of the ledgers before it, and cannot move the mark-delete, whose next entry lies before
        the first acknowledged one, in a kept ledger or earlier), for the next ``acks`` acknowledgements of any kind at least (the
        close stays on the cursor ledger's branch: an acknowledgement moves the range count by
        one at most). None otherwise. O(1)."""
        if self._la_cut is None or not self._la_entries or not self.to_ledger:
            return None
        assert self._ledger_above is not None  # to_ledger
        acks = self.ranges - self._ledger_above - 1
        return (self._la_cut, acks) if acks > 0 else None

    def lost(self) -> tuple[int, int]:
        """``(messages, entries)`` of acknowledged whole entries the close record loses. O(1)."""
        entries, extra = self.kept()
        lost = self.card - entries
        return lost + self.extra - extra, lost

    # -- following acks -----------------------------------------------------------------------
    def entry_acked(self, ledger_id: int, entry_id: int, messages: int) -> bool:
        """The whole entry ``ledger_id:entry_id`` (``messages`` messages) was just added to the
        range set (no mark-delete moved); False when the tracker cannot follow (rebuild it).
        A few O(log) bitmap queries; O(ledgers) in the long-array format."""
        acked = self._acked
        sides = acked.neighbours(ledger_id, entry_id)
        left, right = sides & 1, sides >> 1
        extra = messages - 1
        self.card += 1
        self.extra += extra
        ranges = self.ranges = self.ranges + 1 - left - right
        cap = self._cap
        boundary = self._boundary
        if boundary is None:
            if cap is not None and ranges > cap:
                return False  # the cap is passed now: the boundary comes from a rebuild
        elif ledger_id > boundary[0] or (ledger_id == boundary[0] and entry_id > boundary[1]):
            if ledger_id == boundary[0] and entry_id == boundary[1] + 1:  # the last kept range grows
                end = acked.run_end(ledger_id, entry_id)
                self._kept_entries += end - boundary[1]
                self._kept_extra += self._extra_of(ledger_id, entry_id, end)
                self._boundary = (ledger_id, end)
        else:
            self._kept_entries += 1
            self._kept_extra += extra
            if left and right:  # two kept ranges joined: the next range is kept now
                self._take_next()
            elif not (left or right):  # a new kept range: the last one is out
                self._drop_last()
        if self._boundary is not None and cap is not None and ranges <= cap:
            self._boundary = None  # no more ranges than the cap: everything is kept
        if self._la_cutoff is not None:
            self._count_long_arrays()
            if self.acks_bytes(_BYTES_PER_RANGE) > self._rooms[self.to_ledger]:
                return False  # the record may not fit its store now: read it from the record
            self.lost_messages, self.lost_entries = self.lost()
            return True
        above = self._ledger_above
        kept_ranges = ranges if cap is None or ranges < cap else cap
        if kept_ranges * _BYTES_PER_RANGE > self._rooms[above is not None and ranges > above]:
            return False  # the record may not fit its store now: read it from the record
        if self._boundary is None:
            self.lost_messages = self.lost_entries = 0
        else:
            lost = self.card - self._kept_entries
            self.lost_entries = lost
            self.lost_messages = lost + self.extra - self._kept_extra
        return True

    def _extra_of(self, ledger_id: int, first: int, last: int) -> int:
        """Messages beyond one of the entries ``first..last`` of one ledger."""
        weights = self._weights
        if not weights.batched:
            return 0
        return weights.extra_in_runs(ledger_id, np.array([first]), np.array([last]))

    # -- internals ------------------------------------------------------------------------------
    def _find_boundary(self, known: Boundary | None) -> None:
        """The end of the ``cap``-th range and what the ranges up to it hold: ``known``'s when
        it still holds (module docstring), else from scratch."""
        cap, acked, weights = self._cap, self._acked, self._weights
        self._boundary = None
        if cap is None or self.ranges <= cap:
            return
        kept_ranges = kept_entries = kept_extra = 0
        if cap <= 0:
            self._boundary = (-1, -1)  # nothing kept: every ack lies past it
            self._kept_entries = self._kept_extra = 0
            return
        if (
            known is not None
            and known.cap == cap
            and known.weights is weights
            and known.generation == weights.generation
            and acked.prefix_unchanged(known.token)
        ):
            self._boundary, self._kept_entries, self._kept_extra = known.end, known.kept_entries, known.kept_extra
            self.found = known
            return
        for ledger_id in acked.ledger_ids():
            runs = acked.ledger_size(ledger_id)
            if kept_ranges + runs >= cap:
                starts, ends = acked.ledger_first_runs(ledger_id, cap - kept_ranges)
                kept_entries += int((ends - starts + 1).sum())
                kept_extra += weights.extra_in_runs(ledger_id, starts, ends) if weights.batched else 0
                self._boundary = (ledger_id, int(ends[-1]))
                break
            kept_ranges += runs
            kept_entries += acked.ledger_cardinality(ledger_id)
            kept_extra += acked.ledger_extra_messages(ledger_id, weights) if weights.batched else 0
        self._kept_entries, self._kept_extra = kept_entries, kept_extra
        end = self._boundary
        if end is not None:
            token = acked.prefix_token(end[0])
            self.found = Boundary(cap, weights, weights.generation, token, end, kept_entries, kept_extra)

    def _take_next(self) -> None:
        assert self._boundary is not None
        nxt = self._acked.run_after(*self._boundary)
        if nxt is None:
            self._boundary = None  # no more ranges than the cap
            return
        ledger_id, first, last = nxt
        self._kept_entries += last - first + 1
        self._kept_extra += self._extra_of(ledger_id, first, last)
        self._boundary = (ledger_id, last)

    def _drop_last(self) -> None:
        assert self._boundary is not None
        ledger_id, last = self._boundary
        first = self._acked.run_start(ledger_id, last)
        self._kept_entries -= last - first + 1
        self._kept_extra -= self._extra_of(ledger_id, first, last)
        before = self._acked.run_before(ledger_id, first)
        assert before is not None  # more ranges than the cap, so one before the last kept
        self._boundary = (before[0], before[2])

    def _count_long_arrays(self) -> None:
        """The ledgers ``toRanges(max)`` keeps (see ``LongArrayCutoff``). O(ledgers)."""
        if self._la_cutoff is None:
            return
        acked, weights, limit = self._acked, self._weights, self._la_cap
        counts_itself = self._la_cutoff is LongArrayCutoff.ADD_AND_GET
        entries = extra = size = 0
        self._la_cut = None
        for ledger_id in acked.ledger_ids():
            card = acked.ledger_cardinality(ledger_id)
            if limit is not None and limit >= 0 and (entries + card if counts_itself else entries) > limit:
                self._la_cut = ledger_id
                break
            entries += card
            extra += acked.ledger_extra_messages(ledger_id, weights) if weights.batched else 0
            size += ((acked.ledger_last_entry(ledger_id) or 0) // 64 + 1) * 10 + 16
        self._la_entries, self._la_extra, self._la_bytes = entries, extra, size

    def _check(self) -> None:
        """Assert the tracker against a fresh one (tests)."""
        fresh = CloseTracker(
            self._acked,
            self._weights,
            self._cap,
            (self._la_cutoff, self._la_cap) if self._la_cutoff is not None else None,
            self._ledger_above,
            self._rooms,
        )
        mine = (self.ranges, self.card, self.extra, self._boundary, self.kept())
        theirs = (fresh.ranges, fresh.card, fresh.extra, fresh._boundary, fresh.kept())
        assert mine == theirs, f"close tracker {mine} != fresh {theirs}"
