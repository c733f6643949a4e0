"""Crash safety: SIGKILL the server during a produce-and-consume run over SQLite, restart it on
the same data directory, and every message whose send was confirmed is delivered (before the
crash and acknowledged, or after the restart), none again after its ack was confirmed (ACK with a request id -> ACK_RESPONSE after the cursor persisted).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pulsar
import pytest
from protocol_raw import RawClient

from mledger.codec import decode_entry
from mledger.codec.proto import PulsarApi_pb2 as api

pytestmark = [pytest.mark.timeout(300)]

_T = api.BaseCommand
TOPIC = "persistent://public/default/crash"


def start_server(data_dir: Path) -> tuple[subprocess.Popen[str], int]:
    """``mledger standalone`` on free ports; returns once /admin/v2/clusters answers."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mledger.cli", "standalone", "--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0",
         "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    urls = json.loads(proc.stdout.readline())
    assert httpx.get(f"{urls['admin_url']}/admin/v2/clusters", timeout=30).json() == ["standalone"]
    return proc, int(urls["service_url"].rsplit(":", 1)[1])


def test_sigkill_during_produce_and_consume_loses_nothing_confirmed(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    proc, port = start_server(data_dir)
    confirmed_sends: set[int] = set()
    acked: set[int] = set()
    ack_sent: set[int] = set()
    stop = threading.Event()
    client = pulsar.Client(
        f"pulsar://127.0.0.1:{port}",
        operation_timeout_seconds=30,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    consumer_raw = RawClient(port)
    consumer_raw.send(
        _T(
            type=_T.SUBSCRIBE,
            subscribe=api.CommandSubscribe(
                topic=TOPIC, subscription="sub", subType=api.CommandSubscribe.Shared, consumer_id=1, request_id=1,
                initialPosition=api.CommandSubscribe.Earliest,
            ),
        )
    )
    assert consumer_raw.next_command().type == _T.SUCCESS
    consumer_raw.send(_T(type=_T.FLOW, flow=api.CommandFlow(consumer_id=1, messagePermits=100_000)))
    producer = client.create_producer(TOPIC, batching_enabled=False, send_timeout_millis=3000)

    def produce() -> None:
        i = 0
        while not stop.is_set():
            def done(res: pulsar.Result, mid: object, i: int = i) -> None:
                if res == pulsar.Result.Ok:
                    confirmed_sends.add(i)
            try:
                producer.send_async(b"%d" % i, done)
            except pulsar.PulsarException:
                return
            i += 1
            if i % 50 == 0:
                time.sleep(0.005)

    def consume() -> None:
        # Ack each message with a request id; record it once the ACK_RESPONSE arrives.
        pending: dict[int, int] = {}
        request_id = 100
        consumer_raw.sock.settimeout(30)  # a bound: the kill closes the socket, which ends the loop
        while True:
            try:
                cmd = consumer_raw.next_command_with_payload()
            except (ConnectionError, OSError):
                return
            if cmd[0].type == _T.MESSAGE:
                mid = cmd[0].message.message_id
                assert cmd[1] is not None
                value = int(decode_entry(cmd[1], verify_checksum=True)[1])
                request_id += 1
                pending[request_id] = value
                ack_sent.add(value)
                ack = api.CommandAck(
                    consumer_id=1, ack_type=api.CommandAck.Individual, request_id=request_id,
                    message_id=[api.MessageIdData(ledgerId=mid.ledgerId, entryId=mid.entryId)],
                )
                try:
                    consumer_raw.send(_T(type=_T.ACK, ack=ack))
                except OSError:
                    return
            elif cmd[0].type == _T.ACK_RESPONSE and not cmd[0].ackResponse.HasField("error"):
                acked.add(pending.pop(cmd[0].ackResponse.request_id))

    producer_thread = threading.Thread(target=produce)
    consumer_thread = threading.Thread(target=consume)
    producer_thread.start()
    consumer_thread.start()
    deadline = time.monotonic() + 120  # a bound for a loaded machine: about 1 s when idle
    while (len(confirmed_sends) < 3000 or len(acked) < 1000) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    stop.set()
    producer_thread.join(30)
    consumer_thread.join(30)
    client.close()
    assert len(confirmed_sends) >= 3000 and len(acked) >= 1000, (len(confirmed_sends), len(acked))
    confirmed = set(confirmed_sends)
    confirmed_acks = set(acked)

    proc, port = start_server(data_dir)
    try:
        client = pulsar.Client(
            f"pulsar://127.0.0.1:{port}", operation_timeout_seconds=30,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        consumer = client.subscribe(TOPIC, "sub", consumer_type=pulsar.ConsumerType.Shared)
        after: list[int] = []
        # Every confirmed message not acked before the crash must come: wait for each (bounded,
        # the restarted broker may be slow to recover and dispatch); then take whatever else
        # comes until the broker is quiet for 2 s (acked messages wrongly redelivered).
        missing = confirmed - ack_sent
        while True:
            try:
                m = consumer.receive(30_000 if missing else 2000)
            except pulsar.Timeout:
                break
            after.append(int(m.data()))
            missing.discard(after[-1])
            consumer.acknowledge(m)
        client.close()
    finally:
        proc.terminate()
        proc.wait(30)
    redelivered_acked = confirmed_acks & set(after)
    assert not redelivered_acked, f"{len(redelivered_acked)} messages came back after their ack was confirmed"
    # An ack sent but not yet answered may or may not have been stored: either is correct.
    lost = confirmed - set(ack_sent) - set(after)
    assert not lost, f"{len(lost)} confirmed messages were lost, e.g. {sorted(lost)[:5]}"
