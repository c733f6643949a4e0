"""The protocol session's hot paths in CPU time, without sockets: SEND, FLOW + MESSAGE, ACK.

    python benchmarks/bench_session.py [--messages 50000] [--read 100]
    python benchmarks/compare_src.py --before OLD/src --after src --repeats 5 benchmarks/bench_session.py

A :class:`~mledger.protocol._session.Session` over a memory-store broker is fed frames the way
the server shell feeds it (``--read`` frames per read) and drained the way the shell drains it
(``Connection.data_to_send``), with a host that runs what the server would schedule at once.
Each figure is commands per CPU-second of this process (``time.process_time``), the broker's
work included: ``bench_protocol.py`` measures the same paths with the real client and sockets,
where the client's share and the machine's load make a 3 % change hard to see.

* ``send``: non-batched SENDs of 100 B on one producer, answered with SEND_RECEIPTs;
* ``flow+message``: a FLOW of 1000 permits at a time and the MESSAGE frames it releases;
* ``ack``: one individual ACK per message, without a receipt.
"""

from __future__ import annotations

import argparse
import itertools
import os
import struct
import time
from collections.abc import Callable

from mledger.broker import Broker, Subscription, Topic
from mledger.codec import EntryMetadata, encode_entry
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.managed_ledger import ManagedLedgerFactory
from mledger.protocol import ProtocolConfig
from mledger.protocol._access import ProducerAccess
from mledger.protocol._codec import decode_command
from mledger.protocol._framing import FrameDecoder, crc32c, encode_frame, encode_payload_frame
from mledger.protocol._session import ConsumerHandle, Session
from mledger.storage import MemoryStore

_T = api.BaseCommand
TOPIC = "persistent://public/default/bench"
PAYLOAD = b"x" * 100


class Host:
    """The server's part of the work, done at once: dispatches, pumps and posted calls."""

    def __init__(self) -> None:
        self.broker = Broker(ManagedLedgerFactory(MemoryStore()))
        self.config = ProtocolConfig(port=0)
        self.auth = None
        self.access = ProducerAccess()
        self.service_url = "pulsar://127.0.0.1:6650"
        self.tls_service_url: str | None = None
        self._ids = itertools.count(1)
        self.pumps: list[ConsumerHandle] = []

    def run_on_loop(self, fn: Callable[[], None]) -> None:
        fn()

    def post(self, fn: Callable[[], None]) -> None:
        fn()

    def next_id(self) -> int:
        return next(self._ids)

    def flush_soon(self, session: Session) -> None:
        pass

    def flush_now(self, session: Session) -> None:
        pass

    def close_soon(self, session: Session) -> None:
        pass

    def watch(self, topic: Topic) -> None:
        pass

    def dispatch_soon(self, subscription: Subscription) -> None:
        pass

    def pump_soon(self, handle: ConsumerHandle) -> None:
        self.pumps.append(handle)

    def dispatch(self, subscription: Subscription) -> int:
        return subscription.dispatch()


def frame(cmd: api.BaseCommand, payload: bytes | None = None) -> bytes:
    data = cmd.SerializeToString()
    return encode_frame(data) if payload is None else encode_payload_frame(data, payload)


def send_frame(sequence_id: int) -> bytes:
    body = encode_entry(PAYLOAD, EntryMetadata(producer_name="p", sequence_id=sequence_id, publish_time_ms=1))
    payload = b"\x0e\x01" + struct.pack(">I", crc32c(body)) + body
    return frame(_T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=sequence_id)), payload)


def reads(frames: list[bytes], per_read: int) -> list[bytes]:
    return [b"".join(frames[i : i + per_read]) for i in range(0, len(frames), per_read)]


def replies(session: Session) -> list[api.BaseCommand]:
    return [decode_command(c) for c, _ in FrameDecoder().feed(session.connection.data_to_send())]


def measure(messages: int, per_read: int) -> dict[str, float]:
    host = Host()
    session = Session(host, "bench:1")
    connect = api.CommandConnect(client_version="bench", protocol_version=20)
    session.data_received(frame(_T(type=_T.CONNECT, connect=connect)))
    producer = api.CommandProducer(topic=TOPIC, producer_id=1, request_id=1)
    session.data_received(frame(_T(type=_T.PRODUCER, producer=producer)))
    subscribe = api.CommandSubscribe(
        topic=TOPIC,
        subscription="s",
        subType=api.CommandSubscribe.Exclusive,
        consumer_id=1,
        request_id=2,
        initialPosition=api.CommandSubscribe.Earliest,
    )
    session.data_received(frame(_T(type=_T.SUBSCRIBE, subscribe=subscribe)))
    session.connection.data_to_send()

    sends = reads([send_frame(i) for i in range(messages)], per_read)
    t0 = time.process_time()
    for data in sends:
        session.data_received(data)
        session.connection.data_to_send()
    send_cpu = time.process_time() - t0

    flow = frame(_T(type=_T.FLOW, flow=api.CommandFlow(consumer_id=1, messagePermits=1000)))
    delivered: list[api.MessageIdData] = []
    t0 = time.process_time()
    while len(delivered) < messages:
        session.data_received(flow)
        while host.pumps:
            host.pumps.pop().pump()
        for reply in replies(session):
            if reply.type == _T.MESSAGE:
                delivered.append(reply.message.message_id)
    flow_cpu = time.process_time() - t0

    acks = [
        frame(_T(type=_T.ACK, ack=api.CommandAck(consumer_id=1, ack_type=api.CommandAck.Individual, message_id=[m])))
        for m in delivered
    ]
    ack_reads = reads(acks, per_read)
    t0 = time.process_time()
    for data in ack_reads:
        session.data_received(data)
        session.connection.data_to_send()
    ack_cpu = time.process_time() - t0
    assert session.messages_in == messages and session.messages_out == messages
    return {"send": messages / send_cpu, "flow+message": messages / flow_cpu, "ack": messages / ack_cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--read", type=int, default=100, help="frames per read")
    args = parser.parse_args()
    measure(2000, args.read)  # warm up: imports, first topic, caches
    rates = measure(args.messages, args.read)
    for name, rate in rates.items():
        print(f"{name} commands per CPU-second: {rate:,.0f}")
    print(f"load average: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
