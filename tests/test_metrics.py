"""render_metrics: strict Prometheus text format 0.0.4, the seed's names and labels, values that
follow the cursors, label escaping, and the deduplication figures read defensively."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from mledger import ManagedLedgerFactory
from mledger.admin import Admin
from mledger.broker import Broker, BrokerConfig, InitialPosition, ManualClock, NoDeduplication, SubscriptionType
from mledger.metrics import CONTENT_TYPE, SUBSCRIPTION_LABELS, render_metrics
from mledger.position import EARLIEST

T = "persistent://public/default/orders"
SEED = ("pulsar_cursor_epoch_increase_count", "pulsar_cursor_epoch_increase_task_state")


# -- a strict parser of the text exposition format 0.0.4 ------------------------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
_HELP = re.compile(rf"^# HELP ({_NAME}) (.*)$")
_TYPE = re.compile(rf"^# TYPE ({_NAME}) (counter|gauge|histogram|summary|untyped)$")
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{(.*)\}})? (\S+)(?: (-?[0-9]+))?$")
_PAIR = re.compile(rf'({_LABEL})="((?:[^"\\\n]|\\[\\"n])*)"')


@dataclass
class Family:
    name: str
    type: str = "untyped"
    help: str | None = None
    samples: list[tuple[tuple[tuple[str, str], ...], float]] = field(default_factory=list)

    def value(self, **labels: str) -> float:
        found = [v for ls, v in self.samples if all(dict(ls).get(k) == want for k, want in labels.items())]
        assert len(found) == 1, (self.name, labels, found)
        return found[0]


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], text)


def _labels(text: str) -> tuple[tuple[str, str], ...]:
    pairs, pos = [], 0
    while pos < len(text):
        m = _PAIR.match(text, pos)
        assert m, f"bad label set at {text[pos:]!r}"
        pairs.append((m.group(1), _unescape(m.group(2))))
        pos = m.end()
        if pos < len(text):
            assert text[pos] == ",", f"expected ',' in {text!r}"
            pos += 1
    names = [k for k, _ in pairs]
    assert len(names) == len(set(names)), f"duplicate label in {text!r}"
    return tuple(pairs)


def _value(text: str) -> float:
    if text in ("NaN", "+Inf", "-Inf"):
        return {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf}[text]
    assert re.fullmatch(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?", text), f"bad value {text!r}"
    return float(text)


def parse(text: str) -> dict[str, Family]:
    """Families by name; raises AssertionError on anything the format does not allow."""
    assert text.endswith("\n"), "the exposition must end with a newline"
    families: dict[str, Family] = {}
    finished: set[str] = set()
    current: str | None = None

    def enter(name: str) -> Family:
        nonlocal current
        if current != name:
            assert name not in finished, f"samples of {name} are not contiguous"
            if current is not None:
                finished.add(current)
            current = name
        return families.setdefault(name, Family(name))

    for line in text[:-1].split("\n"):
        if not line:
            continue
        if line.startswith("# HELP "):
            m = _HELP.match(line)
            assert m, f"bad HELP line {line!r}"
            family = enter(m.group(1))
            assert family.help is None, f"second HELP for {family.name}"
            assert not re.search(r"\\[^\\n]", m.group(2)), f"bad escape in HELP {line!r}"
            family.help = m.group(2)
        elif line.startswith("# TYPE "):
            m = _TYPE.match(line)
            assert m, f"bad TYPE line {line!r}"
            family = enter(m.group(1))
            assert not family.samples, f"TYPE after samples for {family.name}"
            assert family.type == "untyped", f"second TYPE for {family.name}"
            family.type = m.group(2)
        elif line.startswith("#"):
            continue
        else:
            m = _SAMPLE.match(line)
            assert m, f"bad sample line {line!r}"
            family = enter(m.group(1))
            labels = _labels(m.group(2) or "")
            assert labels not in [ls for ls, _ in family.samples], f"duplicate series {line!r}"
            family.samples.append((labels, _value(m.group(3))))
    for family in families.values():
        assert family.help is not None and family.type != "untyped", f"{family.name} lacks HELP or TYPE"
    return families


def test_the_parser_is_strict() -> None:
    ok = '# HELP a_b x\n# TYPE a_b gauge\na_b{l="v\\"\\n\\\\"} 1.5\n'
    assert parse(ok)["a_b"].samples == [((("l", 'v"\n\\'),), 1.5)]
    for bad in ('# TYPE a gauge\na{l="v"} 1',  # no trailing newline
                '# HELP a x\n# TYPE a gauge\na{l=v} 1\n',
                '# HELP a x\n# TYPE a gauge\na{l="\\t"} 1\n',
                '# HELP a x\n# TYPE a gauge\na 1\n# HELP b x\n# TYPE b gauge\nb 1\na 2\n',
                '# HELP a x\n# TYPE a gauge\na 1\na 1\n',
                '# HELP a x\n# TYPE a enum\na 1\n',
                '# HELP a x\n# TYPE a gauge\na one\n'):
        with pytest.raises(AssertionError):
            parse(bad)


# -- the broker's metrics -----------------------------------------------------------------------------


@pytest.fixture
def broker() -> Any:
    b = Broker(ManagedLedgerFactory(), clock=ManualClock(0))
    yield b
    b.close()


def test_seed_metrics_names_types_and_labels(broker: Broker) -> None:
    broker.create_topic(T, partitions=2)
    broker.subscribe(T, "shared", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    families = parse(render_metrics(broker))
    assert families[SEED[0]].type == "counter"
    assert families[SEED[1]].type == "gauge"
    for name in SEED:
        assert len(families[name].samples) == 2  # one per partition
        for labels, value in families[name].samples:
            assert tuple(k for k, _ in labels) == ("cluster", "namespace", "topic", "subscription")
            assert value == 0
    topics = {dict(ls)["topic"] for ls, _ in families[SEED[0]].samples}
    assert topics == {f"{T}-partition-0", f"{T}-partition-1"}
    assert dict(families[SEED[0]].samples[0][0])["cluster"] == "standalone"
    assert dict(families[SEED[0]].samples[0][0])["namespace"] == "public/default"
    assert SUBSCRIPTION_LABELS == ("cluster", "namespace", "topic", "subscription")
    assert CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"
    custom = parse(render_metrics(broker, cluster="east"))
    assert {dict(ls)["cluster"] for ls, _ in custom[SEED[0]].samples} == {"east"}


def test_values_follow_the_cursors(broker: Broker) -> None:
    broker.create_topic(T)
    sub = broker.subscribe(T, "shared", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    broker.subscribe(T, "excl", SubscriptionType.EXCLUSIVE, InitialPosition.EARLIEST)
    producer = broker.create_producer(T)
    ids = [producer.send(f"m{i}".encode()) for i in range(10)]
    delayed = producer.send(b"later", deliver_at_ms=60_000)
    producer.close()
    admin = Admin(broker)
    admin.topics.cancel_delayed_message(T, delayed.ledger_id, delayed.entry_id, ["shared"])
    from mledger.admin import SkipMessageIdsRequest

    admin.topics.skip_messages(T, "shared", SkipMessageIdsRequest.of([ids[3], ids[6]]))
    admin.topics.reset_cursor(T, "excl", EARLIEST)
    admin.topics.reset_cursor(T, "excl", EARLIEST)
    consumer = sub.add_consumer()
    consumer.receive(4)  # delivered, not acked: the mark-delete lags the read position
    consumer.close()

    f = parse(render_metrics(broker))
    shared, excl = {"subscription": "shared", "topic": T}, {"subscription": "excl", "topic": T}
    assert f["pulsar_subscription_back_log"].value(**shared) == 11 - 3
    assert f["pulsar_subscription_back_log"].value(**excl) == 11
    assert f["mledger_subscription_non_contiguous_deleted_ranges"].value(**shared) == 3
    assert f["mledger_subscription_non_contiguous_deleted_ranges"].value(**excl) == 0
    assert f["pulsar_cursor_epoch_increase_count"].value(**excl) == 2
    assert f["mledger_cursor_max_unacked_ranges_to_persist"].value(**shared) == 10_000
    cursor = sub.cursor
    assert f["mledger_subscription_mark_delete_lag"].value(**shared) == cursor.number_of_entries_since_first_not_acked()
    stats = cursor.stats()
    assert f["mledger_cursor_persisted_state_bytes"].value(**shared) == stats.persisted_state_bytes
    assert f["mledger_cursor_truncated_ranges"].value(**shared) == stats.truncated_ranges == 0
    assert f["mledger_cursor_persist_total"].value(**shared) == stats.persist_count
    for family in f.values():
        if family.type == "counter":
            assert all(v >= 0 for _, v in family.samples)

    # a revision in progress shows in the task-state gauge
    revision = broker.get_subscription(T, "excl").cursor.revision
    assert revision.start_revision() >= 0
    try:
        assert parse(render_metrics(broker))[SEED[1]].value(**excl) == 1
    finally:
        revision.end_revision()
    assert parse(render_metrics(broker))[SEED[1]].value(**excl) == 0


def test_truncated_ranges_against_a_small_limit() -> None:
    from mledger.config import ManagedLedgerConfig

    config = BrokerConfig(managed_ledger_config=ManagedLedgerConfig(max_unacked_ranges_to_persist=3))
    broker = Broker(ManagedLedgerFactory(), config, clock=ManualClock(0))
    try:
        sub = broker.subscribe(T, "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
        producer = broker.create_producer(T)
        ids = [producer.send(b"x") for _ in range(20)]
        for mid in ids[1::2]:
            sub.cursor.delete(mid.position)
        broker.get_topic(T).managed_ledger.close()  # persists the cursor state
        f = parse(render_metrics(broker))
        labels = {"subscription": "s"}
        assert f["mledger_cursor_max_unacked_ranges_to_persist"].value(**labels) == 3
        assert f["mledger_subscription_non_contiguous_deleted_ranges"].value(**labels) == 10
        assert f["mledger_cursor_truncated_ranges"].value(**labels) > 0
        assert f["mledger_cursor_truncated_ranges_total"].value(**labels) > 0
        assert f["mledger_cursor_persisted_state_bytes"].value(**labels) > 0
    finally:
        broker.close()


def test_label_values_are_escaped(broker: Broker) -> None:
    name = 'we"ird\\sub\nname'
    broker.subscribe(T, name, SubscriptionType.SHARED, InitialPosition.EARLIEST)
    text = render_metrics(broker)
    assert 'subscription="we\\"ird\\\\sub\\nname"' in text
    families = parse(text)
    assert families[SEED[0]].value(subscription=name) == 0


def test_empty_broker_still_parses(broker: Broker) -> None:
    families = parse(render_metrics(broker))
    assert set(SEED) <= set(families)
    assert all(not f.samples for f in families.values())


class FakeDedup(NoDeduplication):
    """A deduplication hook exposing the figures the metrics read with getattr."""

    def __init__(self, topic: Any) -> None:
        self.calls = 0

    def stats(self) -> SimpleNamespace:
        self.calls += 1
        return SimpleNamespace(producers=3, snapshot_age_ms=1500, duplicates=2)


class BrokenDedup(NoDeduplication):
    def stats(self) -> SimpleNamespace:
        raise RuntimeError("not ready")


def test_dedup_figures_read_defensively() -> None:
    broker = Broker(ManagedLedgerFactory(), clock=ManualClock(0), dedup_factory=FakeDedup)
    try:
        broker.create_topic(T)
        f = parse(render_metrics(broker))
        labels = {"topic": T}
        assert f["mledger_dedup_producers"].value(**labels) == 3
        assert f["mledger_dedup_snapshot_age_seconds"].value(**labels) == 1.5
        assert f["mledger_dedup_duplicates_total"].value(**labels) == 2
        assert tuple(k for k, _ in f["mledger_dedup_producers"].samples[0][0]) == ("cluster", "namespace", "topic")
    finally:
        broker.close()
    for factory in (lambda topic: NoDeduplication(), lambda topic: BrokenDedup()):
        broker = Broker(ManagedLedgerFactory(), clock=ManualClock(0), dedup_factory=factory)
        try:
            broker.create_topic(T)
            assert not parse(render_metrics(broker))["mledger_dedup_producers"].samples
        finally:
            broker.close()


def test_real_deduplication_metrics() -> None:
    config = BrokerConfig(deduplication_enabled=True, deduplication_entries_interval=2)
    broker = Broker(ManagedLedgerFactory(), config, clock=ManualClock(0))
    try:
        producer = broker.create_producer(T, producer_name="p1")
        for i in range(5):
            producer.send(b"x", sequence_id=i)
        broker.clock.advance(4000)
        f = parse(render_metrics(broker))
        assert f["mledger_dedup_producers"].value(topic=T) == 1
        assert f["mledger_dedup_snapshot_age_seconds"].value(topic=T) >= 0
    finally:
        broker.close()
