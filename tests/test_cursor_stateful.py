"""A Hypothesis state machine: the durable cursor against a naive model.

The model is a list of added positions plus a Python set of individually acked positions, a
mark-delete position (None = before every entry), a read position, the mark-delete properties
and the batch state as a dict ``position -> remaining indexes`` (a bitset int). Its rules are
REFERENCE.md 2.2-2.4 and 2.9 written the slow way:

* an individual ack adds a position; while the entry right after the mark-delete is acked the
  mark-delete absorbs it (across ledgers);
* a mark-delete never moves backwards and never beyond the last confirmed entry;
* a batch-index ack ANDs into the remaining indexes; an empty result is an individual ack;
* reset moves both positions (backwards too) and clears acks, batch state and properties;
* skip mark-deletes the n-th entry after the mark-delete (counting acked entries or not);
* ledgers every entry of which is at or below the mark-delete (and that are not the current
  ledger) are trimmed, and their entries count as acknowledged.

After every step the cursor must agree with the model and ``cursor._check()`` must pass.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from mledger import (
    EARLIEST,
    LATEST,
    IndividualDeletedEntries,
    InitialPosition,
    InvalidPositionError,
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    MarkDeletingMarkedPositionError,
    Position,
)
from mledger.storage import MemoryStore

BATCH_SIZE = 4
FULL_BATCH = (1 << BATCH_SIZE) - 1
PROPERTIES = st.dictionaries(st.sampled_from(["a", "b"]), st.integers(-5, 5), max_size=2)


class CursorMachine(RuleBasedStateMachine):
    ml: ManagedLedger
    cursor: ManagedCursor

    def __init__(self) -> None:
        super().__init__()
        self.added: list[Position] = []
        self.acked: set[Position] = set()
        self.md: Position | None = None
        self.read = Position(-1, -1)
        self.props: dict[str, int] = {}
        self.batch: dict[Position, int] = {}
        self.trimmed: set[int] = set()

    # -- model helpers ---------------------------------------------------------------------
    def existing(self) -> list[Position]:
        return [p for p in self.added if p.ledger_id not in self.trimmed]

    def deleted(self, p: Position) -> bool:
        return p.ledger_id in self.trimmed or (self.md is not None and p <= self.md) or p in self.acked

    def slot(self) -> Position:
        """Where the next entry will be written (the ledger's own answer past the end)."""
        return self.ml.next_valid_position(self.ml.last_confirmed_entry)

    def next_valid(self, p: Position | None) -> Position:
        return next((q for q in self.existing() if p is None or q > p), None) or self.slot()

    def after_md(self) -> list[Position]:
        return [p for p in self.existing() if self.md is None or p > self.md]

    def move_md(self, target: Position) -> None:
        """setAcknowledgedPosition: move, absorb acked entries, trim acks and batch, fix read."""
        self.md = target
        while True:
            nxt = next((q for q in self.existing() if q > self.md), None)
            if nxt is None or nxt not in self.acked:
                break
            self.md = nxt
        self.acked = {p for p in self.acked if p > self.md}
        self.batch = {p: bits for p, bits in self.batch.items() if p > self.md}
        if self.read <= self.md:
            self.read = self.next_valid(self.md)

    def ack(self, p: Position) -> None:
        self.batch.pop(p, None)
        if self.deleted(p):
            return
        self.acked.add(p)
        nxt = next((q for q in self.existing() if self.md is None or q > self.md), None)
        if nxt == p:
            self.move_md(p)

    def trim(self) -> None:
        # Trimming runs in the background: let the passes queued so far finish first.
        self.ml.trim_consumed_ledgers_in_background().result(timeout=10)
        if self.md is None:
            return
        current = self.ml.current_ledger_id
        for ledger_id in sorted({p.ledger_id for p in self.added} - self.trimmed):
            last = max(p for p in self.added if p.ledger_id == ledger_id)
            if ledger_id == current or last > self.md:
                break
            self.trimmed.add(ledger_id)

    def snapshot(self) -> tuple[object, ...]:
        c = self.cursor
        return (c.mark_delete_position, c.read_position, str(c.individually_deleted_messages()),
                c.batch_deleted_states(), c.properties, c.number_of_entries_in_backlog(precise=False))

    # -- rules -----------------------------------------------------------------------------
    @initialize(max_entries=st.integers(1, 4), earliest=st.booleans(), prefill=st.integers(0, 5))
    def open(self, max_entries: int, earliest: bool, prefill: int) -> None:
        factory = ManagedLedgerFactory(MemoryStore())
        # The prefill comes before the cursor: keep it (Pulsar's rule would trim it at the rollovers).
        config = ManagedLedgerConfig(max_entries_per_ledger=max_entries, retain_without_subscriptions=True)
        self.ml = factory.open("ml", config)
        self.added = self.ml.add_entries([b"p%d" % i for i in range(prefill)])
        initial = InitialPosition.EARLIEST if earliest else InitialPosition.LATEST
        self.cursor = self.ml.open_cursor("c", initial)
        self.md = None if earliest or not self.added else self.added[-1]
        self.read = self.next_valid(self.md)

    @rule(n=st.integers(1, 5))
    def add_entries(self, n: int) -> None:
        self.added += self.ml.add_entries([b"e%d" % (len(self.added) + i) for i in range(n)])
        self.trim()  # a rollover queues a pass (Pulsar's ledgerClosed): the closed ledger may be consumed

    @rule(n=st.integers(1, 6))
    def read_entries(self, n: int) -> None:
        expected = [p for p in self.existing() if p >= self.read and not self.deleted(p)][:n]
        got = [e.position for e in self.cursor.read_entries(n)]
        assert got == expected
        if len(expected) == n:
            self.read = self.next_valid(expected[-1])
        else:
            self.read = max(self.read, self.slot())

    @precondition(lambda self: bool(self.added))
    @rule(data=st.data(), properties=PROPERTIES)
    def mark_delete(self, data: st.DataObject, properties: dict[str, int]) -> None:
        target = data.draw(st.sampled_from(self.added))
        if (self.md is not None and target < self.md) or (self.md is None and target.ledger_id in self.trimmed):
            before = self.snapshot()
            try:
                self.cursor.mark_delete(target, properties=properties)
                raise AssertionError(f"mark-delete back to {target} below {self.md} accepted")
            except MarkDeletingMarkedPositionError:
                pass
            assert self.snapshot() == before
            return
        self.cursor.mark_delete(target, properties=properties)
        self.props = dict(properties)
        self.move_md(target)
        self.trim()

    @rule(beyond_ledger=st.booleans())
    def mark_delete_beyond_lac_fails(self, beyond_ledger: bool) -> None:
        lac = self.ml.last_confirmed_entry
        target = Position(lac.ledger_id + 1000, 0) if beyond_ledger else lac.next()
        before = self.snapshot()
        try:
            self.cursor.mark_delete(target)
            raise AssertionError(f"mark-delete beyond the LAC {lac} at {target} accepted")
        except InvalidPositionError:
            pass
        assert self.snapshot() == before

    @precondition(lambda self: bool(self.added))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        # Mostly entries not acked yet (holes are what matters), sometimes any entry.
        pending = [p for p in self.added if not self.deleted(p)]
        p = data.draw(st.sampled_from(pending if pending and data.draw(st.integers(0, 3)) else self.added))
        self.cursor.delete(p)
        self.ack(p)
        self.trim()

    @precondition(lambda self: bool(self.added))
    @rule(data=st.data(), beyond=st.booleans())
    def delete_many(self, data: st.DataObject, beyond: bool) -> None:
        ps = data.draw(st.lists(st.sampled_from(self.added), max_size=8))
        if beyond:
            lac = self.ml.last_confirmed_entry
            ps = [*ps, lac.next()]
            before = self.snapshot()
            try:
                self.cursor.delete_many(ps)
                raise AssertionError(f"delete beyond the LAC {lac} accepted")
            except InvalidPositionError:
                pass
            assert self.snapshot() == before
            return
        new = len({p for p in ps if not self.deleted(p)})
        assert self.cursor.delete_many(ps) == new
        for p in ps:
            self.ack(p)
        if ps:  # an empty call changes and persists nothing, so it does not trim either
            self.trim()

    @precondition(lambda self: bool(self.added))
    @rule(data=st.data(), indexes=st.sets(st.integers(0, BATCH_SIZE - 1)))
    def batch_index_ack(self, data: st.DataObject, indexes: set[int]) -> None:
        # Mostly entries with partial batch state already (the AND-merge), sometimes any entry.
        partial = sorted(self.batch)
        p = data.draw(st.sampled_from(partial if partial and data.draw(st.booleans()) else self.added))
        self.cursor.delete_batch_indexes(p, sorted(indexes), batch_size=BATCH_SIZE)
        if self.deleted(p):
            self.batch.pop(p, None)
        else:
            remaining = self.batch.get(p, FULL_BATCH) & ~sum(1 << i for i in indexes)
            if remaining:
                self.batch[p] = remaining
            else:
                self.ack(p)
        self.trim()

    @rule(data=st.data())
    def seek(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from([*self.added, self.slot()]))
        self.cursor.seek(target)
        if self.deleted(target) and target not in self.acked:
            self.read = self.next_valid(self.md)  # at or below the mark-delete
        elif target in self.existing():
            self.read = target
        else:
            self.read = self.slot()
        self.trim()

    @rule()
    def rewind(self) -> None:
        self.cursor.rewind()
        self.read = self.next_valid(self.md)
        self.trim()

    @rule(data=st.data())
    def reset_cursor(self, data: st.DataObject) -> None:
        lac = self.ml.last_confirmed_entry
        target = data.draw(st.sampled_from([EARLIEST, LATEST, Position(lac.ledger_id + 1000, 0), *self.added]))
        self.cursor.reset_cursor(target)
        if target == EARLIEST:
            new_read = self.next_valid(None)
        elif target in self.added:
            new_read = target if target.ledger_id not in self.trimmed else self.next_valid(target)
        else:
            new_read = self.slot()
        self.read = new_read
        self.md = max((p for p in self.existing() if p < new_read), default=None)
        self.acked = set()
        self.batch = {}
        self.props = {}
        self.trim()

    @rule(data=st.data(), include=st.booleans())
    def skip_entries(self, data: st.DataObject, include: bool) -> None:
        self.skip(data.draw(st.integers(0, len(self.after_md()) + 2)), include)

    @precondition(lambda self: bool(self.acked))
    @rule(data=st.data())
    def skip_entries_over_holes(self, data: st.DataObject) -> None:
        self.skip(data.draw(st.integers(1, len(self.after_md()))), include=False)

    def skip(self, n: int, include: bool) -> None:
        mode = IndividualDeletedEntries.INCLUDE if include else IndividualDeletedEntries.EXCLUDE
        candidates = self.after_md()
        self.cursor.skip_entries(n, mode)
        if not candidates:
            # Nothing after the mark-delete: it stays; the properties may be cleared or kept.
            self.props = self.cursor.properties if self.cursor.properties in ({}, self.props) else self.props
        elif n == 0:
            # previous(next_valid(MD)): the same cut, but "before the first entry" when the
            # mark-delete's own ledger has been trimmed.
            self.props = {}
            if self.md is not None and self.md.ledger_id in self.trimmed:
                self.md = None
        else:
            counted = candidates if include else [p for p in candidates if p not in self.acked]
            self.props = {}
            self.move_md(counted[n - 1] if n <= len(counted) else self.added[-1])
        self.trim()

    @rule()
    def clear_backlog(self) -> None:
        candidates = self.after_md()
        self.cursor.clear_backlog()
        if candidates:
            self.props = {}
            self.move_md(self.added[-1])
        self.trim()

    # -- checks ----------------------------------------------------------------------------
    @invariant()
    def agrees_with_model(self) -> None:
        c = self.cursor
        c._check()
        self.ml._check()
        md, read = c.mark_delete_position, c.read_position
        assert read > md
        assert read == self.read, f"read {read} != model {self.read}"
        existing = self.existing()
        if self.md is not None:
            assert md == self.md, f"mark-delete {md} != model {self.md}"
        elif existing:
            assert md < existing[0]
        # No hole at or below the mark-delete; the acked set is exactly the model's.
        ranges = list(c.individually_deleted_messages())
        assert all(lo >= md for lo, _ in ranges)
        acked = {Position(hi.ledger_id, e) for lo, hi in ranges for e in range(lo.entry_id + 1, hi.entry_id + 1)}
        assert acked == self.acked
        for p in self.added:
            assert c.is_message_deleted(p) == self.deleted(p), p
        backlog = sum(1 for p in self.added if not self.deleted(p))
        assert c.number_of_entries_in_backlog(precise=True) == backlog
        assert c.number_of_entries_in_backlog(precise=False) == backlog
        to_read = sum(1 for p in existing if p >= read and not self.deleted(p))
        assert c.number_of_entries() == to_read
        assert c.has_more_entries() == (to_read > 0)
        assert c.batch_deleted_states() == sorted(self.batch.items())
        assert c.properties == self.props
        kept = sorted({p.ledger_id for p in self.added} - self.trimmed)
        assert [li.ledger_id for li in self.ml.ledger_infos() if li.entries] == kept


CursorMachine.TestCase.settings = settings(
    max_examples=250, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestCursorAgainstModel = CursorMachine.TestCase
