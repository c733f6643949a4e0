"""A protocol session's state: one owner of what a connection has open and counted, read
through ``stats()`` (issue 32 item 3, the protocol half)."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any, cast

import pytest
from protocol_raw import subscribe_command
from test_protocol_session import TOPIC, Host, connected, frame, producer_cmd, replies, send_frame

from mledger.codec import EntryMetadata, encode_entry
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.protocol import Connection, ConnectionState
from mledger.protocol._framing import crc32c
from mledger.protocol._handles import (
    ConsumerHandle,
    NonPersistentConsumerHandle,
    NonPersistentProducerHandle,
    ProducerHandle,
    Send,
)
from mledger.protocol._session_state import SessionCounters, SessionState

_T = api.BaseCommand
_NONE: Any = None  # what the state never reads of a handle (its topic, its owner)


class _Topic:
    partition_index = -1  # all a consumer handle reads of its topic when made


_TOPIC: Any = _Topic()


def _producer(producer_id: int) -> ProducerHandle:
    return ProducerHandle(_NONE, producer_id, _NONE, 0)


def _send(handle: ProducerHandle, sequence_id: int) -> Send:
    return cast(Send, (handle, sequence_id, sequence_id, None))


def test_handles_of_both_kinds_share_one_id_space_per_map() -> None:
    state = SessionState(Connection(), "client:1")
    state.add_producer(_producer(1))
    state.add_producer(NonPersistentProducerHandle(2, _NONE, _NONE))
    state.add_consumer(ConsumerHandle(_NONE, 1, _TOPIC, _NONE))
    state.add_consumer(NonPersistentConsumerHandle(_NONE, 2, _NONE))
    state._check()
    assert (list(state.producers), list(state.np_producers)) == ([1], [2])
    assert (list(state.consumers), list(state.np_consumers)) == ([1], [2])
    assert (state.stats().producers, state.stats().consumers) == (2, 2)
    state.add_producer(NonPersistentProducerHandle(1, _NONE, _NONE))  # a bug in a caller: the id is taken
    with pytest.raises(AssertionError, match="a producer id of both kinds"):
        state._check()
    assert state.remove_np_producer(1) is not None
    assert state.remove_producer(1) is not None and state.remove_producer(1) is None
    assert state.remove_consumer(1) is not None and state.remove_np_consumer(2) is not None
    state._check()
    assert (state.stats().producers, state.stats().consumers) == (1, 0)


def test_sends_wait_per_topic_and_stay_in_flight_until_answered() -> None:
    state = SessionState(Connection())
    handle = _producer(1)
    state.queue_send(7, _send(handle, 0), 3, 100)
    state.queue_send(8, _send(handle, 1), 1, 10)
    state.queue_send(7, _send(handle, 2), 1, 10)
    state._check()
    assert state.has_pending_sends and state.sends_in_flight == 3
    batches = state.take_pending_sends()
    assert {k: [s[1] for s in v] for k, v in batches.items()} == {7: [0, 2], 8: [1]}
    assert not state.has_pending_sends and state.take_pending_sends() == {}
    assert state.sends_in_flight == 3  # taken to be published, not answered yet
    state.sends_done(2)
    state._check()
    assert state.stats().sends_in_flight == 1
    assert state.stats().counters == SessionCounters(messages_in=5, bytes_in=120)


def test_stats_is_a_frozen_snapshot_and_counters_add_up() -> None:
    state = SessionState(Connection())
    state.count_in(2, 20)
    before = state.stats()
    state.count_out(4, 40)
    state.count_checksum_error()
    state.count_validation_error()
    after = state.stats()
    assert before.counters == SessionCounters(messages_in=2, bytes_in=20)
    assert after.counters == SessionCounters(2, 20, 4, 40, 1, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.counters.messages_in = 0  # type: ignore[misc]
    assert before.counters + after.counters == SessionCounters(4, 40, 4, 40, 1, 1)
    assert sum((before.counters, after.counters), SessionCounters()) == before.counters + after.counters


def test_close_closes_the_connection_once() -> None:
    state = SessionState(Connection())
    assert not state.closed and not state.is_connected
    assert state.close() is True
    assert state.closed and state.connection.state is ConnectionState.CLOSED
    assert state.close() is False
    state._check()


def test_a_session_counts_through_its_state() -> None:
    """Frame by frame: SENDs, a bad checksum, a MESSAGE, an ACK carrying a validation error;
    ``stats()`` is a snapshot, the producer and consumer gauges follow CLOSE_*."""
    host = Host()
    session = connected(host)
    session.data_received(frame(producer_cmd(1, 10)))
    replies(session)
    session.data_received(send_frame(1, 0, b"a") + send_frame(1, 1, b"b"))
    body = encode_entry(b"c", EntryMetadata(producer_name="p", sequence_id=2, publish_time_ms=1))
    bad = b"\x0e\x01" + struct.pack(">I", crc32c(body) ^ 1) + body
    session.data_received(frame(_T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=2)), bad))
    assert [r.type for r, _ in replies(session)] == [_T.SEND_RECEIPT, _T.SEND_RECEIPT, _T.SEND_ERROR]
    produced = session.stats()
    assert produced.counters.messages_in == 2 and produced.counters.checksum_errors == 1
    assert produced.counters.bytes_in > 0 and produced.sends_in_flight == 0
    subscribe = subscribe_command(TOPIC, "s", 7, 11)
    subscribe.subscribe.initialPosition = api.CommandSubscribe.Earliest
    session.data_received(frame(subscribe))
    session.data_received(frame(_T(type=_T.FLOW, flow=api.CommandFlow(consumer_id=7, messagePermits=10))))
    host.settle()
    messages = [m for m, _ in replies(session) if m.type == _T.MESSAGE]
    ack = api.CommandAck(
        consumer_id=7,
        ack_type=api.CommandAck.Individual,
        message_id=[messages[0].message.message_id],
        validation_error=api.CommandAck.ChecksumMismatch,
    )
    session.data_received(frame(_T(type=_T.ACK, ack=ack)))
    consumed = session.stats()
    assert (consumed.producers, consumed.consumers) == (1, 1)
    assert consumed.counters.messages_out == 2 and consumed.counters.validation_errors == 1
    assert consumed.counters.bytes_out == produced.counters.bytes_in
    assert produced.counters.messages_out == 0  # the earlier snapshot did not move
    session.data_received(
        frame(_T(type=_T.CLOSE_PRODUCER, close_producer=api.CommandCloseProducer(producer_id=1, request_id=12)))
        + frame(_T(type=_T.CLOSE_CONSUMER, close_consumer=api.CommandCloseConsumer(consumer_id=7, request_id=13)))
    )
    closed = session.stats()
    assert (closed.producers, closed.consumers) == (0, 0) and closed.counters == consumed.counters
    session.close()
    assert session.closed and session.stats().counters == consumed.counters


def test_every_handler_is_bound_to_the_part_that_owns_it() -> None:
    """``Session.handle_<command>`` names each handler once; on a session it is the owning
    part's bound method (what the session's dispatch table holds)."""
    from mledger.protocol._consuming import ConsumerCommands
    from mledger.protocol._producing import ProducerCommands
    from mledger.protocol._session import Session

    session = Session(Host(), "test:1")
    assert isinstance(session.handle_send.__self__, ProducerCommands)  # type: ignore[attr-defined]
    assert isinstance(session.handle_ack.__self__, ConsumerCommands)  # type: ignore[attr-defined]
    assert session.handle_connect.__self__ is session
