"""``mledger capture`` against real clusters and hostile admin endpoints (issue 31 items 7-10).

Capture never changes the cluster (a misspelt topic is refused, never created; the topic and
subscription lists are the same after each documented workflow), always ends (an admin endpoint
that drips one byte at a time is cut at the admin call's deadline, and ``--duration`` or SIGTERM
still end the capture; an unreachable service URL fails within ``--connect-timeout``), stays
small and says what it did not see (an endless or oversized ``internalStats`` is refused at the
size cap; a list where an object is expected, a missing ``cursors`` key or an id below -1 is an
anomaly, never a deletion), and says "complete" only when it is.

The hostile endpoints are :class:`HostileAdmin`, a local HTTP server in front of a real
``mledger standalone``'s admin API that passes every call through except ``internalStats``,
which it answers as the test says.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pulsar
import pyarrow.parquet as pq
import pytest
from test_capture import standalone  # noqa: F401 - the fixture
from test_record_differential import NS

from mledger import ConfigError
from mledger.admin import RemoteAdmin
from mledger.cli import main
from mledger.replay import Capture, CaptureSettings, run_single_process
from mledger.replay._capture import CAPTURE_FILE

pytestmark = pytest.mark.timeout(180)

DRIP_EVERY_S = 0.2
"""The slow-drip server's pace: one byte per this many seconds, well inside any read timeout."""
Transform = Callable[[Any], Any]


class _Handler(BaseHTTPRequestHandler):
    server: HostileAdmin

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.server.seen.append(self.path)
        mode = self.server.internal_stats if self.path.split("?")[0].endswith("/internalStats") else None
        if mode == "drip":  # headers, then one byte now and then, forever
            self._headers(200, 1 << 20)
            self._forever(b" ", DRIP_EVERY_S)
        elif mode == "endless":  # no Content-Length: a body that never ends
            self._headers(200, None)
            self._forever(b" " * 65536, 0)
        elif mode == "huge":  # a Content-Length of 200 MB (a capture must not read it)
            self._headers(200, 200 << 20)
            self._forever(b" " * 65536, 0)
        else:
            upstream = self.server.http.get(self.path)
            body = upstream.content
            if callable(mode) and upstream.is_success:
                body = json.dumps(mode(upstream.json())).encode()
            self._headers(upstream.status_code, len(body))
            self.wfile.write(body)

    def _headers(self, status: int, length: int | None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.flush()

    def _forever(self, piece: bytes, pause: float) -> None:
        try:
            while not self.server.closing.is_set():
                self.wfile.write(piece)
                self.wfile.flush()
                self.server.closing.wait(pause)
        except OSError:  # the client gave up: what a capture must do
            pass

    def log_message(self, *args: Any) -> None:
        pass


class LocalServer(ThreadingHTTPServer):
    """An HTTP server on a free local port, serving ``handler`` from a thread until :meth:`close`
    (which sets :attr:`closing`, for the answers that never end)."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.closing = threading.Event()
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.closing.set()
        self.shutdown()
        self.server_close()


class HostileAdmin(LocalServer):
    """A local admin endpoint in front of ``upstream``: every GET is passed through, except
    ``internalStats`` when :attr:`internal_stats` says otherwise: ``"drip"``, ``"endless"``,
    ``"huge"`` or a function of the real answer. :attr:`seen` lists the paths asked for."""

    def __init__(self, upstream: str) -> None:
        self.http = httpx.Client(base_url=upstream, timeout=30)
        self.internal_stats: str | Transform | None = None
        self.seen: list[str] = []
        super().__init__(_Handler)

    def close(self) -> None:
        super().close()
        self.http.close()


@pytest.fixture
def hostile(standalone: dict[str, str]) -> Iterator[HostileAdmin]:  # noqa: F811 - the fixture
    server = HostileAdmin(standalone["admin_url"])
    try:
        yield server
    finally:
        server.close()


def cluster_lists(admin_url: str) -> dict[str, Any]:
    """What capture must never change: the namespace's topic lists and each topic's subscriptions."""
    with httpx.Client(base_url=f"{admin_url}/admin/v2/persistent/public/default", timeout=30) as http:
        topics = sorted(http.get("").json())
        out: dict[str, Any] = {"topics": topics, "partitioned": sorted(http.get("/partitioned").json())}
        for topic in topics:
            out[topic] = sorted(http.get(f"/{topic.rsplit('/', 1)[1]}/subscriptions").json())
    return out


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def capture_cli(out: Path, service_url: str, admin_url: str, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mledger.cli", "capture", str(out), "--service-url", service_url,
         "--admin-url", admin_url, "--interval", "200ms", *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def mledger_capture(out: Path, urls: dict[str, str], *options: str) -> int:
    """``mledger capture`` run in this process (what the command line runs): its exit status."""
    return main(["capture", str(out), "--service-url", urls["service_url"], "--admin-url", urls["admin_url"], *options])


def recording_status(directory: Path) -> dict[str, Any]:
    status: dict[str, Any] = json.loads((directory / "recording.json").read_text())
    return status


def description(directory: Path) -> dict[str, Any]:
    desc: dict[str, Any] = json.loads((directory / CAPTURE_FILE).read_text())
    return desc


def produce_and_subscribe(urls: dict[str, str], topic: str = "orders", acked: int = 2) -> None:
    """``topic`` with 4 entries and a subscription ``billing`` that acknowledged ``acked`` of them."""
    client = pulsar.Client(urls["service_url"])
    try:
        consumer = client.subscribe(topic, "billing", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(4):
            producer.send(b"%d" % i)
        for _ in range(acked):
            consumer.acknowledge(consumer.receive(10_000))
        consumer.close()
    finally:
        client.close()


# -- item 7: capture never changes the cluster ------------------------------------------------------
def test_a_misspelt_topic_is_refused_naming_it_and_nothing_is_created(
    tmp_path: Path,
    standalone: dict[str, str],  # noqa: F811 - the fixture
    capsys: pytest.CaptureFixture[str],
) -> None:
    produce_and_subscribe(standalone)
    before = cluster_lists(standalone["admin_url"])
    code = mledger_capture(tmp_path / "cap", standalone, "--topic", "ordrs", "--duration", "1s")
    stderr = capsys.readouterr().err
    assert code == 2 and "persistent://public/default/ordrs does not exist" in stderr, stderr
    assert cluster_lists(standalone["admin_url"]) == before  # no ordrs
    assert recording_status(tmp_path / "cap")["complete"] is False  # a failed capture is never complete
    assert "does not exist" in recording_status(tmp_path / "cap")["sessions"][0]["incomplete_reason"]


def test_the_documented_workflows_leave_the_topic_and_subscription_lists_unchanged(
    tmp_path: Path,
    standalone: dict[str, str],  # noqa: F811 - the fixture
) -> None:
    """``--topic`` (plain and partitioned, with ``--hash-keys``), ``--namespace``, and ``--append``
    into the first capture's directory, each run as the CLI runs it (in this process, to keep the
    test fast); after each, the cluster lists what it listed before."""
    httpx.put(f"{standalone['admin_url']}/admin/v2/{NS.replace('://', '/')}/events/partitions", json=2, timeout=30)
    produce_and_subscribe(standalone)
    before = cluster_lists(standalone["admin_url"])
    workflows = [
        ("topics", CaptureSettings(topics=("orders", "events"), interval_s=0.1, hash_keys=True)),
        ("namespace", CaptureSettings(namespace="public/default", interval_s=0.1)),
        ("topics", CaptureSettings(topics=("orders",), interval_s=0.1, append=True)),
    ]
    client = pulsar.Client(standalone["service_url"])
    try:
        with RemoteAdmin(standalone["admin_url"]) as admin:
            for directory, settings in workflows:
                Capture(tmp_path / directory, client, admin, settings).run(0.3)
                wait_until(lambda: cluster_lists(standalone["admin_url"]) == before, f"{settings} changed the cluster")
    finally:
        client.close()
    for directory in ("topics", "namespace"):
        desc = description(tmp_path / directory)
        assert desc["complete"], (desc["anomalies"], recording_status(tmp_path / directory))
    assert len(recording_status(tmp_path / "topics")["sessions"]) == 2  # --append: a second session


def test_a_topic_deleted_between_the_check_and_the_read_is_an_anomaly_and_stays_deleted(
    tmp_path: Path,
    standalone: dict[str, str],  # noqa: F811 - the fixture
) -> None:
    produce_and_subscribe(standalone, "doomed")
    produce_and_subscribe(standalone)
    client = pulsar.Client(standalone["service_url"])
    try:
        with RemoteAdmin(standalone["admin_url"]) as admin:
            capture = Capture(tmp_path / "cap", client, admin, CaptureSettings(topics=("orders", "doomed")))
            capture.check_topics()
            admin.topics.delete_topic(f"{NS}/doomed", force=True)
            capture.poll()
            capture.close()
    finally:
        client.close()
    assert f"{NS}/doomed" not in cluster_lists(standalone["admin_url"])["topics"]  # not created again
    desc = description(tmp_path / "cap")
    assert desc["anomaly_counts"] == {"topic_disappeared": 1} and not desc["complete"], desc
    assert desc["topics"] == [f"{NS}/orders"]
    assert recording_status(tmp_path / "cap")["complete"] is False


# -- item 8: capture always ends ------------------------------------------------------------------------
def test_a_slow_drip_admin_endpoint_cannot_hold_the_capture_past_sigterm(
    tmp_path: Path,
    standalone: dict[str, str],  # noqa: F811 - the fixture
    hostile: HostileAdmin,
) -> None:
    """Once the capture runs, ``internalStats`` sends its headers and then one byte every 0.2 s
    (inside any read timeout: only a deadline on the whole call ends it); SIGTERM still ends the
    capture, its last poll's call cut at ``--stop-timeout``, and it says what it missed."""
    produce_and_subscribe(standalone)
    proc = capture_cli(
        tmp_path / "cap", standalone["service_url"], hostile.url, "--topic", "orders", "--duration", "10m",
        "--admin-timeout", "20s", "--stop-timeout", "2s",
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.communicate(timeout=60)[1]
        assert json.loads(line) == {"capturing": [f"{NS}/orders"]}
        hostile.internal_stats = "drip"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=90)  # never on main: the first dripping call never ended
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert_missed_internal_stats(tmp_path / "cap")


def test_a_slow_drip_admin_endpoint_cannot_hold_the_capture_past_its_duration(
    tmp_path: Path,
    standalone: dict[str, str],  # noqa: F811 - the fixture
    hostile: HostileAdmin,
) -> None:
    """The same with the duration ending the capture (in this process: the loop ``mledger
    capture --duration`` runs): the dripping calls are cut at the end of the duration and of
    the last poll's time."""
    produce_and_subscribe(standalone)
    client = pulsar.Client(standalone["service_url"])
    try:
        with RemoteAdmin(hostile.url, deadline=20) as admin:  # 20 s: room for a loaded machine
            settings = CaptureSettings(topics=("orders",), interval_s=0.2, stop_timeout_s=2)
            capture = Capture(tmp_path / "cap", client, admin, settings)
            capture.run(1.0, started=lambda _: setattr(hostile, "internal_stats", "drip"))
    finally:
        client.close()
    assert_missed_internal_stats(tmp_path / "cap")


def assert_missed_internal_stats(directory: Path) -> None:
    desc = description(directory)
    assert desc["anomaly_counts"].get("admin_error", 0) >= 1 and not desc["complete"], desc
    assert "internalStats within" in json.dumps(desc["anomalies"]["admin_error"])
    assert recording_status(directory)["complete"] is False


def test_an_unreachable_service_url_fails_within_the_connect_timeout_in_one_line(
    tmp_path: Path,
    standalone: dict[str, str],  # noqa: F811 - the fixture
    capsys: pytest.CaptureFixture[str],
) -> None:
    produce_and_subscribe(standalone)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    url = f"pulsar://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()  # nothing listens there
    urls = {**standalone, "service_url": url}
    code = mledger_capture(tmp_path / "cap", urls, "--topic", "orders", "--duration", "10m", "--connect-timeout", "1s")
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mledger capture: error:")]
    assert code == 2 and len(errors) == 1 and url in errors[0], errors  # not a traceback after 31 s
    status = recording_status(tmp_path / "cap")  # item 10: a failed capture is not complete
    assert status["complete"] is False and "the capture failed" in status["sessions"][0]["incomplete_reason"]


# -- item 9: capture stays small and says what it did not see ------------------------------------------
def live_cursor(urls: dict[str, str], topic: str = "orders") -> dict[str, Any]:
    stats = httpx.get(
        f"{urls['admin_url']}/admin/v2/persistent/public/default/{topic}/internalStats", timeout=30
    ).json()
    cursor: dict[str, Any] = stats["cursors"]["billing"]
    return cursor


def test_oversized_and_wrong_shaped_internal_stats_are_anomalies_never_deletions(
    tmp_path: Path,
    standalone: dict[str, str],  # noqa: F811 - the fixture
    hostile: HostileAdmin,
) -> None:
    """One poll per hostile answer, between good ones: the subscription is created once, never
    deleted, and the capture replays to the live cursor; each answer is one anomaly."""

    def without_cursors(stats: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in stats.items() if k != "cursors"}

    def cursor_change(**fields: Any) -> Transform:
        def change(stats: dict[str, Any]) -> dict[str, Any]:
            cursor = {k: v for k, v in stats["cursors"]["billing"].items() if k not in fields}
            cursor.update({k: v for k, v in fields.items() if v is not None})
            return {**stats, "cursors": {**stats["cursors"], "billing": cursor}}

        return change

    produce_and_subscribe(standalone, acked=0)
    answers: list[str | Transform | None] = [
        "endless",  # admin_error: more than the size cap, never read whole
        "huge",  # admin_error: a Content-Length over the cap, refused unread
        lambda stats: [stats],  # invalid_answer: a list where an object is expected
        without_cursors,  # missing_field (was read as "every subscription deleted")
        cursor_change(markDeletePosition="-5:-2"),  # invalid_answer: an id below -1
        cursor_change(markDeletePosition=None),  # missing_field
        cursor_change(individuallyDeletedMessages="[(3:-7..3:2]]"),  # invalid_answer
    ]
    client = pulsar.Client(standalone["service_url"])
    try:
        with RemoteAdmin(hostile.url, deadline=30, max_response_bytes=1 << 20) as admin:
            capture = Capture(tmp_path / "cap", client, admin, CaptureSettings(topics=("orders",)))
            capture.check_topics()
            capture.poll()  # billing at L:-1 (a new subscription's mark-delete)
            consumer = client.subscribe("orders", "billing", consumer_type=pulsar.ConsumerType.Shared)
            consumer.acknowledge(consumer.receive(10_000))
            consumer.close()
            wait_until(lambda: live_cursor(standalone)["markDeletePosition"].endswith(":0"), "ack never applied")
            for answer in answers:
                hostile.internal_stats = answer
                capture.poll()
                hostile.internal_stats = None
            capture.poll()
            capture.close()
    finally:
        client.close()
    desc = description(tmp_path / "cap")
    assert desc["anomaly_counts"] == {"admin_error": 2, "invalid_answer": 3, "missing_field": 2}, desc
    assert "1048576 bytes" in json.dumps(desc["anomalies"]["admin_error"])
    events = [r["event"] for r in pq.read_table(tmp_path / "cap" / "subscriptions").to_pylist()]
    assert events == ["created"]  # never deleted
    run_single_process(str(tmp_path / "cap"), str(tmp_path / "out"))
    (row,) = pq.read_table(tmp_path / "out" / "cursors").to_pylist()
    live = live_cursor(standalone)
    assert f"{row['mark_delete_ledger_id']}:{row['mark_delete_entry_id']}" == live["markDeletePosition"]
    assert row["backlog"] == live["numberOfEntriesInBacklog"] == 3


# -- item 10: an output that is not empty ------------------------------------------------------------
def test_capture_refuses_a_directory_that_is_not_empty_unless_appending(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    with pytest.raises(ConfigError, match="--append"):
        Capture(tmp_path, None, None, CaptureSettings(topics=("orders",)))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no recording"):
        Capture(tmp_path, None, None, CaptureSettings(topics=("orders",), append=True))  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # nothing written
