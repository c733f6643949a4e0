"""Issue 32 items 1 and 2: one ack seam. A cursor's acknowledgement state applies one resolved
plan and returns one outcome; its single-entry method is the same steps (same state, same
outcome, same refusals), and so are its shortcuts for a plan of one entry and a bulk plan; a
``CommandAck`` crosses into the managed ledger once and the dispatcher twice at most; a moved
name warns."""

from __future__ import annotations

import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import numpy as np
import pulsar
import pytest
from hypothesis import given, settings, strategies as st

from mledger import (
    InvalidPositionError,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    MarkDeletingMarkedPositionError,
    Position,
)
from mledger.broker import AckRequest, Broker, BrokerConfig, Dispatcher, ManualClock, MessageId, SubscriptionType
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.core import _deprecation as deprecation
from mledger.managed_ledger import (
    ACKED,
    BATCH_STATE_DROPPED,
    MARK_DELETE_MOVED,
    AckOutcome,
    AckPlan,
    AckState,
    InitialPosition,
    ManagedCursor,
    _ack_state,
)
from mledger.protocol import EmbeddedBroker
from mledger.protocol._consuming import ConsumerCommands
from mledger.storage import MemoryStore

ENTRIES = 12
PER_LEDGER = 5
SIZE = 4


def _ledger(batch_level: bool = True, batches: bool = False) -> ManagedLedger:
    """Twelve entries over ledgers of five (the last one open); with ``batches`` every third
    entry is a batch of three messages."""
    factory = ManagedLedgerFactory(MemoryStore())
    config = ManagedLedgerConfig(max_entries_per_ledger=PER_LEDGER, deletion_at_batch_index_level_enabled=batch_level)
    ml = factory.open("seam", config)
    ml.open_cursor("keep", InitialPosition.EARLIEST)  # holds the ledgers back from trimming
    ml.add_entries([b"x"] * ENTRIES)
    if batches:
        for position in _positions(ml)[::3]:
            ml.record_entry_messages(position, [3])
    return ml


def _positions(ml: ManagedLedger) -> list[Position]:
    out = [ml.next_valid_position(ml.first_position())]
    while len(out) < ENTRIES:
        out.append(ml.next_valid_position(out[-1]))
    return out


def _invalid(ml: ManagedLedger) -> list[Position]:
    """Beyond the last confirmed entry; past the end of a closed ledger; entry id -1."""
    first, lac = ml.first_position(), ml.last_confirmed_entry
    return [Position(lac.ledger_id, lac.entry_id + 3), Position(first.ledger_id, PER_LEDGER + 2),
            Position(ml.next_ledger_id(first.ledger_id) or 0, -1)]  # fmt: skip


def _state_of(state: AckState) -> tuple[object, ...]:
    return state.mark_delete, str(state.acked), state.batch_states(), dict(state.batch_sizes)


def _outcome_of_flags(flags: int, position: Position, before: Position, after: Position) -> dict[str, object]:
    """The outcome the single-entry method's flags stand for (what the general method returns)."""
    return {
        "mark_delete_before": before,
        "mark_delete_after": after,
        "entries_acked": 1 if flags & ACKED else 0,
        "deleted": [list(position)] if position > before else [],
        "batch_acked": (),
        "moved": bool(flags & MARK_DELETE_MOVED),
    }


def _view(outcome: AckOutcome) -> dict[str, object]:
    return {
        "mark_delete_before": outcome.mark_delete_before,
        "mark_delete_after": outcome.mark_delete_after,
        "entries_acked": outcome.entries_acked,
        "deleted": outcome.deleted.tolist(),
        "batch_acked": outcome.batch_acked,
        "moved": outcome.mark_delete_moved,
    }


step = st.one_of(
    st.tuples(st.just("entries"), st.lists(st.integers(0, ENTRIES - 1), max_size=20)),
    st.tuples(st.just("ack_set"), st.integers(0, ENTRIES - 1), st.integers(0, (1 << SIZE) - 1)),
    st.tuples(st.just("mark"), st.integers(0, ENTRIES - 1), st.sampled_from([None, 0b1100, 0b1000])),
)


def _apply(state: AckState, positions: list[Position], s: tuple[Any, ...]) -> None:
    """One step of a random history, applied through the general method (refusals ignored)."""
    if s[0] == "entries":
        plan = AckPlan.of(entries=[positions[k] for k in s[1]])
    elif s[0] == "ack_set":
        plan = AckPlan.of(ack_sets=[(positions[s[1]], s[2], SIZE)])
    else:
        plan = AckPlan.cumulative(positions[s[1]], ack_set=s[2])
    try:
        state.apply(plan)
    except MarkDeletingMarkedPositionError:  # a mark-delete behind the current one: nothing changed
        pass


@settings(max_examples=150, deadline=None)
@given(history=st.lists(step, max_size=12), pick=st.integers(0, ENTRIES + 2), batch_level=st.booleans())
def test_the_single_entry_method_is_the_one_entry_plan(
    history: list[tuple[Any, ...]], pick: int, batch_level: bool
) -> None:
    """``AckState.ack_entry(p)`` and ``AckState.apply(AckPlan.of(entries=[p]))`` from the same
    state leave the same state, return the same outcome and refuse the same positions."""
    ml = _ledger(batch_level)
    positions = _positions(ml)
    single, general = AckState(ml, ml.previous_position(positions[0])), AckState(ml, ml.previous_position(positions[0]))
    for s in history:
        _apply(single, positions, s)
        _apply(general, positions, s)
        single._check()
    assert _state_of(single) == _state_of(general)
    position = (positions + _invalid(ml))[pick]
    before = single.mark_delete
    had_batch_state = single.batch_ack_set(position) is not None
    errors: list[str] = []
    try:
        flags = single.ack_entry(position)
    except InvalidPositionError as exc:
        errors.append(str(exc))
    try:
        outcome = general.apply(AckPlan.of(entries=[position]))
    except InvalidPositionError as exc:
        errors.append(str(exc))
    single._check()
    general._check()
    assert _state_of(single) == _state_of(general)
    if errors:
        assert len(errors) == 2 and errors[0] == errors[1]  # the same refusal, nothing changed
        return
    assert _outcome_of_flags(flags, position, before, single.mark_delete) == _view(outcome)
    assert bool(flags & BATCH_STATE_DROPPED) == (had_batch_state and bool(flags))


def _rows(ml: ManagedLedger, picks: list[int]) -> np.ndarray:
    """The entries picked (an index past them: a row no plan may name: right after the last
    confirmed entry, right after a closed ledger's end, entry -1 there, an entry id past 32
    bits, a ledger that is not there, a ledger id past 32 bits)."""
    positions = _positions(ml)
    closed, lac = positions[-3].ledger_id, ml.last_confirmed_entry  # the last closed ledger
    bad = [(lac.ledger_id, lac.entry_id + 1), (closed, PER_LEDGER), (closed, -1),
           (closed, (1 << 32) + 1), (lac.ledger_id + 50, 0), (1 << 40, 3)]  # fmt: skip
    table = [tuple(p) for p in positions] + bad
    return np.array([table[k] for k in picks], dtype=np.int64).reshape(-1, 2)


ROWS_PATH = 2
"""``SCALAR_ROWS`` for the state under test: a plan of more rows takes the vectorised path."""
pick = st.integers(0, ENTRIES - 1)
bad_pick = st.integers(ENTRIES, ENTRIES + 5)


@st.composite
def bulk(draw: st.DrawFn) -> list[int]:
    """A plan past ``ROWS_PATH`` rows: entries with repeats or without (then one bitmap per
    ledger may hold them all), and none, one or two rows no plan may name, anywhere."""
    unique = draw(st.booleans())
    picks = draw(st.lists(pick, min_size=ROWS_PATH + 1, max_size=ENTRIES if unique else 40, unique=unique))
    for bad in draw(st.lists(bad_pick, max_size=2)):
        picks.insert(draw(st.integers(0, len(picks))), bad)
    return picks


rows_step = st.one_of(step, st.tuples(st.just("rows"), bulk()), st.tuples(st.just("weigh")))


def _apply_rows(state: AckState, ml: ManagedLedger, s: tuple[Any, ...], scalar_rows: int) -> None:
    """:func:`_apply`, and plans of rows (refusals ignored) with ``SCALAR_ROWS`` at
    ``scalar_rows``, and counting the messages (from there on the bulk adds keep the count)."""
    if s[0] == "weigh":
        state.acked.extra_messages(ml.entry_messages)
    elif s[0] == "rows":
        _outcome_or_refusal(state, AckPlan.of(entries=_rows(ml, s[1])), scalar_rows)
    else:
        _apply(state, _positions(ml), s)


def _outcome_or_refusal(state: AckState, plan: AckPlan, scalar_rows: int) -> dict[str, object] | str:
    with mock.patch.object(_ack_state, "SCALAR_ROWS", scalar_rows):
        try:
            outcome = state.apply(plan)
        except InvalidPositionError as exc:
            return str(exc)
    return {**_view(outcome), "persist": outcome.persist}


def _counted_state_of(state: AckState, ml: ManagedLedger) -> tuple[object, ...]:
    """:func:`_state_of`, the messages counted and the partial acks ignored."""
    return *_state_of(state), state.acked.extra_messages(ml.entry_messages), state.ignored_batch_states()[0]


def _two_states(history: list[tuple[Any, ...]], batch_level: bool) -> tuple[ManagedLedger, AckState, AckState]:
    """The same history through the shortcuts and through the position-by-position path."""
    ml = _ledger(batch_level, batches=True)
    start = ml.previous_position(_positions(ml)[0])
    fast, general = AckState(ml, start), AckState(ml, start)
    for s in history:
        _apply_rows(fast, ml, s, ROWS_PATH)
        _apply_rows(general, ml, s, 1 << 30)
        fast._check()
    assert _counted_state_of(fast, ml) == _counted_state_of(general, ml)
    return ml, fast, general


@settings(max_examples=200, deadline=None)
@given(history=st.lists(rows_step, max_size=10), picks=bulk(), batch_level=st.booleans())
def test_a_bulk_plan_leaves_what_the_position_by_position_path_leaves(
    history: list[tuple[Any, ...]], picks: list[int], batch_level: bool
) -> None:
    """A plan past ``SCALAR_ROWS`` rows (the vectorised checks, one bitmap per ledger) and the
    same plan position by position leave the same state (messages counted included), return
    the same outcome and refuse with the same error (a plan the vectorised checks do not pass
    goes position by position: the first bad row)."""
    ml, fast, general = _two_states(history, batch_level)
    plan = AckPlan.of(entries=_rows(ml, picks))
    assert _outcome_or_refusal(fast, plan, ROWS_PATH) == _outcome_or_refusal(general, plan, 1 << 30)
    fast._check()
    assert _counted_state_of(fast, ml) == _counted_state_of(general, ml)


@settings(max_examples=150, deadline=None)
@given(history=st.lists(rows_step, max_size=10), one=st.integers(0, ENTRIES + 5), batch_level=st.booleans())
def test_a_one_entry_plan_leaves_what_the_position_by_position_path_leaves(
    history: list[tuple[Any, ...]], one: int, batch_level: bool
) -> None:
    """A plan of one whole entry (``ack_entry``, an outcome from its flags) leaves the state
    the position-by-position path leaves for the entry named twice, with the same outcome but
    for the entry listed once, and the same refusal."""
    ml, fast, general = _two_states(history, batch_level)
    got = _outcome_or_refusal(fast, AckPlan.of(entries=_rows(ml, [one])), ROWS_PATH)
    expected = _outcome_or_refusal(general, AckPlan.of(entries=_rows(ml, [one, one])), 1 << 30)
    fast._check()
    if isinstance(expected, dict):
        expected["deleted"] = expected["deleted"][:1]  # type: ignore[index]
    assert got == expected
    assert _counted_state_of(fast, ml) == _counted_state_of(general, ml)


def test_an_outcome_says_what_the_plan_changed() -> None:
    ml = _ledger()
    p = _positions(ml)
    state = AckState(ml, ml.previous_position(p[0]))
    outcome = state.apply(AckPlan.of(entries=[p[2], p[3]], ack_sets=[(p[1], 0b1010, SIZE)]))
    assert (outcome.entries_acked, outcome.deleted.tolist()) == (2, [list(p[2]), list(p[3])])
    assert outcome.batch_acked == ((p[1], 0b0101),) and not outcome.mark_delete_moved
    outcome = state.apply(AckPlan.of(ack_sets=[(p[1], 0b0101, SIZE)]))  # its last indexes: the entry
    assert outcome.entries_acked == 1 and outcome.deleted.tolist() == [list(p[1])] and outcome.batch_acked == ()
    outcome = state.apply(AckPlan.of(entries=[p[0], p[2]]))  # closes the hole: the mark-delete absorbs
    assert outcome.entries_acked == 1 and outcome.mark_delete_after == p[3]
    assert outcome.deleted.tolist() == [list(p[0]), list(p[2])]  # named above the mark-delete, new or not
    outcome = state.apply(AckPlan.cumulative(p[7], ack_set=0b1100))  # up to p[6], p[7] in part
    assert (outcome.mark_delete_before, outcome.mark_delete_after, outcome.entries_acked) == (p[3], p[6], 3)
    assert state.batch_ack_set(p[7]) == 0b1100
    state._check()


def test_ack_sets_are_ignored_without_batch_index_deletion_but_an_empty_one_acks_the_entry() -> None:
    ml = _ledger(batch_level=False)
    p = _positions(ml)
    state = AckState(ml, ml.previous_position(p[0]))
    outcome = state.apply(AckPlan.of(ack_sets=[(p[1], 0b0110, SIZE), (p[2], 0, SIZE)]))
    assert outcome.batch_acked == () and state.batch_states() == ()
    assert outcome.entries_acked == 1 and outcome.deleted.tolist() == [list(p[2])]


@settings(max_examples=100, deadline=None)
@given(history=st.lists(step, max_size=14))
def test_the_ignored_ack_sets_are_kept_as_each_change_goes(history: list[tuple[Any, ...]]) -> None:
    """Without batch-index deletion the ack sets the state ignores (for the restart figures)
    are those of the entries above the mark-delete not acknowledged whole, AND-merged: the
    state keeps exactly these as it goes (an entry leaves when it is acknowledged whole or the
    mark-delete passes it) where it used to keep every one and filter them when asked; and
    the journal of their changes names every position that changed (the restart figures
    count only those)."""
    ml = _ledger(batch_level=False)
    positions = _positions(ml)
    state = AckState(ml, ml.previous_position(positions[0]))
    given: dict[Position, int] = {}  # every ack set given, AND-merged: the oracle, filtered below
    for s in history:
        md = state.mark_delete
        view, sizes_before = state.ignored_batch_states()
        before = {p: (bits, sizes_before.get(p)) for p, bits in view}
        _apply(state, positions, s)
        state._check()
        after_view, sizes_after = state.ignored_batch_states()
        after = {p: (bits, sizes_after.get(p)) for p, bits in after_view}
        changed = after_view.changes.since(view.generation)
        assert after_view.is_current and after_view.live == dict(after_view)
        if changed is not None:  # else forgotten (a reset): a reader counts every state again
            # the journal names every position whose state or batch size changed
            assert {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)} <= set(changed)
        if s[0] == "ack_set" and s[2] and not state.is_deleted(positions[s[1]]):
            given[positions[s[1]]] = given.get(positions[s[1]], s[2]) & s[2]
        elif s[0] == "mark" and s[2] is not None and positions[s[1]] > md:
            given[positions[s[1]]] = given.get(positions[s[1]], s[2]) & s[2]
    expected = tuple(sorted((p, bits) for p, bits in given.items() if not state.is_deleted(p)))
    states, sizes = state.ignored_batch_states()
    assert states == expected
    assert state.has_ignored_batch == bool(expected) and state.counted_state_count() == len(expected)
    assert sizes.keys() <= {p for p, _ in expected}
    assert all(state.counted_ack_set(p) == bits for p, bits in expected)


@settings(max_examples=100, deadline=None)
@given(history=st.lists(step, max_size=14), cap=st.sampled_from([2, 100]))
def test_a_tally_of_the_ignored_acks_following_their_journal_equals_a_fresh_count(
    history: list[tuple[Any, ...]], cap: int
) -> None:
    """The restart figures' batch tally, counting the ignored partial acks after each change
    by the positions their journal names, gives what a fresh tally of the same states gives
    (the batch sizes the ledger lacks recorded after each count, as the figures do)."""
    from types import MappingProxyType

    from mledger.managed_ledger._cursor_snapshot import CursorSnapshot
    from mledger.managed_ledger._restart_figures import _BatchTally

    ml = _ledger(batch_level=False, batches=True)
    positions = _positions(ml)
    state = AckState(ml, ml.previous_position(positions[0]))
    running, nothing_held = _BatchTally(), MappingProxyType({})
    for s in history:
        _apply(state, positions, s)
        states, sizes = state.ignored_batch_states()
        snapshot = CursorSnapshot(state.mark_delete, state.acked, states, {}, {}, MappingProxyType(sizes))
        running.count(snapshot, nothing_held, ml.entry_messages, cap)
        fresh = _BatchTally()
        fresh.count(snapshot, nothing_held, ml.entry_messages, cap)
        got = (running.lost, running.all, running.tail, running.words, running.unknown_sizes)
        assert got == (fresh.lost, fresh.all, fresh.tail, fresh.words, fresh.unknown_sizes)
        for position, size in running.unknown_sizes:
            ml.record_entry_messages(position, (size,))


def test_the_cursor_builds_plans_and_returns_the_outcome() -> None:
    ml = _ledger()
    p = _positions(ml)
    cursor = ml.open_cursor("c", InitialPosition.EARLIEST)
    assert isinstance(cursor, ManagedCursor)
    outcome = cursor.acknowledge(AckPlan.of(entries=[p[0], p[1]]))
    assert outcome.mark_delete_after == p[1] == cursor.mark_delete_position and cursor.messages_consumed_counter == 2
    assert cursor.delete_many([p[1], p[2]]) == 1
    cursor.mark_delete(p[5], {"k": 1})
    assert cursor.properties == {"k": 1} and cursor.read_position == p[6]
    cursor._check()


def test_the_old_spelling_of_ack_plan_warns_and_is_the_same_class() -> None:
    deprecation._WARNED.discard("mledger.managed_ledger._cursor_args.AckPlan")
    from mledger.managed_ledger import _cursor_args

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = _cursor_args.AckPlan
    assert old is AckPlan
    assert [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)] == [
        "mledger.managed_ledger._cursor_args.AckPlan is deprecated and will be removed in mledger "
        f"{deprecation.removal_release()}; use mledger.managed_ledger.AckPlan instead"
    ]


# -- what one CommandAck costs ------------------------------------------------------------------------------
MUTATIONS = ("acknowledge", "delete", "delete_many", "delete_batch_indexes", "delete_with_ack_set",
             "delete_with_ack_sets", "mark_delete")  # fmt: skip


class Crossings:
    """Per ``CommandAck`` the protocol session handles: the cursor mutations, position
    validations, receipt flushes and dispatcher calls made while handling it, on its thread
    (nested calls inside a counted one are not counted again)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.acks: list[Counter[str]] = []
        self._local = threading.local()
        handle = ConsumerCommands.handle_ack

        def counted_handle(session: Any, request: Any) -> None:
            self._local.counts, self._local.depth = Counter(), Counter()
            try:
                handle(session, request)
            finally:
                self.acks.append(self._local.counts)
                self._local.counts = None

        monkeypatch.setattr(ConsumerCommands, "handle_ack", counted_handle)  # sessions bind it when made
        for name in MUTATIONS:
            self._wrap(monkeypatch, ManagedCursor, name, "cursor mutation")
        self._wrap(monkeypatch, ManagedCursor, "flush", "flush")
        for name in ("_check_plan", "ack_entry"):
            self._wrap(monkeypatch, AckState, name, "validation")
        for name in [n for n in vars(Dispatcher) if not n.startswith("_") and callable(getattr(Dispatcher, n))]:
            self._wrap(monkeypatch, Dispatcher, name, f"dispatcher.{name}", group="dispatcher")

    def _wrap(self, monkeypatch: pytest.MonkeyPatch, owner: type, name: str, label: str, group: str = "") -> None:
        real = getattr(owner, name)
        group = group or label

        def counted(*args: Any, **kwargs: Any) -> Any:
            counts = getattr(self._local, "counts", None)
            if counts is None:
                return real(*args, **kwargs)
            depth = self._local.depth
            if not depth[group]:
                counts[label] += 1
            depth[group] += 1
            try:
                return real(*args, **kwargs)
            finally:
                depth[group] -= 1

        monkeypatch.setattr(owner, name, counted)

    def next(self, act: Callable[[], None]) -> Counter[str]:
        """Run ``act`` (which makes the client send one ack) and wait for its CommandAck."""
        before = len(self.acks)
        act()
        deadline = time.monotonic() + 30
        while len(self.acks) == before:
            assert time.monotonic() < deadline, "no CommandAck arrived"
            time.sleep(0.01)
        assert len(self.acks) == before + 1, "the client sent more than one CommandAck"
        return self.acks[-1]


@pytest.fixture
def client(pulsar_broker: EmbeddedBroker) -> Iterator[pulsar.Client]:
    c = pulsar.Client(pulsar_broker.service_url, operation_timeout_seconds=10,
                      logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))  # fmt: skip
    yield c
    c.close()


ONE_TRIP = {"cursor mutation": 1, "validation": 1}


@pytest.mark.timeout(120)
def test_one_command_ack_crosses_into_the_ledger_once(
    pulsar_broker: EmbeddedBroker, client: pulsar.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An individual, a batch-index and a cumulative ack: one cursor mutation, one validation,
    at most one dispatcher query (batch sizes and held indexes) and one notification."""
    crossings = Crossings(monkeypatch)
    shared = client.subscribe("trip", "shared", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True)
    exclusive = client.subscribe("trip", "exclusive")
    plain = client.create_producer("trip", batching_enabled=False)
    plain.send(b"one")
    plain.send(b"two")
    batched = client.create_producer("trip-batch", batching_enabled=True, batching_max_publish_delay_ms=50)
    batch_consumer = client.subscribe(
        "trip-batch", "shared", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True
    )
    for i in range(3):
        batched.send_async(b"%d" % i, None)
    batched.flush()

    got = [shared.receive(5000) for _ in range(2)]
    individual = crossings.next(lambda: shared.acknowledge(got[0]))
    assert individual == Counter({**ONE_TRIP, "dispatcher.on_acked": 1})

    batch = [batch_consumer.receive(5000) for _ in range(3)]
    index = crossings.next(lambda: batch_consumer.acknowledge(batch[1]))
    assert index == Counter({**ONE_TRIP, "dispatcher.held_batches": 1, "dispatcher.on_acked": 1})

    mine = [exclusive.receive(5000) for _ in range(2)]
    cumulative = crossings.next(lambda: exclusive.acknowledge_cumulative(mine[1]))
    assert cumulative == Counter({**ONE_TRIP, "dispatcher.on_acked": 1})
    sub = pulsar_broker.broker.get_subscription("persistent://public/default/trip", "exclusive")
    assert sub.cursor.mark_delete_position == sub.cursor.ledger.last_confirmed_entry


@pytest.mark.timeout(60)
def test_an_ack_with_a_receipt_adds_only_the_flush(
    pulsar_broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from protocol_raw import RawClient

    crossings = Crossings(monkeypatch)
    broker = pulsar_broker.broker
    topic = "persistent://public/default/receipt"
    broker.subscribe(topic, "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    mid = broker.create_producer(topic).send(b"x")
    raw = RawClient(pulsar_broker.port)
    _T = api.BaseCommand
    raw.send(_T(type=_T.SUBSCRIBE, subscribe=api.CommandSubscribe(
        topic=topic, subscription="s", subType=api.CommandSubscribe.Shared, consumer_id=1, request_id=1)))  # fmt: skip
    assert raw.next_command().type == _T.SUCCESS
    ack = api.CommandAck(consumer_id=1, ack_type=api.CommandAck.Individual, request_id=2,
                         message_id=[api.MessageIdData(ledgerId=mid.ledger_id, entryId=mid.entry_id)])  # fmt: skip
    counts = crossings.next(lambda: raw.send(_T(type=_T.ACK, ack=ack)))
    assert raw.next_command().type == _T.ACK_RESPONSE
    assert counts == Counter({**ONE_TRIP, "dispatcher.on_acked": 1, "flush": 1})
    raw.close()


def test_the_replay_passes_batch_sizes_and_reads_the_outcome() -> None:
    """A batch-index ack whose entry no consumer holds: the request's batch size is used, no
    entry is read, and the outcome says what changed."""
    clock = ManualClock(0)
    broker = Broker(ManagedLedgerFactory(MemoryStore(), clock=clock), BrokerConfig(), clock=clock)
    sub = broker.subscribe("sizes", "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    position = broker.create_producer("sizes").send(b"not a batch").position  # read back: 1 message
    consumer = sub.add_consumer(permits=0)
    ids = [MessageId(position.ledger_id, position.entry_id, -1, i) for i in (0, 2)]
    outcome = consumer.acknowledge_with_outcome(AckRequest(message_ids=ids, batch_sizes={position: 3}))
    assert outcome.batch_acked == ((position, 0b101),) and sub.cursor.batch_ack_set(position) == 0b010
    outcome = consumer.acknowledge_with_outcome(
        AckRequest(message_ids=[MessageId(position.ledger_id, position.entry_id, -1, 1)], batch_sizes={position: 3})
    )
    assert outcome.entries_acked == 1 and outcome.mark_delete_moved and sub.backlog() == 0
