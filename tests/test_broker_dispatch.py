"""Subscription types, acknowledgements, redelivery, permits, delayed delivery, Key_Shared rules,
dispatcher resets (seeds/002) and admin cursor operations, through the public broker API."""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import pytest

from mledger import (
    ConcurrentResetError,
    InvalidPositionError,
    InvalidRequestError,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    MemoryStore,
    NotAllowedError,
    NotFoundError,
    Position,
)
from mledger.broker import (
    AckType,
    AlreadyClosedError,
    Broker,
    BrokerConfig,
    Consumer,
    ConsumerBusyError,
    InitialPosition,
    ManualClock,
    Message,
    MessageId,
    SkipEntry,
    Subscription,
    SubscriptionType,
    sticky_key_hash,
)
from mledger.broker._keyshared import ConsistentHashRing
from mledger.storage import HeldReadStore

EXCLUSIVE, SHARED = SubscriptionType.EXCLUSIVE, SubscriptionType.SHARED
FAILOVER, KEY_SHARED = SubscriptionType.FAILOVER, SubscriptionType.KEY_SHARED


class Env:
    """A broker with topic ``orders``, subscription ``s`` (from the earliest position), a producer."""

    def __init__(self, sub_type: SubscriptionType, store: MemoryStore | HeldReadStore | None = None,
                 ml_config: ManagedLedgerConfig | None = None, **config: object) -> None:
        self.clock = ManualClock(0)
        self.broker = Broker(
            ManagedLedgerFactory(store, clock=self.clock),
            BrokerConfig(managed_ledger_config=ml_config, **config),  # type: ignore[arg-type]
            clock=self.clock,
        )
        sub = self.broker.subscribe("orders", "s", sub_type, InitialPosition.EARLIEST)
        assert isinstance(sub, Subscription)
        self.sub = sub
        self.producer = self.broker.create_producer("orders", "p")

    def publish(self, n: int, keys: list[str] | None = None, prefix: str = "m") -> list[MessageId]:
        return [
            self.producer.send(f"{prefix}{i}".encode(), key=None if keys is None else keys[i % len(keys)])
            for i in range(n)
        ]


def data(messages: list[Message]) -> list[str]:
    return [m.data.decode() for m in messages]


def drain(consumer: Consumer, ack: bool = True) -> list[Message]:
    out: list[Message] = []
    while batch := consumer.receive(50):
        out.extend(batch)
        if ack:
            consumer.acknowledge(batch)
    return out


def keys_owned(names: list[str], owner: str, count: int, prefix: str = "key") -> list[str]:
    """Keys whose sticky hash a ring of ``names`` gives to ``owner`` (the dispatcher's own ring)."""
    ring: ConsistentHashRing[str] = ConsistentHashRing(100)
    for n in names:
        ring.add(n, n)
    out: list[str] = []
    i = 0
    while len(out) < count:
        key = f"{prefix}-{i}"
        if ring.select(sticky_key_hash(key)) == owner:
            out.append(key)
        i += 1
    return out


# -- Exclusive -------------------------------------------------------------------------------------


def test_exclusive_allows_one_consumer() -> None:
    env = Env(EXCLUSIVE)
    c = env.sub.add_consumer("c1")
    with pytest.raises(ConsumerBusyError, match="Exclusive consumer is already connected") as info:
        env.sub.add_consumer("c2")
    assert info.value.http_status == 409
    c.close()
    env.sub.add_consumer("c2")


def test_exclusive_delivers_in_order_and_acks_cumulatively() -> None:
    env = Env(EXCLUSIVE)
    ids = env.publish(5)
    c = env.sub.add_consumer("c")
    msgs = c.receive(10)
    assert data(msgs) == ["m0", "m1", "m2", "m3", "m4"]
    assert [m.message_id for m in msgs] == ids and all(m.redelivery_count == 0 for m in msgs)
    c.acknowledge_cumulative(msgs[2])
    assert env.sub.cursor.mark_delete_position == ids[2].position and env.sub.backlog() == 2
    assert c.unacked_messages == 2
    c.acknowledge_cumulative(msgs[1])  # behind the mark-delete position: ignored, as Pulsar does
    assert env.sub.cursor.mark_delete_position == ids[2].position
    with pytest.raises(InvalidPositionError, match="does not exist"):
        c.acknowledge_cumulative(MessageId(ids[0].ledger_id, 99))
    c.acknowledge(msgs[4])  # individual acks are allowed on Exclusive too
    c.acknowledge(msgs[3], AckType.CUMULATIVE)
    assert env.sub.backlog() == 0 and c.unacked_messages == 0


def test_exclusive_negative_ack_redelivers_everything_unacked_in_order() -> None:
    env = Env(EXCLUSIVE)
    env.publish(5)
    c = env.sub.add_consumer("c")
    msgs = c.receive(10)
    c.acknowledge(msgs[0])
    c.negative_acknowledge(msgs[2])
    again = c.receive(10)
    assert data(again) == ["m1", "m2", "m3", "m4"]
    assert [m.redelivery_count for m in again] == [1, 1, 1, 1]
    c.redeliver_unacknowledged_messages()
    assert [m.redelivery_count for m in c.receive(10)] == [2, 2, 2, 2]


def test_exclusive_ignores_deliver_at_times() -> None:
    env = Env(EXCLUSIVE)
    env.producer.send(b"later", deliver_at_ms=60_000)
    c = env.sub.add_consumer("c")
    assert data(c.receive()) == ["later"]


def test_cumulative_ack_inside_a_batch_keeps_the_rest_of_it() -> None:
    env = Env(EXCLUSIVE)
    ids = env.producer.send_batch([b"b0", b"b1", b"b2", b"b3"])
    env.publish(1)
    c = env.sub.add_consumer("c")
    msgs = c.receive(10)
    assert data(msgs) == ["b0", "b1", "b2", "b3", "m0"]
    c.acknowledge_cumulative(msgs[1])
    assert env.sub.cursor.batch_ack_set(ids.position) == 0b1100
    c.negative_acknowledge(msgs[2])
    assert data(c.receive(10)) == ["b2", "b3", "m0"]
    c.acknowledge_cumulative(ids[3])  # the last index: the whole entry
    assert env.sub.cursor.mark_delete_position == ids.position


# -- Failover ---------------------------------------------------------------------------------------


def test_failover_active_consumer_and_switch_redelivers_in_order() -> None:
    env = Env(FAILOVER)
    env.publish(4)
    b = env.sub.add_consumer("b")
    assert data(b.receive(2)) == ["m0", "m1"]
    a = env.sub.add_consumer("a")  # sorts first: becomes active, gets everything unacked
    assert env.sub.active_consumer is a
    assert b.receive() == []
    got = a.receive()
    assert data(got) == ["m0", "m1", "m2", "m3"] and {m.redelivery_count for m in got} == {1}
    a.acknowledge(got[0])
    a.close()
    assert env.sub.active_consumer is b
    assert data(b.receive()) == ["m1", "m2", "m3"]


def test_failover_on_partitions_spreads_active_consumers() -> None:
    broker = Broker(ManagedLedgerFactory(), clock=ManualClock(0))
    broker.create_topic("pay", partitions=2)
    psub = broker.subscribe("pay", "s", FAILOVER, InitialPosition.EARLIEST)
    psub.add_consumer("a")
    psub.add_consumer("b")
    assert [s.active_consumer.name for s in psub.partitions] == ["a", "b"]  # type: ignore[union-attr]


# -- Shared -----------------------------------------------------------------------------------------


def test_shared_round_robin_over_consumers_with_permits() -> None:
    env = Env(SHARED)
    env.publish(6)
    c1 = env.sub.add_consumer("c1", permits=2)
    c2 = env.sub.add_consumer("c2", permits=2)
    assert data(c1.receive(10)) == ["m0", "m2", "m4", "m5"]
    assert data(c2.receive(10)) == ["m1", "m3"]


def test_shared_refuses_cumulative_acks() -> None:
    for sub_type in (SHARED, KEY_SHARED):
        env = Env(sub_type)
        env.publish(1)
        c = env.sub.add_consumer("c")
        msg = c.receive()[0]
        with pytest.raises(NotAllowedError, match="Cannot use cumulative acks") as info:
            c.acknowledge_cumulative(msg)
        assert info.value.http_status == 405
        with pytest.raises(NotAllowedError, match="Cannot use cumulative acks"):
            c.acknowledge(msg, AckType.CUMULATIVE)
        assert env.sub.backlog() == 1
        c.acknowledge(msg, AckType.INDIVIDUAL)
        assert env.sub.backlog() == 0


def test_shared_negative_ack_redelivers_only_that_message() -> None:
    env = Env(SHARED)
    env.publish(3)
    c = env.sub.add_consumer("c")
    msgs = c.receive()
    c.negative_acknowledge(msgs[1])
    c.negative_acknowledge(MessageId(msgs[0].message_id.ledger_id, 0))  # twice: it is no longer held
    again = c.receive()
    assert data(again) == ["m0", "m1"] and [m.redelivery_count for m in again] == [1, 1]
    c.acknowledge(msgs[2])
    c.acknowledge(again)
    assert env.sub.backlog() == 0 and c.receive() == []


def test_shared_consumer_closing_hands_its_messages_to_the_others() -> None:
    env = Env(SHARED)
    env.publish(5)
    c1 = env.sub.add_consumer("c1")
    got = c1.receive()
    c2 = env.sub.add_consumer("c2")
    c1.acknowledge(got[0])
    c1.close()
    c1.close()  # idempotent
    again = c2.receive()
    assert data(again) == ["m1", "m2", "m3", "m4"] and {m.redelivery_count for m in again} == {1}
    with pytest.raises(AlreadyClosedError):
        c1.receive()
    with pytest.raises(AlreadyClosedError):
        c1.acknowledge(got[1])


def test_max_unacked_messages_per_consumer_blocks_delivery() -> None:
    env = Env(SHARED, max_unacked_messages_per_consumer=2)
    env.publish(4)
    c = env.sub.add_consumer("c")
    first = c.receive()
    assert data(first) == ["m0", "m1"] and c.receive() == []
    c.acknowledge(first[0])
    assert data(c.receive()) == ["m2"]


def test_max_unacked_messages_per_subscription_stops_reading() -> None:
    env = Env(SHARED, max_unacked_messages_per_subscription=3, dispatcher_max_read_batch_size=1)
    env.publish(5)
    c = env.sub.add_consumer("c")
    got = c.receive()
    assert data(got) == ["m0", "m1", "m2"]
    c.acknowledge(got)
    assert data(c.receive()) == ["m3", "m4"]


def test_permits_bound_the_receive_queue_and_flow_adds_room() -> None:
    env = Env(SHARED)
    env.publish(5)
    c = env.sub.add_consumer("c", permits=0)
    assert c.receive() == []
    c.flow(1)
    env.sub.dispatch()
    assert c.queued_messages == 1 and c.permits == 0
    assert data(c.receive(10)) == ["m0", "m1", "m2", "m3", "m4"]  # the queue refills as it drains
    assert c.permits == 1 and c.unacked_messages == 5


def test_messages_acknowledged_while_queued_are_not_handed_out() -> None:
    env = Env(SHARED)
    ids = env.publish(3)
    c = env.sub.add_consumer("c")
    env.sub.dispatch()
    assert c.queued_messages == 3
    env.sub.skip_messages([SkipEntry(ids[1].ledger_id, ids[1].entry_id)])
    env.sub.cursor.delete(ids[2].position)  # even behind the subscription's back
    assert data(c.receive()) == ["m0"]
    assert c.unacked_messages == 1 and c.permits == 1000


# -- batches ------------------------------------------------------------------------------------------


def test_batch_index_acks_and_redelivery_of_the_rest() -> None:
    env = Env(SHARED)
    ids = env.producer.send_batch([b"a", b"b", b"c"])
    c = env.sub.add_consumer("c")
    msgs = c.receive()
    assert data(msgs) == ["a", "b", "c"] and [m.message_id for m in msgs] == list(ids)
    assert msgs[1].sequence_id == 1 and msgs[1].producer_name == "p"
    c.acknowledge([msgs[0], msgs[2]])
    assert env.sub.cursor.batch_ack_set(ids.position) == 0b010
    c.negative_acknowledge(msgs[1])
    again = c.receive()
    assert data(again) == ["b"] and again[0].redelivery_count == 1
    c.acknowledge(again)
    assert env.sub.cursor.is_message_deleted(ids.position) and env.sub.backlog() == 0


def test_batch_acks_without_batch_index_deletion() -> None:
    env = Env(SHARED, ml_config=ManagedLedgerConfig(deletion_at_batch_index_level_enabled=False))
    ids = env.producer.send_batch([b"a", b"b", b"c"])
    c = env.sub.add_consumer("c")
    msgs = c.receive()
    c.acknowledge([msgs[0], msgs[2]])
    c.negative_acknowledge(msgs[1])
    again = c.receive()
    assert data(again) == ["a", "b", "c"]  # the ledger does not track indexes: all come back
    c.acknowledge(again)  # every index its consumer held is acked: the entry is done
    assert env.sub.cursor.is_message_deleted(ids.position)


def test_ack_of_a_batch_index_with_unknown_batch_size_reads_the_entry() -> None:
    env = Env(SHARED)
    ids = env.producer.send_batch([b"a", b"b"])
    c = env.sub.add_consumer("c", permits=0)
    c.acknowledge(MessageId(ids.ledger_id, ids.entry_id, batch_index=0))  # batch_size 0: unknown
    assert env.sub.cursor.batch_ack_set(ids.position) == 0b10
    with pytest.raises(InvalidRequestError, match=r"Invalid batch index 2 .* holds 2 messages"):
        c.acknowledge(MessageId(ids.ledger_id, ids.entry_id, batch_index=2))
    c.flow(5)
    assert data(c.receive()) == ["b"]


def test_a_message_ids_own_batch_size_is_not_trusted() -> None:
    env = Env(SHARED)
    ids = env.producer.send_batch([b"a", b"b", b"c"])
    c = env.sub.add_consumer("c")
    msgs = c.receive()
    c.acknowledge(MessageId(ids.ledger_id, ids.entry_id, batch_index=0, batch_size=10))
    with pytest.raises(InvalidRequestError, match="Invalid batch index 5"):
        c.acknowledge(MessageId(ids.ledger_id, ids.entry_id, batch_index=5, batch_size=10))
    c.acknowledge(msgs[1:])
    assert env.sub.cursor.is_message_deleted(ids.position) and c.unacked_messages == 0


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda ids: MessageId(999_999, 0), InvalidPositionError, "does not exist in topic"),
        (lambda ids: MessageId(ids[0].ledger_id, 50), InvalidPositionError, "does not exist in topic"),
        (lambda ids: MessageId(ids[0].ledger_id, 0, partition=3), InvalidRequestError, "of partition 3"),
        (lambda ids: MessageId(ids[0].ledger_id, 0, batch_index=1, batch_size=1), InvalidRequestError,
         "Invalid batch index 1"),
        (lambda ids: MessageId(ids[0].ledger_id, 1, batch_index=1), InvalidRequestError, "holds 1 message "),
        (lambda ids: "1:0", InvalidRequestError, "invalid message id '1:0'"),
        (lambda ids: [ids[1], 5], InvalidRequestError, "invalid message id 5"),
    ],
)
def test_ack_errors_change_nothing(make, error, message) -> None:  # type: ignore[no-untyped-def]
    env = Env(SHARED)
    ids = env.publish(3)
    c = env.sub.add_consumer("c")
    c.receive()
    with pytest.raises(error, match=message):
        c.acknowledge([ids[1], make(ids)] if not isinstance(make(ids), list) else make(ids))
    assert env.sub.backlog() == 3 and c.unacked_messages == 3


def test_consumer_argument_errors() -> None:
    env = Env(SHARED)
    c = env.sub.add_consumer("c")
    for bad in (0, -1, True, 1.5):
        with pytest.raises(InvalidRequestError, match="max_messages"):
            c.receive(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="permits"):
        c.flow(-1)
    with pytest.raises(InvalidRequestError, match="permits"):
        env.sub.add_consumer("d", permits=-1)
    with pytest.raises(InvalidRequestError, match="consumer name"):
        env.sub.add_consumer("")
    with pytest.raises(ConsumerBusyError, match="'c' is already connected"):
        env.sub.add_consumer("c")
    with pytest.raises(InvalidRequestError, match="one message id"):
        c.acknowledge_cumulative([])
    with pytest.raises(InvalidRequestError, match="ack type"):
        c.acknowledge([], "Individual")  # type: ignore[arg-type]
    assert env.sub.add_consumer().name == "s-consumer-2"  # a generated name


# -- Key_Shared ------------------------------------------------------------------------------------


def test_key_shared_routes_each_key_to_one_consumer_in_order() -> None:
    env = Env(KEY_SHARED)
    c1 = env.sub.add_consumer("c1")
    c2 = env.sub.add_consumer("c2")
    keys = keys_owned(["c1", "c2"], "c1", 3) + keys_owned(["c1", "c2"], "c2", 3)
    env.publish(30, keys)
    got = {"c1": drain(c1), "c2": drain(c2)}
    per_key: dict[str, list[str]] = defaultdict(list)
    for name, msgs in got.items():
        for m in msgs:
            assert keys.index(m.key) // 3 == (0 if name == "c1" else 1)  # the ring's owner
            per_key[m.key].append(m.data.decode())  # type: ignore[index]
    for seq in per_key.values():
        assert seq == sorted(seq, key=lambda s: int(s[1:]))
    assert sum(len(v) for v in got.values()) == 30


def test_key_shared_joining_consumer_waits_for_older_messages_to_be_acked() -> None:
    """seeds/002 footnote 4: the newcomer gets nothing newer than its join position until every
    message before that position is acknowledged, so no key is consumed out of order."""
    env = Env(KEY_SHARED)
    moving = keys_owned(["c1", "c2"], "c2", 2)  # keys c2 takes over from c1
    staying = keys_owned(["c1", "c2"], "c1", 2)
    c1 = env.sub.add_consumer("c1")
    env.publish(6, moving + staying, prefix="old")
    first = c1.receive(1)  # everything is pushed to c1's queue; it has handled one message
    assert data(first) == ["old0"]
    c2 = env.sub.add_consumer("c2")
    joined = env.sub._dispatcher.recently_joined_position(c2)
    assert joined == env.sub.cursor.read_position  # restricted to entries before its join position
    env.publish(6, moving + staying, prefix="new")
    assert c2.receive() == []  # its keys' new messages wait: c1 still holds older ones
    rest = c1.receive()
    assert data(rest) == ["old1", "old2", "old3", "old4", "old5", "new2", "new3"]
    c1.acknowledge(first + rest[:4])
    assert c2.receive() == []  # old5 is still unacknowledged
    c1.acknowledge(rest[4])
    got = c2.receive()
    assert data(got) == ["new0", "new1", "new4", "new5"]  # released, in order
    assert env.sub._dispatcher.recently_joined_position(c2) is None


def test_key_shared_negative_ack_returns_the_message_to_its_keys_consumer() -> None:
    env = Env(KEY_SHARED)
    a = keys_owned(["c1", "c2"], "c1", 1)
    c1 = env.sub.add_consumer("c1")
    c2 = env.sub.add_consumer("c2")
    env.publish(4, a)
    msgs = c1.receive(2)
    c1.negative_acknowledge(msgs[0])
    assert c2.receive() == []
    # As in Pulsar, a negative ack gives up key order: m2, m3 were already in c1's queue.
    again = c1.receive()
    assert data(again) == ["m2", "m3", "m0"] and again[-1].redelivery_count == 1


def test_key_shared_entries_wait_in_replay_when_their_consumer_is_full() -> None:
    env = Env(KEY_SHARED)
    k1 = keys_owned(["c1", "c2"], "c1", 1)[0]
    k2 = keys_owned(["c1", "c2"], "c2", 1)[0]
    c1 = env.sub.add_consumer("c1", permits=1)
    c2 = env.sub.add_consumer("c2", permits=10)
    env.publish(6, [k1, k2])
    assert data(c2.receive()) == ["m1", "m3", "m5"]  # not stuck behind c1's keys
    assert env.sub.stats().dispatcher.redelivery_queue_size == 2
    assert data(c1.receive(10)) == ["m0", "m2", "m4"]


def test_reset_cursor_clears_recently_joined_consumers_with_the_cursor() -> None:
    """seeds/002 Scenario-3: a reset and a consumer joining must not leave the newcomer stuck
    behind a join position from before the reset."""
    env = Env(KEY_SHARED)
    moving = keys_owned(["c1", "c2"], "c2", 1)
    c1 = env.sub.add_consumer("c1")
    ids = env.publish(4, moving + keys_owned(["c1", "c2"], "c1", 1))
    c1.receive(1)
    c2 = env.sub.add_consumer("c2")
    assert env.sub._dispatcher.recently_joined_position(c2) is not None
    env.sub.reset_cursor(ids[0])
    assert env.sub._dispatcher.recently_joined_position(c2) is None
    assert env.sub.cursor.read_position == ids[0].position
    assert data(c2.receive()) == ["m0", "m2"]  # not stuck: c1 acked nothing
    assert data(c1.receive()) == ["m1", "m3"]


def test_consumers_joining_after_a_dispatcher_reset_are_not_restricted() -> None:
    """seeds/002 footnote 5: after the last consumer left, consumers joining must see the
    rewound read position, not the one from before the reset."""
    env = Env(KEY_SHARED)
    env.publish(10, ["a", "b", "c", "d"])
    c0 = env.sub.add_consumer("c0")
    assert len(c0.receive(3)) == 3
    c0.close()  # last consumer: Dispatcher Reset, read position back to the start
    c1 = env.sub.add_consumer("c1")
    c2 = env.sub.add_consumer("c2")
    c3 = env.sub.add_consumer("c3")
    assert all(env.sub._dispatcher.recently_joined_position(c) is None for c in (c2, c3))
    total = drain(c1) + drain(c2) + drain(c3)
    assert sorted(data(total)) == sorted(f"m{i}" for i in range(10))


# -- delayed delivery ------------------------------------------------------------------------------


@pytest.mark.parametrize("sub_type", [SHARED, KEY_SHARED])
def test_delayed_messages_are_held_until_their_time(sub_type: SubscriptionType) -> None:
    env = Env(sub_type)
    env.producer.send(b"late", deliver_at_ms=5_000, key="k")
    env.producer.send(b"early", deliver_at_ms=2_000, key="k")
    env.producer.send(b"now", key="k")
    c = env.sub.add_consumer("c")
    assert data(c.receive()) == ["now"]
    assert env.sub.stats().msg_delayed == 2
    env.clock.advance(1_999)
    assert c.receive() == []
    env.clock.advance(1)
    got = c.receive()
    assert data(got) == ["early"] and got[0].deliver_at_ms == 2_000
    env.clock.set(5_000)
    assert env.broker.run_due_tasks() == 1
    assert c.queued_messages == 1 and data(c.receive()) == ["late"]
    assert env.sub.stats().msg_delayed == 0


def test_delayed_delivery_with_pulsars_tick_rounding() -> None:
    env = Env(SHARED, delayed_delivery_deliver_at_time_strict=False)
    env.producer.send(b"within-a-tick", deliver_at_ms=900)
    env.producer.send(b"later", deliver_at_ms=1_500)
    c = env.sub.add_consumer("c")
    assert data(c.receive()) == ["within-a-tick"]
    env.clock.advance(500)
    assert data(c.receive()) == ["later"]


def test_delayed_delivery_can_be_disabled() -> None:
    env = Env(SHARED, delayed_delivery_enabled=False)
    env.producer.send(b"x", deliver_at_ms=10**12)
    assert data(env.sub.add_consumer("c").receive()) == ["x"]


def test_delayed_batch_is_held_as_a_whole() -> None:
    env = Env(SHARED)
    env.producer.send_batch([b"a", b"b"], deliver_at_ms=100)
    c = env.sub.add_consumer("c")
    assert c.receive() == []
    env.clock.advance(100)
    assert data(c.receive()) == ["a", "b"]


# -- dispatcher resets ------------------------------------------------------------------------------


def test_dispatcher_reset_when_the_last_consumer_leaves() -> None:
    env = Env(SHARED)
    ids = env.publish(3)
    env.producer.send(b"delayed", deliver_at_ms=10_000)
    c1 = env.sub.add_consumer("c1")
    got = c1.receive()
    c1.acknowledge(got[0])
    c1.negative_acknowledge(got[1])  # -> redelivery queue
    before = env.sub.stats().dispatcher
    assert (before.delayed_messages, before.redelivery_queue_size, before.pending_entries) == (1, 1, 1)
    revision = env.sub.cursor.revision.revision_num
    c1.close()
    after = env.sub.stats().dispatcher
    assert (after.delayed_messages, after.redelivery_queue_size, after.pending_entries, after.resets) == (0, 0, 0, 1)
    assert env.sub.cursor.revision.revision_num == revision + 1  # one revision, cursor and dispatcher
    assert env.sub.cursor.read_position == ids[1].position  # rewound to mark-delete + 1
    c2 = env.sub.add_consumer("c2")
    again = c2.receive()
    assert data(again) == ["m1", "m2"] and [m.redelivery_count for m in again] == [1, 1]
    env.clock.advance(10_000)
    assert data(c2.receive()) == ["delayed"]


def test_rewind_is_deferred_while_another_reset_holds_the_cursor() -> None:
    env = Env(SHARED)
    env.publish(3)
    c1 = env.sub.add_consumer("c1")
    assert len(c1.receive()) == 3
    assert env.sub.cursor.revision.start_revision() != -1  # someone else's reset is running
    c1.close()
    assert env.sub.stats().dispatcher.rewind_pending
    c2 = env.sub.add_consumer("c2")
    assert c2.receive() == []  # no reads while the other reset runs
    env.sub.cursor.revision.end_revision()
    assert data(c2.receive()) == ["m0", "m1", "m2"]
    assert not env.sub.stats().dispatcher.rewind_pending


def test_in_flight_read_is_discarded_when_the_last_consumer_leaves() -> None:
    """Scenario-2 at the broker: a read in flight while the dispatcher resets must not deliver
    its entries nor move the read position past the reset."""
    store = HeldReadStore(MemoryStore(), hold_timeout=10.0)
    env = Env(SHARED, store=store)
    ids = env.publish(8)
    c1 = env.sub.add_consumer("c1", permits=3)
    assert data(c1.receive(3)) == ["m0", "m1", "m2"]
    store.hold_reads()
    with ThreadPoolExecutor(1) as pool:
        round_ = pool.submit(env.sub.dispatch)  # reads m3..m5 for c1
        store.wait_until_held(1)
        c1.close()  # Dispatcher Reset while the read is in flight
        c2 = env.sub.add_consumer("c2", permits=100)
        store.release()
        round_.result(timeout=10)
    assert env.sub.cursor.stats().revision.discarded_reads >= 1
    got = c2.receive(100)
    assert data(got) == [f"m{i}" for i in range(8)]  # in order, from the rewound position
    assert [m.message_id for m in got] == ids


def test_in_flight_replay_is_discarded_by_reset_cursor() -> None:
    """Scenario-1 at the broker: a replay read racing reset-cursor delivers nothing out of order."""
    store = HeldReadStore(MemoryStore(), hold_timeout=10.0)
    env = Env(SHARED, store=store)
    ids = env.publish(6)
    c = env.sub.add_consumer("c", permits=4)
    got = c.receive(4)
    c.negative_acknowledge(got[2:])  # m2, m3 -> redelivery queue
    store.hold_reads()
    with ThreadPoolExecutor(1) as pool:
        round_ = pool.submit(env.sub.dispatch)
        store.wait_until_held(1)
        env.sub.reset_cursor(ids[0])
        store.release()
        round_.result(timeout=10)
    assert data(c.receive(10)) == [f"m{i}" for i in range(6)]


# -- admin cursor operations -------------------------------------------------------------------


def test_reset_cursor_skip_and_clear_backlog() -> None:
    env = Env(SHARED)
    ids = env.publish(6)
    c = env.sub.add_consumer("c")
    drain(c)
    env.sub.reset_cursor(ids[2])  # acks after it are forgotten
    assert data(c.receive()) == ["m2", "m3", "m4", "m5"]
    env.sub.reset_cursor(MessageId.EARLIEST)
    assert data(c.receive(2)) == ["m0", "m1"]
    env.sub.skip(2)  # the next two unacknowledged entries after the mark-delete: m0 and m1
    assert env.sub.backlog() == 4
    env.sub.clear_backlog()
    assert env.sub.backlog() == 0 and c.receive() == [] and c.unacked_messages == 0
    env.publish(1, prefix="x")
    env.sub.reset_cursor(MessageId.LATEST)
    assert c.receive() == []


def test_reset_cursor_by_time() -> None:
    env = Env(SHARED)
    ids = []
    for i in range(5):
        env.clock.set(i * 100)
        ids.append(env.producer.send(f"m{i}".encode()))
    c = env.sub.add_consumer("c")
    drain(c)
    assert env.sub.reset_cursor_by_time(250) == ids[3].position
    assert data(c.receive()) == ["m3", "m4"]
    env.sub.reset_cursor_by_time(10_000)
    assert c.receive() == []


def test_admin_operation_errors() -> None:
    env = Env(SHARED)
    for bad in (-1, "2", True):
        with pytest.raises(InvalidRequestError, match="skip"):
            env.sub.skip(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="invalid position"):
        env.sub.reset_cursor("1:0")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="timestamp"):
        env.sub.reset_cursor_by_time("now")  # type: ignore[arg-type]
    assert env.sub.cursor.revision.start_revision() != -1
    with pytest.raises(ConcurrentResetError) as info:
        env.sub.reset_cursor(MessageId.EARLIEST)
    assert info.value.http_status == 409
    env.sub.cursor.revision.end_revision()


def test_stats_snapshot() -> None:
    env = Env(SHARED)
    ids = env.publish(4)
    env.producer.send(b"d", deliver_at_ms=99)
    c = env.sub.add_consumer("c")
    got = c.receive(3)
    c.acknowledge(got[1])
    stats = env.sub.stats()
    assert stats.type is SHARED and stats.topic == "persistent://public/default/orders"
    assert stats.msg_backlog == 4 and stats.msg_delayed == 1 and stats.unacked_messages == 3
    assert stats.mark_delete_position < ids[0].position
    assert stats.individually_deleted_messages == f"[({ids[0].position}..{ids[1].position}]]"
    assert stats.consumers[0].name == "c" and stats.consumers[0].queued_messages == 1
    assert stats.dispatcher.messages_dispatched == 4
    topic_stats = env.broker.get_topic("orders").stats()  # type: ignore[union-attr]
    assert topic_stats.producers == ("p",) and topic_stats.entries == 5 and "s" in topic_stats.subscriptions


# -- concurrency ----------------------------------------------------------------------------------


def test_concurrent_producers_and_consumers_deliver_everything_once() -> None:
    env = Env(SHARED)
    consumers = [env.sub.add_consumer(f"c{i}", permits=7) for i in range(3)]
    total = 4 * 150
    seen: list[bytes] = []
    seen_lock = threading.Lock()
    done = threading.Event()

    def produce(k: int) -> None:
        p = env.broker.create_producer("orders")
        for i in range(150):
            p.send(f"{k}-{i}".encode())

    def consume(c: Consumer) -> None:
        rnd = random.Random(c.name)
        while not done.is_set():
            msgs = c.receive(rnd.randint(1, 10))
            if msgs:
                c.acknowledge(msgs)
                with seen_lock:
                    seen.extend(m.data for m in msgs)
                    if len(seen) >= total:
                        done.set()

    with ThreadPoolExecutor(7) as pool:
        futures = [pool.submit(consume, c) for c in consumers] + [pool.submit(produce, k) for k in range(4)]
        assert done.wait(60)
        for f in futures:
            f.result(timeout=60)
    assert len(seen) == total and len(set(seen)) == total
    assert env.sub.backlog() == 0
    env.sub.cursor._check()


# -- partitioned subscriptions: admin operations and lookups -----------------------------------------


def test_partitioned_reset_skip_and_clear() -> None:
    broker = Broker(ManagedLedgerFactory(), clock=ManualClock(0))
    broker.create_topic("pay", partitions=2)
    sub = broker.subscribe("pay", "s", SHARED, InitialPosition.EARLIEST)
    p = broker.create_producer("pay")
    ids = [p.send(f"m{i}".encode()) for i in range(6)]  # round-robin: m0 m2 m4 on 0, m1 m3 m5 on 1
    c = sub.add_consumer("c")
    assert len(drain(c)) == 6 and sub.backlog() == 0
    sub.reset_cursor(ids[2])  # a MessageId with a partition: that partition only
    assert [s.backlog() for s in sub.partitions] == [2, 0]
    sub.reset_cursor(ids[3].position)  # a bare position: the partition holding its ledger
    assert [s.backlog() for s in sub.partitions] == [2, 2]
    sub.reset_cursor(MessageId.EARLIEST)
    assert sub.backlog() == 6
    sub.skip(1)
    assert [s.backlog() for s in sub.partitions] == [2, 2]
    sub.clear_backlog()
    assert sub.backlog() == 0
    sub.reset_cursor_by_time(0)
    assert sub.backlog() == 6
    with pytest.raises(InvalidPositionError, match="in no partition"):
        sub.reset_cursor(Position(999_999, 0))
    with pytest.raises(InvalidRequestError, match="names a partition"):
        sub.reset_cursor(MessageId(ids[0].ledger_id, 0, partition=7))
    assert sorted(data(drain(c))) == [f"m{i}" for i in range(6)]


def test_partitioned_subscription_lookups() -> None:
    broker = Broker(ManagedLedgerFactory())
    topic = broker.create_topic("pay", partitions=2)
    topic.partitions[0].subscribe("only-on-0")  # type: ignore[union-attr]
    assert topic.subscription_names() == ["only-on-0"]
    with pytest.raises(NotFoundError, match="only-on-0"):
        broker.get_subscription("pay", "only-on-0")
    broker.unsubscribe("pay", "only-on-0")
    assert topic.subscription_names() == []
    sub = broker.subscribe("pay", "s", KEY_SHARED)
    assert broker.get_subscription("pay", "s").type is KEY_SHARED and sub.consumers == []
    assert broker.subscribe("pay", "s", SHARED).type is SHARED  # no consumers: the type may change


def test_closed_topic_closes_its_subscriptions_and_consumers() -> None:
    env = Env(SHARED)
    ids = env.publish(1)
    c = env.sub.add_consumer("c")
    env.broker.get_topic("orders").close()  # type: ignore[union-attr]
    assert env.sub.is_closed and not c.is_connected
    for call in (
        lambda: env.sub.add_consumer("d"),
        lambda: env.sub.cancel_delayed_message(ids[0].ledger_id, ids[0].entry_id),
        lambda: env.sub.skip_messages([SkipEntry(ids[0].ledger_id, ids[0].entry_id)]),
        lambda: env.sub.skip(1),
        lambda: env.sub.clear_backlog(),
        lambda: env.sub.reset_cursor(MessageId.EARLIEST),
        lambda: c.receive(),
        lambda: c.flow(1),
        lambda: c.negative_acknowledge(ids[0]),
    ):
        with pytest.raises(AlreadyClosedError):
            call()
    c.close()  # closing a closed consumer is fine
