"""The protocol session's hot paths in CPU time, without sockets: SEND, FLOW + MESSAGE, ACK.

    python benchmarks/bench_session.py [--messages 50000] [--read 100]
    python benchmarks/compare_src.py --before OLD/src --after src --repeats 5 benchmarks/bench_session.py

A :class:`~mledger.protocol._session.Session` over a memory-store broker is fed frames the way
the server shell feeds it (``--read`` frames per read) and drained the way the shell drains it
(``Connection.data_to_send``), through the host of ``tests/test_protocol_session.py`` (which
runs what the server would schedule when told to settle).
Each figure is commands per CPU-second of this process (``time.process_time``), the broker's
work included: ``bench_protocol.py`` measures the same paths with the real client and sockets,
where the client's share and the machine's load make a 3 % change hard to see.

* ``send``: non-batched SENDs of 100 B on one producer, answered with SEND_RECEIPTs;
* ``flow+message``: a FLOW of 1000 permits at a time and the MESSAGE frames it releases;
* ``ack``: one individual ACK per message, without a receipt.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the session tests' host and frames

from protocol_raw import producer_command, subscribe_command  # noqa: E402
from test_protocol_session import Host, connected, frame, replies, send_frame  # noqa: E402

from mledger.codec.proto import PulsarApi_pb2 as api  # noqa: E402
from mledger.protocol._session import Session  # noqa: E402

_T = api.BaseCommand
TOPIC = "persistent://public/default/bench"
PAYLOAD = b"x" * 100


def reads(frames: list[bytes], per_read: int) -> list[bytes]:
    return [b"".join(frames[i : i + per_read]) for i in range(0, len(frames), per_read)]


def measure(messages: int, per_read: int) -> dict[str, float]:
    host = Host()
    session: Session = connected(host)
    session.data_received(frame(subscribe_command(TOPIC, "s", 1, 1)) + frame(producer_command(TOPIC, 1, 2)))
    session.connection.data_to_send()

    sends = reads([send_frame(1, i, PAYLOAD) for i in range(messages)], per_read)
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
        host.settle()
        for reply, _ in replies(session):
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
