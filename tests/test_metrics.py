"""render_metrics: strict Prometheus text format 0.0.4, the seed's names and labels, values that
follow the cursors, label escaping, and the deduplication figures read defensively."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mledger import EARLIEST, ManagedLedgerFactory
from mledger.admin import Admin
from mledger.broker import Broker, BrokerConfig, InitialPosition, ManualClock, NoDeduplication, SubscriptionType
from mledger.metrics import CONTENT_TYPE, SUBSCRIPTION_LABELS, render_metrics

T = "persistent://public/default/orders"
SEED = ("pulsar_cursor_epoch_increase_count_total", "pulsar_cursor_epoch_increase_task_state")
"""Sample names of the seed's two metrics (prometheus_client writes a counter's samples as ``_total``)."""


# -- reading the text with prometheus_client's own parser ----------------------------------------


@dataclass
class Family:
    """The samples of one name (a counter's are ``<family>_total``) and their family's type."""

    name: str
    type: str
    family: str
    samples: list[tuple[tuple[tuple[str, str], ...], float]] = field(default_factory=list)

    def value(self, **labels: str) -> float:
        found = [v for ls, v in self.samples if all(dict(ls).get(k) == want for k, want in labels.items())]
        assert len(found) == 1, (self.name, labels, found)
        return found[0]


def parse(text: str) -> dict[str, Family]:
    """Samples by name, read by prometheus_client's parser (ValueError on anything malformed);
    every family has HELP and a type, and no series appears twice."""
    assert text.endswith("\n"), "the exposition must end with a newline"
    out: dict[str, Family] = {}
    for family in text_string_to_metric_families(text):
        assert family.documentation and family.type in ("counter", "gauge"), family
        expected = family.name + "_total" if family.type == "counter" else family.name
        out.setdefault(expected, Family(expected, family.type, family.name))
        for sample in family.samples:
            assert sample.name == expected, (family.name, sample.name)
            labels = tuple(sorted(sample.labels.items()))
            assert labels not in [ls for ls, _ in out[expected].samples], f"duplicate series {sample}"
            out[expected].samples.append((labels, sample.value))
    return out


def test_the_parser_refuses_malformed_text() -> None:
    ok = '# HELP a_b x\n# TYPE a_b gauge\na_b{l="v\\"\\n\\\\"} 1.5\n'
    assert parse(ok)["a_b"].samples == [((("l", 'v"\n\\'),), 1.5)]
    for bad in ('# HELP a x\n# TYPE a gauge\na{l=v} 1\n',
                '# HELP a x\n# TYPE a gauge\na 1\na 1\n',
                '# HELP a x\n# TYPE a gauge\na one\n'):
        with pytest.raises((AssertionError, ValueError)):
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
    assert (families[SEED[0]].family, families[SEED[0]].type) == ("pulsar_cursor_epoch_increase_count", "counter")
    assert (families[SEED[1]].family, families[SEED[1]].type) == ("pulsar_cursor_epoch_increase_task_state", "gauge")
    for name in SEED:
        assert len(families[name].samples) == 2  # one per partition
        for labels, value in families[name].samples:
            assert {k for k, _ in labels} == {"cluster", "namespace", "topic", "subscription"}
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
    assert f[SEED[0]].value(**excl) == 2
    assert f["mledger_cursor_max_unacked_ranges_to_persist"].value(**shared) == 10_000
    cursor = sub.cursor
    assert f["mledger_subscription_mark_delete_lag"].value(**shared) == cursor.number_of_entries_since_first_not_acked()
    stats = cursor.stats().persistence
    assert f["mledger_cursor_persisted_state_bytes"].value(**shared) == stats.persisted_state_bytes
    assert f["mledger_cursor_truncated_ranges"].value(**shared) == stats.truncated_ranges == 0
    assert f["mledger_cursor_persist_total"].value(**shared) == stats.persist_count
    crash, unload = stats.redelivered_after_crash.messages, stats.redelivered_after_unload.messages
    assert f["mledger_cursor_redelivered_after_crash"].value(**shared) == crash
    assert f["mledger_cursor_redelivered_after_unload"].value(**shared) == unload
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
    from mledger import ManagedLedgerConfig

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
        assert {k for k, _ in f["mledger_dedup_producers"].samples[0][0]} == {"cluster", "namespace", "topic"}
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


def test_the_collector_in_an_application_registry(broker: Broker) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from mledger.metrics import BrokerCollector

    broker.subscribe(T, "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker, cluster="west"))
    families = parse(generate_latest(registry).decode())
    assert families[SEED[0]].value(subscription="s", cluster="west") == 0
    assert registry.get_sample_value("pulsar_subscription_back_log", {
        "cluster": "west", "namespace": "public/default", "topic": T, "subscription": "s"}) == 0


def test_a_scrape_renders_no_ack_range_string(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    from mledger import IndividualDeletedMessages

    sub = broker.subscribe(T, "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    producer = broker.create_producer(T)
    ids = [producer.send(b"x") for _ in range(6)]
    producer.close()
    for mid in ids[1::2]:
        sub.cursor.delete(mid.position)

    def refuse(self: object) -> str:
        raise AssertionError("the scrape rendered the ranges string")

    monkeypatch.setattr(IndividualDeletedMessages, "__str__", refuse)
    assert parse(render_metrics(broker))["mledger_subscription_non_contiguous_deleted_ranges"].value() == 3
