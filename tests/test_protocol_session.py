"""The session without sockets or an event loop: frames in, frames out, through a hand-made host.

:class:`~mledger.protocol._session.Session` reaches its server only through the
:class:`~mledger.protocol._session.SessionHost` protocol, so these tests drive it frame by frame
over a real broker (memory store) and read what it queued.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable

import pytest
from protocol_raw import producer_command, subscribe_command

from mledger.broker import Broker, Subscription, Topic
from mledger.codec import EntryMetadata, encode_entry
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.managed_ledger import ManagedLedgerFactory
from mledger.protocol import ProtocolConfig
from mledger.protocol._access import EXCLUSIVE, EXCLUSIVE_WITH_FENCING, SHARED, WAIT_FOR_EXCLUSIVE, ProducerAccess
from mledger.protocol._codec import decode_command
from mledger.protocol._framing import FrameDecoder, crc32c, encode_frame, encode_payload_frame, parse_payload
from mledger.protocol._session import ConsumerHandle, Session
from mledger.storage import MemoryStore

_T = api.BaseCommand
TOPIC = "persistent://public/default/t"


class Host:
    """A SessionHost without a loop: the work the server would schedule runs in :meth:`settle`."""

    def __init__(self) -> None:
        self.broker = Broker(ManagedLedgerFactory(MemoryStore()))
        self.config = ProtocolConfig(port=0)
        self.auth = None
        self.access = ProducerAccess()
        self.service_url = "pulsar://127.0.0.1:6650"
        self.tls_service_url: str | None = None
        self.closing: list[Session] = []
        self._posted: list[Callable[[], None]] = []
        self._pumps: list[ConsumerHandle] = []
        self._watched: list[Topic] = []
        self._ids = itertools.count(1)

    def run_on_loop(self, fn: Callable[[], None]) -> None:
        fn()

    def post(self, fn: Callable[[], None]) -> None:
        self._posted.append(fn)

    def next_id(self) -> int:
        return next(self._ids)

    def flush_soon(self, session: Session) -> None:
        pass  # the tests read session.connection.data_to_send() themselves

    def flush_now(self, session: Session) -> None:
        pass

    def close_soon(self, session: Session) -> None:
        self.closing.append(session)

    def watch(self, topic: Topic) -> None:
        if topic not in self._watched:
            self._watched.append(topic)

    def dispatch_soon(self, subscription: Subscription) -> None:
        pass  # settle() dispatches every watched subscription

    def pump_soon(self, handle: ConsumerHandle) -> None:
        self._pumps.append(handle)

    def dispatch(self, subscription: Subscription) -> int:
        return subscription.dispatch()

    def settle(self) -> None:
        """Run what the server would run at the end of the loop turn."""
        posted, self._posted = self._posted, []
        pumps, self._pumps = self._pumps, []
        for fn in posted:
            fn()
        for handle in pumps:
            handle.pump()
        for topic in self._watched:
            for sub in topic.subscriptions.values():
                sub.dispatch()


def frame(cmd: api.BaseCommand, payload: bytes | None = None) -> bytes:
    data = cmd.SerializeToString()
    return encode_frame(data) if payload is None else encode_payload_frame(data, payload)


def replies(session: Session) -> list[tuple[api.BaseCommand, bytes | None]]:
    return [(decode_command(c), p) for c, p in FrameDecoder().feed(session.connection.data_to_send())]


def connected(host: Host) -> Session:
    session = Session(host, "test:1")
    session.data_received(
        frame(_T(type=_T.CONNECT, connect=api.CommandConnect(client_version="t", protocol_version=20)))
    )
    [(reply, _)] = replies(session)
    assert reply.type == _T.CONNECTED
    return session


def producer_cmd(producer_id: int, request_id: int, mode: int = SHARED) -> api.BaseCommand:
    body = api.CommandProducer(topic=TOPIC, producer_id=producer_id, request_id=request_id, producer_access_mode=mode)
    return _T(type=_T.PRODUCER, producer=body)


def send_frame(producer_id: int, sequence_id: int, value: bytes) -> bytes:
    body = encode_entry(value, EntryMetadata(producer_name="p", sequence_id=sequence_id, publish_time_ms=1))
    payload = b"\x0e\x01" + struct.pack(">I", crc32c(body)) + body
    return frame(_T(type=_T.SEND, send=api.CommandSend(producer_id=producer_id, sequence_id=sequence_id)), payload)


def test_produce_then_consume_frame_by_frame() -> None:
    host = Host()
    session = connected(host)
    session.data_received(frame(producer_cmd(1, 10)))
    [(success, _)] = replies(session)
    assert success.type == _T.PRODUCER_SUCCESS and success.producer_success.request_id == 10

    session.data_received(send_frame(1, 0, b"a") + send_frame(1, 1, b"b"))
    receipts = [r for r, _ in replies(session)]
    assert [r.type for r in receipts] == [_T.SEND_RECEIPT] * 2
    assert [r.send_receipt.sequence_id for r in receipts] == [0, 1]
    assert receipts[0].send_receipt.message_id.entryId + 1 == receipts[1].send_receipt.message_id.entryId
    assert session.inflight_sends == 0 and session.messages_in == 2

    subscribe = api.CommandSubscribe(
        topic=TOPIC,
        subscription="s",
        subType=api.CommandSubscribe.Shared,
        consumer_id=7,
        request_id=11,
        initialPosition=api.CommandSubscribe.Earliest,
    )
    session.data_received(frame(_T(type=_T.SUBSCRIBE, subscribe=subscribe)))
    assert [r.type for r, _ in replies(session)] == [_T.SUCCESS]
    session.data_received(frame(_T(type=_T.FLOW, flow=api.CommandFlow(consumer_id=7, messagePermits=10))))
    host.settle()
    messages = replies(session)
    assert [m.type for m, _ in messages] == [_T.MESSAGE] * 2
    assert [m.message.message_id.entryId for m, _ in messages] == [r.send_receipt.message_id.entryId for r in receipts]
    values = [parse_payload(p).entry[-1:] for _, p in messages if p is not None]
    assert values == [b"a", b"b"]
    assert session.messages_out == 2


def test_receipts_echo_the_sequence_ids_and_counts_follow_num_messages() -> None:
    host = Host()
    session = connected(host)
    session.data_received(frame(producer_cmd(1, 10)))
    replies(session)
    u64 = 1 << 64
    # (sequence_id, highest_sequence_id or None, num_messages or None) -> receipt's (sequence_id, highest)
    cases = [
        ((5, None, None), (5, 5)),
        ((6, 9, 4), (6, 9)),
        ((10, 3, None), (10, 10)),  # a highest below the sequence id: the sequence id
        ((u64 - 1, None, None), (u64 - 1, 0)),  # -1 from a Java client: highest stays 0
        ((u64 - 2, u64 - 1, 2), (u64 - 2, u64 - 1)),
    ]
    data = b""
    for (seq, highest, n), _ in cases:
        send = api.CommandSend(producer_id=1, sequence_id=seq)
        if highest is not None:
            send.highest_sequence_id = highest
        if n is not None:
            send.num_messages = n
        body = encode_entry(b"v", EntryMetadata(producer_name="p", sequence_id=seq % (1 << 63), publish_time_ms=1))
        data += frame(_T(type=_T.SEND, send=send), b"\x0e\x01" + struct.pack(">I", crc32c(body)) + body)
    session.data_received(data)
    receipts = [r.send_receipt for r, _ in replies(session)]
    assert [(r.sequence_id, r.highest_sequence_id) for r in receipts] == [want for _, want in cases]
    assert session.messages_in == 1 + 4 + 1 + 1 + 2


def test_a_fencing_producer_closes_the_other_sessions_producer() -> None:
    host = Host()
    first, second = connected(host), connected(host)
    first.data_received(frame(producer_cmd(1, 1)))
    assert [r.type for r, _ in replies(first)] == [_T.PRODUCER_SUCCESS]
    second.data_received(frame(producer_cmd(5, 2, EXCLUSIVE_WITH_FENCING)))
    assert [r.type for r, _ in replies(second)] == [_T.PRODUCER_SUCCESS]
    [(closed, _)] = replies(first)
    assert closed.type == _T.CLOSE_PRODUCER and closed.close_producer.producer_id == 1
    assert first.producer_count == 0 and second.producer_count == 1
    # the fenced producer's SENDs are refused from now on
    first.data_received(send_frame(1, 0, b"x"))
    [(refused, _)] = replies(first)
    assert refused.type == _T.SEND_ERROR and refused.send_error.error == api.NotAllowedError


def test_a_bad_token_refuses_the_connect_and_asks_the_host_to_close() -> None:
    from mledger.protocol import ClientAuth

    host = Host()
    host.auth = ClientAuth({"good": "role"})  # type: ignore[assignment]
    session = Session(host, "test:2")
    connect = api.CommandConnect(client_version="t", protocol_version=20, auth_method_name="token", auth_data=b"bad")
    session.data_received(frame(_T(type=_T.CONNECT, connect=connect)))
    [(reply, _)] = replies(session)
    assert reply.type == _T.ERROR and reply.error.error == api.AuthenticationError
    assert host.closing == [session]


def test_seek_disconnects_the_consumer_before_it_answers() -> None:
    # The broker's reset_cursor disconnects the subscription's consumers: the session hears it
    # through the handle (the broker consumer's sink) and sends CLOSE_CONSUMER, then SUCCESS.
    host = Host()
    session = connected(host)
    subscribe = api.CommandSubscribe(
        topic=TOPIC,
        subscription="s",
        subType=api.CommandSubscribe.Exclusive,
        consumer_id=3,
        request_id=1,
        force_topic_creation=True,
    )
    session.data_received(frame(_T(type=_T.SUBSCRIBE, subscribe=subscribe)))
    assert [r.type for r, _ in replies(session)] == [_T.SUCCESS]
    earliest = api.MessageIdData(ledgerId=(1 << 64) - 1, entryId=(1 << 64) - 1)
    session.data_received(
        frame(_T(type=_T.SEEK, seek=api.CommandSeek(consumer_id=3, request_id=2, message_id=earliest)))
    )
    closed, success = (r for r, _ in replies(session))
    assert closed.type == _T.CLOSE_CONSUMER and closed.close_consumer.consumer_id == 3
    assert success.type == _T.SUCCESS and success.success.request_id == 2
    assert session.consumer_count == 0


# -- an id already in use on the connection (Pulsar's ServerCnx.handleProducer / handleSubscribe:
# one map of producers and one of consumers per connection, topics never compared) --------------

OTHER = "persistent://public/default/other"
NP_TOPIC = "non-persistent://public/default/np"
NP_OTHER = "non-persistent://public/default/np-other"


def producer_on(topic: str, producer_id: int, request_id: int, mode: int = SHARED) -> bytes:
    return frame(producer_command(topic, producer_id, request_id, mode))


def subscribe_on(topic: str, subscription: str, consumer_id: int, request_id: int) -> bytes:
    return frame(subscribe_command(topic, subscription, consumer_id, request_id))


def close_producer(producer_id: int, request_id: int) -> bytes:
    body = api.CommandCloseProducer(producer_id=producer_id, request_id=request_id)
    return frame(_T(type=_T.CLOSE_PRODUCER, close_producer=body))


def only_reply(session: Session) -> api.BaseCommand:
    [(reply, _)] = replies(session)
    return reply


def broker_producers(host: Host, topic: str) -> list[str]:
    """The names of the broker producers on ``topic`` (persistent or not)."""
    if topic.startswith("non-persistent://"):
        found = host.broker.non_persistent.get(topic)
        return [] if found is None else [p.name for p in found.producers]
    opened = host.broker.open_topic(topic)
    assert isinstance(opened, Topic)
    return [p.name for p in opened.producers]


def broker_consumers(host: Host, topic: str, subscription: str) -> int:
    """How many broker consumers ``subscription`` of ``topic`` has (0 when it does not exist)."""
    if topic.startswith("non-persistent://"):
        found = host.broker.non_persistent.get(topic)
        subs = {} if found is None else found.subscriptions
        return len(subs[subscription].consumers) if subscription in subs else 0
    opened = host.broker.open_topic(topic)
    assert isinstance(opened, Topic)
    sub = opened.subscriptions.get(subscription)
    return 0 if sub is None else len(sub.consumers)


@pytest.mark.parametrize(
    ("first", "second"),
    [(TOPIC, TOPIC), (TOPIC, OTHER), (TOPIC, NP_TOPIC), (NP_TOPIC, NP_TOPIC), (NP_TOPIC, NP_OTHER), (NP_TOPIC, OTHER)],
    ids=["same", "other-topic", "to-np", "np-same", "np-other-topic", "np-to-persistent"],
)
def test_a_producer_id_in_use_gets_the_existing_producer_on_any_topic(first: str, second: str) -> None:
    # "Producer with the same id is already created": PRODUCER_SUCCESS for the existing producer
    # (its name, last sequence id -1, ready), whatever topic the new PRODUCER names, persistent
    # or not, and no second broker producer anywhere.
    host = Host()
    session = connected(host)
    session.data_received(producer_on(first, 1, 10))
    made = only_reply(session).producer_success
    session.data_received(send_frame(1, 0, b"a"))
    assert only_reply(session).type == _T.SEND_RECEIPT
    session.data_received(producer_on(second, 1, 11))
    again = only_reply(session)
    assert again.type == _T.PRODUCER_SUCCESS, again
    assert again.producer_success.request_id == 11
    assert again.producer_success.last_sequence_id == -1 and again.producer_success.producer_ready
    assert again.producer_success.producer_name == made.producer_name
    assert broker_producers(host, first) == [made.producer_name]
    if second != first:
        assert broker_producers(host, second) == []
    assert session.producer_count == 1


def test_a_reused_producer_id_leaks_no_exclusive_producer() -> None:
    # Before, PRODUCER id 1 on another topic replaced the session's producer 1 without closing
    # it: the first topic kept an exclusive producer nobody could close.
    host = Host()
    session, other = connected(host), connected(host)
    session.data_received(producer_on(TOPIC, 1, 10, EXCLUSIVE))
    assert only_reply(session).type == _T.PRODUCER_SUCCESS
    session.data_received(producer_on(OTHER, 1, 11, EXCLUSIVE))
    assert only_reply(session).type == _T.PRODUCER_SUCCESS
    session.data_received(close_producer(1, 12))
    assert only_reply(session).type == _T.SUCCESS
    assert broker_producers(host, TOPIC) == [] and broker_producers(host, OTHER) == []
    other.data_received(producer_on(TOPIC, 1, 20, EXCLUSIVE))
    assert only_reply(other).type == _T.PRODUCER_SUCCESS


def test_a_producer_id_still_waiting_for_exclusive_access_is_not_ready() -> None:
    # Pulsar's producer future is pending until the topic is granted: ServiceNotReady
    # "Producer is already present on the connection"; once granted, the same PRODUCER_SUCCESS.
    host = Host()
    holder, session = connected(host), connected(host)
    holder.data_received(producer_on(TOPIC, 1, 1, EXCLUSIVE))
    assert only_reply(holder).type == _T.PRODUCER_SUCCESS
    session.data_received(producer_on(TOPIC, 2, 10, WAIT_FOR_EXCLUSIVE))
    waiting = only_reply(session)
    assert waiting.type == _T.PRODUCER_SUCCESS and not waiting.producer_success.producer_ready
    for topic in (TOPIC, OTHER, NP_TOPIC):
        session.data_received(producer_on(topic, 2, 11))
        refused = only_reply(session)
        assert refused.type == _T.ERROR and refused.error.request_id == 11
        assert refused.error.error == api.ServiceNotReady
        assert refused.error.message == "Producer is already present on the connection"
    assert broker_producers(host, OTHER) == [] and broker_producers(host, NP_TOPIC) == []
    holder.data_received(close_producer(1, 2))
    replies(holder)
    granted = only_reply(session)
    assert granted.type == _T.PRODUCER_SUCCESS and granted.producer_success.request_id == 10
    assert granted.producer_success.producer_ready
    session.data_received(producer_on(TOPIC, 2, 12))
    again = only_reply(session)
    assert again.type == _T.PRODUCER_SUCCESS and again.producer_success.producer_ready
    assert again.producer_success.producer_name == waiting.producer_success.producer_name
    assert len(broker_producers(host, TOPIC)) == 1


def test_a_closed_producers_id_opens_a_new_producer() -> None:
    # Closed by the client (CLOSE_PRODUCER) or by the broker (fenced): the id is free again.
    host = Host()
    session, fencer = connected(host), connected(host)
    session.data_received(producer_on(TOPIC, 1, 10))
    assert only_reply(session).type == _T.PRODUCER_SUCCESS
    session.data_received(close_producer(1, 11))
    assert only_reply(session).type == _T.SUCCESS
    session.data_received(producer_on(NP_TOPIC, 1, 12))
    second = only_reply(session).producer_success.producer_name
    assert broker_producers(host, NP_TOPIC) == [second] and broker_producers(host, TOPIC) == []
    session.data_received(close_producer(1, 13))
    assert only_reply(session).type == _T.SUCCESS
    session.data_received(producer_on(TOPIC, 1, 14))
    assert only_reply(session).type == _T.PRODUCER_SUCCESS
    fencer.data_received(producer_on(TOPIC, 1, 1, EXCLUSIVE_WITH_FENCING))
    replies(fencer)
    assert only_reply(session).type == _T.CLOSE_PRODUCER
    session.data_received(producer_on(OTHER, 1, 15))
    assert only_reply(session).type == _T.PRODUCER_SUCCESS
    assert len(broker_producers(host, OTHER)) == 1 and session.producer_count == 1


def test_a_reused_producer_id_with_a_bad_topic_name_gets_invalid_topic_name() -> None:
    host = Host()
    session = connected(host)
    session.data_received(producer_on(TOPIC, 1, 10))
    replies(session)
    session.data_received(producer_on("persistent://only-two/parts", 1, 11))
    refused = only_reply(session)
    assert refused.type == _T.ERROR and refused.error.error == api.InvalidTopicName


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ((TOPIC, "s"), (TOPIC, "s")),
        ((TOPIC, "s"), (TOPIC, "s2")),
        ((TOPIC, "s"), (OTHER, "s")),
        ((TOPIC, "s"), (NP_TOPIC, "s")),
        ((NP_TOPIC, "s"), (NP_TOPIC, "s")),
        ((NP_TOPIC, "s"), (NP_TOPIC, "s2")),
        ((NP_TOPIC, "s"), (NP_OTHER, "s")),
        ((NP_TOPIC, "s"), (TOPIC, "s")),
    ],
    ids=["same", "other-sub", "other-topic", "to-np", "np-same", "np-other-sub", "np-other-topic", "np-to-persistent"],
)
def test_a_consumer_id_in_use_gets_success_on_any_topic_or_subscription(
    first: tuple[str, str], second: tuple[str, str]
) -> None:
    # "Consumer with the same id is already created": SUCCESS, no second broker consumer.
    host = Host()
    session = connected(host)
    session.data_received(subscribe_on(*first, 7, 10))
    assert only_reply(session).type == _T.SUCCESS
    session.data_received(subscribe_on(*second, 7, 11))
    again = only_reply(session)
    assert again.type == _T.SUCCESS and again.success.request_id == 11, again
    assert broker_consumers(host, *first) == 1
    if second != first:
        assert broker_consumers(host, *second) == 0
    assert session.consumer_count == 1


def test_a_closed_consumers_id_subscribes_anew() -> None:
    host = Host()
    session = connected(host)
    session.data_received(subscribe_on(NP_TOPIC, "s", 7, 10))
    replies(session)
    close = api.CommandCloseConsumer(consumer_id=7, request_id=11)
    session.data_received(frame(_T(type=_T.CLOSE_CONSUMER, close_consumer=close)))
    assert only_reply(session).type == _T.SUCCESS
    session.data_received(subscribe_on(TOPIC, "s", 7, 12))
    assert only_reply(session).type == _T.SUCCESS
    assert broker_consumers(host, TOPIC, "s") == 1 and broker_consumers(host, NP_TOPIC, "s") == 0
