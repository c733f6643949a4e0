"""``BrokerCollector``: a prometheus_client collector of a broker's cursor and subscription figures.

Theory of operation
-------------------
A scrape calls :meth:`BrokerCollector.collect`, which reads every topic of the broker (each
partition of a partitioned topic is its own topic) and yields one metric family per name below,
built with prometheus_client's ``CounterMetricFamily`` / ``GaugeMetricFamily``; prometheus_client
writes the text (``prometheus_client.generate_latest``). Register the collector in any
``CollectorRegistry`` of an application, or call :func:`~mledger.metrics.render_metrics`.

Per subscription, labels ``cluster, namespace, topic, subscription`` (``topic`` is the full name,
a partition's own name for a partitioned topic; ``namespace`` is ``tenant/namespace``):

=================================================  =======  ==========================================
family                                             type     value
=================================================  =======  ==========================================
``pulsar_cursor_epoch_increase_count``             counter  completed cursor state revisions
``pulsar_cursor_epoch_increase_task_state``        gauge    1 while a revision runs, else 0 (an
                                                            "Enumeration"; the text format has none)
``pulsar_subscription_back_log``                   gauge    unacknowledged entries (a batch counts once)
``pulsar_subscription_delayed``                    gauge    messages held for delayed delivery
``mledger_subscription_mark_delete_lag``           gauge    entries in (mark-delete, read position]
``mledger_subscription_non_contiguous_deleted_ranges``  gauge  ack holes after the mark-delete position
``mledger_cursor_persisted_state_bytes``           gauge    size of the last persisted cursor state
``mledger_cursor_persisted_state_chunks``          gauge    chunks of it (PIP-381; 1 = not chunked)
``mledger_cursor_max_unacked_ranges_to_persist``   gauge    the limit on persisted ranges
``mledger_cursor_truncated_ranges``                gauge    ranges the last persist left out
``mledger_cursor_truncated_ranges_total``          counter  ranges left out, over all persists
``mledger_cursor_truncated_batch_indexes``         gauge    batch-index states the last persist left out
``mledger_cursor_persist_total``                   counter  cursor state persists
``mledger_cursor_redelivered_after_crash``         gauge    acknowledged messages a crash now would
                                                            redeliver (the stored record lacks them)
``mledger_cursor_redelivered_after_unload``        gauge    acknowledged messages a clean close now
                                                            (unload, restart) would redeliver
``mledger_cursor_revision_refused_total``          counter  resets refused: another was running
``mledger_cursor_discarded_reads_total``           counter  reads discarded or refused by a revision
=================================================  =======  ==========================================

Per topic (labels ``cluster, namespace, topic``), for topics whose deduplication hook has
``stats()`` (read with ``getattr``: a hook without it adds nothing, one that fails is logged
and skipped): ``mledger_dedup_producers`` (gauge), ``mledger_dedup_snapshot_age_seconds``
(gauge; absent before the first snapshot), ``mledger_dedup_duplicates_total`` (counter).

With fault injection on (:mod:`mledger.broker`), labels ``cluster`` (and ``action``):
``mledger_faults_armed`` (gauge, the faults armed now) and ``mledger_faults_fired_total``
(counter, the firings of each action: ``error``, ``delay``, ``close``, ...).

Counter samples carry prometheus_client's ``_total`` suffix (the OpenMetrics rule, which
Prometheus' Java client follows too): the counter ``pulsar_cursor_epoch_increase_count``
is scraped as ``pulsar_cursor_epoch_increase_count_total``; the ``mledger_*_total`` counters keep
their names. Names starting ``pulsar_`` are Pulsar's (or the revision controller's), ``mledger_`` ones ours.
Counters restart from 0 with the broker, as Pulsar's do.

Cost: O(topics + subscriptions); each subscription's cursor lock is taken once (``stats()``,
a frozen snapshot: counts and two small property copies) and its subscription lock once (the delayed count), briefly; no
ack-range string is rendered. Every
topic in the store is reported, so the first scrape opens them all. Thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from ..broker import FaultStats, Topic
from ..core import NotFoundError

if TYPE_CHECKING:
    from ..broker import Broker, Subscription

__all__ = ["SUBSCRIPTION_LABELS", "TOPIC_LABELS", "BrokerCollector"]

log = logging.getLogger(__name__)

SUBSCRIPTION_LABELS = ("cluster", "namespace", "topic", "subscription")
TOPIC_LABELS = ("cluster", "namespace", "topic")

# (family name, type, help); the order of this table is the order of the output.
_SUBSCRIPTION_FAMILIES: tuple[tuple[str, str, str], ...] = (
    (
        "pulsar_cursor_epoch_increase_count",
        "counter",
        "How many times the read position of the cursor was changed by a cursor position reset",
    ),
    (
        "pulsar_cursor_epoch_increase_task_state",
        "gauge",
        "1 while a cursor state revision task is running, 0 when none is (an enumeration)",
    ),
    ("pulsar_subscription_back_log", "gauge", "Entries not acknowledged by the subscription (a batch counts once)"),
    ("pulsar_subscription_delayed", "gauge", "Messages held by the delayed-delivery tracker"),
    (
        "mledger_subscription_mark_delete_lag",
        "gauge",
        "Entries between the mark-delete position and the read position (numberOfEntriesSinceFirstNotAckedMessage)",
    ),
    (
        "mledger_subscription_non_contiguous_deleted_ranges",
        "gauge",
        "Individually acknowledged ranges after the mark-delete position (ack holes)",
    ),
    ("mledger_cursor_persisted_state_bytes", "gauge", "Size in bytes of the last persisted cursor state"),
    ("mledger_cursor_persisted_state_chunks", "gauge", "Chunks of the last persisted cursor state (1: not chunked)"),
    (
        "mledger_cursor_max_unacked_ranges_to_persist",
        "gauge",
        "max_unacked_ranges_to_persist: ranges beyond it are kept in memory only",
    ),
    (
        "mledger_cursor_truncated_ranges",
        "gauge",
        "Acknowledged ranges the last persist left out (lost on a restart, redelivered)",
    ),
    ("mledger_cursor_truncated_ranges_total", "counter", "Acknowledged ranges left out, over all persists"),
    ("mledger_cursor_truncated_batch_indexes", "gauge", "Batch-index states the last persist left out"),
    ("mledger_cursor_persist_total", "counter", "Cursor state persists"),
    (
        "mledger_cursor_redelivered_after_crash",
        "gauge",
        "Acknowledged messages a crash now would redeliver: the stored cursor state does not hold them",
    ),
    (
        "mledger_cursor_redelivered_after_unload",
        "gauge",
        "Acknowledged messages a clean close now (topic unload, broker restart) would redeliver",
    ),
    ("mledger_cursor_revision_refused_total", "counter", "Cursor resets refused because another was running"),
    ("mledger_cursor_discarded_reads_total", "counter", "Reads discarded or refused because of a cursor reset"),
)

_TOPIC_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("mledger_dedup_producers", "gauge", "Producers in the deduplication persisted map"),
    ("mledger_dedup_snapshot_age_seconds", "gauge", "Broker-clock time since the last deduplication snapshot"),
    ("mledger_dedup_duplicates_total", "counter", "Publishes dropped as duplicates"),
)


def _family(name: str, kind: str, text: str, labels: tuple[str, ...]) -> CounterMetricFamily | GaugeMetricFamily:
    if kind == "counter":
        return CounterMetricFamily(name, text, labels=labels)
    return GaugeMetricFamily(name, text, labels=labels)


class BrokerCollector(Collector):
    """The metrics of every subscription (and deduplicating topic) of ``broker``.

    ``cluster`` is the value of the ``cluster`` label. Usable in any registry::

        registry = CollectorRegistry(auto_describe=False)
        registry.register(BrokerCollector(broker, cluster="standalone"))
        text = prometheus_client.generate_latest(registry)
    """

    def __init__(self, broker: Broker, cluster: str = "standalone") -> None:
        self.broker = broker
        self.cluster = cluster

    def collect(self) -> Iterator[Metric]:
        """One family per name of the module table, in that order; O(topics + subscriptions)."""
        subscription_families = [_family(n, k, t, SUBSCRIPTION_LABELS) for n, k, t in _SUBSCRIPTION_FAMILIES]
        # one Sample per value, appended to the families' lists (add_metric would build a label
        # dict per sample; here a subscription's samples share one, the writer only reads it)
        appends = [f.samples.append for f in subscription_families]
        names = [_sample_name(f) for f in subscription_families]
        topic_families = {n: _family(n, k, t, TOPIC_LABELS) for n, k, t in _TOPIC_FAMILIES}
        cluster = self.cluster
        for topic in _topics(self.broker):
            namespace = topic.topic_name.namespace_name
            topic_name = topic.name
            limit = topic.managed_ledger.config.max_unacked_ranges_to_persist
            for sub_name, sub in sorted(topic.subscriptions.items()):
                # in the order prometheus_client's writer sorts them to
                labels = {"cluster": cluster, "namespace": namespace, "subscription": sub_name, "topic": topic_name}
                for append, name, value in zip(appends, names, _subscription_values(sub, limit), strict=True):
                    append(Sample(name, labels, value))
            for name, value in _dedup_values(topic):
                topic_families[name].add_metric([cluster, namespace, topic_name], value)
        yield from subscription_families
        yield from topic_families.values()
        if self.broker.faults.enabled:
            yield from _fault_families(self.broker.faults.stats(), cluster)


def _fault_families(stats: FaultStats, cluster: str) -> Iterator[Metric]:
    """The injected faults' figures: those armed now, the firings by action."""
    armed = GaugeMetricFamily("mledger_faults_armed", "Injected faults armed now", labels=["cluster"])
    armed.add_metric([cluster], stats.armed)
    fired = CounterMetricFamily(
        "mledger_faults_fired", "Injected faults that fired, by action", labels=["cluster", "action"]
    )
    for action, count in sorted(stats.fired_by_action.items()):
        fired.add_metric([cluster, action], count)
    yield armed
    yield fired


def _sample_name(family: Metric) -> str:
    """The name of a family's value samples (a counter's carry ``_total``, as add_metric names them)."""
    return family.name + "_total" if family.type == "counter" else family.name


def _topics(broker: Broker) -> Iterable[Topic]:
    for name in broker.list_topics(include_partitions=True):
        try:
            topic = broker.get_topic(name)
        except NotFoundError:  # deleted since it was listed
            continue
        if isinstance(topic, Topic):
            yield topic


def _subscription_values(sub: Subscription, max_unacked_ranges: int) -> tuple[float, ...]:
    """The values of ``_SUBSCRIPTION_FAMILIES``, in its order."""
    stats = sub.cursor.stats()
    rev = stats.revision
    persisted = stats.persistence
    return (
        rev.epoch_increase_count,
        rev.epoch_increase_task_state,
        stats.backlog,
        sub.number_of_delayed_messages(),
        stats.mark_delete_lag,
        stats.individually_deleted_ranges,
        persisted.persisted_state_bytes,
        persisted.last_persist_chunks,
        max_unacked_ranges,
        persisted.truncated_ranges,
        persisted.truncated_ranges_total,
        persisted.truncated_batch_indexes,
        persisted.persist_count,
        persisted.redelivered_after_crash.messages,
        persisted.redelivered_after_unload.messages,
        rev.refused_revisions,
        rev.discarded_reads,
    )


def _dedup_values(topic: Topic) -> list[tuple[str, float]]:
    """Dedup figures if the topic's hook exposes ``stats()`` with them; nothing otherwise."""
    stats_of = getattr(getattr(topic, "deduplication", None), "stats", None)
    if not callable(stats_of):
        return []
    try:
        stats = stats_of()
    except Exception:  # a hook in a bad state must not break the whole scrape
        log.warning("%s: deduplication stats unavailable", topic.name, exc_info=True)
        return []
    out: list[tuple[str, float]] = []
    producers = getattr(stats, "producers", None)
    if isinstance(producers, int):
        out.append(("mledger_dedup_producers", producers))
    age_ms = getattr(stats, "snapshot_age_ms", None)
    if isinstance(age_ms, int):
        out.append(("mledger_dedup_snapshot_age_seconds", age_ms / 1000))
    duplicates = getattr(stats, "duplicates", None)
    if isinstance(duplicates, int):
        out.append(("mledger_dedup_duplicates_total", duplicates))
    return out
