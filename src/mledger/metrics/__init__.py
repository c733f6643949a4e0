"""Prometheus metrics of a broker, with prometheus_client (the ``server`` extra).

``render_metrics(broker, cluster="standalone")`` returns the text a Prometheus server scrapes
(what ``GET /metrics`` of ``mledger-admin serve`` answers, content type :data:`CONTENT_TYPE`);
:class:`BrokerCollector` is the collector behind it, for an application's own registry. The
families, their labels and types are listed in :mod:`mledger.metrics._collector`.
:class:`WatchCollector` is ``mledger watch``'s (:mod:`mledger.metrics._watch`).
"""

from __future__ import annotations

try:
    from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, generate_latest
except ImportError as e:  # pragma: no cover - depends on the installation
    from ..core import MissingExtraError

    raise MissingExtraError("mledger.metrics needs prometheus_client: pip install 'mledger[server]'") from e

from collections.abc import Sequence
from typing import TYPE_CHECKING

from prometheus_client.registry import Collector

from ..broker import Broker
from ..core import lazy_getattr
from ._collector import (
    SUBSCRIPTION_LABELS as SUBSCRIPTION_LABELS,
    TOPIC_LABELS as TOPIC_LABELS,
    BrokerCollector as BrokerCollector,
)

if TYPE_CHECKING:
    from ._protocol import ProtocolCollector as ProtocolCollector
    from ._watch import WATCH_LABELS as WATCH_LABELS, WatchCollector as WatchCollector

# imported on first use (PEP 562): the protocol server's collector imports the protocol package
# (asyncio and the rest), which a broker's metrics alone do not need; the watch's collector
# imports the replay (pyarrow), which a broker's /metrics never needs
_LAZY = {
    "._protocol": ("ProtocolCollector",),
    "._watch": ("WATCH_LABELS", "WatchCollector"),
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = [
    "CONTENT_TYPE",
    "SUBSCRIPTION_LABELS",
    "TOPIC_LABELS",
    "WATCH_LABELS",
    "BrokerCollector",
    "WatchCollector",
    "metrics_registry",
    "render_metrics",
]

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
"""The content type of :func:`render_metrics`' text (Prometheus text format 0.0.4)."""


def metrics_registry(broker: Broker, cluster: str = "standalone", extra: Sequence[Collector] = ()) -> CollectorRegistry:
    """A registry holding a :class:`BrokerCollector` of ``broker`` and the ``extra`` collectors
    (e.g. a :class:`~mledger.metrics.ProtocolCollector`).

    ``auto_describe`` is off: the collector reads the broker only when scraped, never at
    registration.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker, cluster))
    for collector in extra:
        registry.register(collector)
    return registry


def render_metrics(broker: Broker, cluster: str = "standalone", extra: Sequence[Collector] = ()) -> str:
    """The Prometheus text (format 0.0.4) of every subscription (and deduplicating topic) of
    ``broker``, written by prometheus_client. O(topics + subscriptions); blocks only on the
    locks of the objects it reads."""
    return generate_latest(metrics_registry(broker, cluster, extra)).decode("utf-8")
