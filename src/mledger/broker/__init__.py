"""The broker layer: topics, producers, subscriptions, dispatchers, delayed delivery, PIP-423.

>>> from mledger import ManagedLedgerFactory, InitialPosition
>>> from mledger.broker import Broker, ManualClock, SubscriptionType, SkipEntry
>>> broker = Broker(ManagedLedgerFactory(), clock=ManualClock(0))
>>> sub = broker.subscribe("orders", "sub", SubscriptionType.SHARED, InitialPosition.EARLIEST)
>>> producer = broker.create_producer("orders")
>>> later = producer.send(b"in a minute", deliver_at_ms=60_000)
>>> now = producer.send(b"now")
>>> consumer = sub.add_consumer("c1")
>>> [m.data for m in consumer.receive()]
[b'now']
>>> sub.cancel_delayed_message(later.ledger_id, later.entry_id)
True
>>> _ = broker.clock.advance(60_000)
>>> consumer.receive()
[]
"""

from typing import TYPE_CHECKING

from ..codec import MessageId as MessageId
from ..core import Clock as Clock, ManualClock as ManualClock, SystemClock as SystemClock, lazy_getattr
from ..managed_ledger import InitialPosition as InitialPosition
from ._acks import AckRequest as AckRequest
from ._backlog_quota import (
    BacklogQuota as BacklogQuota,
    BacklogQuotaExceededError as BacklogQuotaExceededError,
    BacklogQuotaType as BacklogQuotaType,
    BacklogRetentionPolicy as BacklogRetentionPolicy,
)
from ._broker import AnyTopic as AnyTopic, Broker as Broker
from ._compaction import (
    CompactedLedger as CompactedLedger,
    CompactionInProgressError as CompactionInProgressError,
    CompactionRecord as CompactionRecord,
    CompactionStats as CompactionStats,
    CompactionStatus as CompactionStatus,
    LongRunningProcessStatus as LongRunningProcessStatus,
)
from ._config import BROKER_MANAGED_LEDGER_CONFIG as BROKER_MANAGED_LEDGER_CONFIG, BrokerConfig as BrokerConfig
from ._consumer import Consumer as Consumer
from ._dedup import DedupStatus as DedupStatus, MessageDeduplication as MessageDeduplication
from ._delayed import DelayedDeliveryTracker as DelayedDeliveryTracker
from ._dispatcher import Dispatcher as Dispatcher, DispatcherStats as DispatcherStats
from ._errors import (
    AlreadyClosedError as AlreadyClosedError,
    ClockNotManualError as ClockNotManualError,
    ConsumerBusyError as ConsumerBusyError,
    InvalidNameError as InvalidNameError,
    MessageDupUnknownError as MessageDupUnknownError,
    MetadataStoreError as MetadataStoreError,
    PersistenceError as PersistenceError,
    ProducerBusyError as ProducerBusyError,
    SubscriptionBusyError as SubscriptionBusyError,
    TopicAlreadyExistsError as TopicAlreadyExistsError,
    TopicBusyError as TopicBusyError,
    TopicFencedError as TopicFencedError,
    TopicTerminatedError as TopicTerminatedError,
)
from ._fault_kinds import COMMAND_KINDS as COMMAND_KINDS, ERROR_ANSWERS as ERROR_ANSWERS, MESSAGE as MESSAGE
from ._faults import (
    ArmedFault as ArmedFault,
    FaultInjectionOffError as FaultInjectionOffError,
    FaultListener as FaultListener,
    Faults as Faults,
    FaultStats as FaultStats,
    FaultTarget as FaultTarget,
    FiredFault as FiredFault,
    Firing as Firing,
    selects as selects,
)
from ._hashing import murmur3_32 as murmur3_32, sticky_key_hash as sticky_key_hash
from ._hooks import (
    Deduplication as Deduplication,
    DedupVerdict as DedupVerdict,
    MetadataNeeds as MetadataNeeds,
    NoDeduplication as NoDeduplication,
    PublishContext as PublishContext,
)
from ._inactive_topics import (
    InactiveTopicDeleteMode as InactiveTopicDeleteMode,
    InactiveTopicPolicies as InactiveTopicPolicies,
)
from ._journal import AckRecord as AckRecord, BrokerJournal as BrokerJournal
from ._listeners import (
    ConsumerSink as ConsumerSink,
    EntryDelivery as EntryDelivery,
    ProducerListener as ProducerListener,
    TopicListener as TopicListener,
    ack_set_words as ack_set_words,
)
from ._message import BatchMessageIds as BatchMessageIds, Message as Message
from ._names import (
    NON_PERSISTENT as NON_PERSISTENT,
    TopicName as TopicName,
    check_cluster_name as check_cluster_name,
    check_namespace_name as check_namespace_name,
    check_tenant_name as check_tenant_name,
    local_name_problem as local_name_problem,
    named_entity_problem as named_entity_problem,
)
from ._namespaces import (
    STANDALONE_NAMESPACES as STANDALONE_NAMESPACES,
    NamespaceNotFoundError as NamespaceNotFoundError,
)
from ._nonpersistent import (
    NonPersistentProducer as NonPersistentProducer,
    NonPersistentSubscription as NonPersistentSubscription,
    NonPersistentSubscriptionStats as NonPersistentSubscriptionStats,
    NonPersistentTopic as NonPersistentTopic,
    NonPersistentTopicStats as NonPersistentTopicStats,
)
from ._open import (
    DETERMINISTIC_START_MS as DETERMINISTIC_START_MS,
    OpenedBroker as OpenedBroker,
    open_broker as open_broker,
    open_store as open_store,
    preset_configs as preset_configs,
)
from ._partitioned import (
    PartitionedConsumer as PartitionedConsumer,
    PartitionedSubscription as PartitionedSubscription,
    PartitionedTopic as PartitionedTopic,
)
from ._producer import PartitionedProducer as PartitionedProducer, Producer as Producer
from ._publishing import (
    FramedPublish as FramedPublish,
    PublishCallback as PublishCallback,
    PublishResult as PublishResult,
)
from ._retention import RetentionPolicies as RetentionPolicies
from ._schema_compat import (
    IncompatibleSchemaError as IncompatibleSchemaError,
    SchemaCompatibilityStrategy as SchemaCompatibilityStrategy,
    SchemaInfo as SchemaInfo,
)
from ._stats import (
    ClientInfo as ClientInfo,
    ConsumerStats as ConsumerStats,
    OutStats as OutStats,
    ProducerStats as ProducerStats,
    RateWindow as RateWindow,
    SubscriptionStats as SubscriptionStats,
    TopicStats as TopicStats,
)
from ._subscription import (
    SUBSCRIPTION_TYPE_PROPERTY as SUBSCRIPTION_TYPE_PROPERTY,
    Subscription as Subscription,
    check_read_compacted as check_read_compacted,
)
from ._tenants import TenantInfo as TenantInfo, TenantNotFoundError as TenantNotFoundError
from ._topic import DEDUPLICATION_CURSOR_NAME as DEDUPLICATION_CURSOR_NAME, Topic as Topic
from ._types import AckType as AckType, SkipEntry as SkipEntry, SubscriptionType as SubscriptionType

if TYPE_CHECKING:  # the fault models import pydantic: loaded on first use (a broker that arms no fault never does)
    from ._fault_specs import (
        FaultScenario as FaultScenario,
        FaultSpec as FaultSpec,
        FaultSpecError as FaultSpecError,
        load_scenario as load_scenario,
        parse_fault as parse_fault,
        parse_scenario as parse_scenario,
    )

_LAZY = {
    "._fault_specs": ("FaultScenario", "FaultSpec", "FaultSpecError", "load_scenario", "parse_fault", "parse_scenario"),
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = [
    "ClockNotManualError",
    "COMMAND_KINDS",
    "ERROR_ANSWERS",
    "ArmedFault",
    "FaultInjectionOffError",
    "FaultListener",
    "FaultScenario",
    "FaultSpec",
    "FaultSpecError",
    "FaultStats",
    "FaultTarget",
    "Faults",
    "FiredFault",
    "Firing",
    "load_scenario",
    "parse_fault",
    "DETERMINISTIC_START_MS",
    "AckRequest",
    "BacklogQuota",
    "BacklogQuotaExceededError",
    "BacklogQuotaType",
    "BacklogRetentionPolicy",
    "InactiveTopicDeleteMode",
    "InactiveTopicPolicies",
    "CompactionInProgressError",
    "CompactionStatus",
    "LongRunningProcessStatus",
    "DEDUPLICATION_CURSOR_NAME",
    "SUBSCRIPTION_TYPE_PROPERTY",
    "AckType",
    "AlreadyClosedError",
    "AnyTopic",
    "BatchMessageIds",
    "Broker",
    "BrokerConfig",
    "ClientInfo",
    "Clock",
    "CompactionInProgressError",
    "CompactionRecord",
    "CompactionStats",
    "CompactionStatus",
    "Consumer",
    "ConsumerBusyError",
    "ConsumerSink",
    "ConsumerStats",
    "DEDUPLICATION_CURSOR_NAME",
    "DedupStatus",
    "DedupVerdict",
    "Deduplication",
    "DelayedDeliveryTracker",
    "Dispatcher",
    "DispatcherStats",
    "EntryDelivery",
    "FramedPublish",
    "IncompatibleSchemaError",
    "InvalidNameError",
    "InitialPosition",
    "LongRunningProcessStatus",
    "ManualClock",
    "Message",
    "MessageDeduplication",
    "MessageDupUnknownError",
    "MessageId",
    "MetadataNeeds",
    "MetadataStoreError",
    "NamespaceNotFoundError",
    "NoDeduplication",
    "NonPersistentSubscription",
    "NonPersistentTopic",
    "OpenedBroker",
    "OutStats",
    "PartitionedConsumer",
    "PartitionedProducer",
    "PartitionedSubscription",
    "PartitionedTopic",
    "PersistenceError",
    "Producer",
    "ProducerBusyError",
    "ProducerListener",
    "ProducerStats",
    "PublishCallback",
    "PublishContext",
    "PublishResult",
    "RateWindow",
    "RetentionPolicies",
    "SUBSCRIPTION_TYPE_PROPERTY",
    "SchemaCompatibilityStrategy",
    "SkipEntry",
    "Subscription",
    "SubscriptionBusyError",
    "SubscriptionStats",
    "SubscriptionType",
    "SystemClock",
    "TenantInfo",
    "Topic",
    "TopicAlreadyExistsError",
    "TopicBusyError",
    "TopicFencedError",
    "TopicListener",
    "TopicName",
    "TopicStats",
    "TopicTerminatedError",
    "murmur3_32",
    "open_broker",
    "open_store",
    "preset_configs",
    "sticky_key_hash",
]
