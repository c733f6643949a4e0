"""Typed snapshots of topics, subscriptions and consumers (Pulsar's ``TopicStats`` family)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.position import Position
from .dispatcher import DispatcherStats
from .types import SubscriptionType

__all__ = ["ConsumerStats", "SubscriptionStats", "TopicStats"]


@dataclass(frozen=True)
class ConsumerStats:
    """One consumer: name, free permits, queued and unacknowledged messages."""

    name: str
    permits: int
    queued_messages: int
    unacked_messages: int


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
