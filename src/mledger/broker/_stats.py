"""Typed snapshots of topics, subscriptions, consumers and producers (Pulsar's ``TopicStats``
family), and the counters and rate windows behind them.

Counters (messages and bytes in, per topic and producer; out, per consumer, subscription and
topic) count from the moment the topic was loaded, as Pulsar's do. Rates are Pulsar's: the
average over the last stats interval (``BrokerConfig.stats_update_frequency_in_secs``, Pulsar's
``statsUpdateFrequencyInSecs``, 60 s), 0 until one interval has passed: the broker's
``updateRates`` timer closes every :class:`RateWindow` at each interval. Where nothing drives the
broker's timers, a window closes its interval when stats are read at least one interval after it
opened (see :mod:`mledger.broker._rates`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import Position
from ._consumer_stats import ConsumerStats, OutStats
from ._dispatcher import DispatcherStats
from ._rates import RateWindow
from ._types import ClientInfo, SubscriptionType

__all__ = [
    "ClientInfo",
    "ConsumerStats",
    "OutStats",
    "ProducerStats",
    "RateWindow",
    "SubscriptionStats",
    "TopicStats",
]


@dataclass(frozen=True)
class ProducerStats:
    """One connected producer: name, id, what it published, its client."""

    name: str
    producer_id: int
    msg_in_counter: int
    bytes_in_counter: int
    msg_rate_in: float
    msg_throughput_in: float
    connected_since_ms: int
    client: ClientInfo | None = None


@dataclass(frozen=True)
class SubscriptionStats:
    """One subscription: its cursor's positions and backlog, its dispatcher, its consumers.

    ``msg_backlog`` counts entries (a batch is one), as the cursor does;
    ``individually_deleted_messages`` is Pulsar's ``[(3:5..3:7],...]`` string.
    """

    name: str
    topic: str
    type: SubscriptionType
    msg_backlog: int
    mark_delete_position: Position
    read_position: Position
    individually_deleted_messages: str
    consumers: tuple[ConsumerStats, ...]
    dispatcher: DispatcherStats
    durable: bool = True
    msg_out_counter: int = 0
    """Messages sent to its consumers, those gone included."""
    bytes_out_counter: int = 0
    non_contiguous_deleted_ranges: int = 0
    last_mark_delete_advanced_ms: int = 0
    total_msg_expired: int = 0
    """Entries acknowledged by message expiry (Pulsar's ``totalMsgExpired``)."""
    last_expire_ms: int = 0
    """When message expiry last looked at this subscription (Pulsar's ``lastExpireTimestamp``)."""

    @property
    def msg_rate_out(self) -> float:
        """Messages/s sent to the connected consumers (the sum of theirs, as Pulsar's)."""
        return sum(c.out.msg_rate for c in self.consumers)

    @property
    def msg_throughput_out(self) -> float:
        """Bytes/s sent to the connected consumers."""
        return sum(c.out.msg_throughput for c in self.consumers)

    @property
    def msg_delayed(self) -> int:
        """Messages held by the delayed-delivery tracker (Pulsar's ``msgDelayed``)."""
        return self.dispatcher.delayed_messages

    @property
    def unacked_messages(self) -> int:
        """Messages delivered and not acknowledged, over all consumers."""
        return self.dispatcher.unacked_messages


@dataclass(frozen=True)
class TopicStats:
    """One topic (or partition): its ledger's counters, producers and subscriptions."""

    name: str
    entries: int
    last_confirmed_entry: Position
    producers: tuple[str, ...]
    subscriptions: dict[str, SubscriptionStats]
    publishers: tuple[ProducerStats, ...] = ()
    msg_in_counter: int = 0
    """Messages stored since the topic was loaded (a batch counts its messages)."""
    bytes_in_counter: int = 0
    msg_rate_in: float = 0.0
    msg_throughput_in: float = 0.0
    msg_out_counter: int = 0
    """Messages sent to consumers, of subscriptions gone included."""
    bytes_out_counter: int = 0
    storage_size: int = 0

    @property
    def msg_rate_out(self) -> float:
        """Messages/s sent to consumers of every subscription."""
        return sum(s.msg_rate_out for s in self.subscriptions.values())

    @property
    def msg_throughput_out(self) -> float:
        """Bytes/s sent to consumers of every subscription."""
        return sum(s.msg_throughput_out for s in self.subscriptions.values())
