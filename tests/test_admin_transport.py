"""The remote admin's transport, blocking and asyncio (issue 35 item 1, keeping issue 31 item 8-9's rules).

The two clients share one set of rules (:mod:`mledger.admin._transport`): a total deadline
however slowly the server answers, a size cap, the error of each status. The asyncio client made
by ``RemoteAdmin.asynchronous`` adds a bound on the calls in flight per broker and follows
Pulsar's redirect to a topic's owner with the same credentials. Each behaviour is checked
against :class:`Scripted`, a local HTTP server answering each path as the test says.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from test_capture_hostile import LocalServer, _Handler as PassingHandler

from mledger.admin import RemoteAdmin
from mledger.admin._transport import AdminConnectionError, AdminResponseTooLargeError
from mledger.core._errors import NotFoundError

pytestmark = pytest.mark.timeout(60)


class _Handler(PassingHandler):
    server: Scripted  # type: ignore[assignment] - a server of its own, with the same closing event

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        server = self.server
        server.seen.append((self.path, self.headers.get("Authorization")))
        with server.lock:
            server.in_flight += 1
            server.most_in_flight = max(server.most_in_flight, server.in_flight)
        try:
            self._answer(self.path.split("?")[0])
        except OSError:  # the client gave up: what a deadline or a cap does
            pass
        finally:
            with server.lock:
                server.in_flight -= 1

    def _answer(self, path: str) -> None:
        server = self.server
        if path == "/drip":  # headers, then a byte now and then, forever
            self._headers(200, 4096)
            self._forever(b" ", 0.05)
        elif path == "/huge":  # a Content-Length over any cap
            self._headers(200, 200 << 20)
        elif path == "/endless":  # no Content-Length, a body that never ends
            self._headers(200, None)
            self._forever(b" " * 65536, 0)
        elif path == "/missing":
            self._body(404, {"reason": "Topic not found"})
        elif path.startswith("/moved/"):  # Pulsar's redirect to the owner broker
            self.send_response(307)
            self.send_header("Location", server.redirect_to + self.path.removeprefix("/moved"))
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            server.closing.wait(server.pause)
            self._body(200, {"path": path})

    def _body(self, status: int, value: Any) -> None:
        body = json.dumps(value).encode()
        self._headers(status, len(body))
        self.wfile.write(body)


class Scripted(LocalServer):
    """A local admin endpoint: ``/drip``, ``/huge``, ``/endless``, ``/missing`` (404),
    ``/moved/...`` (307 to ``redirect_to``), anything else ``{"path": ...}`` after ``pause``
    seconds. It keeps what it was asked (path and Authorization) and the most calls it
    served at once."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []
        self.lock = threading.Lock()
        self.in_flight = self.most_in_flight = 0
        self.pause = 0.0
        self.redirect_to = ""
        super().__init__(_Handler)


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    server = Scripted()
    try:
        yield server
    finally:
        server.close()


def both_clients(url: str, path: str, **options: Any) -> list[BaseException]:
    """What a GET of ``path`` raises, from the blocking client and from its asyncio twin."""
    errors: list[BaseException] = []
    with RemoteAdmin(url, **options) as admin:
        try:
            admin.get_json(path)
        except Exception as exc:  # noqa: BLE001 - compared below
            errors.append(exc)

        async def asynchronous() -> None:
            async with admin.asynchronous() as client:
                await client.get_json(path)

        try:
            asyncio.run(asynchronous())
        except Exception as exc:  # noqa: BLE001 - compared below
            errors.append(exc)
    return errors


@pytest.mark.parametrize(
    ("path", "error", "message"),
    [
        ("/drip", AdminConnectionError, "did not answer /drip within 0.5 s"),
        ("/endless", AdminResponseTooLargeError, "more than the 65536 bytes allowed"),
        ("/huge", AdminResponseTooLargeError, "answered 209715200 bytes, more than the 65536 allowed"),
        ("/missing", NotFoundError, "Topic not found"),
    ],
)
def test_both_clients_keep_the_same_deadline_cap_and_errors(
    scripted: Scripted, path: str, error: type[Exception], message: str
) -> None:
    started = time.monotonic()
    errors = both_clients(scripted.url, path, deadline=0.5, max_response_bytes=65536)
    assert [type(e) for e in errors] == [error, error], errors
    assert all(message in str(e) for e in errors), errors
    assert time.monotonic() - started < 30  # two deadlines of 0.5 s, with room for a loaded machine


def test_the_asyncio_client_bounds_the_calls_in_flight_per_broker(scripted: Scripted) -> None:
    scripted.pause = 0.2  # long enough that the calls overlap whenever they may

    async def twelve() -> None:
        async with RemoteAdmin(scripted.url).asynchronous(max_concurrency_per_host=3) as client:
            answers = await asyncio.gather(*(client.get_json(f"/t{i}") for i in range(12)))
        assert answers == [{"path": f"/t{i}"} for i in range(12)]

    asyncio.run(twelve())
    assert scripted.most_in_flight == 3  # concurrent, never more than the bound


def test_a_redirect_to_the_owner_is_followed_with_the_credentials_within_its_own_bound(
    scripted: Scripted,
) -> None:
    owner = Scripted()  # another broker: another host:port
    try:
        scripted.redirect_to = owner.url
        owner.pause = 0.2

        async def six() -> list[Any]:
            async with RemoteAdmin(scripted.url, token="s3cr3t").asynchronous(max_concurrency_per_host=2) as client:
                return list(await asyncio.gather(*(client.get_json(f"/moved/t{i}", {"q": "1"}) for i in range(6))))

        assert asyncio.run(six()) == [{"path": f"/t{i}"} for i in range(6)]
        assert sorted(owner.seen) == sorted((f"/t{i}?q=1", "Bearer s3cr3t") for i in range(6))
        assert owner.most_in_flight == 2
    finally:
        owner.close()


def test_a_redirect_to_another_scheme_is_refused(scripted: Scripted) -> None:
    scripted.redirect_to = "ftp://127.0.0.1:1"

    async def moved() -> None:
        async with RemoteAdmin(scripted.url).asynchronous() as client:
            await client.get_json("/moved/t")

    with pytest.raises(AdminConnectionError, match="refused a redirect to ftp://"):
        asyncio.run(moved())
