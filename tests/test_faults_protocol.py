"""Issue 34 item 1, frame by frame: each command an ``error`` fault can answer gets the frame
Pulsar's broker answers it with (``ServerCnx``: ``newError``, ``newSendError``,
``newLookupErrorResponse``, ``newPartitionMetadataResponse``, ``newAckResponse``,
``newGetSchemaResponseError``, ...), the faults' matching rules (topic, client, subscription,
after, count) and the hold that keeps a delayed connection's answers in order."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from protocol_raw import RawClient, producer_command, subscribe_command

from mledger.broker import ERROR_ANSWERS
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.protocol import EmbeddedBroker
from mledger.protocol._session import Session

pytestmark = pytest.mark.timeout(60)

_T = api.BaseCommand
TOPIC = "persistent://public/default/orders"


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


def _ready(port: int) -> RawClient:
    """A raw client with producer 1 and Shared consumer 1 (subscription ``billing``) on TOPIC."""
    raw = RawClient(port)
    raw.send(producer_command(TOPIC, 1, 1))
    assert raw.next_command().type == _T.PRODUCER_SUCCESS
    raw.send(subscribe_command(TOPIC, "billing", 1, 2))
    assert raw.next_command().type == _T.SUCCESS
    return raw


_ID = api.MessageIdData(ledgerId=1, entryId=0)
_COMMANDS: dict[str, api.BaseCommand] = {
    "PRODUCER": producer_command(TOPIC, 2, 10),
    "SUBSCRIBE": subscribe_command(TOPIC, "other", 2, 10),
    "SEND": _T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=7)),
    "ACK": _T(type=_T.ACK, ack=api.CommandAck(consumer_id=1, ack_type=0, message_id=[_ID], request_id=10)),
    "LOOKUP": _T(type=_T.LOOKUP, lookupTopic=api.CommandLookupTopic(topic=TOPIC, request_id=10)),
    "PARTITIONED_METADATA": _T(
        type=_T.PARTITIONED_METADATA, partitionMetadata=api.CommandPartitionedTopicMetadata(topic=TOPIC, request_id=10)
    ),
    "GET_TOPICS_OF_NAMESPACE": _T(
        type=_T.GET_TOPICS_OF_NAMESPACE,
        getTopicsOfNamespace=api.CommandGetTopicsOfNamespace(namespace="public/default", request_id=10),
    ),
    "SEEK": _T(type=_T.SEEK, seek=api.CommandSeek(consumer_id=1, request_id=10, message_id=_ID)),
    "UNSUBSCRIBE": _T(type=_T.UNSUBSCRIBE, unsubscribe=api.CommandUnsubscribe(consumer_id=1, request_id=10)),
    "CLOSE_PRODUCER": _T(type=_T.CLOSE_PRODUCER, close_producer=api.CommandCloseProducer(producer_id=1, request_id=10)),
    "CLOSE_CONSUMER": _T(type=_T.CLOSE_CONSUMER, close_consumer=api.CommandCloseConsumer(consumer_id=1, request_id=10)),
    "GET_LAST_MESSAGE_ID": _T(
        type=_T.GET_LAST_MESSAGE_ID, getLastMessageId=api.CommandGetLastMessageId(consumer_id=1, request_id=10)
    ),
    "GET_SCHEMA": _T(type=_T.GET_SCHEMA, getSchema=api.CommandGetSchema(topic=TOPIC, request_id=10)),
    "GET_OR_CREATE_SCHEMA": _T(
        type=_T.GET_OR_CREATE_SCHEMA,
        getOrCreateSchema=api.CommandGetOrCreateSchema(
            topic=TOPIC, request_id=10, schema=api.Schema(name="s", schema_data=b"", type=api.Schema.String)
        ),
    ),
    "CONSUMER_STATS": _T(type=_T.CONSUMER_STATS, consumerStats=api.CommandConsumerStats(consumer_id=1, request_id=10)),
}


def _error_of(answer: api.BaseCommand) -> tuple[str, int, int]:
    """(answer type, its request id or sequence id, its error code) for each answer kind."""
    kind = _T.Type.Name(answer.type)
    if answer.type == _T.ERROR:
        return kind, answer.error.request_id, answer.error.error
    if answer.type == _T.SEND_ERROR:
        return kind, answer.send_error.sequence_id, answer.send_error.error
    if answer.type == _T.LOOKUP_RESPONSE:
        assert answer.lookupTopicResponse.response == api.CommandLookupTopicResponse.Failed
        return kind, answer.lookupTopicResponse.request_id, answer.lookupTopicResponse.error
    if answer.type == _T.PARTITIONED_METADATA_RESPONSE:
        body = answer.partitionMetadataResponse
        assert body.response == api.CommandPartitionedTopicMetadataResponse.Failed
        return kind, body.request_id, body.error
    if answer.type == _T.ACK_RESPONSE:
        return kind, answer.ackResponse.request_id, answer.ackResponse.error
    if answer.type == _T.GET_SCHEMA_RESPONSE:
        return kind, answer.getSchemaResponse.request_id, answer.getSchemaResponse.error_code
    if answer.type == _T.GET_OR_CREATE_SCHEMA_RESPONSE:
        return kind, answer.getOrCreateSchemaResponse.request_id, answer.getOrCreateSchemaResponse.error_code
    assert answer.type == _T.CONSUMER_STATS_RESPONSE, kind
    return kind, answer.consumerStatsResponse.request_id, answer.consumerStatsResponse.error_code


_EXPECTED = {
    "SEND": "SEND_ERROR",
    "ACK": "ACK_RESPONSE",
    "LOOKUP": "LOOKUP_RESPONSE",
    "PARTITIONED_METADATA": "PARTITIONED_METADATA_RESPONSE",
    "GET_SCHEMA": "GET_SCHEMA_RESPONSE",
    "GET_OR_CREATE_SCHEMA": "GET_OR_CREATE_SCHEMA_RESPONSE",
    "CONSUMER_STATS": "CONSUMER_STATS_RESPONSE",
}


def test_every_answered_command_gets_pulsars_error_frame(broker: EmbeddedBroker) -> None:
    assert set(_COMMANDS) == set(ERROR_ANSWERS) - {"CONNECT"}
    raw = _ready(broker.port)
    try:
        for name, command in _COMMANDS.items():
            broker.faults.fail_next(name, error="TooManyRequests")
            raw.send(command, b"" if name == "SEND" else None)
            kind, request_id, error = _error_of(raw.next_command())
            assert (kind, request_id, error) == (_EXPECTED.get(name, "ERROR"), 7 if name == "SEND" else 10, 14), name
        assert [f.command for f in broker.faults.fired()] == list(_COMMANDS)
        # nothing was done: the producer and consumer are still there, the subscription too
        assert broker.stats().producers == 1 and broker.stats().consumers == 1
    finally:
        raw.close()


def test_an_error_on_connect_refuses_the_connection(broker: EmbeddedBroker) -> None:
    broker.faults.fail_next("CONNECT", error="ServiceNotReady", message="warming up")
    raw = RawClient(broker.port, connect=False)
    raw.send(_T(type=_T.CONNECT, connect=api.CommandConnect(client_version="raw", protocol_version=20)))
    answer = raw.next_command()
    assert (answer.type, answer.error.request_id, answer.error.error) == (_T.ERROR, 0, api.ServiceNotReady)
    assert answer.error.message == "warming up"
    assert raw.is_closed_by_server()
    RawClient(broker.port).close()  # the next connection is served: the fault fired once


def test_topic_client_subscription_after_and_count_narrow_a_fault(broker: EmbeddedBroker) -> None:
    faults = broker.faults
    faults.fail_next("SUBSCRIBE", error="ConsumerBusy", topic="orders", subscription="bill.*", after=1, count=2)
    raw = RawClient(broker.port)
    try:
        answers = []
        for i, (topic, sub) in enumerate(
            [
                ("other", "billing"),
                (TOPIC, "audit"),
                (TOPIC, "billing"),
                (TOPIC, "billing2"),
                (TOPIC, "billing3"),
                ("orders", "billing4"),
            ]
        ):
            raw.send(subscribe_command(topic, sub, i, 100 + i))
            answers.append(raw.next_command().type)
        # other topic and audit do not match; billing passes (after=1); billing2 and 3 fire; then spent
        assert answers == [_T.SUCCESS, _T.SUCCESS, _T.SUCCESS, _T.ERROR, _T.ERROR, _T.SUCCESS]
        assert faults.armed() == []
        faults.fail_next("PRODUCER", client="my-producer")
        raw.send(producer_command(TOPIC, 1, 200))
        assert raw.next_command().type == _T.PRODUCER_SUCCESS  # no name: does not match
        named = producer_command(TOPIC, 2, 201)
        named.producer.producer_name = "my-producer"
        raw.send(named)
        assert raw.next_command().type == _T.ERROR
    finally:
        raw.close()


def test_a_duration_window_fires_on_every_match_until_it_ends(broker: EmbeddedBroker) -> None:
    broker.faults.fail_next("LOOKUP", error="ServiceNotReady", count=None, duration_ms=60_000)
    raw = RawClient(broker.port)
    try:
        for i in range(5):
            raw.send(_T(type=_T.LOOKUP, lookupTopic=api.CommandLookupTopic(topic=TOPIC, request_id=i)))
            assert raw.next_command().lookupTopicResponse.response == api.CommandLookupTopicResponse.Failed
        assert broker.faults.stats().fired_by_action == {"error": 5}
        broker.faults.clear()
        raw.send(_T(type=_T.LOOKUP, lookupTopic=api.CommandLookupTopic(topic=TOPIC, request_id=9)))
        assert raw.next_command().lookupTopicResponse.response == api.CommandLookupTopicResponse.Connect
    finally:
        raw.close()


def test_a_delay_holds_the_commands_behind_it_so_answers_keep_their_order(broker: EmbeddedBroker) -> None:
    broker.faults.delay("LOOKUP", 10_000, clock="broker")  # on the manual clock: until advanced
    raw = RawClient(broker.port)
    try:
        raw.send(_T(type=_T.LOOKUP, lookupTopic=api.CommandLookupTopic(topic=TOPIC, request_id=1)))
        raw.send(
            _T(
                type=_T.PARTITIONED_METADATA,
                partitionMetadata=api.CommandPartitionedTopicMetadata(topic=TOPIC, request_id=2),
            )
        )
        raw.send(_T(type=_T.PING, ping=api.CommandPing()))  # the connection itself still answers PING
        assert raw.next_command().type == _T.PONG
        raw.sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            raw.next_command()
        raw.sock.settimeout(5)
        broker.clock.advance(10_000)
        assert [raw.next_command().type, raw.next_command().type] == [
            _T.LOOKUP_RESPONSE,
            _T.PARTITIONED_METADATA_RESPONSE,
        ]
    finally:
        raw.close()


def test_with_nothing_armed_sessions_dispatch_through_the_plain_table(broker: EmbeddedBroker) -> None:
    """The cost rule: no fault armed, no filter in the path of a command."""
    raw = RawClient(broker.port)
    try:
        (session,) = broker.call(lambda: list(broker.server._shells))
        assert isinstance(session, Session)
        assert broker.call(lambda: session._handlers is session._plain)
        fault = broker.faults.fail_next("PRODUCER")
        done = threading.Event()
        broker.server.run_on_loop(done.set)
        assert done.wait(5)
        assert broker.call(lambda: session._handlers is not session._plain)
        broker.faults.remove(fault)
        assert broker.call(lambda: session._handlers is session._plain)
    finally:
        raw.close()
