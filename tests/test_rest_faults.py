"""The REST server under the faults a new user hits first (issue 16), each against a real socket on
127.0.0.1: oversize and undecidable bodies, a 5,000-digit Content-Length, a 100k-character URL,
50 concurrent clients with bodies, bad names, credentials without authorization; and what the
FastAPI app adds: JSON for every error, keep-alive, OpenAPI, offline docs, the httpx client."""

from __future__ import annotations

import http.client
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mledger import ConfigError, InvalidRequestError, ManagedLedgerFactory, NotFoundError
from mledger.admin import Admin, Authorization, RemoteAdmin, SkipMessageIdsRequest
from mledger.admin._remote import AdminConnectionError
from mledger.broker import Broker, InitialPosition, ManualClock, SubscriptionType
from mledger.rest import AdminServer, RoleResolver, create_app

pytestmark = pytest.mark.timeout(120)

TOPIC = "persistent://public/default/orders"
V2 = "/admin/v2/persistent/public/default"
SKIP = f"{V2}/orders/subscription/shared/skipByMessageIds"
TIMEOUT = 10


@pytest.fixture
def broker() -> Iterator[Broker]:
    b = Broker(ManagedLedgerFactory(), clock=ManualClock(1_700_000_000_000))
    b.create_topic(TOPIC)
    b.subscribe(TOPIC, "shared", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    producer = b.create_producer(TOPIC)
    for i in range(5):
        producer.send(f"m{i}".encode())
    producer.close()
    yield b
    b.close()


@pytest.fixture
def server(broker: Broker) -> Iterator[AdminServer]:
    with AdminServer(Admin(broker), port=0, max_body_bytes=1 << 20) as srv:
        yield srv


def connect(srv: AdminServer) -> socket.socket:
    sock = socket.create_connection(srv.address, timeout=TIMEOUT)
    sock.settimeout(TIMEOUT)
    return sock


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], Any]:
    """One HTTP response from a raw socket: status, headers (lower-case) and the JSON body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside the body"
        rest += chunk
    return status, headers, json.loads(rest[:length]) if length else None


def request(srv: AdminServer, method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, Any, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection(*srv.address, timeout=TIMEOUT)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw and response.getheader("content-type", "").startswith(
            "application/json") else raw, response
    finally:
        conn.close()


# -- the body limit ------------------------------------------------------------------------------


def test_an_oversize_body_is_answered_413_before_it_is_sent(server: AdminServer) -> None:
    """A declared size over the limit: the answer comes at once, with no body byte sent."""
    sock = connect(server)
    try:
        declared = 5 * (1 << 20) + 12_345  # over the 1 MiB limit, not a multiple of 64 KiB
        sock.sendall(f"POST {SKIP} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {declared}\r\n\r\n".encode())
        started = time.monotonic()
        status, headers, body = read_response(sock)
        assert (status, headers["content-type"]) == (413, "application/json")
        assert body["reason"] == f"Request body too large: {declared} bytes (limit {1 << 20})"
        assert time.monotonic() - started < TIMEOUT
    finally:
        sock.close()


def test_a_client_that_writes_its_whole_oversize_body_first_still_gets_413(server: AdminServer) -> None:
    """The server reads the refused body away (under 64 MiB), so writing it all, then reading,
    gets the 413 and not a reset; the connection stays usable."""
    conn = http.client.HTTPConnection(*server.address, timeout=TIMEOUT)
    try:
        body = b"[" + b'"AA==",' * 450_000 + b'"AA=="]'  # ~3.2 MB, not a multiple of 64 KiB
        conn.request("POST", SKIP, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 413 and "too large" in json.loads(response.read())["reason"]
        conn.request("GET", f"{V2}/orders/subscriptions")  # same connection, kept alive
        response = conn.getresponse()
        assert (response.status, json.loads(response.read())) == (200, ["shared"])
    finally:
        conn.close()


def test_a_5000_digit_content_length_is_answered_413_json(server: AdminServer) -> None:
    sock = connect(server)
    try:
        sock.sendall(f"POST {SKIP} HTTP/1.1\r\nHost: x\r\nContent-Length: {'9' * 5000}\r\n\r\n".encode())
        status, headers, body = read_response(sock)
        assert (status, headers["content-type"], headers["connection"]) == (413, "application/json", "close")
        assert body["reason"].startswith("Request body too large")
    finally:
        sock.close()


def test_a_streamed_body_over_the_limit_is_413(broker: Broker) -> None:
    # Chunked, so no length is declared: the limit is enforced as the body streams in. The
    # request goes out in one write: the server answers 413 as soon as the limit is passed and
    # closes (as documented), so a client still writing chunks then may get a reset instead.
    chunks = [b"[", b'"AA==",' * 20, b'"AA=="]']
    body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    head = f"POST {SKIP} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    with AdminServer(Admin(broker), port=0, max_body_bytes=64) as srv:
        sock = connect(srv)
        try:
            sock.sendall(head.encode() + body)
            status, headers, reply = read_response(sock)
            assert status == 413 and "over 64 bytes" in reply["reason"]
            assert headers.get("connection") == "close"
        finally:
            sock.close()


def test_a_bad_content_length_is_400_json(server: AdminServer) -> None:
    sock = connect(server)
    try:
        sock.sendall(f"POST {SKIP} HTTP/1.1\r\nHost: x\r\nContent-Length: 12ab\r\n\r\n".encode())
        status, _, body = read_response(sock)
        assert status == 400 and body["reason"] == "Invalid HTTP request: Invalid character in Content-Length"
    finally:
        sock.close()


# -- URLs, headers, unknown routes ------------------------------------------------------------------


def test_a_100k_character_url_is_414_json(server: AdminServer) -> None:
    sock = connect(server)
    try:
        sock.sendall(f"GET {V2}/{'x' * 100_000}/internalStats HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        status, headers, body = read_response(sock)
        assert (status, headers["content-type"]) == (414, "application/json")
        assert body["reason"] == "URI Too Long: the request target exceeds 8192 bytes"
    finally:
        sock.close()


def test_oversize_headers_are_431_json(server: AdminServer) -> None:
    sock = connect(server)
    try:
        filler = "".join(f"X-Filler-{i}: {'y' * 1000}\r\n" for i in range(80))
        sock.sendall(f"GET {V2} HTTP/1.1\r\nHost: x\r\n{filler}\r\n".encode())
        status, _, body = read_response(sock)
        assert status == 431 and "Request Header Fields Too Large" in body["reason"]
    finally:
        sock.close()


def test_every_error_is_json(server: AdminServer) -> None:
    cases = [
        ("GET", "/nowhere", 404, "HTTP 404 Not Found"),
        ("GET", "/static-offline-docs/nothing.js", 404, "HTTP 404 Not Found"),
        ("DELETE", "/metrics", 405, "HTTP 405 Method Not Allowed"),
        ("PATCH", f"{V2}/orders/internalStats", 405, "HTTP 405 Method Not Allowed"),
        ("POST", f"{V2}/orders/subscription/shared/skip/x", 400, "Invalid numMessages 'x': expected an integer"),
        ("POST", f"{V2}/orders/subscription/shared/skip/-1", 400, "Invalid numMessages '-1': out of range"),
        ("DELETE", f"{V2}/orders?force=perhaps", 400, "Invalid force 'perhaps': expected true or false"),
        ("POST", f"{V2}/orders/cancelDelayedMessage?ledgerId=1&entryId=x", 412, "Invalid entryId 'x': expected an integer"),
    ]
    for method, path, status, reason in cases:
        got, body, response = request(server, method, path, b"" if method in ("POST", "PUT", "PATCH") else None)
        assert (got, body) == (status, {"reason": reason}), (method, path)
        assert response.getheader("content-type") == "application/json"


def test_keep_alive_serves_many_requests_on_one_connection(server: AdminServer) -> None:
    conn = http.client.HTTPConnection(*server.address, timeout=TIMEOUT)
    try:
        for _ in range(20):
            conn.request("GET", f"{V2}/orders/internalStats")
            response = conn.getresponse()
            assert response.status == 200 and response.version == 11
            assert response.getheader("connection") != "close"
            response.read()
        sock = conn.sock
        conn.request("GET", "/metrics")
        conn.getresponse().read()
        assert conn.sock is sock  # never reconnected
    finally:
        conn.close()


# -- names ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoded", [".", "..", "%2E", "%2E%2E", "a%00b", "bad%01name", "tab%09", "del%7F", "%20"])
def test_bad_topic_names_are_refused_with_400(server: AdminServer, broker: Broker, encoded: str) -> None:
    status, body, _ = request(server, "PUT", f"{V2}/{encoded}", b"")
    assert status == 400 and body["reason"].startswith("Invalid topic name"), body
    assert broker.list_topics() == [TOPIC]


def test_bad_tenant_namespace_and_subscription_names(server: AdminServer, broker: Broker) -> None:
    # a namespace route answers Pulsar's 412 "Namespace name is not valid"; a topic route's tenant
    # and namespace are part of its topic name (400, as the library's TopicName.parse)
    for path, status_and_reason in (
        ("/admin/v2/persistent/../default/orders/subscriptions", (400, "Invalid topic name")),
        ("/admin/v2/persistent/public/a%00b", (412, "Namespace name is not valid: 'public/a\\x00b'")),
        ("/admin/v2/persistent/p%C3%BCblic/default", (412, "Namespace name is not valid: 'püblic/default'")),
    ):
        status, body, _ = request(server, "GET", path)
        assert (status, body["reason"][: len(status_and_reason[1])]) == status_and_reason, (path, body)
    status, body, _ = request(server, "PUT", f"{V2}/orders/subscription/a%00b", b"")
    assert status == 400 and body["reason"].startswith("Invalid subscription name"), body
    assert broker.get_topic(TOPIC).subscription_names() == ["shared"]


def test_library_refuses_bad_topic_names_too(broker: Broker) -> None:
    admin = Admin(broker)
    for name in (".", "..", "a\x00b", "a\nb", "persistent://public/../x"):
        with pytest.raises(InvalidRequestError):
            admin.topics.create_topic(name)
    with pytest.raises(InvalidRequestError):
        admin.topics.create_subscription(TOPIC, "bad\x00name")


# -- concurrency --------------------------------------------------------------------------------


def test_50_concurrent_clients_with_bodies_get_no_error(server: AdminServer, broker: Broker) -> None:
    producer = broker.create_producer(TOPIC)
    ids = [producer.send(b"x") for _ in range(50)]
    producer.close()
    errors: list[str] = []
    done = [0]
    lock = threading.Lock()
    start = threading.Barrier(50)

    def client(i: int) -> None:
        conn = http.client.HTTPConnection(*server.address, timeout=30)
        body = json.dumps([ids[i].to_base64()]).encode()
        start.wait()
        try:
            for n in range(20):
                try:
                    if n % 2:
                        conn.request("POST", SKIP, body=body, headers={"Content-Type": "application/json"})
                    else:
                        conn.request("PUT", f"{V2}/orders/subscription/c{i}-{n}", body=b'{"ledgerId": -1, "entryId": -1}')
                    response = conn.getresponse()
                    response.read()
                    if response.status != 204:
                        raise AssertionError(f"status {response.status}")
                    with lock:
                        done[0] += 1
                except Exception as e:  # noqa: BLE001 - every failure is counted
                    with lock:
                        errors.append(f"client {i} request {n}: {e!r}")
                    conn.close()
                    conn = http.client.HTTPConnection(*server.address, timeout=30)
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=100)
    assert not errors, errors[:5]
    assert done[0] == 50 * 20
    cursor = broker.get_subscription(TOPIC, "shared").cursor
    assert all(cursor.is_message_deleted(mid.position) for mid in ids)
    assert len(broker.get_topic(TOPIC).subscription_names()) == 1 + 50 * 10
    assert server.in_flight == 0


# -- authentication set-up ------------------------------------------------------------------------


def test_tokens_without_authorization_refuse_to_start(broker: Broker, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="without an authorization file"):
        create_app(Admin(broker), roles=RoleResolver({"s3cr3t": "ops"}))
    with pytest.raises(ConfigError, match="without an authorization file"):
        create_app(Admin(broker), roles=RoleResolver(trust_role_header=True))
    app = create_app(Admin(broker, authorization=Authorization({"ops": {"*": ["get_stats"]}})),
                     roles=RoleResolver({"s3cr3t": "ops"}))
    assert app.title


def test_serve_with_a_token_file_and_no_auth_file_exits_2(tmp_path: Path) -> None:
    from mledger.cli._admin import main

    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"s3cr3t": "ops"}))
    code = main(["serve", "--data-dir", str(tmp_path / "data"), "--bind", "127.0.0.1:0",
                 "--token-file", str(tokens)])
    assert code == 2
    assert not (tmp_path / "data").exists()  # refused before anything was opened


# -- OpenAPI and the docs --------------------------------------------------------------------------


ROUTES = {
    "": {"get"}, "/partitioned": {"get"}, "/{topic}": {"put", "delete"},
    "/{topic}/partitions": {"get", "put", "delete"}, "/{topic}/subscriptions": {"get"},
    "/{topic}/internalStats": {"get"}, "/{topic}/partitioned-internalStats": {"get"},
    "/{topic}/cancelDelayedMessage": {"post"}, "/{topic}/subscription/{subName}": {"put", "delete"},
    "/{topic}/subscription/{subName}/skipByMessageIds": {"post"},
    "/{topic}/subscription/{subName}/skip_all": {"post"},
    "/{topic}/subscription/{subName}/skip/{numMessages}": {"post"},
    "/{topic}/subscription/{subName}/resetcursor/{timestamp}": {"post"},
    "/{topic}/subscription/{subName}/resetcursor": {"post"},
}


def test_openapi_lists_every_route_with_its_models(server: AdminServer) -> None:
    status, document, _ = request(server, "GET", "/openapi.json")
    assert status == 200 and document["openapi"].startswith("3.")
    paths = document["paths"]
    for prefix in ("/admin/v2/persistent/{tenant}/{namespace}", "/admin/persistent/{property}/{cluster}/{namespace}"):
        for route, methods in ROUTES.items():
            assert set(paths[prefix + route]) == methods, prefix + route
    assert set(paths["/metrics"]) == {"get"}
    assert not any("non-persistent" in p or p.startswith("/admin/v1/") for p in paths)

    def schema_ref(operation: dict[str, Any], where: str) -> str:
        node = operation[where]["content"]["application/json"]["schema"] if where == "requestBody" else \
            operation["responses"]["200"]["content"]["application/json"]["schema"]
        return str(node.get("$ref", node))

    v2 = "/admin/v2/persistent/{tenant}/{namespace}"
    assert schema_ref(paths[v2 + "/{topic}/internalStats"]["get"], "responses").endswith("/PersistentTopicInternalStats")
    assert schema_ref(paths[v2 + "/{topic}/partitioned-internalStats"]["get"], "responses").endswith(
        "/PartitionedTopicInternalStats")
    assert schema_ref(paths[v2 + "/{topic}/partitions"]["get"], "responses").endswith("/PartitionedTopicMetadata")
    assert schema_ref(paths[v2 + "/{topic}/subscription/{subName}/skipByMessageIds"]["post"],
                      "requestBody").endswith("/SkipMessageIdsBody")
    assert schema_ref(paths[v2 + "/{topic}/subscription/{subName}/resetcursor"]["post"],
                      "requestBody").endswith("/ResetCursorData")
    errors = paths[v2 + "/{topic}/subscription/{subName}/skipByMessageIds"]["post"]["responses"]
    assert {"400", "401", "403", "404", "405", "412"} <= set(errors)
    assert errors["405"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
    schemas = document["components"]["schemas"]
    for model in ("PersistentTopicInternalStats", "CursorStats", "LedgerInfo", "ResetCursorData",
                  "SkipMessageIdsBody", "MessageIdItem", "ErrorBody"):
        assert model in schemas, model
    assert {"ledgerId", "entryId", "batchIndex"} <= set(schemas["MessageIdItem"]["properties"])
    assert "markDeletePosition" in schemas["CursorStats"]["properties"]


def test_the_docs_load_offline(server: AdminServer) -> None:
    for page in ("/docs", "/redoc"):
        status, html, response = request(server, "GET", page)
        assert status == 200 and response.getheader("content-type").startswith("text/html")
        text = html.decode()
        urls = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", text)
        urls += re.findall(r"""url:\s*['"]([^'"]+)['"]""", text)
        assert urls, text[:500]
        for url in urls:
            assert url.startswith("/"), f"{page} loads {url} from elsewhere"
            got, body, _ = request(server, "GET", url)
            assert got == 200 and body, url
        assert "/openapi.json" in urls or "/openapi.json" in text


# -- the httpx client -----------------------------------------------------------------------------


def test_the_remote_client_reuses_one_connection(server: AdminServer, broker: Broker,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="mledger.rest")
    mid = broker.create_producer(TOPIC).send(b"y")
    with RemoteAdmin(server.url, timeout=5) as admin:
        for _ in range(5):
            assert admin.topics.list_subscriptions(TOPIC) == ["shared"]
        admin.topics.skip_messages(TOPIC, "shared", SkipMessageIdsRequest.of([mid]))
        assert admin.topics.internal_stats(TOPIC).cursors["shared"].number_of_entries_in_backlog == 5
        with pytest.raises(NotFoundError, match="nope"):
            admin.topics.list_subscriptions("nope")
    clients = {r.getMessage().split()[0] for r in caplog.records if r.name == "mledger.rest" and '"' in r.getMessage()}
    assert len(clients) == 1, clients  # host:port of one connection


def test_the_remote_client_times_out_with_a_typed_error() -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections, never answers
    try:
        with RemoteAdmin(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.5) as admin:
            started = time.monotonic()
            with pytest.raises(AdminConnectionError, match="did not answer within 0.5 s"):
                admin.topics.list_subscriptions(TOPIC)
            # the 0.5 s given, not the 60 s default; the bound leaves a loaded machine room
            assert time.monotonic() - started < 30
    finally:
        silent.close()


# -- graceful stop --------------------------------------------------------------------------------


class _Draining(logging.Handler):
    """Sets ``event`` when uvicorn says it is waiting for the connections in flight to close."""

    def __init__(self, event: threading.Event) -> None:
        super().__init__(logging.INFO)
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Waiting for connections to close"):
            self.event.set()


def test_shutdown_lets_a_request_in_flight_finish(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mledger.admin import Topics

    entered, draining = threading.Event(), threading.Event()
    original = Topics.list_subscriptions

    def slow(self: Topics, topic: str) -> list[str]:
        entered.set()
        draining.wait(TIMEOUT)  # in flight until the stopping server waits for it (bounded)
        return original(self, topic)

    monkeypatch.setattr(Topics, "list_subscriptions", slow)
    caplog.set_level(logging.INFO, logger="uvicorn.error")
    uvicorn_log = logging.getLogger("uvicorn.error")
    handler = _Draining(draining)
    uvicorn_log.addHandler(handler)
    try:
        srv = AdminServer(Admin(broker), port=0).start()
        answers: list[tuple[int, Any]] = []
        client = threading.Thread(target=lambda: answers.append(request(srv, "GET", f"{V2}/orders/subscriptions")[:2]))
        client.start()
        assert entered.wait(TIMEOUT)
        assert srv.in_flight == 1
        assert srv.shutdown(drain_timeout=TIMEOUT) is True  # waited for it
        assert draining.is_set()  # the request was still running when the server began to drain
        client.join(TIMEOUT)
    finally:
        uvicorn_log.removeHandler(handler)
    assert answers == [(200, ["shared"])]
    with pytest.raises(OSError):
        socket.create_connection(srv.address, timeout=2).close()


def test_swagger_ui_renders_in_a_browser_with_no_other_host_reachable(server: AdminServer, tmp_path: Path) -> None:
    """Headless Chromium, every host but 127.0.0.1 unresolvable, runs /docs: Swagger UI's own
    scripts (served by the app) fetch /openapi.json and render each operation."""
    import os
    import shutil
    import subprocess

    browser = next((c for c in (os.environ.get("MLEDGER_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"))
                    if c and os.access(c, os.X_OK)), None)
    if browser is None:
        pytest.fail("Chromium is missing: run scripts/ensure_chromium.sh (`make test` does) or set MLEDGER_CHROMIUM")
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--virtual-time-budget=15000",
         "--dump-dom", f"{server.url}/docs"],
        capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert 'class="swagger-ui' in dom and "opblock" in dom, dom[:2000]
    for path in ("/{topic}/subscription/{subName}/skipByMessageIds", "/{topic}/cancelDelayedMessage", "/metrics"):
        assert path in dom, path
