"""Record mode (issue 25 item 1): the broker's journal and the recorder writing raw logs.

The library's ``Broker(journal=Recorder(DIR))`` on a manual clock checks what each operation
records; ``mledger standalone --record`` as a process checks a SIGKILL (only readable parts
left, and they replay) and a clean SIGTERM stop; a failing disk and a full queue leave the
clients alone and mark the recording incomplete.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pulsar
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from mledger import InitialPosition, ManagedLedgerFactory, MemoryStore
from mledger.broker import AckRecord, Broker, ManualClock, SkipEntry, SubscriptionType
from mledger.codec import MessageId
from mledger.replay import Recorder, RecordSettings, _recording as recording, read_recording_status
from mledger.replay._poll_events import Acked

pytestmark = pytest.mark.timeout(120)

TOPIC = "persistent://public/default/orders"


def rows(directory: Path, log: str) -> list[dict[str, object]]:
    """Every row of one log of a recording, in part order (what the replay reads)."""
    out: list[dict[str, object]] = []
    for part in sorted((directory / log).glob("part-*.parquet")):
        out.extend(pq.read_table(part).to_pylist())
    return out


def recorded_broker(directory: Path, settings: RecordSettings | None = None) -> tuple[Broker, Recorder]:
    recorder = Recorder(directory, settings)
    broker = Broker(ManagedLedgerFactory(MemoryStore()), clock=ManualClock(1_000), journal=recorder)
    return broker, recorder


def test_every_cursor_change_is_recorded(tmp_path: Path) -> None:
    broker, recorder = recorded_broker(tmp_path)
    shared = broker.subscribe(TOPIC, "billing", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    exclusive = broker.subscribe(TOPIC, "audit", SubscriptionType.EXCLUSIVE, InitialPosition.EARLIEST)
    producer = broker.create_producer(TOPIC, "p1")
    single = [producer.send(b"m%d" % i, key="k") for i in range(4)]
    batch = producer.send_batch([b"a", b"b", b"c"])
    delayed = producer.send(b"later", deliver_at_ms=60_000)
    broker.clock.advance(5)
    consumer = shared.add_consumer("c1")
    consumer.acknowledge(single[0])
    consumer.acknowledge(MessageId(batch[0].ledger_id, batch[0].entry_id, -1, 1))  # batch index 1
    assert shared.cancel_delayed_message(delayed.ledger_id, delayed.entry_id)
    shared.skip_messages([SkipEntry(single[2].ledger_id, single[2].entry_id)])
    consumer.acknowledge(single[0])  # already acked: changes nothing, not recorded
    exclusive.add_consumer("x1").acknowledge_cumulative(single[1])
    broker.clock.advance(5)
    shared.reset_cursor(single[1])
    consumer.close()
    broker.unsubscribe(TOPIC, "billing")
    broker.close()  # closes the recorder: everything written

    produced = rows(tmp_path, "produced")
    assert [(r["entry_id"], r["batch_size"], r["producer_name"], r["sequence_id"]) for r in produced] == [
        (0, 1, "p1", 0),
        (1, 1, "p1", 1),
        (2, 1, "p1", 2),
        (3, 1, "p1", 3),
        (4, 3, "p1", 4),
        (5, 1, "p1", 7),
    ]
    assert produced[0]["key"] == "k" and produced[5]["deliver_at_ms"] == 60_000
    assert {r["publish_time_ms"] for r in produced} == {1_002}  # 1 ms after each subscription event
    acked = [
        (r["subscription"], r["entry_id"], r["batch_index"], r["ack_type"], r["ts_ms"]) for r in rows(tmp_path, "acked")
    ]
    assert acked == [
        ("billing", 0, None, "individual", 1_005),
        ("billing", 4, 1, "individual", 1_005),
        ("billing", 2, None, "individual", 1_005),  # the PIP-423 skip: an individual ack
        ("audit", 1, None, "cumulative", 1_005),
    ]
    cancelled = rows(tmp_path, "cancelled")
    assert [(r["subscription"], r["entry_id"], r["batch_index"]) for r in cancelled] == [("billing", 5, None)]
    subs = [
        (r["subscription"], r["event"], r["type"], r["initial_position"], r["entry_id"])
        for r in rows(tmp_path, "subscriptions")
    ]
    assert subs == [
        ("billing", "created", "SHARED", "earliest", -1),  # where the cursor started: before entry 0
        ("audit", "created", "EXCLUSIVE", "earliest", -1),
        ("billing", "reset", None, None, 1),
        ("billing", "deleted", None, None, None),
    ]
    times = [r["ts_ms"] for r in rows(tmp_path, "subscriptions")]
    assert times == [1_000, 1_001, 1_010, 1_011]  # events after a subscription event: 1 ms later
    status = read_recording_status(tmp_path)
    assert status is not None and status["complete"] and status["sessions"][0]["dropped_rows"] == 0
    assert not list(tmp_path.rglob(".*"))  # no temporary file left


def test_the_rows_of_one_ack_request_share_a_command_number(tmp_path: Path) -> None:
    """One request (a ``CommandAck`` with several ids) is one ``command``; two requests of the
    same subscription in the same millisecond are two; a capture's acks have none."""
    broker, recorder = recorded_broker(tmp_path)
    sub = broker.subscribe(TOPIC, "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    producer = broker.create_producer(TOPIC, "p1")
    single = [producer.send(b"m%d" % i) for i in range(4)]
    batch = producer.send_batch([b"a", b"b", b"c"])
    consumer = sub.add_consumer("c1")
    consumer.acknowledge([single[0], single[2], MessageId(batch[0].ledger_id, batch[0].entry_id, -1, 1)])
    consumer.acknowledge([single[1], single[3]])  # the same millisecond: the manual clock stands
    recorder.write_events([Acked(TOPIC, -1, "s", [AckRecord(batch[0].ledger_id, batch[0].entry_id, 0)], 1_000)])
    broker.close()
    acked = [(r["entry_id"], r["batch_index"], r["ts_ms"], r["command"]) for r in rows(tmp_path, "acked")]
    first, second = acked[0][3], acked[3][3]
    assert first is not None and second is not None and first != second
    assert acked == [
        (0, None, 1_001, first),
        (2, None, 1_001, first),
        (4, 1, 1_001, first),
        (1, None, 1_001, second),
        (3, None, 1_001, second),
        (4, 0, 1_001, None),
    ]


def test_a_write_failure_leaves_clients_alone_and_marks_the_recording_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker, recorder = recorded_broker(tmp_path)

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(recording.pq, "write_table", disk_full)
    producer = broker.create_producer(TOPIC)
    ids = [producer.send(b"x") for _ in range(3)]
    assert recorder.flush()
    assert [i.entry_id for i in ids] == [0, 1, 2]  # the publishes succeeded
    assert recorder.dropped_rows == 3 and not recorder.complete
    status = json.loads((tmp_path / "recording.json").read_text())
    session = status["sessions"][-1]
    assert session["dropped_rows"] == 3 and "No space left" in session["incomplete_reason"]
    assert status["complete"] is False
    monkeypatch.undo()
    producer.send(b"y")  # once the disk has room again, rows are written (still incomplete)
    broker.close()
    assert [r["entry_id"] for r in rows(tmp_path, "produced")] == [3]
    status = read_recording_status(tmp_path)
    assert status is not None and status["complete"] is False


def test_a_full_queue_drops_and_counts_never_blocks(tmp_path: Path) -> None:
    broker, recorder = recorded_broker(tmp_path, RecordSettings(flush_interval_s=3600, max_pending_rows=2))
    producer = broker.create_producer(TOPIC)
    for _ in range(5):
        producer.send(b"x")
    assert recorder.dropped_rows == 3 and not recorder.complete
    broker.close()
    assert len(rows(tmp_path, "produced")) == 2
    status = read_recording_status(tmp_path)
    assert status is not None and status["complete"] is False
    assert "max_pending_rows" in status["sessions"][-1]["incomplete_reason"]


def full_disk(monkeypatch: pytest.MonkeyPatch, parts_written_every: int) -> None:
    """A disk that is full: only one Parquet part in ``parts_written_every`` finds room, and
    ``recording.json``'s temporary file is created, empty, then its write fails."""
    calls = iter(range(1 << 30))
    write_table = recording.pq.write_table

    def write_part(*args: Any, **kwargs: Any) -> None:
        if next(calls) % parts_written_every:
            raise OSError(errno.ENOSPC, "No space left on device")
        write_table(*args, **kwargs)

    write_text = Path.write_text

    def write_status(path: Path, *args: Any, **kwargs: Any) -> int:
        if path.name != ".recording.json.tmp":
            return write_text(path, *args, **kwargs)
        path.touch()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(recording.pq, "write_table", write_part)
    monkeypatch.setattr(Path, "write_text", write_status)


def test_a_full_disk_leaves_the_recording_incomplete_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 31 item 10: about 90 % of the rows dropped, then a clean stop. While the disk is
    full, ``recording.json`` keeps its first content, which says incomplete; once it has room,
    it carries the dropped rows and when they were dropped, and the replay's warning says so."""
    for directory, room_at_stop in (tmp_path / "full", False), (tmp_path / "freed", True):
        broker, recorder = recorded_broker(directory, RecordSettings(flush_interval_s=3600))
        full_disk(monkeypatch, parts_written_every=10)
        producer = broker.create_producer(TOPIC)
        for _ in range(20):
            producer.send(b"x")
            assert recorder.flush()  # one part per entry
        if room_at_stop:
            monkeypatch.undo()
        broker.close()
        monkeypatch.undo()
        assert not list(directory.glob(".recording.json.tmp"))  # no empty temporary file left
        status = json.loads((directory / "recording.json").read_text())
        assert status["complete"] is False
        assert len(rows(directory, "produced")) == 2 and recorder.dropped_rows == 18
    session = status["sessions"][0]
    assert session["dropped_rows"] == 18 and session["stopped_ms"] is not None
    assert session["incomplete_since_ms"] <= session["dropped_from_ms"] <= session["dropped_until_ms"]
    caplog.set_level("WARNING", logger="mledger.replay._recording")
    recording.warn_if_incomplete(pafs.LocalFileSystem(), str(tmp_path / "freed"))
    assert "18 rows dropped between " in caplog.text and "No space left" in caplog.text


def test_a_session_is_incomplete_until_its_clean_stop(tmp_path: Path) -> None:
    broker, recorder = recorded_broker(tmp_path)
    assert json.loads((tmp_path / "recording.json").read_text())["complete"] is False  # from the first byte
    broker.create_producer(TOPIC).send(b"x")
    assert recorder.flush()
    assert json.loads((tmp_path / "recording.json").read_text())["complete"] is False
    broker.close()
    assert json.loads((tmp_path / "recording.json").read_text())["complete"] is True


def test_skip_n_is_not_expressible_and_marks_the_recording_incomplete(tmp_path: Path) -> None:
    broker, recorder = recorded_broker(tmp_path)
    sub = broker.subscribe(TOPIC, "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    broker.create_producer(TOPIC).send(b"x")
    sub.skip(1)
    broker.close()
    status = read_recording_status(tmp_path)
    assert status is not None and not status["complete"]
    assert "skip of 1 messages" in status["sessions"][-1]["incomplete_reason"]


def test_standalone_without_record_does_not_import_the_recorder() -> None:
    code = (
        "import sys; from mledger.standalone import EmbeddedStandalone\n"
        "with EmbeddedStandalone(): pass\n"
        "assert 'mledger.replay._recording' not in sys.modules, 'recorder imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def start_standalone(record: Path, *extra: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mledger.cli", "standalone", "--memory", "--bind", "127.0.0.1:0",
         "--admin-bind", "127.0.0.1:0", "--record", str(record), *extra],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def readable_files(directory: Path) -> list[Path]:
    """Every file a reader of the recording sees (hidden names are skipped), each checked readable."""
    seen = []
    for path in sorted(directory.rglob("*")):
        if path.is_dir() or any(part.startswith((".", "_")) for part in path.relative_to(directory).parts):
            continue
        if path.suffix == ".parquet":
            pq.read_table(path)
        else:
            json.loads(path.read_text())
        seen.append(path)
    return seen


def test_sigkill_mid_run_leaves_only_readable_files_that_replay(tmp_path: Path) -> None:
    record = tmp_path / "rec"
    proc, urls = start_standalone(record, "--record-flush-interval", "0.05")
    try:
        client = pulsar.Client(urls["service_url"])
        consumer = client.subscribe("t", "s", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer("t", batching_enabled=False)
        for i in range(50):
            producer.send(b"m%d" % i)
            consumer.acknowledge(consumer.receive(10_000))
        consumer.close()  # the client sends its grouped acks first
        # the writer thread writes every 50 ms: wait (bounded) for the parts of both logs
        deadline = time.monotonic() + 30
        while not (rows(record, "produced") and rows(record, "acked")):
            assert time.monotonic() < deadline, "nothing recorded"
            time.sleep(0.01)
        producer.send(b"in the last interval")  # may be lost with the process
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        client.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    files = readable_files(record)
    assert record / "recording.json" in files
    assert json.loads((record / "recording.json").read_text())["complete"] is False  # the file itself says so
    status = read_recording_status(record)
    assert status is not None and status["complete"] is False  # not stopped: the last interval may be lost
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "mledger.cli", "replay", str(record), str(out), "--single-process", "--quiet"],
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert "is an incomplete recording (not stopped cleanly" in done.stderr
    cursors = pq.read_table(out / "cursors").to_pylist()
    assert [c["subscription"] for c in cursors] == ["s"]
    produced = rows(record, "produced")
    assert produced and [r["entry_id"] for r in produced] == list(range(len(produced)))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_clean_stop_writes_everything_before_the_process_exits(tmp_path: Path, sig: signal.Signals) -> None:
    record = tmp_path / "rec"
    proc, urls = start_standalone(record, "--record-flush-interval", "3600")
    try:
        client = pulsar.Client(urls["service_url"])
        producer = client.create_producer("t", batching_enabled=False)
        for i in range(20):
            producer.send(b"m%d" % i)
        client.close()
        assert not rows(record, "produced")  # nothing flushed yet
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert len(rows(record, "produced")) == 20
    status = read_recording_status(record)
    assert status is not None and status["complete"] is True
    assert os.listdir(record / "produced")  # and no temporary file
    assert not [p for p in record.rglob(".*")]


def test_what_the_logs_cannot_express_marks_the_recording_incomplete(tmp_path: Path) -> None:
    store = MemoryStore()
    before = Broker(ManagedLedgerFactory(store), clock=ManualClock(1_000))
    before.subscribe(TOPIC, "old", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    before.close()
    recorder = Recorder(tmp_path / "a")
    broker = Broker(ManagedLedgerFactory(store), clock=ManualClock(1_000), journal=recorder)
    broker.get_topic(TOPIC)  # opened with a subscription stored before the recording
    assert not recorder.complete
    broker.close()
    recorder = Recorder(tmp_path / "b")
    broker = Broker(ManagedLedgerFactory(MemoryStore()), clock=ManualClock(1_000), journal=recorder)
    broker.create_producer(TOPIC).send(b"x")
    assert recorder.complete
    broker.delete_topic(TOPIC, force=True)
    assert not recorder.complete
    broker.close()
    status = read_recording_status(tmp_path / "b")
    assert status is not None and "deletion of topic" in status["sessions"][-1]["incomplete_reason"]


def test_parts_roll_by_rows(tmp_path: Path) -> None:
    broker, recorder = recorded_broker(tmp_path, RecordSettings(flush_interval_s=3600, rows_per_part=2))
    producer = broker.create_producer(TOPIC)
    for _ in range(5):
        producer.send(b"x")
    assert recorder.flush()
    sizes = [pq.read_metadata(p).num_rows for p in sorted((tmp_path / "produced").glob("part-*.parquet"))]
    assert sum(sizes) == 5 and max(sizes) == 2  # (the first part is the session's empty one)
    broker.close()


def test_sends_over_the_protocol_are_recorded_with_their_key_and_deliver_at_time(
    tmp_path: Path, pulsar_broker_factory: Any
) -> None:
    """The protocol server hands the broker a shared empty metadata record when nothing needs
    more; a recorded topic gets the full one, or every recorded key and deliver-at time is null."""
    record = tmp_path / "rec"
    broker = pulsar_broker_factory(record=record)
    client = pulsar.Client(broker.service_url)
    try:
        producer = client.create_producer("keys", batching_enabled=False)
        producer.send(b"plain", partition_key="k1")
        producer.send(b"later", partition_key="k2", deliver_after=timedelta(minutes=1))
    finally:
        client.close()
    broker.stop()
    produced = rows(record, "produced")
    assert [r["key"] for r in produced] == ["k1", "k2"]
    assert produced[0]["deliver_at_ms"] is None
    assert produced[1]["deliver_at_ms"] is not None and produced[1]["deliver_at_ms"] >= produced[1]["publish_time_ms"]
