"""A store that refuses writes (a full disk) under the real Pulsar client (pulsar-client 3.13.0).

Pulsar's answer to a failed write (``PersistentTopic.addFailed``): fence the topic, disconnect
its producers, ``PersistenceError`` for the pending sends. The C++ client treats any SEND_ERROR
but ChecksumError as "reconnect and resend", and restarts its send timer on every successful
reconnect, so the broker also refuses a producer's reconnection until the store accepts a write
again: the client's send timer then fails the pending sends.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pulsar
import pytest

from mledger.protocol import EmbeddedBroker
from mledger.storage import DISK_FULL, FaultInjectingStore, Store

pytestmark = pytest.mark.timeout(60)

SEND_TIMEOUT_MS = 1000


class DiskBroker(EmbeddedBroker):
    """An embedded broker over SQLite whose disk the test can fill (``disk.disk_full``)."""

    disk: FaultInjectingStore

    def _open_store(self) -> Store:
        self.disk = FaultInjectingStore(super()._open_store())
        return self.disk


def make_client(broker: EmbeddedBroker, operation_timeout_seconds: int = 10) -> pulsar.Client:
    return pulsar.Client(
        broker.service_url,
        operation_timeout_seconds=operation_timeout_seconds,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )


def send_and_wait(producer: pulsar.Producer, data: bytes, timeout: float) -> pulsar.Result | None:
    """Send asynchronously; the callback's result, or None when it did not come in ``timeout``."""
    done = threading.Event()
    results: list[pulsar.Result] = []

    def callback(result: pulsar.Result, _: pulsar.MessageId) -> None:
        results.append(result)
        done.set()

    producer.send_async(data, callback)
    return results[0] if done.wait(timeout) else None


def wait_for(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_a_full_disk_fails_the_send_within_its_timeout_and_sends_resume_once_space_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mledger")
    with DiskBroker(tmp_path / "data", manual_clock=False) as broker:
        client = make_client(broker)
        producer = client.create_producer("full", send_timeout_millis=SEND_TIMEOUT_MS)
        before = producer.send(b"before")
        broker.disk.disk_full = True
        writes = broker.disk.writes
        # The application is told: the callback comes (the client's send timer fires after
        # SEND_TIMEOUT_MS; 30 s is only a bound, for a loaded machine).
        result = send_and_wait(producer, b"refused", 30)
        assert result is not None, "the send neither succeeded nor failed"
        assert result == pulsar.Result.Timeout  # the send timer: the client gives up the send
        assert broker.disk.writes > writes  # the store was asked, and refused
        other = make_client(broker, operation_timeout_seconds=2)
        with pytest.raises(pulsar.PulsarException):  # a producer created meanwhile is refused too
            other.create_producer("full", send_timeout_millis=SEND_TIMEOUT_MS)
        other.close()
        # Space is back: the same producer reconnects by itself and its sends succeed.
        broker.disk.disk_full = False
        wait_for(producer.is_connected)
        after = producer.send(b"after")
        reader = client.create_reader("full", pulsar.MessageId.earliest)
        got = [reader.read_next(5000) for _ in range(2)]
        assert [m.data() for m in got] == [b"before", b"after"]
        assert [str(m.message_id()) for m in got] == [str(before), str(after)]
        assert not reader.has_message_available()
        client.close()
    # Nothing confirmed is lost: a restart reads back exactly what was confirmed.
    with EmbeddedBroker(tmp_path / "data") as restarted:
        client = make_client(restarted)
        reader = client.create_reader("full", pulsar.MessageId.earliest)
        assert [reader.read_next(5000).data() for _ in range(2)] == [b"before", b"after"]
        assert not reader.has_message_available()
        client.close()
    # One line when the failures start and one when they end, whatever the number of retries;
    # no traceback.
    failures = [r for r in caplog.records if DISK_FULL in r.getMessage()]
    assert len(failures) == 2, [r.getMessage() for r in failures]
    assert "writes succeed again after" in failures[1].getMessage()
    assert not any(r.exc_info for r in caplog.records)
