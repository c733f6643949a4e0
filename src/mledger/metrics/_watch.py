"""``WatchCollector``: the Prometheus metrics of ``mledger watch`` (its ``/metrics`` endpoint).

The collector holds the latest :class:`~mledger.replay.WatchRound` (:meth:`WatchCollector.update`,
called after each poll) and turns it into metric families at each scrape. Every name starts
``mledger_watch_``: never one of Pulsar's own, so a Prometheus scraping both the brokers and
watch keeps them apart. Per subscription, labels ``topic`` (a partition's own name),
``subscription``:

==================================================  =======  =================================================
family                                              type     value (and the Pulsar metric it predicts)
==================================================  =======  =================================================
``mledger_watch_unacked_ranges``                    gauge    ack holes now (``pulsar_ml_cursor_nonContiguousDeletedMessagesRange``)
``mledger_watch_state_bytes``                       gauge    the cursor state's size at its last persist (the
                                                             subscription stat ``nonContiguousDeletedMessagesRangesSerializedSize``'s record)
``mledger_watch_redelivered_after_crash``           gauge    messages a broker crash now would deliver again
                                                             (they would show in ``pulsar_subscription_msg_rate_out``
                                                             a second time; no Pulsar metric counts them)
``mledger_watch_redelivered_after_crash_limits``    gauge    the part of them lost to the limits
``mledger_watch_redelivered_after_unload``          gauge    messages an unload (a clean close) now would deliver again
``mledger_watch_truncated_ranges``                  gauge    ranges the last persist left out (while above 0,
                                                             ``pulsar.broker.managed_ledger.cursor.persist.unacked_ranges.truncated`` rises, #25548)
``mledger_watch_persist_limit_seconds``             gauge    time until the ranges pass the persist limit at the
                                                             current growth (+Inf: not growing; 0: passed)
``mledger_watch_frame_limit_seconds``               gauge    time until the state passes the frame limit (then
                                                             ``pulsar_ml_cursor_persistLedgerErrors`` rises)
``mledger_watch_status``                            gauge    1 for the subscription's status (label ``status``:
                                                             ``LOSING_STATE``, ``AT_RISK``, ``OK``), 0 for the others
``mledger_watch_history_dropped``                   gauge    1 once samples were dropped for the memory bound
==================================================  =======  =================================================

And for the watch itself: ``mledger_watch_figures_info`` (gauge, 1, label ``unit``: ``messages``
with readers, ``entries`` under ``--no-readers``, when every count of messages above counts entries),
``mledger_watch_subscriptions`` (gauge, label ``status``),
``mledger_watch_poll_seconds`` (gauge, the last poll's wall time), ``mledger_watch_polls_total``
and ``mledger_watch_anomalies_total`` (counters: polls, and what the polls could not see).
Thread-safe: a scrape reads the round the last :meth:`~WatchCollector.update` left.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..replay import STATUSES, SubscriptionWatch, WatchRound

__all__ = ["WATCH_LABELS", "WatchCollector"]

WATCH_LABELS = ("topic", "subscription")

_SUBSCRIPTION_GAUGES: tuple[tuple[str, str], ...] = (
    ("mledger_watch_unacked_ranges", "Individually acknowledged ranges after the mark-delete position now"),
    ("mledger_watch_state_bytes", "Size in bytes of the cursor state at its last persist"),
    ("mledger_watch_redelivered_after_crash", "Acknowledged messages a broker crash now would deliver again"),
    ("mledger_watch_redelivered_after_crash_limits", "The part of them lost to the limits"),
    ("mledger_watch_redelivered_after_unload", "Acknowledged messages an unload now would deliver again"),
    ("mledger_watch_truncated_ranges", "Acknowledged ranges the last persist left out (lost on a restart)"),
    ("mledger_watch_persist_limit_seconds", "Seconds until the ranges pass the persist limit (+Inf: not growing)"),
    ("mledger_watch_frame_limit_seconds", "Seconds until the state passes the frame limit (+Inf: not growing)"),
    ("mledger_watch_history_dropped", "1 once the oldest samples were dropped for the memory bound"),
)


class WatchCollector(Collector):
    """A prometheus_client collector of the latest watch round (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._round: WatchRound | None = None
        self._polls = 0
        self._anomalies = 0

    def update(self, done: WatchRound) -> None:
        """The round a scrape reports from now on (its poll and anomalies counted)."""
        with self._lock:
            self._round = done
            self._polls += 1
            self._anomalies += done.anomalies

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            done, polls, anomalies = self._round, self._polls, self._anomalies
        yield CounterMetricFamily("mledger_watch_polls", "Polls of the cluster", value=polls)
        yield CounterMetricFamily("mledger_watch_anomalies", "Things the polls could not see", value=anomalies)
        if done is None:
            return
        yield GaugeMetricFamily("mledger_watch_poll_seconds", "Wall time of the last poll", value=done.poll.wall_s)
        unit = GaugeMetricFamily("mledger_watch_figures_info", "What the counts of messages count", labels=["unit"])
        unit.add_metric([done.unit], 1)
        yield unit
        by_status = GaugeMetricFamily("mledger_watch_subscriptions", "Subscriptions per status", labels=["status"])
        for name, count in done.counts().items():
            by_status.add_metric([name], count)
        yield by_status
        families = {name: GaugeMetricFamily(name, doc, labels=WATCH_LABELS) for name, doc in _SUBSCRIPTION_GAUGES}
        status = GaugeMetricFamily(
            "mledger_watch_status", "1 for the subscription's status", labels=[*WATCH_LABELS, "status"]
        )
        for row in done.subscriptions:
            labels = [row.local_topic, row.subscription]
            for name, value in _values(row).items():
                families[name].add_metric(labels, value)
            for name in STATUSES:
                status.add_metric([*labels, name], 1.0 if row.status == name else 0.0)
        yield from families.values()
        yield status


def _values(row: SubscriptionWatch) -> dict[str, float]:
    return {
        "mledger_watch_unacked_ranges": row.unacked_ranges,
        "mledger_watch_state_bytes": row.state_bytes,
        "mledger_watch_redelivered_after_crash": row.redelivered_after_crash,
        "mledger_watch_redelivered_after_crash_limits": row.redelivered_after_crash_limits,
        "mledger_watch_redelivered_after_unload": row.redelivered_after_unload,
        "mledger_watch_truncated_ranges": row.truncated_ranges,
        "mledger_watch_persist_limit_seconds": _until(row.at_ms, row.persist_limit_at_ms),
        "mledger_watch_frame_limit_seconds": _until(row.at_ms, row.frame_limit_at_ms),
        "mledger_watch_history_dropped": 1.0 if row.history_dropped else 0.0,
    }


def _until(now_ms: int, at_ms: int | None) -> float:
    return math.inf if at_ms is None else max(at_ms - now_ms, 0) / 1000
