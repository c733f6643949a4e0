"""A consumer's snapshot (Pulsar's ``ConsumerStats``), with what it was sent grouped in
:class:`OutStats`; taken by ``Consumer.stats``. Its own module so that the consumer, which
takes it, need not import the subscription's and topic's snapshots (they import the dispatcher,
which imports the consumer)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core import Position
from ._types import ClientInfo

__all__ = ["ConsumerStats", "OutStats"]


@dataclass(frozen=True, slots=True)
class OutStats:
    """What a consumer was sent: counters since it connected and the rates over the last stats
    interval (Pulsar's ``msgOutCounter``, ``bytesOutCounter``, ``msgRateOut``,
    ``msgThroughputOut``; ``entries_counter`` is behind its ``avgMessagesPerEntry``)."""

    msg_counter: int = 0
    bytes_counter: int = 0
    entries_counter: int = 0
    msg_rate: float = 0.0
    """Messages/s over the last stats interval."""
    msg_throughput: float = 0.0
    """Bytes/s over the last stats interval."""


@dataclass(frozen=True)
class ConsumerStats:
    """One consumer: name, free permits, queued and unacknowledged messages, what it was sent.

    ``permits`` is the broker consumer's own room; ``available_permits`` adds the permits a
    remote client granted that the broker holds back (Pulsar's ``availablePermits``).
    """

    name: str
    permits: int
    queued_messages: int
    unacked_messages: int
    available_permits: int = 0
    out: OutStats = field(default_factory=OutStats)
    connected_since_ms: int = 0
    last_consumed_ms: int = 0
    last_acked_ms: int = 0
    last_flow_ms: int = 0
    read_position_when_joining: Position | None = None
    client: ClientInfo | None = None
