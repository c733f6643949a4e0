"""ManagedLedger and ManagedLedgerFactory: rollover, position arithmetic, trimming, reopen.

Position rules follow REFERENCE.md 2.2 and 2.9 (Pulsar's ``ManagedLedgerImpl``):
``next_valid_position`` skips missing and empty ledgers and, past the end, answers the next
write slot; ``previous_position`` steps back into the last non-empty earlier ledger;
``number_of_entries`` counts real entries; ``position_after_n`` walks ledgers and is clamped to
the last confirmed entry.
"""

from __future__ import annotations

import pytest

from mledger import (
    EARLIEST,
    EntryMetadata,
    EntryTooLargeError,
    InitialPosition,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    ManualClock,
    NotFoundError,
    Position,
    PositionBound,
)
from mledger.codec import encode_entry
from mledger.codec.proto import MLDataFormats_pb2 as pb
from mledger.replay._store import add_repeated_entries
from mledger.storage import MemoryStore

P = Position


def open_ml(max_entries: int = 50_000, store: MemoryStore | None = None, name: str = "ml") -> ManagedLedger:
    # These tests look at the ledger layout of logs mostly without durable cursors, which
    # Pulsar's rule would trim at each rollover (tests/test_retention.py covers that): keep them.
    factory = ManagedLedgerFactory(store if store is not None else MemoryStore())
    config = ManagedLedgerConfig(max_entries_per_ledger=max_entries, retain_without_subscriptions=True)
    return factory.open(name, config)


def layout(ml: ManagedLedger) -> list[tuple[int, int]]:
    """The ledger list as (id, entries), once the ledger's invariants held."""
    ml._check()
    return [(li.ledger_id, li.entries) for li in ml.ledger_infos()]


def settled(ml: ManagedLedger) -> list[tuple[int, int]]:
    """The layout once the trimming passes queued so far have run (they run in the background)."""
    ml.trim_consumed_ledgers_in_background().result(timeout=10)
    return layout(ml)


def preloaded(entries_per_ledger: list[int], listed: list[bool] | None = None) -> tuple[MemoryStore, list[int]]:
    """A store holding a managed ledger ``ml`` whose ledgers have the given sizes.

    ``listed[i]`` False creates the ledger in the store but leaves it out of the ledger list
    (a ledger id the managed ledger does not own, like one of another ML or a trimmed one).
    """
    store = MemoryStore()
    info = pb.ManagedLedgerInfo()
    ids = []
    for i, n in enumerate(entries_per_ledger):
        ledger_id = store.create_ledger()
        ids.append(ledger_id)
        if n:
            store.append_many(ledger_id, [encode_entry(b"e%d" % k, EntryMetadata()) for k in range(n)])
        store.seal_ledger(ledger_id)
        if listed is None or listed[i]:
            info.ledgerInfo.add(ledgerId=ledger_id, entries=n, size=10 * n, timestamp=1)
    store.put("/managed-ledgers/ml", info.SerializeToString())
    return store, ids


# -- appends and rollover ------------------------------------------------------------------


def test_rollover_at_max_entries_per_ledger() -> None:
    ml = open_ml(max_entries=3)
    first = ml.current_ledger_id
    positions = [ml.add_entry(b"m%d" % i) for i in range(7)]
    assert positions == [
        P(first, 0),
        P(first, 1),
        P(first, 2),
        P(first + 1, 0),
        P(first + 1, 1),
        P(first + 1, 2),
        P(first + 2, 0),
    ]
    assert layout(ml) == [(first, 3), (first + 1, 3), (first + 2, 1)]
    assert ml.last_confirmed_entry == P(first + 2, 0)
    assert ml.entries_added_counter == 7
    assert ml.number_of_entries() == 7


def test_filling_a_ledger_exactly_opens_the_next_one_at_once() -> None:
    ml = open_ml(max_entries=2)
    first = ml.current_ledger_id
    ml.add_entries([b"a", b"b"])
    assert layout(ml) == [(first, 2), (first + 1, 0)]
    assert ml.current_ledger_id == first + 1
    assert ml.last_confirmed_entry == P(first, 1)


def test_add_entries_across_ledger_boundaries_keeps_order_and_positions() -> None:
    ml = open_ml(max_entries=3)
    first = ml.current_ledger_id
    ml.add_entry(b"x")
    positions = ml.add_entries([b"b%d" % i for i in range(6)])
    assert positions == [P(first, 1), P(first, 2), P(first + 1, 0), P(first + 1, 1), P(first + 1, 2), P(first + 2, 0)]
    assert [e.data for e in ml.read_positions(positions)] == [b"b%d" % i for i in range(6)]
    assert ml.read_entry(P(first, 0)).data == b"x"
    assert ml.add_entries([]) == []


def test_size_rollover_is_the_same_for_bulk_and_single_appends() -> None:
    # A ledger rolls over after the entry that brings it to max_size_per_ledger_mb.
    payloads = [bytes(600 * 1024)] * 5
    layouts = []
    for bulk in (True, False):
        ml = open_ml(store=MemoryStore(max_entry_size=2 * 1024 * 1024))
        ml = ml.factory.open("sized", ManagedLedgerConfig(retain_without_subscriptions=True, max_size_per_ledger_mb=1))
        if bulk:
            ml.add_entries(payloads)
        else:
            for p in payloads:
                ml.add_entry(p)
        layouts.append([entries for _, entries in layout(ml)])
    assert layouts[0] == layouts[1] == [2, 2, 1]


def test_entry_metadata_round_trips_through_the_ledger() -> None:
    ml = open_ml()
    meta = EntryMetadata(producer_name="p", sequence_id=7, num_messages=3)
    p = ml.add_entry(b"payload", metadata=meta)
    entry = ml.read_entry(p)
    assert entry.data == b"payload" and entry.metadata.num_messages == 3 and entry.metadata.sequence_id == 7


def test_time_based_rollover_with_an_injected_clock() -> None:
    clock = ManualClock(1_000)
    factory = ManagedLedgerFactory(MemoryStore(), clock=clock)
    ml = factory.open("ml", ManagedLedgerConfig(retain_without_subscriptions=True, maximum_rollover_time_ms=60_000))
    first = ml.current_ledger_id
    assert ml.roll_over_if_due() is False  # empty ledgers are never rolled over
    ml.add_entry(b"a")
    clock.advance(59_999)
    assert ml.roll_over_if_due() is False
    clock.advance(1)
    assert ml.roll_over_if_due() is True
    assert layout(ml) == [(first, 1), (first + 1, 0)]


@pytest.mark.parametrize("how", ["single", "bulk", "repeated"])
def test_minimum_rollover_time_gates_the_entry_limit_too(how: str) -> None:
    # Pulsar's currentLedgerIsFull: a full ledger rolls over only once it is older than
    # minimumRolloverTimeMs (the broker's managedLedgerMinLedgerRolloverTimeMinutes, 10).
    clock = ManualClock(1_000)
    factory = ManagedLedgerFactory(MemoryStore(), clock=clock)
    config = ManagedLedgerConfig(
        max_entries_per_ledger=2, minimum_rollover_time_ms=10_000, retain_without_subscriptions=True
    )
    ml = factory.open("ml", config)
    first = ml.current_ledger_id

    def add(n: int) -> None:
        if how == "single":
            for _ in range(n):
                ml.add_entry(b"e")
        elif how == "bulk":
            ml.add_entries([b"e"] * n)
        else:
            add_repeated_entries(ml, encode_entry(b"e", EntryMetadata()), n)

    add(5)
    assert layout(ml) == [(first, 5)]  # five entries, limit two: too young to roll over
    clock.advance(10_000)
    add(1)
    assert layout(ml) == [(first, 6)]  # 10 s old is not older than 10 s
    clock.advance(1)
    add(3)  # the first add finds the ledger full and old enough: it rolls over after it
    assert layout(ml)[0] == (first, 7) and layout(ml)[1] == (first + 1, 2)


def test_a_brokers_topics_wait_ten_minutes_before_a_rollover_unless_configured() -> None:
    from mledger.broker import Broker, BrokerConfig

    broker = Broker(ManagedLedgerFactory(MemoryStore()))
    assert broker.open_topic("t").managed_ledger.config.minimum_rollover_time_ms == 600_000
    own = ManagedLedgerConfig(max_entries_per_ledger=2)
    broker = Broker(ManagedLedgerFactory(MemoryStore()), BrokerConfig(managed_ledger_config=own))
    assert broker.open_topic("t").managed_ledger.config.minimum_rollover_time_ms == 0


def test_entry_too_large_is_refused_and_nothing_is_written() -> None:
    ml = open_ml(max_entries=3, store=MemoryStore(max_entry_size=64))
    ml.add_entry(b"small")
    before = (layout(ml), ml.last_confirmed_entry, ml.entries_added_counter)
    with pytest.raises(EntryTooLargeError):
        ml.add_entry(b"x" * 100)
    with pytest.raises(EntryTooLargeError):
        ml.add_entries([b"ok", b"y" * 100, b"ok"])
    assert (layout(ml), ml.last_confirmed_entry, ml.entries_added_counter) == before


# -- position arithmetic -------------------------------------------------------------------


def test_empty_ml_positions() -> None:
    ml = open_ml()
    current = ml.current_ledger_id
    assert ml.last_confirmed_entry == P(current, -1)
    assert ml.first_position() == P(current, -1)
    assert ml.next_valid_position(ml.last_confirmed_entry) == P(current, 0)
    assert ml.previous_position(P(current, 0)) == P(current, -1)
    assert ml.number_of_entries() == 0
    assert not ml.is_valid_position(P(current, 0))


def test_next_valid_position_within_and_across_ledgers() -> None:
    ml = open_ml(max_entries=2)
    p = ml.add_entries([b"a", b"b", b"c"])  # L1: 0,1  L2: 0
    assert ml.next_valid_position(P(p[0].ledger_id, -1)) == p[0]
    assert ml.next_valid_position(p[0]) == p[1]
    assert ml.next_valid_position(p[1]) == p[2]  # crosses into the next ledger
    # Past the end: the next write slot (LAC.next while the current ledger has entries).
    assert ml.next_valid_position(p[2]) == p[2].next()
    assert ml.next_valid_position(P(p[2].ledger_id, 10)) == p[2].next()


def test_next_valid_position_past_the_end_is_the_empty_current_ledger() -> None:
    # testGetNextValidPosition: max 1 entry per ledger, so the current ledger is empty.
    ml = open_ml(max_entries=1)
    c1 = ml.open_cursor("c1")
    p1, p2, p3 = (ml.add_entry(b"entry%d" % i) for i in (1, 2, 3))
    assert ml.next_valid_position(c1.mark_delete_position) == p1
    assert ml.next_valid_position(p1) == p2
    current = ml.current_ledger_id
    assert current > p3.ledger_id
    assert ml.next_valid_position(p3) == P(current, 0)
    assert ml.next_valid_position(P(p3.ledger_id, p3.entry_id + 1)) == P(current, 0)


def test_next_valid_position_skips_empty_and_missing_ledgers() -> None:
    # Ledgers: a(2) b(0, listed) c(2, not listed) d(2) -> the ML owns a, b, d.
    store, (a, b, c, d) = preloaded([2, 0, 2, 2], listed=[True, True, False, True])
    ml = ManagedLedgerFactory(store).open("ml")
    assert [lid for lid, _ in layout(ml)][:3] == [a, b, d]
    assert ml.next_valid_position(P(a, 1)) == P(d, 0)
    assert ml.next_valid_position(P(b, -1)) == P(d, 0)
    assert ml.next_valid_position(P(c, 0)) == P(d, 0)
    assert ml.last_confirmed_entry == P(d, 1)
    assert not ml.is_valid_position(P(b, 0)) and not ml.is_valid_position(P(c, 0))
    assert ml.is_valid_position(P(d, 1)) and not ml.is_valid_position(P(d, 2))


def test_previous_position_steps_back_into_the_last_non_empty_ledger() -> None:
    store, (a, b, c, d) = preloaded([2, 0, 2, 2], listed=[True, True, False, True])
    ml = ManagedLedgerFactory(store).open("ml")
    assert ml.previous_position(P(d, 1)) == P(d, 0)
    assert ml.previous_position(P(d, 0)) == P(a, 1)  # skips empty b and unlisted c
    assert ml.previous_position(P(a, 0)) == P(a, -1)  # no earlier ledger
    assert ml.previous_position(P(a, -1)) == P(a, -1)


def test_previous_position_with_only_empty_earlier_ledgers() -> None:
    store, (a, b, c) = preloaded([0, 0, 1])
    ml = ManagedLedgerFactory(store).open("ml")
    assert ml.previous_position(P(c, 0)) == P(a, -1)


def test_number_of_entries_with_inclusive_and_exclusive_bounds() -> None:
    ml = open_ml(max_entries=5)
    p = ml.add_entries([b"x"] * 12)  # L1: 0..4, L2: 0..4, L3: 0..1
    l1, l2, l3 = p[0].ledger_id, p[5].ledger_id, p[10].ledger_id
    assert ml.number_of_entries() == 12
    assert ml.number_of_entries(P(l1, 1), P(l1, 3)) == 3
    assert ml.number_of_entries(P(l1, 1), P(l1, 3), lower_inclusive=False) == 2
    assert ml.number_of_entries(P(l1, 1), P(l1, 3), upper_inclusive=False) == 2
    assert ml.number_of_entries(P(l1, 1), P(l1, 3), False, False) == 1
    assert ml.number_of_entries(P(l1, 3), P(l3, 0)) == 2 + 5 + 1
    assert ml.number_of_entries(P(l1, 3), P(l3, 0), False, False) == 1 + 5
    # (MD, LAC] with MD = L:-1: negative entry ids are never counted.
    assert ml.number_of_entries(P(l1, -1), ml.last_confirmed_entry, False, True) == 12
    assert ml.number_of_entries(P(l2, -1), P(l2, -1)) == 0
    # Positions beyond a ledger's end count only real entries.
    assert ml.number_of_entries(P(l1, 3), P(l1, 100)) == 2
    assert ml.number_of_entries(P(l3, 1), P(l1, 0)) == 0  # lower > upper
    assert ml.number_of_entries(None, P(l2, 0)) == 6
    assert ml.number_of_entries(P(l2, 4), None) == 3


def test_number_of_entries_counts_missing_ledgers_as_zero() -> None:
    store, (a, b, c) = preloaded([3, 3, 3], listed=[True, False, True])
    ml = ManagedLedgerFactory(store).open("ml")
    assert ml.number_of_entries(P(a, 0), P(c, 2)) == 6
    assert ml.number_of_entries(P(b, 0), P(b, 2)) == 0


def test_position_after_n_ports_pulsars_cases() -> None:
    # ManagedLedgerTest.testGetPositionAfterN: 5 entries per ledger, 10 entries, mark-delete
    # at the 4th, ledgers (5, 5, 0 current).
    ml = open_ml(max_entries=5)
    cursor = ml.open_cursor("cursor", InitialPosition.EARLIEST)
    positions = ml.add_entries([b"entry-%d" % i for i in range(10)])
    cursor.mark_delete(positions[3])
    infos = ml.ledger_infos()
    assert [li.entries for li in infos] == [5, 5, 0]
    first, second = infos[0].ledger_id, infos[1].ledger_id
    start = P(first, 0)
    assert ml.position_after_n(start, 1, PositionBound.START_EXCLUDED) == P(first, 1)
    assert ml.position_after_n(start, 4, PositionBound.START_EXCLUDED) == P(first, 4)
    # The "expiry" case: from the entry after the mark-delete, skipping everything stored is
    # clamped to the last confirmed entry.
    search = ml.next_valid_position(cursor.mark_delete_position)
    assert search == P(first, 4)
    stored = ml.number_of_entries(cursor.mark_delete_position, ml.last_confirmed_entry, False, True)
    assert ml.position_after_n(search, stored, PositionBound.START_EXCLUDED) == P(second, 4)
    assert ml.position_after_n(search, 1000, PositionBound.START_EXCLUDED) == P(second, 4)


def test_position_after_n_bounds_and_ledger_crossing() -> None:
    ml = open_ml(max_entries=5)
    ml.open_cursor("keep", InitialPosition.EARLIEST)
    p = ml.add_entries([b"x"] * 10)
    first, second = p[0].ledger_id, p[5].ledger_id
    assert ml.position_after_n(P(first, 0), 1, PositionBound.START_INCLUDED) == P(first, 0)
    assert ml.position_after_n(P(first, 0), 5, PositionBound.START_INCLUDED) == P(first, 4)
    assert ml.position_after_n(P(first, 0), 6, PositionBound.START_INCLUDED) == P(second, 0)
    assert ml.position_after_n(P(first, 2), 3, PositionBound.START_EXCLUDED) == P(second, 0)
    assert ml.position_after_n(P(first, -1), 5, PositionBound.START_EXCLUDED) == P(first, 4)
    assert ml.position_after_n(P(first, -1), 0, PositionBound.START_EXCLUDED) == P(first, -1)
    assert ml.position_after_n(ml.last_confirmed_entry, 3, PositionBound.START_EXCLUDED) == ml.last_confirmed_entry


# -- trimming ------------------------------------------------------------------------------


def test_trimming_follows_the_slowest_durable_cursor() -> None:
    ml = open_ml(max_entries=2)
    fast = ml.open_cursor("fast", InitialPosition.EARLIEST)
    slow = ml.open_cursor("slow", InitialPosition.EARLIEST)
    p = ml.add_entries([b"x"] * 7)  # ledgers of 2, 2, 2, 1
    fast.mark_delete(p[6])
    assert [lid for lid, _ in settled(ml)] == [p[0].ledger_id, p[2].ledger_id, p[4].ledger_id, p[6].ledger_id]
    slow.mark_delete(p[2])  # inside the second ledger: only the first is fully consumed
    assert [lid for lid, _ in settled(ml)] == [p[2].ledger_id, p[4].ledger_id, p[6].ledger_id]
    slow.mark_delete(p[5])  # end of the third ledger: the second and third are consumed
    assert [lid for lid, _ in settled(ml)] == [p[6].ledger_id]
    assert not ml.store.ledger_exists(p[0].ledger_id)
    # Consumed entries are gone from storage but the counts stay right.
    assert slow.number_of_entries_in_backlog() == 1
    assert ml.number_of_entries() == 1


def test_ledger_fully_consumed_at_its_last_entry_is_trimmed() -> None:
    ml = open_ml(max_entries=3)
    cursor = ml.open_cursor("c", InitialPosition.EARLIEST)
    p = ml.add_entries([b"x"] * 3)  # fills the first ledger; the current one is empty
    cursor.mark_delete(p[2])
    assert settled(ml) == [(ml.current_ledger_id, 0)]
    assert not ml.store.ledger_exists(p[0].ledger_id)


def test_the_current_ledger_is_never_trimmed() -> None:
    ml = open_ml(max_entries=10)
    cursor = ml.open_cursor("c", InitialPosition.EARLIEST)
    p = ml.add_entries([b"x"] * 4)
    cursor.mark_delete(p[3])
    assert ml.trim_consumed_ledgers() == []
    assert settled(ml) == [(p[0].ledger_id, 4)]


def test_retain_without_subscriptions_trims_nothing_and_non_durable_cursors_do_not_count() -> None:
    ml = open_ml(max_entries=2)  # retain_without_subscriptions
    nd = ml.open_non_durable_cursor(EARLIEST)
    p = ml.add_entries([b"x"] * 5)
    nd.mark_delete(p[4])
    assert ml.trim_consumed_ledgers() == []
    assert len(settled(ml)) == 3  # ledgers of 2, 2 and the current one with 1
    durable = ml.open_cursor("d", InitialPosition.EARLIEST)
    durable.mark_delete(p[1])
    assert [lid for lid, _ in settled(ml)] == [p[2].ledger_id, p[4].ledger_id]


def test_trimming_advances_non_durable_cursors_left_in_trimmed_ledgers() -> None:
    # Pulsar's advanceCursorsIfNecessary: a cursor whose mark-delete lies in a trimmed ledger
    # is moved to the last trimmed entry, so its counts stay consistent.
    ml = open_ml(max_entries=2)
    durable = ml.open_cursor("d", InitialPosition.EARLIEST)
    nd = ml.open_non_durable_cursor(EARLIEST)
    p = ml.add_entries([b"x"] * 6)
    durable.mark_delete(p[3])
    assert [lid for lid, _ in settled(ml)] == [p[4].ledger_id, ml.current_ledger_id]
    assert nd.mark_delete_position == p[3]
    assert nd.number_of_entries_in_backlog(precise=True) == 2
    assert nd.number_of_entries_in_backlog(precise=False) == 2
    assert [e.position for e in nd.read_entries(10)] == p[4:]
    nd._check()


def test_deleting_a_cursor_releases_its_ledgers() -> None:
    ml = open_ml(max_entries=2)
    ml.open_cursor("slow", InitialPosition.EARLIEST)
    fast = ml.open_cursor("fast", InitialPosition.EARLIEST)
    p = ml.add_entries([b"x"] * 4)
    fast.mark_delete(p[3])
    assert len(settled(ml)) == 3
    ml.delete_cursor("slow")
    assert settled(ml) == [(ml.current_ledger_id, 0)]
    assert ml.cursor_names() == ["fast"]
    with pytest.raises(NotFoundError):
        ml.delete_cursor("slow")


# -- reopen --------------------------------------------------------------------------------


def test_reopen_recovers_entries_ledgers_and_cursors() -> None:
    store = MemoryStore()
    config = ManagedLedgerConfig(retain_without_subscriptions=True, max_entries_per_ledger=3)
    ml = ManagedLedgerFactory(store).open("persistent://public/default/t", config)
    c1 = ml.open_cursor("c1", InitialPosition.EARLIEST)
    c2 = ml.open_cursor("c2", InitialPosition.EARLIEST)
    p = ml.add_entries([b"m%d" % i for i in range(8)])
    c1.mark_delete(p[2], properties={"a": 1})
    c1.delete([p[4], p[6]])
    c2.mark_delete(p[0])
    c1.set_cursor_property("owner", "me")
    ml.close()

    # A second factory over the same store recovers everything.
    ml2 = ManagedLedgerFactory(store).open("persistent://public/default/t", config)
    assert ml2 is not ml
    assert ml2.last_confirmed_entry == p[7]
    assert ml2.number_of_entries() == 8
    assert [e.data for e in ml2.read_positions(p)] == [b"m%d" % i for i in range(8)]
    # The last ledger is sealed and a new current ledger is created.
    assert ml2.current_ledger_id > p[7].ledger_id
    assert [c.name for c in ml2.cursors] == ["c1", "c2"]
    r1, r2 = ml2.get_cursor("c1"), ml2.get_cursor("c2")
    assert r1.mark_delete_position == p[2]
    assert r1.read_position == p[3]
    # Ranges never cross ledgers: p4 = L2:1 and p6 = L3:0.
    assert str(r1.individually_deleted_messages()) == (
        f"[({P(p[4].ledger_id, p[4].entry_id - 1)}..{p[4]}],({P(p[6].ledger_id, -1)}..{p[6]}]]"
    )
    assert r1.properties == {"a": 1}
    assert r1.cursor_properties == {"owner": "me"}
    assert r1.number_of_entries_in_backlog() == 3
    assert r2.mark_delete_position == p[0]
    assert r2.number_of_entries_in_backlog(precise=False) == 7
    # New appends continue after the recovered entries.
    q = ml2.add_entry(b"next")
    assert q == P(ml2.current_ledger_id, 0)
    assert [e.data for e in r1.read_entries(10)] == [b"m3", b"m5", b"m7", b"next"]
    r1._check()
    r2._check()


def test_reopen_of_an_empty_managed_ledger_drops_its_empty_ledger() -> None:
    store = MemoryStore()
    ml = ManagedLedgerFactory(store).open("ml")
    ml.open_cursor("c")
    first = ml.current_ledger_id
    ml.close()
    ml2 = ManagedLedgerFactory(store).open("ml")
    assert layout(ml2) == [(ml2.current_ledger_id, 0)]
    assert ml2.current_ledger_id > first and not store.ledger_exists(first)
    recovered = ml2.get_cursor("c")
    assert recovered.mark_delete_position < recovered.read_position
    assert recovered.number_of_entries() == 0
    p = ml2.add_entry(b"x")
    assert recovered.number_of_entries() == 1
    recovered.delete(p)
    assert recovered.mark_delete_position == p


def test_factory_returns_the_same_open_managed_ledger_and_lists_names() -> None:
    factory = ManagedLedgerFactory()
    a = factory.open("public/default/persistent/a")
    assert factory.open("public/default/persistent/a") is a
    factory.open("b")
    factory.open("persistent://public/default/c")  # "//" must not send the listing into a loop
    names = factory.list_managed_ledgers()
    assert "b" in names and "public/default/persistent/a" in names


def test_forced_roll_over_seals_the_current_ledger_and_discards_an_empty_one() -> None:
    store = MemoryStore()
    factory = ManagedLedgerFactory(store)
    name = "public/default/persistent/roll"
    config = ManagedLedgerConfig(retain_without_subscriptions=True, max_entries_per_ledger=100)
    ml = factory.open(name, config)
    cursor = ml.open_cursor("c", initial_position=InitialPosition.EARLIEST)
    first = ml.current_ledger_id
    # nothing written: an empty ledger is discarded, not kept (Pulsar's ledgerClosed)
    second = ml.roll_over()
    assert second != first and [li.ledger_id for li in ml.ledger_infos()] == [second]
    assert not store.ledger_exists(first)
    ml.add_entries([b"a", b"b"])
    third = ml.roll_over()
    assert third != second and ml.current_ledger_id == third
    assert [li.entries for li in ml.ledger_infos()] == [2, 0]
    assert ml.add_entry(b"c") == Position(third, 0)
    assert ml.next_valid_position(Position(second, 1)) == Position(third, 0)
    ml._check()
    # the cursor created in the discarded ledger reads on from the next one
    assert cursor.mark_delete_position == Position(first, -1) and cursor.number_of_entries_in_backlog() == 3
    assert [e.position for e in cursor.read_entries(10)] == [Position(second, 0), Position(second, 1), Position(third, 0)]
    ml.close()
    assert [li.ledger_id for li in factory.open(name, config).ledger_infos()][:2] == [second, third]


def test_add_repeated_entries_equals_framed_adds_with_rollover(monkeypatch: pytest.MonkeyPatch) -> None:
    """The replay's bulk append (in adds of at most ``_REPEAT_CHUNK`` entries): the same
    positions, ledgers and sizes as one framed add."""
    from mledger import EntryMetadata, ManagedLedgerConfig, ManagedLedgerFactory
    from mledger.codec import encode_entry
    from mledger.replay import _store as replay_store
    from mledger.storage import MemoryStore

    monkeypatch.setattr(replay_store, "_REPEAT_CHUNK", 4)
    raw = encode_entry(b"xyz", EntryMetadata())
    for max_entries, max_mb, counts in ((7, 100, [3, 20, 0, 1, 9]), (1000, 1, [0, 5]), (50_000, 100, [12])):
        config = ManagedLedgerConfig(
            retain_without_subscriptions=True, max_entries_per_ledger=max_entries, max_size_per_ledger_mb=max_mb
        )
        stores = [MemoryStore(), MemoryStore()]
        a = ManagedLedgerFactory(stores[0]).open("t/a", config)
        b = ManagedLedgerFactory(stores[1]).open("t/a", config)
        for n in counts:
            last = add_repeated_entries(a, raw, n)
            positions = b.add_entries([raw] * n, framed=True)
            assert last == (positions[-1] if positions else None)
        assert [(i.ledger_id, i.entries, i.size) for i in a.ledger_infos()] == [
            (i.ledger_id, i.entries, i.size) for i in b.ledger_infos()
        ]
        assert a.last_confirmed_entry == b.last_confirmed_entry
        a._check()
    big = ManagedLedgerFactory(MemoryStore()).open(
        "t/big", ManagedLedgerConfig(retain_without_subscriptions=True, max_size_per_ledger_mb=1)
    )
    add_repeated_entries(big, b"\0" * 300_000, 10)  # the size limit rolls every 4th entry
    assert [i.entries for i in big.ledger_infos()][:2] == [4, 4]
    with pytest.raises(ValueError):
        add_repeated_entries(big, raw, -1)


# -- non-durable cursors are listed by their ledger (Pulsar's getCursors) -------------------


# NonDurableCursorTest.testCursorWithNameIsCachable
def test_non_durable_cursor_with_a_name_is_cachable() -> None:
    ml = open_ml(max_entries=1)
    p1, p2 = ml.add_entry(b"entry-1"), ml.add_entry(b"entry-2")
    c1 = ml.open_non_durable_cursor(p1, "entry-1")
    c2 = ml.open_non_durable_cursor(p1, "entry-1")
    c3 = ml.open_non_durable_cursor(p2, "entry-2")
    c4 = ml.open_non_durable_cursor(p2, "entry-2")
    assert c1 is c2 and c3 is c4 and c1 is not c3
    unnamed = ml.open_non_durable_cursor(p1)
    assert unnamed.name.startswith("non-durable-cursor-") and unnamed is not ml.open_non_durable_cursor(p1)


# NonDurableCursorTest.deleteNonDurableCursorWithName
def test_delete_non_durable_cursor_with_name() -> None:
    ml = open_ml()
    c = ml.open_non_durable_cursor(EARLIEST, "custom-name")
    assert ml.all_cursors == [c] and ml.non_durable_cursors == [c] and ml.cursors == []
    assert ml.get_cursor("custom-name") is c
    ml.delete_cursor(c.name)
    assert ml.all_cursors == [] and c.is_closed
    with pytest.raises(NotFoundError):
        ml.get_cursor("custom-name")


def test_non_durable_cursors_are_listed_while_open_and_never_persisted() -> None:
    store = MemoryStore()
    ml = open_ml(store=store)
    durable = ml.open_cursor("sub")
    reader = ml.open_non_durable_cursor(EARLIEST, "reader-1")
    assert [c.name for c in ml.all_cursors] == ["sub", "reader-1"]
    assert ml.stats().cursors == 1 and ml.stats().non_durable_cursors == 1
    assert ml.cursor_names() == ["sub"]  # names stored in the metadata store
    reader.close()
    assert ml.all_cursors == [durable] and ml.non_durable_cursors == []
    ml.open_non_durable_cursor(EARLIEST, "reader-2")
    ml.close()
    reopened = ManagedLedgerFactory(store).open("ml")
    assert [c.name for c in reopened.all_cursors] == ["sub"]


# NonDurableCursorTest.testGetSlowestConsumer
def test_non_durable_cursors_do_not_count_for_the_slowest_position() -> None:
    ml = open_ml()
    p1, p2, p3 = (ml.add_entry(b"e%d" % i) for i in range(3))
    cursor1 = ml.open_cursor("cursor1")
    cursor1.mark_delete(p3)
    assert ml.slowest_cursor_position() == p3
    reader = ml.open_non_durable_cursor(p2, "non-durable-cursor1")
    earliest = ml.open_non_durable_cursor(Position(-1, -2), "non-durable-cursor-earliest")
    assert ml.slowest_cursor_position() == p3
    for position in (p1, p2, p3):
        earliest.mark_delete(position)
        assert ml.slowest_cursor_position() == p3
    reader.mark_delete(p3)
    assert ml.slowest_cursor_position() == p3


# -- sizes (Pulsar's totalSize, ledger sizes, entriesAddedCounter) ---------------------------------


def test_sizes_are_tracked_as_entries_are_added_and_survive_a_reopen(tmp_path: object) -> None:
    from mledger.storage import SqliteStore

    path = tmp_path / "data"  # type: ignore[operator]
    factory = ManagedLedgerFactory(SqliteStore(path))
    ml = factory.open("ml", ManagedLedgerConfig(retain_without_subscriptions=True, max_entries_per_ledger=3))
    ml.open_cursor("c", InitialPosition.EARLIEST)
    positions = ml.add_entries([b"x" * n for n in (10, 20, 30, 40, 50)])
    raw = [len(e.raw) for e in ml.read_positions(positions)]
    stats = ml.stats()
    assert stats.total_size == ml.total_size == sum(raw)
    assert [li.size for li in ml.ledger_infos()] == [sum(raw[:3]), sum(raw[3:])]
    assert (stats.current_ledger_entries, stats.current_ledger_size) == (2, sum(raw[3:]))
    assert (stats.number_of_entries, stats.entries_added_counter) == (5, 5)
    factory.close()

    factory = ManagedLedgerFactory(SqliteStore(path))
    ml = factory.open("ml", ManagedLedgerConfig(retain_without_subscriptions=True, max_entries_per_ledger=3))
    stats = ml.stats()
    # The ledger that was open is measured from the store (BookKeeper's ledger length).
    assert stats.total_size == sum(raw) and stats.number_of_entries == 5
    assert [li.size for li in ml.ledger_infos()] == [sum(raw[:3]), sum(raw[3:]), 0]
    assert stats.entries_added_counter == 0  # Pulsar counts what was added since the ML opened
    assert ml.get_cursor("c").number_of_entries_in_backlog(precise=False) == 5
    ml.add_entry(b"y")
    assert ml.stats().entries_added_counter == 1
    factory.close()


def test_trimming_takes_the_trimmed_ledgers_out_of_the_sizes() -> None:
    ml = open_ml(max_entries=2)
    cursor = ml.open_cursor("c", InitialPosition.EARLIEST)
    positions = ml.add_entries([b"x" * 100] * 5)
    before = ml.total_size
    first = ml.ledger_infos()[0].size
    cursor.mark_delete(positions[1])
    settled(ml)
    assert ml.total_size == before - first
    assert ml.stats().number_of_entries == 3 and ml.stats().trimmed_ledgers_total == 1


def test_estimated_backlog_size_is_pulsars() -> None:
    # ManagedLedgerImpl.getEstimatedBacklogSize: the ledgers after the slowest cursor's one in
    # full, plus the unconsumed part of its ledger at that ledger's average entry size.
    ml = open_ml(max_entries=4)
    cursor = ml.open_cursor("c", InitialPosition.EARLIEST)
    positions = ml.add_entries([b"x" * 96] * 10)  # ledgers of 4, 4 and 2
    sizes = [li.size for li in ml.ledger_infos()]
    assert ml.estimated_backlog_size() == sum(sizes)
    cursor.mark_delete(positions[5])  # the second entry of the second ledger
    assert ml.estimated_backlog_size() == sum(sizes[1:]) - 2 * (sizes[1] // 4)


def test_add_repeated_entries_builds_no_object_per_entry() -> None:
    """The replay's bulk add is O(ledgers touched) in the managed ledger: a million entries
    allocate a few lists of one store call's size (64 Ki pointers, 0.5 MiB each) at a time, not
    a Position per entry (11 MiB at the peak; the replay engine lost 15 % of its speed to it)."""
    import tracemalloc

    from mledger import EntryMetadata, ManagedLedgerConfig, ManagedLedgerFactory
    from mledger.codec import encode_entry
    from mledger.replay._store import ReplayStore

    config = ManagedLedgerConfig(max_entries_per_ledger=300_000, retain_without_subscriptions=True)
    ml = ManagedLedgerFactory(ReplayStore()).open("t/bulk", config)
    raw = encode_entry(b"", EntryMetadata())
    tracemalloc.start()
    try:
        last = add_repeated_entries(ml, raw, 1_000_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert last is not None and ml.stats().number_of_entries == 1_000_000
    assert [li.entries for li in ml.ledger_infos()] == [300_000, 300_000, 300_000, 100_000]
    assert peak < 4 << 20, peak
