"""Internal stats: Pulsar's ``PersistentTopicInternalStats`` built from a managed ledger.

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

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from ..managed_ledger.cursor import ManagedCursor
    from ..managed_ledger.ledger import ManagedLedger

__all__ = [
    "CursorStats",
    "LedgerInfo",
    "PartitionedTopicInternalStats",
    "PartitionedTopicMetadata",
    "PersistentTopicInternalStats",
    "cursor_internal_stats",
    "topic_internal_stats",
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
        cursor_ledger=stats.cursor_ledger_id,
        individually_deleted_messages=str(cursor.individually_deleted_messages()),
        state=stats.state,
        number_of_entries_since_first_not_acked_message=cursor.number_of_entries_since_first_not_acked(),
        total_non_contiguous_deleted_messages_range=stats.individually_deleted_ranges,
        properties=dict(stats.properties),
        number_of_entries_in_backlog=stats.backlog,
    )


def topic_internal_stats(ml: ManagedLedger) -> PersistentTopicInternalStats:
    """The internal stats of one managed ledger and its open cursors, as Pulsar's
    ``getManagedLedgerInternalStats`` reports them: sizes and counters tracked as entries are
    added (``totalSize`` and ``numberOfEntries`` count every ledger, the current one included;
    ``entriesAddedCounter`` counts since the topic was loaded); the open ledger listed with
    ``entries`` and ``size`` 0 (its figures are ``currentLedgerEntries`` /
    ``currentLedgerSize``); the cursors map holds the durable cursors by name and then the
    open non-durable ones (readers)."""
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
        state="Closed" if ml.is_closed else "LedgerOpened",
        ledgers=[
            LedgerInfo(ledger_id=li.ledger_id, entries=0, size=0)
            if li.ledger_id == current_id
            else LedgerInfo(ledger_id=li.ledger_id, entries=li.entries, size=li.size)
            for li in ledgers
        ],
        cursors={cursor.name: cursor_internal_stats(cursor) for cursor in ml.all_cursors},
    )
