"""Every code example of README.md and of the documentation site (docs/**/*.md, every page of
mkdocs.yml's nav) runs as a test, so one that does not run cannot land.

How a fenced block runs, by its language:

* ``python``: as a script in a fresh temporary directory (``SqliteStore("data/")`` writes there).
  A block with a top-level ``def test_...`` runs under pytest instead (the ``pulsar_broker``
  fixture and the rest of the plugin are there). Full-line comments right after a ``print(...)``
  line are its expected output, checked line by line.
* ``bash``: as one ``bash -eo pipefail`` script in a fresh temporary directory with ``mledger``
  and ``mledger-admin`` on ``PATH``. Every ``127.0.0.1:PORT`` is moved to a free port (in the
  expected output too), and so are the ports of ``--tls-port N``, ``--admin-tls-port N`` and of
  Pulsar's config keys (``webServicePortTls=8443``). A server command (``mledger standalone``, ``mledger-admin serve``, with
  or without ``&``) runs in the background: the script waits for the line it prints when ready,
  and stops it at the end. Full-line comments after a command are its expected output: each must
  match an output line, in order; ``...`` matches anything, and a note in parentheses after two
  or more spaces (``   (412)``) is not part of the output.
* ``json``: must parse. ``yaml``: must parse, and a mapping with a ``faults`` key must be a valid
  fault scenario (``mledger.broker.parse_scenario``). Blocks without a language (layouts,
  diagrams) are text.

Markers, HTML comments on the lines right before a block (invisible on GitHub, visible in the
source):

* ``<!-- example: skip REASON -->``: not run; the reason is required. Keep these few.
* ``<!-- example: continues -->``: runs in the same script as the block before it (a
  walk-through split by prose: its server and files are still there).
* ``<!-- example: prelude NAME -->``: ``PRELUDES[NAME]`` (below) runs first, making the names a
  fragment uses (a cursor, a broker, a subscription, events to replay).
* ``<!-- example: mark NAME -->``: the test gets ``pytest.mark.NAME`` (``spark``, ``slow``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
RUN_TIMEOUT_S = 240

PRELUDES: dict[str, str] = {
    # a ledger with entries and a durable cursor over it (the library fragments)
    "cursor": textwrap.dedent(
        """
        from mledger import EARLIEST, InitialPosition, ManagedLedgerConfig, ManagedLedgerFactory, SqliteStore
        factory = ManagedLedgerFactory(SqliteStore("data/"))
        ml = factory.open("orders", ManagedLedgerConfig(max_entries_per_ledger=10))
        p = ml.add_entries([b"m%d" % i for i in range(25)])
        cursor = ml.open_cursor("billing", InitialPosition.EARLIEST)
        cursor.mark_delete(p[12])
        """
    ),
    # a broker with a Shared subscription on a topic holding a few messages (the broker fragments)
    "broker": textwrap.dedent(
        """
        from mledger import ManagedLedgerFactory, SqliteStore, InitialPosition
        from mledger.broker import Broker, BrokerConfig, ManualClock, SubscriptionType
        broker = Broker(ManagedLedgerFactory(SqliteStore("data/")), BrokerConfig(), clock=ManualClock(0))
        topic = "persistent://public/default/orders"
        producer = broker.create_producer(topic)
        first = producer.send(b"pay", deliver_at_ms=60_000)
        producer.send_batch([b"a", b"b", b"c"])
        sub = broker.subscribe(topic, "billing", SubscriptionType.SHARED, initial_position=InitialPosition.EARLIEST)
        subscription, cursor = sub, sub.cursor
        import types
        dispatcher = types.SimpleNamespace(redelivery_queue=[])  # "your own state"
        ledger_id, entry_id = first.ledger_id, first.entry_id
        ts = 0
        deliver = print
        factory = broker.factory
        from mledger import EARLIEST, ManagedLedgerConfig
        from mledger.admin import Admin
        """
    ),
    # PIP-423's ids: topic orders whose first ledger is 12, Shared billing and Exclusive audit,
    # 12:0-12:3 and 12:5 plain messages, 12:4 delayed, 12:6 a batch of 3
    "pip423": textwrap.dedent(
        """
        import json
        from mledger import ManagedLedgerFactory, MemoryStore, InitialPosition
        from mledger.broker import Broker, ManualClock, SubscriptionType
        broker = Broker(ManagedLedgerFactory(MemoryStore(first_ledger_id=12)), clock=ManualClock(0))
        topic = "persistent://public/default/orders"
        producer = broker.create_producer(topic)
        sub = broker.subscribe(topic, "billing", SubscriptionType.SHARED, initial_position=InitialPosition.EARLIEST)
        broker.subscribe(topic, "audit", SubscriptionType.EXCLUSIVE, initial_position=InitialPosition.EARLIEST)
        ids = [producer.send(b"m%d" % i) for i in range(4)]
        ids.append(producer.send(b"later", deliver_at_ms=60_000))
        ids.append(producer.send(b"m5"))
        producer.send_batch([b"a", b"b", b"c"])
        assert (ids[4].ledger_id, ids[4].entry_id) == (12, 4), ids
        ledger_id, entry_id = 12, 4
        body = json.dumps({"type": "messageId", "messageIds": [{"ledgerId": 12, "entryId": 5}]})
        """
    ),
    # an admin REST server on 127.0.0.1:8080 (token s3cr3t, role admin, a superuser) over a broker
    # with topic orders, its Shared subscription billing and messages 4:0 and 4:1
    "admin-server": textwrap.dedent(
        """
        from mledger import ManagedLedgerFactory, MemoryStore, InitialPosition
        from mledger.admin import Admin, Authorization
        from mledger.broker import Broker, SubscriptionType
        from mledger.rest import AdminServer, RoleResolver, create_app
        broker = Broker(ManagedLedgerFactory(MemoryStore(first_ledger_id=4)))
        broker.subscribe("orders", "billing", SubscriptionType.SHARED, initial_position=InitialPosition.EARLIEST)
        broker.create_producer("orders").send_batch([b"x"])
        broker.create_producer("orders").send(b"y")
        admin_app = create_app(Admin(broker, Authorization({}, super_user_roles=["admin"])),
                               roles=RoleResolver({"s3cr3t": "admin"}))
        admin_server = AdminServer(admin_app, "127.0.0.1", int("127.0.0.1:8080".split(":")[1])).start()
        """
    ),
    # bash: the data directory of the admin walk-through (topic orders, Shared billing, Exclusive
    # audit, delayed messages 4:0 and 4:1, a batch of 3 at 5:0: the ledger rolls over on reopen) and a standalone server beside it on 127.0.0.1:8080 with orders
    "orders": textwrap.dedent(
        """
        mledger-admin --data-dir data topics create orders >/dev/null
        mledger-admin --data-dir data topics create-subscription orders -s billing -t Shared -m earliest >/dev/null
        mledger-admin --data-dir data topics create-subscription orders -s audit -t Exclusive -m earliest >/dev/null
        mledger-admin --data-dir data topics produce orders -m one -m two --deliver-after-ms 600000 >/dev/null
        mledger-admin --data-dir data topics produce orders -m a -m b -m c --batch >/dev/null  # 5:0
        mledger standalone --data-dir server-data --bind 127.0.0.1:6650 --admin-bind 127.0.0.1:8080
        curl -sf -X PUT http://127.0.0.1:8080/admin/v2/persistent/public/default/orders
        curl -sf -X PUT http://127.0.0.1:8080/admin/v2/persistent/public/default/orders/subscription/billing
        """
    ),
    # bash: a small seeded prepared log in prepared/
    "prepared": "mledger generate --quiet --events 20000 --seed 1 prepared/ >/dev/null\n",
}


@dataclass
class Block:
    """One fenced code block of a markdown file, with the markers before it."""

    path: Path
    line: int  # the fence's line, 1-based
    lang: str
    code: str
    markers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}-{self.lang or 'text'}"

    def marker(self, name: str) -> str | None:
        return next((arg for word, arg in self.markers if word == name), None)


_MARKER = re.compile(r"<!--\s*example:\s*(\w+)\s*(.*?)\s*-->")


def read_blocks(path: Path) -> list[Block]:
    """The fenced blocks of ``path`` (``` fences at any indentation), with their markers."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        indent, lang = fence.group(1), fence.group(2)
        markers: list[tuple[str, str]] = []
        j = i - 1
        while j >= 0 and (m := _MARKER.fullmatch(lines[j].strip())):
            markers.insert(0, (m.group(1), m.group(2)))
            j -= 1
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = [line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]]
        blocks.append(Block(path, i + 1, lang, "\n".join(body) + "\n", markers))
        i = end + 1
    return blocks


def examples() -> list[list[Block]]:
    """Runnable examples: chains of blocks joined by ``continues`` markers."""
    chains: list[list[Block]] = []
    for path in DOCS:
        for block in read_blocks(path):
            if block.marker("continues") is not None:
                same = [c for c in chains if c[-1].path == path and c[-1].lang == block.lang]
                assert same, f"{block.id}: 'continues' with no earlier {block.lang} block in {path.name}"
                same[-1].append(block)
            else:
                chains.append([block])
    return chains


def _params() -> list[object]:
    params = []
    for chain in examples():
        first = chain[0]
        marks = [getattr(pytest.mark, name) for b in chain for word, name in b.markers if word == "mark"]
        params.append(pytest.param(chain, id=first.id, marks=marks))
    return params


# -- expected output -------------------------------------------------------------------------------


def _expected_pattern(text: str) -> re.Pattern[str]:
    text = re.sub(r"\s{2,}\(.*\)\s*$", "", text)  # a note, not output: "   (412)"
    parts = [re.sub(r"\s+", "", part) for part in text.split("...")]
    return re.compile(".*?".join(re.escape(part) for part in parts), re.DOTALL)


def check_output(expected: list[str], output: str) -> None:
    """Each expected line is found in the output after the one before it. Whitespace does not
    count (JSON may be printed over several lines, curl's bodies end without a newline) and
    ``...`` matches anything."""
    stream = re.sub(r"\s+", "", output)
    at = 0
    for want in expected:
        found = _expected_pattern(want).search(stream, at)
        assert found, f"expected output not found (in order): {want!r}\n--- output:\n{output}"
        at = found.end()


def python_expected(code: str) -> list[str]:
    """Full-line comments right after a ``print(`` line: what the block prints."""
    expected: list[str] = []
    lines = code.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("print("):
            j = i + 1
            while j < len(lines) and lines[j].startswith("# "):
                expected.append(lines[j][2:])
                j += 1
    return expected


# -- running --------------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(ROOT / "src"), env.get("PYTHONPATH", "")] if p)
    env.pop("MLEDGER_DATA_DIR", None)
    return env


def _run(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"exit status {done.returncode}\n--- output:\n{output}"
    return done.stdout


def run_python(chain: list[Block], tmp: Path) -> None:
    code = "".join(PRELUDES[name] for b in chain for word, name in b.markers if word == "prelude")
    code = move_ports(code + "".join(b.code for b in chain), {})
    if re.search(r"^def test_", code, re.MULTILINE):
        (tmp / "test_example.py").write_text(code)
        _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py"], tmp)
        return
    (tmp / "example.py").write_text(code)
    check_output(python_expected(code), _run([sys.executable, "example.py"], tmp))


_SERVER = re.compile(r"^(mledger standalone|mledger-admin serve)\b(.*?)\s*(&)?\s*(#.*)?$")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_PORT = re.compile(r"(127\.0\.0\.1:|--(?:admin-)?tls-port[ =]|\b[a-z]\w*Port(?:Tls)?=)(\d{4,5})\b")
"""A port a walk-through names: ``127.0.0.1:PORT``, the TLS flags' bare ports, and Pulsar's
config keys (``brokerServicePortTls=6651``), which a CI recipe's config file spells out."""


def move_ports(text: str, ports: dict[str, str]) -> str:
    """Every port of :data:`_PORT` on a free port instead (the same one for the same PORT)."""

    def free(m: re.Match[str]) -> str:
        if m.group(2) not in ports:
            ports[m.group(2)] = str(_free_port())
        return m.group(1) + ports[m.group(2)]

    return _PORT.sub(free, text)


def bash_script(code: str, ports: dict[str, str]) -> tuple[str, list[str]]:
    """The runnable script of a walk-through and its expected output lines."""

    def move(text: str) -> str:
        return move_ports(text, ports)

    script = [
        "set -eo pipefail",
        "SERVERS=()",
        'stop_servers() { for pid in "${SERVERS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done; wait; }',
        "trap stop_servers EXIT",
    ]
    expected: list[str] = []
    for line in code.splitlines():
        if line.startswith("# "):
            expected.append(move(line[2:]))
            continue
        server = _SERVER.match(line)
        if server:  # in the background; its first line says it is ready
            command = server.group(1) + server.group(2)
            if "--bind" not in command:  # never the machine's real default ports
                command += " --bind 127.0.0.1:" + (
                    "6650 --admin-bind 127.0.0.1:8080" if "standalone" in command else "8080"
                )
            elif "--admin-bind" not in command and "standalone" in command:
                command += " --admin-bind 127.0.0.1:8080"
            command = move(command)
            script.append(f"exec {{fd}}< <(exec {command} 2>>server.log)")
            script.append('SERVERS+=($!); read -r -u "$fd" ready || { cat server.log; exit 1; }; echo "$ready"')
        else:
            script.append(move(line))
    return "\n".join(script) + "\n", expected


def run_bash(chain: list[Block], tmp: Path) -> None:
    ports: dict[str, str] = {}
    prelude = "".join(PRELUDES[name] for b in chain for word, name in b.markers if word == "prelude")
    script, expected = bash_script(prelude + "".join(b.code for b in chain), ports)
    (tmp / "example.sh").write_text(script)
    check_output(expected, _run(["bash", "example.sh"], tmp))


def test_markers_are_known_and_skips_give_a_reason() -> None:
    """A misspelt marker would silently stop an example from running."""
    known = {"skip", "continues", "prelude", "mark"}
    for chain in examples():
        for block in chain:
            for word, arg in block.markers:
                assert word in known, f"{block.id}: unknown example marker {word!r}"
                if word == "skip":
                    assert len(arg) > 10, f"{block.id}: a skipped example must say why"
                if word == "prelude":
                    assert arg in PRELUDES, f"{block.id}: no prelude {arg!r}"
            if block.lang and block.marker("skip") is None:
                assert block.lang in ("python", "bash", "json", "yaml", "text"), f"{block.id}: no runner for {block.lang!r}"


def site_pages() -> set[Path]:
    """The pages of the documentation site: every ``.md`` path that mkdocs.yml's nav names."""
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1]
    return {ROOT / "docs" / name for name in re.findall(r"^\s*-\s+(?:[^:\n]*:\s+)?(\S+\.md)\s*$", nav, re.MULTILINE)}


def test_the_runner_reads_every_page_of_the_site() -> None:
    """Each page of the site (and nothing outside it but the README) is a file the runner reads:
    a page in a new folder, or a page the nav names but the glob misses, would go unchecked."""
    pages = site_pages()
    assert len(pages) > 20, "mkdocs.yml's nav was not found"
    missing = sorted(str(p.relative_to(ROOT)) for p in pages if not p.is_file())
    assert not missing, f"the nav names pages that do not exist: {missing}"
    assert set(DOCS) == pages | {ROOT / "README.md"}


def test_the_readme_is_the_newcomers_page_and_links_into_the_site() -> None:
    """The README keeps to what a newcomer needs (under 250 lines); the rest lives in the site,
    and every page it links to is a page of the site."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 250
    links = {ROOT / link.split("#")[0] for link in re.findall(r"\]\((docs/[^)\s]+)\)", readme)}
    assert links and links <= site_pages() | {ROOT / "docs"}, sorted(map(str, links - site_pages()))
    assert "make docs" in readme


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
@pytest.mark.parametrize("chain", _params())
def test_example_runs(chain: list[Block], tmp_path: Path) -> None:
    first = chain[0]
    reason = next((b.marker("skip") for b in chain if b.marker("skip") is not None), None)
    if reason is not None:
        pytest.skip(f"marked in the markdown: {reason}")
    if first.lang in ("", "text"):
        return
    if first.lang == "json":
        for block in chain:
            json.loads(block.code)
        return
    if first.lang == "yaml":
        import yaml

        from mledger.broker import parse_scenario

        for block in chain:
            data = yaml.safe_load(block.code)
            if isinstance(data, dict) and "faults" in data:
                parse_scenario(data, block.id)
        return
    if first.lang == "python":
        run_python(chain, tmp_path)
    elif first.lang == "bash":
        if shutil.which("curl") is None and any("curl " in b.code for b in chain):
            pytest.fail("the example needs curl on PATH")
        run_bash(chain, tmp_path)
