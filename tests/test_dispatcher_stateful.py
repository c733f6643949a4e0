"""Stateful test of the dispatcher: publishes (single, batched, keyed, delayed), consumers joining
and leaving, receives, acks (individual, cumulative, batch-index), negative acks, redelivery,
skips, clears, cursor resets and time passing, in any order, on every subscription type.

After each step ``Dispatcher._check()`` asserts the dispatcher's invariants, and the oracle
checks that no acknowledged message is ever received again and that every message published
is either acknowledged or still in the backlog.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from mledger import ManagedLedgerConfig, ManagedLedgerFactory, MemoryStore
from mledger.broker import (
    Broker,
    BrokerConfig,
    Consumer,
    ConsumerBusyError,
    InitialPosition,
    ManualClock,
    Message,
    MessageId,
    Subscription,
    SubscriptionType,
)

KEYS = ("k1", "k2", "k3")
NAMES = ("c1", "c2", "c3")


def check_dispatcher(sub: Subscription) -> None:
    """``Dispatcher._check()`` under the subscription lock, as the dispatcher's callers hold it."""
    with sub._lock:
        sub._dispatcher._check()


class DispatcherMachine(RuleBasedStateMachine):
    """One topic, one subscription of a type drawn at the start, up to three local consumers.

    Model: the message ids acknowledged so far (never to be received again) and the ids each
    consumer received and has not settled (acked, or handed back by a nack / redelivery / close).
    """

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(0)
        self.acked: set[MessageId] = set()
        self.published: list[MessageId] = []
        self.held: dict[str, list[Message]] = {}
        self.consumers: dict[str, Consumer] = {}

    @initialize(sub_type=st.sampled_from(list(SubscriptionType)), permits=st.integers(1, 6))
    def open(self, sub_type: SubscriptionType, permits: int) -> None:
        self.broker = Broker(
            ManagedLedgerFactory(MemoryStore(), clock=self.clock),
            BrokerConfig(
                receiver_queue_size=permits,
                # retention keeps every ledger: trimming runs on the factory's executor, and a
                # trim racing a step would make the machine's draws depend on thread timing
                managed_ledger_config=ManagedLedgerConfig(
                    max_entries_per_ledger=4, retention_time_ms=-1, retention_size_in_mb=-1
                ),
            ),
            clock=self.clock,
        )
        sub = self.broker.subscribe("orders", "s", sub_type, InitialPosition.EARLIEST)
        assert isinstance(sub, Subscription)
        self.sub = sub
        self.producer = self.broker.create_producer("orders", "p")
        self.join("c1")

    @rule(n=st.integers(1, 3), key=st.sampled_from(KEYS), delay=st.sampled_from([None, 0, 500, 3000]))
    def publish(self, n: int, key: str, delay: int | None) -> None:
        at = None if delay is None else self.clock.now_ms() + delay
        if n == 1:
            self.published.append(self.producer.send(b"x", key=key, deliver_at_ms=at))
        else:
            self.published.extend(self.producer.send_batch([b"x"] * n, key=key, deliver_at_ms=at))

    @rule(name=st.sampled_from(NAMES))
    def join(self, name: str) -> None:
        if name in self.consumers:
            return
        try:
            self.consumers[name] = self.sub.add_consumer(name)
        except ConsumerBusyError:
            assert self.sub.type is SubscriptionType.EXCLUSIVE
            return
        self.held[name] = []

    @precondition(lambda self: bool(self.consumers))
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.consumers)))
        self.consumers.pop(name).close()
        self.held.pop(name)

    @precondition(lambda self: bool(self.consumers))
    @rule(data=st.data(), n=st.integers(1, 5))
    def receive(self, data: st.DataObject, n: int) -> None:
        name = data.draw(st.sampled_from(sorted(self.consumers)))
        got = self.consumers[name].receive(n)
        again = [m.message_id for m in got if m.message_id in self.acked]
        assert not again, f"acknowledged messages received again: {again}"
        self.held[name].extend(got)

    @precondition(lambda self: any(self.held.values()))
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(n for n, held in self.held.items() if held)))
        held = self.held[name]
        picked = data.draw(st.lists(st.sampled_from(held), min_size=1, max_size=3, unique_by=lambda m: m.message_id))
        self.consumers[name].acknowledge([m.message_id for m in picked])
        self.acked.update(m.message_id for m in picked)
        ids = {m.message_id for m in picked}
        self.held[name] = [m for m in held if m.message_id not in ids]

    @precondition(lambda self: any(self.held.values()) and self.sub.type.is_cumulative_ack_mode)
    @rule(data=st.data())
    def ack_cumulative(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(n for n, held in self.held.items() if held)))
        if self.sub.active_consumer is not self.consumers[name]:
            return
        upto = data.draw(st.sampled_from(self.held[name])).message_id
        self.consumers[name].acknowledge_cumulative(upto)
        # The cursor is the truth: a cumulative ack of batch index i leaves indexes > i of its
        # entry unacknowledged when that lowers the entry's first unacknowledged index, even if
        # some were acknowledged one by one before (Pulsar's markDelete with an ack set does the
        # same: the given bit set replaces the stored one when its first set bit is higher).
        self._resync()

    @precondition(lambda self: any(self.held.values()))
    @rule(data=st.data())
    def negative_ack(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(n for n, held in self.held.items() if held)))
        picked = data.draw(st.sampled_from(self.held[name]))
        self.consumers[name].negative_acknowledge([picked.message_id])
        self.held[name] = []  # a single-active nack redelivers everything: settle the model loosely

    @precondition(lambda self: bool(self.consumers))
    @rule(data=st.data())
    def redeliver(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.consumers)))
        self.consumers[name].redeliver_unacknowledged_messages()
        self.held[name] = []

    @rule(data=st.data(), op=st.sampled_from(["skip", "clear_backlog", "reset_cursor"]))
    def admin(self, data: st.DataObject, op: str) -> None:
        if op == "skip":
            self.sub.skip(data.draw(st.integers(1, 3)))
        elif op == "clear_backlog":
            self.sub.clear_backlog()
        elif self.published:
            self.sub.reset_cursor(data.draw(st.sampled_from(self.published)).position)
        self._resync()

    @rule(ms=st.sampled_from([100, 1000, 5000]))
    def time_passes(self, ms: int) -> None:
        self.clock.advance(ms)
        self.broker.run_due_tasks()

    def _resync(self) -> None:
        """After an admin operation, the cursor is the truth: recompute what counts as acked."""
        cursor = self.sub.cursor
        self.acked = {
            mid
            for mid in self.published
            if cursor.is_message_deleted(mid.position)
            or (mid.batch_index >= 0 and not _index_remaining(cursor.batch_ack_set(mid.position), mid.batch_index))
        }
        for name in self.held:
            self.held[name] = []

    @invariant()
    def dispatcher_invariants(self) -> None:
        if hasattr(self, "sub"):
            check_dispatcher(self.sub)


def _index_remaining(ack_set: int | None, index: int) -> bool:
    return ack_set is None or bool((ack_set >> index) & 1)


TestDispatcherStateful = DispatcherMachine.TestCase
TestDispatcherStateful.settings = settings(
    max_examples=100, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
