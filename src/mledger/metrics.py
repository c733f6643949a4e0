"""Prometheus metrics of a broker: text exposition format 0.0.4, standard library only.

``render_metrics(broker)`` returns the text a Prometheus server scrapes (``GET /metrics`` on
``mledger-admin serve``). Every family has ``# HELP`` and ``# TYPE`` lines and its samples
together; label values are escaped (``\\``, ``"``, newline) as the format requires.

Per subscription, labels exactly ``cluster, namespace, topic, subscription`` (``topic`` is the
full name, a partition's own name for a partitioned topic; ``namespace`` is
``tenant/namespace``):

=============================================  =======  =============================================
name                                           type     value
=============================================  =======  =============================================
``pulsar_cursor_epoch_increase_count``         counter  completed cursor state revisions (seeds/002)
``pulsar_cursor_epoch_increase_task_state``    gauge    1 while a revision runs, else 0 (the seed's
                                                        "Enumeration"; the 0.0.4 format has none)
``pulsar_subscription_back_log``               gauge    unacknowledged entries (a batch counts once)
``pulsar_subscription_delayed``                gauge    messages held for delayed delivery
``mledger_subscription_mark_delete_lag``       gauge    entries in (mark-delete, read position]
``mledger_subscription_non_contiguous_deleted_ranges``  gauge  ack holes: individually
                                                        deleted ranges after the mark-delete position
``mledger_cursor_persisted_state_bytes``       gauge    size of the last persisted cursor state
``mledger_cursor_persisted_state_chunks``      gauge    chunks of it (PIP-381; 1 = not chunked)
``mledger_cursor_max_unacked_ranges_to_persist`` gauge  the limit on persisted ranges
``mledger_cursor_truncated_ranges``            gauge    ranges the last persist left out (memory only)
``mledger_cursor_truncated_ranges_total``      counter  ranges left out, over all persists
``mledger_cursor_truncated_batch_indexes``     gauge    batch-index states the last persist left out
``mledger_cursor_persist_total``               counter  cursor state persists
``mledger_cursor_revision_refused_total``      counter  resets refused: another was running
``mledger_cursor_discarded_reads_total``       counter  reads discarded or refused by a revision
=============================================  =======  =============================================

Per topic (labels ``cluster, namespace, topic``), only for topics whose deduplication hook has
``stats()`` (``mledger.broker.dedup.MessageDeduplication``; read with ``getattr``, so a hook
without it simply adds nothing): ``mledger_dedup_producers`` (gauge, producers in the persisted
map), ``mledger_dedup_snapshot_age_seconds`` (gauge, broker-clock time since the last snapshot;
absent before the first), ``mledger_dedup_duplicates_total`` (counter, publishes dropped).

Names starting ``pulsar_`` are Pulsar's (or the seed's); ``mledger_`` ones are mledger's own.
Counters restart from 0 when the broker restarts, as Pulsar's do. Every topic in the store is
reported, so the first scrape opens them all. Read-only and thread-safe; takes each cursor's and
subscription's lock briefly. Cost: O(topics + subscriptions + ack ranges), the last because the
delayed count comes from ``Subscription.stats()``, which also renders the ranges string.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import NotFoundError

if TYPE_CHECKING:
    from .broker import Broker, Subscription, Topic

__all__ = ["CONTENT_TYPE", "SUBSCRIPTION_LABELS", "TOPIC_LABELS", "render_metrics"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SUBSCRIPTION_LABELS = ("cluster", "namespace", "topic", "subscription")
TOPIC_LABELS = ("cluster", "namespace", "topic")

# (name, type, help); the order of this table is the order of the output.
_SUBSCRIPTION_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("pulsar_cursor_epoch_increase_count", "counter",
     "How many times the read position of the cursor was changed by a cursor position reset"),
    ("pulsar_cursor_epoch_increase_task_state", "gauge",
     "1 while a cursor state revision task is running, 0 when none is (an enumeration)"),
    ("pulsar_subscription_back_log", "gauge", "Entries not acknowledged by the subscription (a batch counts once)"),
    ("pulsar_subscription_delayed", "gauge", "Messages held by the delayed-delivery tracker"),
    ("mledger_subscription_mark_delete_lag", "gauge",
     "Entries between the mark-delete position and the read position (numberOfEntriesSinceFirstNotAckedMessage)"),
    ("mledger_subscription_non_contiguous_deleted_ranges", "gauge",
     "Individually acknowledged ranges after the mark-delete position (ack holes)"),
    ("mledger_cursor_persisted_state_bytes", "gauge", "Size in bytes of the last persisted cursor state"),
    ("mledger_cursor_persisted_state_chunks", "gauge", "Chunks of the last persisted cursor state (1: not chunked)"),
    ("mledger_cursor_max_unacked_ranges_to_persist", "gauge",
     "max_unacked_ranges_to_persist: ranges beyond it are kept in memory only"),
    ("mledger_cursor_truncated_ranges", "gauge",
     "Acknowledged ranges the last persist left out (lost on a restart, redelivered)"),
    ("mledger_cursor_truncated_ranges_total", "counter", "Acknowledged ranges left out, over all persists"),
    ("mledger_cursor_truncated_batch_indexes", "gauge", "Batch-index states the last persist left out"),
    ("mledger_cursor_persist_total", "counter", "Cursor state persists"),
    ("mledger_cursor_revision_refused_total", "counter", "Cursor resets refused because another was running"),
    ("mledger_cursor_discarded_reads_total", "counter", "Reads discarded or refused because of a cursor reset"),
)

_TOPIC_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("mledger_dedup_producers", "gauge", "Producers in the deduplication persisted map"),
    ("mledger_dedup_snapshot_age_seconds", "gauge", "Broker-clock time since the last deduplication snapshot"),
    ("mledger_dedup_duplicates_total", "counter", "Publishes dropped as duplicates"),
)


@dataclass
class _Family:
    name: str
    type: str
    help: str
    labels: tuple[str, ...]
    samples: list[tuple[tuple[str, ...], float | int]] = field(default_factory=list)


def render_metrics(broker: Broker, cluster: str = "standalone") -> str:
    """The Prometheus text of every subscription (and deduplicating topic) of ``broker``.

    O(topics + subscriptions + ack ranges); blocks only on the locks of the objects it reads.
    """
    families = {name: _Family(name, kind, text, SUBSCRIPTION_LABELS) for name, kind, text in _SUBSCRIPTION_FAMILIES}
    families.update({name: _Family(name, kind, text, TOPIC_LABELS) for name, kind, text in _TOPIC_FAMILIES})
    for topic in _topics(broker):
        namespace = topic.topic_name.namespace_name
        for sub_name, sub in sorted(topic.subscriptions.items()):
            labels = (cluster, namespace, topic.name, sub_name)
            for name, value in _subscription_values(topic, sub):
                families[name].samples.append((labels, value))
        for name, value in _dedup_values(topic):
            families[name].samples.append(((cluster, namespace, topic.name), value))
    out: list[str] = []
    for family in families.values():
        out.append(f"# HELP {family.name} {_escape_help(family.help)}")
        out.append(f"# TYPE {family.name} {family.type}")
        for values, value in family.samples:
            pairs = ",".join(f'{k}="{_escape_label(v)}"' for k, v in zip(family.labels, values, strict=True))
            out.append(f"{family.name}{{{pairs}}} {_number(value)}")
    return "\n".join(out) + "\n"


def _topics(broker: Broker) -> Iterable[Topic]:
    from .broker import Topic

    for name in broker.list_topics(include_partitions=True):
        try:
            topic = broker.get_topic(name)
        except NotFoundError:  # deleted since it was listed
            continue
        if isinstance(topic, Topic):
            yield topic


def _subscription_values(topic: Topic, sub: Subscription) -> list[tuple[str, float | int]]:
    cursor = sub.cursor
    stats = cursor.stats()
    rev = stats.revision
    return [
        ("pulsar_cursor_epoch_increase_count", rev.epoch_increase_count),
        ("pulsar_cursor_epoch_increase_task_state", rev.epoch_increase_task_state),
        ("pulsar_subscription_back_log", stats.backlog),
        ("pulsar_subscription_delayed", sub.stats().msg_delayed),
        ("mledger_subscription_mark_delete_lag", cursor.number_of_entries_since_first_not_acked()),
        ("mledger_subscription_non_contiguous_deleted_ranges", stats.individually_deleted_ranges),
        ("mledger_cursor_persisted_state_bytes", stats.persisted_state_bytes),
        ("mledger_cursor_persisted_state_chunks", stats.last_persist_chunks),
        ("mledger_cursor_max_unacked_ranges_to_persist", topic.managed_ledger.config.max_unacked_ranges_to_persist),
        ("mledger_cursor_truncated_ranges", stats.truncated_ranges),
        ("mledger_cursor_truncated_ranges_total", stats.truncated_ranges_total),
        ("mledger_cursor_truncated_batch_indexes", stats.truncated_batch_indexes),
        ("mledger_cursor_persist_total", stats.persist_count),
        ("mledger_cursor_revision_refused_total", rev.refused_revisions),
        ("mledger_cursor_discarded_reads_total", rev.discarded_reads),
    ]


def _dedup_values(topic: Topic) -> list[tuple[str, float | int]]:
    """Dedup figures if the topic's hook exposes ``stats()`` with them; nothing otherwise."""
    stats_of = getattr(getattr(topic, "deduplication", None), "stats", None)
    if not callable(stats_of):
        return []
    try:
        stats = stats_of()
    except Exception:  # a hook in a bad state must not break the whole scrape
        log.warning("%s: deduplication stats unavailable", topic.name, exc_info=True)
        return []
    out: list[tuple[str, float | int]] = []
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


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float | int) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))
