"""Topic stats: Pulsar's ``PersistentTopicInternalStats`` built from a managed ledger, and
Pulsar's ``TopicStats`` family (:class:`TopicStatsData`, ``pulsar-admin topics stats``) built
from the broker's snapshots (see :func:`topic_stats`; their JSON leaves nulls out, as Pulsar's
object mapper does).

Internal stats:

Field names (the JSON aliases) are Pulsar's, from ``PersistentTopicInternalStats`` /
``ManagedLedgerInternalStats`` and their ``CursorStats`` and ``LedgerInfo``; Python attributes
are snake_case. Values Pulsar takes from BookKeeper machinery mledger does not model keep
Pulsar's neutral values (``waitingReadOp`` False, ``pendingReadOps`` 0, no offload, no schema
ledgers, no compacted ledger). One field is mledger's own: ``numberOfEntriesInBacklog``, the
cursor's precise backlog in entries (``ManagedCursor.getNumberOfEntriesInBacklog(true)``), which
Pulsar reports only in the topic stats.

Positions print as ``L:E``; timestamps as Pulsar's ``DateFormatter.format``
(``yyyy-MM-dd'T'HH:mm:ss.SSSZ``), in UTC.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ..broker import SubscriptionType
from ..core import MLedgerError

if TYPE_CHECKING:
    from ..broker import CompactedLedger, ConsumerStats, ProducerStats, SubscriptionStats, Topic
    from ..core import Position
    from ..managed_ledger import ManagedCursor, ManagedLedger

_M = TypeVar("_M", bound=BaseModel)

__all__ = [
    "CompactionStatsData",
    "ConsumerStatsData",
    "CursorStats",
    "LedgerInfo",
    "PartitionedTopicInternalStats",
    "PartitionedTopicMetadata",
    "PartitionedTopicStatsData",
    "PersistentTopicInternalStats",
    "PublisherStatsData",
    "SubscriptionStatsData",
    "TopicStatsData",
    "cursor_internal_stats",
    "partitioned_topic_stats",
    "subscription_stats",
    "topic_internal_stats",
    "topic_stats",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)

    def to_json(self, indent: int | None = 2) -> str:
        """Pulsar's JSON form (camelCase field names)."""
        return self.model_dump_json(by_alias=True, indent=indent)


class LedgerInfo(_Model):
    """One ledger of the topic (``PersistentTopicInternalStats.LedgerInfo``)."""

    ledger_id: int = Field(alias="ledgerId")
    entries: int
    size: int
    offloaded: bool = False
    metadata: str | None = None
    under_replicated: bool = Field(default=False, alias="underReplicated")


class CursorStats(_Model):
    """One cursor (subscription) of the topic (``ManagedLedgerInternalStats.CursorStats``)."""

    mark_delete_position: str = Field(alias="markDeletePosition")
    read_position: str = Field(alias="readPosition")
    waiting_read_op: bool = Field(default=False, alias="waitingReadOp")
    pending_read_ops: int = Field(default=0, alias="pendingReadOps")
    messages_consumed_counter: int = Field(alias="messagesConsumedCounter")
    cursor_ledger: int = Field(alias="cursorLedger")
    cursor_ledger_last_entry: int = Field(default=-1, alias="cursorLedgerLastEntry")
    individually_deleted_messages: str = Field(alias="individuallyDeletedMessages")
    last_ledger_switch_timestamp: str | None = Field(default=None, alias="lastLedgerSwitchTimestamp")
    state: str
    number_of_entries_since_first_not_acked_message: int = Field(alias="numberOfEntriesSinceFirstNotAckedMessage")
    total_non_contiguous_deleted_messages_range: int = Field(alias="totalNonContiguousDeletedMessagesRange")
    subscription_have_pending_read: bool = Field(default=False, alias="subscriptionHavePendingRead")
    subscription_have_pending_replay_read: bool = Field(default=False, alias="subscriptionHavePendingReplayRead")
    properties: dict[str, int]
    number_of_entries_in_backlog: int = Field(alias="numberOfEntriesInBacklog")


class PersistentTopicInternalStats(_Model):
    """A topic's (or one partition's) managed ledger and cursors."""

    entries_added_counter: int = Field(alias="entriesAddedCounter")
    number_of_entries: int = Field(alias="numberOfEntries")
    total_size: int = Field(alias="totalSize")
    current_ledger_entries: int = Field(alias="currentLedgerEntries")
    current_ledger_size: int = Field(alias="currentLedgerSize")
    last_ledger_created_timestamp: str | None = Field(default=None, alias="lastLedgerCreatedTimestamp")
    last_ledger_creation_failure_timestamp: str | None = Field(default=None, alias="lastLedgerCreationFailureTimestamp")
    waiting_cursors_count: int = Field(default=0, alias="waitingCursorsCount")
    pending_add_entries_count: int = Field(default=0, alias="pendingAddEntriesCount")
    last_confirmed_entry: str = Field(alias="lastConfirmedEntry")
    state: str
    ledgers: list[LedgerInfo]
    cursors: dict[str, CursorStats]
    schema_ledgers: list[LedgerInfo] = Field(default_factory=list, alias="schemaLedgers")
    compacted_ledger: LedgerInfo = Field(
        default_factory=lambda: LedgerInfo(ledger_id=-1, entries=-1, size=-1), alias="compactedLedger"
    )


class PartitionedTopicMetadata(_Model):
    """``PartitionedTopicMetadata``: the number of partitions."""

    partitions: int


class PartitionedTopicInternalStats(_Model):
    """``PartitionedTopicInternalStats``: metadata and each partition's internal stats."""

    metadata: PartitionedTopicMetadata
    partitions: dict[str, PersistentTopicInternalStats]


def format_timestamp(ms: int) -> str | None:
    """Pulsar's ``DateFormatter.format`` of an epoch-millisecond time, in UTC; None for <= 0."""
    if ms <= 0:
        return None
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}+0000"


def cursor_internal_stats(cursor: ManagedCursor) -> CursorStats:
    """The ``CursorStats`` of one cursor. Takes the cursor lock; O(ranges) for the string."""
    stats = cursor.stats()
    return CursorStats(
        mark_delete_position=str(stats.mark_delete_position),
        read_position=str(stats.read_position),
        messages_consumed_counter=stats.messages_consumed_counter,
        cursor_ledger=stats.persistence.cursor_ledger_id,
        individually_deleted_messages=cursor.individually_deleted_text(),
        state=stats.state,
        number_of_entries_since_first_not_acked_message=stats.mark_delete_lag,
        total_non_contiguous_deleted_messages_range=stats.individually_deleted_ranges,
        properties=dict(stats.properties),
        number_of_entries_in_backlog=stats.backlog,
    )


def topic_internal_stats(ml: ManagedLedger, compacted: CompactedLedger | None = None) -> PersistentTopicInternalStats:
    """The internal stats of one managed ledger and its open cursors, as Pulsar's
    ``getManagedLedgerInternalStats`` reports them: sizes and counters tracked as entries are
    added (``totalSize`` and ``numberOfEntries`` count every ledger, the current one included;
    ``entriesAddedCounter`` counts since the topic was loaded); the open ledger listed with
    ``entries`` and ``size`` 0 (its figures are ``currentLedgerEntries`` /
    ``currentLedgerSize``); the cursors map holds the durable cursors by name and then the
    open non-durable ones (readers); ``compactedLedger`` is the topic's compacted view
    (``compacted``; ledger -1 without one)."""
    ml_stats = ml.stats()
    ledgers = ml.ledger_infos()
    current_id = ml_stats.current_ledger_id
    return PersistentTopicInternalStats(
        entries_added_counter=ml_stats.entries_added_counter,
        number_of_entries=ml_stats.number_of_entries,
        total_size=ml_stats.total_size,
        current_ledger_entries=ml_stats.current_ledger_entries,
        current_ledger_size=ml_stats.current_ledger_size,
        last_ledger_created_timestamp=format_timestamp(ml_stats.last_ledger_created_timestamp),
        last_confirmed_entry=str(ml_stats.last_confirmed_entry),
        state="Closed" if ml.is_closed else "Terminated" if ml.is_terminated else "LedgerOpened",
        ledgers=[
            LedgerInfo(ledger_id=li.ledger_id, entries=0, size=0)
            if li.ledger_id == current_id
            else LedgerInfo(ledger_id=li.ledger_id, entries=li.entries, size=li.size)
            for li in ledgers
        ],
        cursors={cursor.name: cursor_internal_stats(cursor) for cursor in ml.all_cursors},
        compacted_ledger=_compacted_ledger_info(ml, compacted),
    )


def _compacted_ledger_info(ml: ManagedLedger, compacted: CompactedLedger | None) -> LedgerInfo:
    if compacted is None:
        return LedgerInfo(ledger_id=-1, entries=-1, size=-1)
    return LedgerInfo(
        ledger_id=compacted.ledger_id, entries=len(compacted), size=ml.store.ledger_length(compacted.ledger_id)
    )


# -- topic stats (``pulsar-admin topics stats``) ----------------------------------------------------


class _StatsModel(BaseModel):
    """Pulsar's stats JSON: camelCase names, fields in Pulsar's order, nulls left out (Pulsar's
    object mapper writes no null field)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, alias_generator=to_camel)

    def to_json(self, indent: int | None = 2) -> str:
        """Pulsar's JSON form (camelCase field names, no nulls)."""
        return self.model_dump_json(by_alias=True, exclude_none=True, indent=indent)


class PublisherStatsData(_StatsModel):
    """One connected producer (Pulsar's ``PublisherStatsImpl``)."""

    access_mode: str = "Shared"
    msg_rate_in: float = 0.0
    msg_throughput_in: float = 0.0
    average_msg_size: float = 0.0
    chunked_message_rate: float = 0.0
    producer_id: int = 0
    supports_partial_producer: bool = False
    producer_name: str | None = None
    address: str | None = None
    connected_since: str | None = None
    client_version: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)


class ConsumerStatsData(_StatsModel):
    """One connected consumer (Pulsar's ``ConsumerStatsImpl``)."""

    app_id: str | None = None
    msg_rate_out: float = 0.0
    msg_throughput_out: float = 0.0
    bytes_out_counter: int = 0
    msg_out_counter: int = 0
    msg_rate_redeliver: float = 0.0
    message_ack_rate: float = 0.0
    chunked_message_rate: float = 0.0
    consumer_name: str | None = None
    available_permits: int = 0
    unacked_messages: int = 0
    avg_messages_per_entry: int = 0
    blocked_consumer_on_unacked_msgs: bool = False
    read_position_when_joining: str | None = None
    draining_hashes_count: int = 0
    draining_hashes_cleared_total: int = 0
    draining_hashes_unacked_messages: int = 0
    address: str | None = None
    connected_since: str | None = None
    client_version: str | None = None
    last_acked_timestamp: int = 0
    last_consumed_timestamp: int = 0
    last_consumed_flow_timestamp: int = 0
    key_hash_ranges: list[str] | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    last_acked_time: str | None = None
    last_consumed_time: str | None = None


class SubscriptionStatsData(_StatsModel):
    """One subscription (Pulsar's ``SubscriptionStatsImpl``). ``msgBacklog`` counts entries
    (a batch once), as Pulsar's; ``backlogSize`` is -1 when not asked for."""

    msg_rate_out: float = 0.0
    msg_throughput_out: float = 0.0
    bytes_out_counter: int = 0
    msg_out_counter: int = 0
    msg_rate_redeliver: float = 0.0
    message_ack_rate: float = 0.0
    chunked_message_rate: int = 0
    msg_backlog: int = 0
    backlog_size: int = 0
    earliest_msg_publish_time_in_backlog: int = 0
    msg_backlog_no_delayed: int = 0
    blocked_subscription_on_unacked_msgs: bool = False
    msg_delayed: int = 0
    unacked_messages: int = 0
    type: str | None = None
    active_consumer_name: str | None = None
    msg_rate_expired: float = 0.0
    total_msg_expired: int = 0
    last_expire_timestamp: int = 0
    last_consumed_flow_timestamp: int = 0
    last_consumed_timestamp: int = 0
    last_acked_timestamp: int = 0
    last_mark_delete_advanced_timestamp: int = 0
    consumers: list[ConsumerStatsData] = Field(default_factory=list)
    is_durable: bool = True
    is_replicated: bool = False
    allow_out_of_order_delivery: bool = False
    key_shared_mode: str | None = None
    consumers_after_mark_delete_position: dict[str, str] = Field(default_factory=dict)
    non_contiguous_deleted_messages_ranges: int = 0
    non_contiguous_deleted_messages_ranges_serialized_size: int = 0
    delayed_message_index_size_in_bytes: int = 0
    subscription_properties: dict[str, str] = Field(default_factory=dict)
    filter_processed_msg_count: int = 0
    filter_accepted_msg_count: int = 0
    filter_rejected_msg_count: int = 0
    filter_rescheduled_msg_count: int = 0


class CompactionStatsData(_StatsModel):
    """Pulsar's ``CompactionStatsImpl``: the topic's compactions on this broker (all 0 before one)."""

    last_compaction_removed_event_count: int = 0
    last_compaction_succeed_timestamp: int = 0
    last_compaction_failed_timestamp: int = 0
    last_compaction_duration_time_in_mills: int = 0


class TopicStatsData(_StatsModel):
    """A topic's or partition's stats (Pulsar's ``TopicStatsImpl``), what ``GET .../stats`` and
    ``pulsar-admin topics stats`` print. See :func:`topic_stats` for what mledger fills."""

    msg_rate_in: float = 0.0
    msg_throughput_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_out: float = 0.0
    bytes_in_counter: int = 0
    msg_in_counter: int = 0
    bytes_out_counter: int = 0
    msg_out_counter: int = 0
    average_msg_size: float = 0.0
    msg_chunk_published: bool = False
    storage_size: int = 0
    backlog_size: int = 0
    backlog_quota_limit_size: int = -1
    backlog_quota_limit_time: int = -1
    publish_rate_limited_times: int = 0
    earliest_msg_publish_time_in_backlogs: int = 0
    offloaded_storage_size: int = 0
    last_offload_ledger_id: int = 0
    last_offload_success_time_stamp: int = 0
    last_offload_failure_time_stamp: int = 0
    ongoing_txn_count: int = 0
    aborted_txn_count: int = 0
    committed_txn_count: int = 0
    publishers: list[PublisherStatsData] = Field(default_factory=list)
    waiting_publishers: int = 0
    subscriptions: dict[str, SubscriptionStatsData] = Field(default_factory=dict)
    replication: dict[str, dict[str, object]] = Field(default_factory=dict)
    deduplication_status: str | None = None
    topic_epoch: int | None = None
    non_contiguous_deleted_messages_ranges: int = 0
    non_contiguous_deleted_messages_ranges_serialized_size: int = 0
    delayed_message_index_size_in_bytes: int = 0
    compaction: CompactionStatsData = Field(default_factory=CompactionStatsData)
    owner_broker: str | None = None


class PartitionedTopicStatsData(TopicStatsData):
    """A partitioned topic's stats (Pulsar's ``PartitionedTopicStatsImpl``): the partitions'
    stats added up, the number of partitions, and each partition's stats when asked for."""

    metadata: PartitionedTopicMetadata = Field(default_factory=lambda: PartitionedTopicMetadata(partitions=0))
    partitions: dict[str, TopicStatsData] = Field(default_factory=dict)


_EPOCH = "1970-01-01T00:00:00.000+0000"


def _time(ms: int) -> str:
    """Pulsar's ``DateFormatter.format`` of a time that may be 0 (the epoch then)."""
    return format_timestamp(ms) or _EPOCH


def _consumer_stats(c: ConsumerStats, individual_acks: bool) -> ConsumerStatsData:
    client, out = c.client, c.out
    return ConsumerStatsData(
        msg_rate_out=out.msg_rate,
        msg_throughput_out=out.msg_throughput,
        bytes_out_counter=out.bytes_counter,
        msg_out_counter=out.msg_counter,
        consumer_name=c.name,
        available_permits=c.available_permits,
        # Pulsar tracks a consumer's unacked messages on individual-ack types only
        unacked_messages=max(c.unacked_messages, 0) if individual_acks else 0,
        avg_messages_per_entry=round(out.msg_counter / out.entries_counter) if out.entries_counter else 0,
        read_position_when_joining=str(c.read_position_when_joining) if c.read_position_when_joining else None,
        address=client.address if client else None,
        connected_since=format_timestamp(c.connected_since_ms),
        client_version=client.client_version if client else None,
        last_acked_timestamp=c.last_acked_ms,
        last_consumed_timestamp=c.last_consumed_ms,
        last_consumed_flow_timestamp=c.last_flow_ms,
        last_acked_time=_time(c.last_acked_ms),
        last_consumed_time=_time(c.last_consumed_ms),
    )


def _earliest_publish_time(ml: ManagedLedger, mark_delete: Position) -> int:
    """The publish time of the first entry after ``mark_delete`` (Pulsar's
    ``getEarliestMessagePublishTimeOfPos``); 0 when there is none or it cannot be read."""
    try:
        position = ml.next_valid_position(mark_delete)
        if position > ml.last_confirmed_entry:
            return 0
        return ml.read_entry(position).metadata.publish_time_ms
    except MLedgerError:
        return 0


def subscription_stats(
    stats: SubscriptionStats, ml: ManagedLedger, backlog_size: bool = True, earliest_time_in_backlog: bool = False
) -> SubscriptionStatsData:
    """The ``SubscriptionStatsImpl`` of one subscription of a topic (partition), from the
    broker's snapshot of it (``Subscription.stats()``) and the topic's managed ledger.

    ``backlog_size``: ``backlogSize`` is the estimated size after the mark-delete position
    (else -1, as Pulsar's ``subscriptionBacklogSize=false``); ``earliest_time_in_backlog``: read
    the first unacknowledged entry for ``earliestMsgPublishTimeInBacklog`` (else 0). The
    backlog is always precise (mledger counts it exactly). Rates, redelivery and filter figures
    mledger does not track are Pulsar's zeros.
    """
    individual = not stats.type.is_cumulative_ack_mode
    consumers = [_consumer_stats(c, individual) for c in stats.consumers]
    delayed = stats.msg_delayed
    md = stats.mark_delete_position
    return SubscriptionStatsData(
        msg_rate_out=stats.msg_rate_out,
        msg_throughput_out=stats.msg_throughput_out,
        bytes_out_counter=stats.bytes_out_counter,
        msg_out_counter=stats.msg_out_counter,
        msg_backlog=stats.msg_backlog,
        backlog_size=ml.estimated_size_after(md) if backlog_size else -1,
        earliest_msg_publish_time_in_backlog=(
            _earliest_publish_time(ml, md) if earliest_time_in_backlog and stats.msg_backlog > 0 else 0
        ),
        msg_backlog_no_delayed=max(stats.msg_backlog - delayed, 0),
        msg_delayed=delayed,
        unacked_messages=sum(c.unacked_messages for c in consumers),
        type=stats.type.value,
        active_consumer_name=stats.dispatcher.active_consumer,
        last_consumed_flow_timestamp=max((c.last_flow_ms for c in stats.consumers), default=0),
        last_consumed_timestamp=max((c.last_consumed_ms for c in stats.consumers), default=0),
        last_acked_timestamp=max((c.last_acked_ms for c in stats.consumers), default=0),
        last_mark_delete_advanced_timestamp=stats.last_mark_delete_advanced_ms,
        total_msg_expired=stats.total_msg_expired,
        last_expire_timestamp=stats.last_expire_ms,
        consumers=consumers,
        is_durable=stats.durable,
        key_shared_mode="AUTO_SPLIT" if stats.type is SubscriptionType.KEY_SHARED else None,
        consumers_after_mark_delete_position={
            c.name: str(c.read_position_when_joining)
            for c in stats.consumers
            if c.read_position_when_joining is not None
        },
        non_contiguous_deleted_messages_ranges=stats.non_contiguous_deleted_ranges,
    )


def _publisher_stats(p: ProducerStats) -> PublisherStatsData:
    client = p.client
    return PublisherStatsData(
        access_mode=client.access_mode if client else "Shared",
        msg_rate_in=p.msg_rate_in,
        msg_throughput_in=p.msg_throughput_in,
        average_msg_size=p.msg_throughput_in / p.msg_rate_in if p.msg_rate_in else 0.0,
        producer_id=p.producer_id,
        producer_name=p.name,
        address=client.address if client else None,
        connected_since=format_timestamp(p.connected_since_ms),
        client_version=client.client_version if client else None,
    )


def _deduplication_status(topic: Topic) -> str | None:
    """The dedup hook's ``stats().status`` name, when it has one (a custom hook may not)."""
    stats_of = getattr(topic.deduplication, "stats", None)
    if not callable(stats_of):
        return "Disabled"
    status = getattr(stats_of(), "status", None)
    return getattr(status, "value", None) or "Disabled"


def topic_stats(
    topic: Topic,
    subscription_backlog_size: bool = True,
    get_earliest_time_in_backlog: bool = False,
    backlog_quota_limits: tuple[int, int] = (-1, -1),
) -> TopicStatsData:
    """The ``TopicStatsImpl`` of one topic or partition (Pulsar's ``PersistentTopic.getStats``).
    ``backlog_quota_limits`` are the size (bytes) and time (seconds) limits of the backlog quotas
    in force, Pulsar's ``backlogQuotaLimitSize`` and ``backlogQuotaLimitTime`` (-1: none).

    Filled from the broker: counters and rates in (the topic's and each producer's, counted
    as entries are stored) and out (each consumer's, a subscription's including consumers
    gone, the topic's including subscriptions gone), ``averageMsgSize`` (throughput / rate),
    ``storageSize`` (every ledger), ``backlogSize`` (after the slowest durable cursor),
    ``earliestMsgPublishTimeInBacklogs`` (the earliest of the subscriptions', when asked),
    publishers (with their client's address, version and access mode for remote ones),
    subscriptions (see :func:`subscription_stats`), ``deduplicationStatus`` and the ack-hole
    count. What mledger does not have (offload, transactions, replication,
    publish rate limits, chunk tracking) keeps Pulsar's zero values; ``topicEpoch`` and
    ``ownerBroker`` are left out (null). O(subscriptions + consumers + ranges); with
    ``get_earliest_time_in_backlog``, one entry read per subscription with a backlog.
    """
    ml = topic.managed_ledger
    stats = topic.stats()
    subscriptions = {
        name: subscription_stats(sub, ml, subscription_backlog_size, get_earliest_time_in_backlog)
        for name, sub in stats.subscriptions.items()
    }
    earliest = [s.earliest_msg_publish_time_in_backlog for s in subscriptions.values()]
    return TopicStatsData(
        msg_rate_in=stats.msg_rate_in,
        msg_throughput_in=stats.msg_throughput_in,
        msg_rate_out=sum(s.msg_rate_out for s in subscriptions.values()),
        msg_throughput_out=sum(s.msg_throughput_out for s in subscriptions.values()),
        bytes_in_counter=stats.bytes_in_counter,
        msg_in_counter=stats.msg_in_counter,
        bytes_out_counter=stats.bytes_out_counter,
        msg_out_counter=stats.msg_out_counter,
        average_msg_size=stats.msg_throughput_in / stats.msg_rate_in if stats.msg_rate_in else 0.0,
        storage_size=stats.storage_size,
        backlog_size=ml.estimated_backlog_size(),
        backlog_quota_limit_size=backlog_quota_limits[0],
        backlog_quota_limit_time=backlog_quota_limits[1],
        earliest_msg_publish_time_in_backlogs=min((t for t in earliest if t > 0), default=0),
        publishers=[_publisher_stats(p) for p in stats.publishers],
        subscriptions=subscriptions,
        deduplication_status=_deduplication_status(topic),
        non_contiguous_deleted_messages_ranges=sum(
            s.non_contiguous_deleted_messages_ranges for s in subscriptions.values()
        ),
        compaction=_compaction_stats(topic),
    )


def _compaction_stats(topic: Topic) -> CompactionStatsData:
    record = topic.compaction.stats().record
    return CompactionStatsData(
        last_compaction_removed_event_count=record.last_removed_event_count,
        last_compaction_succeed_timestamp=record.last_succeed_timestamp_ms,
        last_compaction_failed_timestamp=record.last_failed_timestamp_ms,
        last_compaction_duration_time_in_mills=record.last_duration_ms,
    )


_TOPIC_SUMS = (
    "msg_rate_in",
    "msg_throughput_in",
    "msg_rate_out",
    "msg_throughput_out",
    "bytes_in_counter",
    "msg_in_counter",
    "bytes_out_counter",
    "msg_out_counter",
    "waiting_publishers",
    "storage_size",
    "backlog_size",
    "publish_rate_limited_times",
    "offloaded_storage_size",
    "non_contiguous_deleted_messages_ranges",
    "non_contiguous_deleted_messages_ranges_serialized_size",
    "delayed_message_index_size_in_bytes",
)
_SUBSCRIPTION_SUMS = (
    "msg_rate_out",
    "msg_throughput_out",
    "bytes_out_counter",
    "msg_out_counter",
    "msg_rate_redeliver",
    "message_ack_rate",
    "chunked_message_rate",
    "msg_backlog",
    "backlog_size",
    "msg_backlog_no_delayed",
    "msg_delayed",
    "unacked_messages",
    "msg_rate_expired",
    "total_msg_expired",
    "non_contiguous_deleted_messages_ranges",
    "non_contiguous_deleted_messages_ranges_serialized_size",
    "delayed_message_index_size_in_bytes",
)
_CONSUMER_SUMS = (
    "msg_rate_out",
    "msg_throughput_out",
    "bytes_out_counter",
    "msg_out_counter",
    "msg_rate_redeliver",
    "message_ack_rate",
    "available_permits",
    "unacked_messages",
)
_PUBLISHER_SUMS = ("msg_rate_in", "msg_throughput_in")


def _summed(items: list[_M], fields: tuple[str, ...], **update: object) -> _M:
    """The first of ``items`` with ``fields`` added up over all of them (and ``update``)."""
    sums = {f: sum(getattr(i, f) for i in items) for f in fields}
    return items[0].model_copy(update={**sums, **update})


def _grouped(items: Iterable[_M], key: Callable[[_M], str | None]) -> dict[str | None, list[_M]]:
    groups: dict[str | None, list[_M]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return groups


def _merge_subscription(parts: list[SubscriptionStatsData]) -> SubscriptionStatsData:
    consumers = [
        _summed(group, _CONSUMER_SUMS)
        for group in _grouped((c for p in parts for c in p.consumers), lambda c: c.consumer_name).values()
    ]
    earliest = [p.earliest_msg_publish_time_in_backlog for p in parts if p.earliest_msg_publish_time_in_backlog > 0]
    return _summed(
        parts,
        _SUBSCRIPTION_SUMS,
        backlog_size=-1 if any(p.backlog_size < 0 for p in parts) else sum(p.backlog_size for p in parts),
        earliest_msg_publish_time_in_backlog=min(earliest, default=0),
        consumers=consumers,
        consumers_after_mark_delete_position={
            k: v for p in parts for k, v in p.consumers_after_mark_delete_position.items()
        },
        is_durable=any(p.is_durable for p in parts),
    )


def partitioned_topic_stats(
    partitions: Sequence[tuple[str, TopicStatsData]], per_partition: bool = True
) -> PartitionedTopicStatsData:
    """A partitioned topic's stats from its partitions' (Pulsar's ``TopicStatsImpl.add`` over
    the partitions): counters, rates and sizes added up, ``averageMsgSize`` the partitions'
    mean, subscriptions added up by name, and, unlike Pulsar (which pairs them by position in
    the list and drops their names), publishers and a subscription's consumers added up by
    name; ``metadata.partitions``; ``partitions`` holds each partition's stats when
    ``per_partition`` (else it is empty)."""
    stats = [s for _, s in partitions]
    if not stats:
        return PartitionedTopicStatsData()
    first = stats[0]
    sums = {f: sum(getattr(s, f) for s in stats) for f in _TOPIC_SUMS}
    publishers = [
        _summed(group, _PUBLISHER_SUMS, average_msg_size=sum(p.average_msg_size for p in group) / len(group))
        for group in _grouped((p for s in stats for p in s.publishers), lambda p: p.producer_name).values()
    ]
    subscriptions = {
        name: _merge_subscription(group)
        for name, group in sorted(
            _grouped_by_name((n, sub) for s in stats for n, sub in s.subscriptions.items()).items()
        )
    }
    earliest = [s.earliest_msg_publish_time_in_backlogs for s in stats if s.earliest_msg_publish_time_in_backlogs > 0]
    return PartitionedTopicStatsData(
        **sums,
        average_msg_size=sum(s.average_msg_size for s in stats) / len(stats),
        earliest_msg_publish_time_in_backlogs=min(earliest, default=0),
        publishers=publishers,
        subscriptions=subscriptions,
        deduplication_status=first.deduplication_status,
        backlog_quota_limit_size=first.backlog_quota_limit_size,  # the partitioned topic's policies
        backlog_quota_limit_time=first.backlog_quota_limit_time,
        metadata=PartitionedTopicMetadata(partitions=len(stats)),
        partitions=dict(partitions) if per_partition else {},
    )


def _grouped_by_name(items: Iterable[tuple[str, SubscriptionStatsData]]) -> dict[str, list[SubscriptionStatsData]]:
    groups: dict[str, list[SubscriptionStatsData]] = {}
    for name, sub in items:
        groups.setdefault(name, []).append(sub)
    return groups
