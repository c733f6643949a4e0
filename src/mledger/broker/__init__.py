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

from ..clock import Clock as Clock
from ..clock import ManualClock as ManualClock
from ..clock import SystemClock as SystemClock
from ..ledger import InitialPosition as InitialPosition
from ..messageid import MessageId as MessageId
from .broker import AnyTopic as AnyTopic
from .broker import Broker as Broker
from .config import BrokerConfig as BrokerConfig
from .consumer import Consumer as Consumer
from .dispatcher import Dispatcher as Dispatcher
from .dispatcher import DispatcherStats as DispatcherStats
from .errors import (
    AlreadyClosedError as AlreadyClosedError,
)
from .errors import (
    ConsumerBusyError as ConsumerBusyError,
)
from .errors import (
    MessageDupUnknownError as MessageDupUnknownError,
)
from .errors import (
    ProducerBusyError as ProducerBusyError,
)
from .errors import (
    SubscriptionBusyError as SubscriptionBusyError,
)
from .errors import (
    TopicAlreadyExistsError as TopicAlreadyExistsError,
)
from .errors import (
    TopicBusyError as TopicBusyError,
)
from .hooks import (
    Deduplication as Deduplication,
)
from .hooks import (
    DedupVerdict as DedupVerdict,
)
from .hooks import (
    NoDeduplication as NoDeduplication,
)
from .hooks import (
    PublishContext as PublishContext,
)
from .listeners import ConsumerSink as ConsumerSink
from .listeners import EntryDelivery as EntryDelivery
from .listeners import ProducerListener as ProducerListener
from .listeners import TopicListener as TopicListener
from .message import BatchMessageIds as BatchMessageIds
from .message import Message as Message
from .names import TopicName as TopicName
from .partitioned import (
    PartitionedConsumer as PartitionedConsumer,
)
from .partitioned import (
    PartitionedSubscription as PartitionedSubscription,
)
from .partitioned import (
    PartitionedTopic as PartitionedTopic,
)
from .producer import PartitionedProducer as PartitionedProducer
from .producer import Producer as Producer
from .stats import ConsumerStats as ConsumerStats
from .stats import SubscriptionStats as SubscriptionStats
from .stats import TopicStats as TopicStats
from .subscription import SUBSCRIPTION_TYPE_PROPERTY as SUBSCRIPTION_TYPE_PROPERTY
from .subscription import Subscription as Subscription
from .topic import DEDUPLICATION_CURSOR_NAME as DEDUPLICATION_CURSOR_NAME
from .topic import FramedPublish as FramedPublish
from .topic import Topic as Topic
from .types import AckType as AckType
from .types import SkipEntry as SkipEntry
from .types import SubscriptionType as SubscriptionType

__all__ = [
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
    "NoDeduplication",
    "PartitionedConsumer",
    "PartitionedProducer",
    "PartitionedSubscription",
    "PartitionedTopic",
    "Producer",
    "ProducerBusyError",
    "ProducerListener",
    "PublishContext",
    "SkipEntry",
    "Subscription",
    "SubscriptionBusyError",
    "SubscriptionStats",
    "SubscriptionType",
    "SystemClock",
    "Topic",
    "TopicAlreadyExistsError",
    "TopicBusyError",
    "TopicListener",
    "TopicName",
    "TopicStats",
]
