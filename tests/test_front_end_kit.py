"""The front-end kit: one function opens store, factory and broker for every command, server and
fixture and closes them once (mledger.broker.open_broker); the REST admin of a standalone answers
its readiness route before FastAPI is imported (mledger.rest.DeferredApp)."""

from __future__ import annotations

import ast
import asyncio
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mledger.broker import BrokerConfig, open_broker
from mledger.protocol import EmbeddedBroker
from mledger.rest import DeferredApp
from mledger.standalone import Standalone
from mledger.storage import FaultInjectingStore, MemoryStore, SqliteStore

SRC = Path(__file__).resolve().parents[1] / "src"

FRONT_ENDS = {
    "mledger/standalone.py": "Standalone",
    "mledger/protocol/__main__.py": "python -m mledger.protocol",
    "mledger/protocol/_embedded.py": "EmbeddedBroker (and the pytest fixture's EmbeddedStandalone)",
    "mledger/rest/_server.py": "mledger-admin serve",
    "mledger/cli/_admin.py": "mledger-admin --data-dir",
    "mledger/cli/_mledger.py": "mledger demo",
}
"""Every module that opens a broker (or a factory) for a user, and what it is."""

WIRING = {"ManagedLedgerFactory", "SqliteStore", "MemoryStore", "Broker"}


@pytest.fixture
def store_closes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Every call of ``SqliteStore.close`` / ``MemoryStore.close``, by store."""
    calls: list[object] = []
    for cls in (SqliteStore, MemoryStore):
        original = cls.close

        def counting(self: Any, _original: Any = original) -> None:
            calls.append(self)
            _original(self)

        monkeypatch.setattr(cls, "close", counting)
    yield calls


def _called_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "")
    return names


@pytest.mark.parametrize("path", sorted(FRONT_ENDS))
def test_each_front_end_opens_its_broker_with_the_kit(path: str) -> None:
    """No front end constructs a store, factory or broker itself; each calls open_broker."""
    called = _called_names(ast.parse((SRC / path).read_text(encoding="utf-8")))
    assert not called & WIRING, f"{FRONT_ENDS[path]} wires {sorted(called & WIRING)} itself"
    assert "open_broker" in called, f"{FRONT_ENDS[path]} does not call open_broker"


def test_the_kit_is_the_only_wiring_outside_the_library() -> None:
    """``ManagedLedgerFactory(``, ``SqliteStore(`` and ``Broker(`` are called only by the kit, the
    factory's memory default, the memory store's own ``reopen`` and the replay's model of the
    broker, across src."""
    allowed = {"mledger/broker/_open.py", "mledger/managed_ledger/_factory.py", "mledger/storage/_memory.py"}
    offenders = []
    for file in sorted(SRC.rglob("*.py")):
        rel = file.relative_to(SRC).as_posix()
        if rel in allowed or rel.startswith("mledger/replay/"):
            continue
        called = _called_names(ast.parse(file.read_text(encoding="utf-8")))
        if called & WIRING:
            offenders.append((rel, sorted(called & WIRING)))
    assert offenders == []


def test_one_token_table_parses_and_compares_tokens() -> None:
    """Token files are read and tokens compared in one module (the identity table)."""
    readers = [
        f.relative_to(SRC).as_posix()
        for f in SRC.rglob("*.py")
        if "compare_digest(" in f.read_text(encoding="utf-8") or "def load_token_file" in f.read_text(encoding="utf-8")
    ]
    assert readers == ["mledger/admin/_authentication.py"]


def test_open_broker_closes_the_store_once(tmp_path: Path, store_closes: list[object]) -> None:
    opened = open_broker(tmp_path, broker_config=BrokerConfig(cluster_name="c1"), namespaces=["public/default"])
    assert isinstance(opened.store, SqliteStore) and opened.store.synchronous == "NORMAL"
    assert opened.broker.namespaces.exists("public/default")
    opened.close()
    opened.close()
    assert store_closes == [opened.store]
    with open_broker(tmp_path) as again:  # the directory lock was released
        assert again.broker.clusters.list() == ["c1", "standalone"]
    assert len(store_closes) == 2


def test_open_broker_closes_what_it_opened_when_a_step_fails(tmp_path: Path, store_closes: list[object]) -> None:
    with pytest.raises(Exception, match="namespace"):
        open_broker(tmp_path, namespaces=["not a namespace"])
    assert len(store_closes) == 1
    open_broker(tmp_path).close()  # not locked


def test_standalone_closes_the_store_once(tmp_path: Path, store_closes: list[object]) -> None:
    standalone = Standalone(tmp_path, ("127.0.0.1", 0), ("127.0.0.1", 0))

    async def run() -> None:
        await standalone.start()
        await standalone.stop()

    asyncio.run(run())
    assert store_closes == [standalone.store]


def test_embedded_broker_closes_the_store_once(tmp_path: Path, store_closes: list[object]) -> None:
    with EmbeddedBroker(tmp_path) as embedded:
        store = embedded.broker.factory.store
    embedded.stop()
    # fault injection is on: the broker serves the SQLite store through the fault injector
    assert isinstance(store, FaultInjectingStore)
    assert store_closes == [store.inner]


def test_standalone_answers_readiness_before_importing_fastapi() -> None:
    """``GET /admin/v2/clusters`` answers from a process that has not imported FastAPI or pydantic;
    the first other request builds the app, which answers every route from then on."""
    code = textwrap.dedent(
        """
        import asyncio, sys, httpx
        from mledger.standalone import Standalone

        def heavy():
            return sorted({m.split(".")[0] for m in sys.modules} & {"fastapi", "pydantic"})

        async def main():
            s = Standalone(None, ("127.0.0.1", 0), ("127.0.0.1", 0))
            await s.start()
            async with httpx.AsyncClient(base_url=s.admin_url, timeout=30) as client:
                ready = await client.get("/admin/v2/clusters")
                print(ready.status_code, ready.json(), heavy())
                tenants = await client.get("/admin/v2/tenants")
                print(tenants.status_code, tenants.json(), heavy())
                again = await client.get("/admin/v2/clusters")
                print(again.status_code, again.json())
            await s.stop()

        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "200 ['standalone'] []",
        "200 ['public', 'pulsar', 'sample'] ['fastapi', 'pydantic']",
        "200 ['standalone']",
    ]


def test_deferred_app_builds_once_for_concurrent_first_requests() -> None:
    builds: list[int] = []
    release = threading.Event()

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def build() -> Any:
        release.wait(10)
        builds.append(1)
        return inner

    app = DeferredApp(build, lambda: ["c"])

    async def request(path: str) -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def send(message: Any) -> None:
            sent.append(message)

        async def receive() -> Any:
            return {"type": "http.request", "body": b""}

        scope = {"type": "http", "method": "GET", "path": path, "query_string": b""}
        await app(scope, receive, send)
        return sent

    async def main() -> None:
        ready = await request("/admin/v2/clusters")
        assert ready[0]["status"] == 200 and ready[1]["body"] == b'["c"]' and app.built is None
        first = [asyncio.create_task(request("/admin/v2/tenants")) for _ in range(3)]
        await asyncio.sleep(0)
        release.set()
        answers = await asyncio.gather(*first)
        assert [a[0]["status"] for a in answers] == [204, 204, 204]
        assert (await request("/admin/v2/clusters"))[0]["status"] == 204  # the app's answer now

    asyncio.run(main())
    assert builds == [1] and app.built is inner


def test_readiness_over_http_matches_the_app(tmp_path: Path) -> None:
    """The deferred answer and the app's own answer are the same JSON."""

    async def run() -> tuple[Any, Any]:
        standalone = Standalone(tmp_path, ("127.0.0.1", 0), ("127.0.0.1", 0))
        await standalone.start()
        try:
            async with httpx.AsyncClient(base_url=standalone.admin_url, timeout=30) as client:
                before = (await client.get("/admin/v2/clusters")).json()
                assert (await client.get("/admin/v2/namespaces/public")).status_code == 200
                after = (await client.get("/admin/v2/clusters")).json()
        finally:
            await standalone.stop()
        return before, after

    before, after = asyncio.run(run())
    assert before == after == ["standalone"]


def test_only_the_broker_processes_freeze_their_start_up_heap() -> None:
    """``freeze_startup_heap`` (called by ``mledger standalone`` and ``python -m mledger.protocol``
    once they listen) moves the start-up objects out of the collector's generations; the
    library's own servers (``EmbeddedBroker``, which tests and applications embed) leave the
    embedding program's collector alone."""
    code = (
        "import gc\n"
        "from mledger.protocol import EmbeddedBroker, freeze_startup_heap\n"
        "with EmbeddedBroker() as broker:\n"
        "    embedded = gc.get_freeze_count()\n"
        "freeze_startup_heap()\n"
        "print(embedded, gc.get_freeze_count())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    embedded, frozen = (int(n) for n in done.stdout.split())
    assert embedded == 0
    assert frozen > 10_000  # every module, class and table alive after start-up
