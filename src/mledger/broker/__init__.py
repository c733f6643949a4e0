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

from ..codec.messageid import MessageId as MessageId
from ..core.clock import Clock as Clock, ManualClock as ManualClock, SystemClock as SystemClock
from ..managed_ledger.ledger_view import InitialPosition as InitialPosition
from .broker import AnyTopic as AnyTopic, Broker as Broker
from .compaction import (
    CompactionInProgressError as CompactionInProgressError,
    CompactionStatus as CompactionStatus,
    LongRunningProcessStatus as LongRunningProcessStatus,
)
from .config import BrokerConfig as BrokerConfig
from .consumer import AckRequest as AckRequest, Consumer as Consumer
from .dispatcher import Dispatcher as Dispatcher, DispatcherStats as DispatcherStats
from .errors import (
    AlreadyClosedError as AlreadyClosedError,
    ConsumerBusyError as ConsumerBusyError,
    MessageDupUnknownError as MessageDupUnknownError,
    PersistenceError as PersistenceError,
    ProducerBusyError as ProducerBusyError,
    SubscriptionBusyError as SubscriptionBusyError,
    TopicAlreadyExistsError as TopicAlreadyExistsError,
    TopicBusyError as TopicBusyError,
    TopicFencedError as TopicFencedError,
    TopicTerminatedError as TopicTerminatedError,
)
from .hooks import (
    Deduplication as Deduplication,
    DedupVerdict as DedupVerdict,
    NoDeduplication as NoDeduplication,
    PublishContext as PublishContext,
)
from .listeners import (
    ConsumerSink as ConsumerSink,
    EntryDelivery as EntryDelivery,
    ProducerListener as ProducerListener,
    TopicListener as TopicListener,
)
from .message import BatchMessageIds as BatchMessageIds, Message as Message
from .names import TopicName as TopicName
from .namespaces import NamespaceNotFoundError as NamespaceNotFoundError
from .partitioned import (
    PartitionedConsumer as PartitionedConsumer,
    PartitionedSubscription as PartitionedSubscription,
    PartitionedTopic as PartitionedTopic,
)
from .producer import PartitionedProducer as PartitionedProducer, Producer as Producer
from .publishing import (
    FramedPublish as FramedPublish,
    PublishCallback as PublishCallback,
    PublishResult as PublishResult,
)
from .retention import RetentionPolicies as RetentionPolicies
from .schema_compat import SchemaCompatibilityStrategy as SchemaCompatibilityStrategy
from .stats import (
    ClientInfo as ClientInfo,
    ConsumerStats as ConsumerStats,
    ProducerStats as ProducerStats,
    RateWindow as RateWindow,
    SubscriptionStats as SubscriptionStats,
    TopicStats as TopicStats,
)
from .subscription import SUBSCRIPTION_TYPE_PROPERTY as SUBSCRIPTION_TYPE_PROPERTY, Subscription as Subscription
from .topic import DEDUPLICATION_CURSOR_NAME as DEDUPLICATION_CURSOR_NAME, Topic as Topic
from .types import AckType as AckType, SkipEntry as SkipEntry, SubscriptionType as SubscriptionType

__all__ = [
    "AckRequest",
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
    "Clock",
    "Consumer",
    "ConsumerBusyError",
    "ConsumerSink",
    "ClientInfo",
    "ConsumerStats",
    "DedupVerdict",
    "Deduplication",
    "Dispatcher",
    "DispatcherStats",
    "EntryDelivery",
    "FramedPublish",
    "InitialPosition",
    "ManualClock",
    "Message",
    "MessageDupUnknownError",
    "MessageId",
    "NamespaceNotFoundError",
    "NoDeduplication",
    "PartitionedConsumer",
    "PartitionedProducer",
    "PartitionedSubscription",
    "PartitionedTopic",
    "PersistenceError",
    "Producer",
    "ProducerBusyError",
    "ProducerListener",
    "PublishCallback",
    "PublishContext",
    "PublishResult",
    "RetentionPolicies",
    "SchemaCompatibilityStrategy",
    "SkipEntry",
    "Subscription",
    "SubscriptionBusyError",
    "ProducerStats",
    "RateWindow",
    "SubscriptionStats",
    "SubscriptionType",
    "SystemClock",
    "Topic",
    "TopicAlreadyExistsError",
    "TopicBusyError",
    "TopicFencedError",
    "TopicListener",
    "TopicTerminatedError",
    "TopicName",
    "TopicStats",
]
