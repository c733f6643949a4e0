"""The admin API: request models, authorization and ``Admin.topics``.

Admin logic lives in :mod:`mledger.admin.topics` once; the ``mledger-admin`` CLI
(:mod:`mledger.cli.admin`) and the REST server (:mod:`mledger.rest`) call it. :class:`RemoteAdmin` is the same API over HTTP, against a
``mledger-admin serve`` (httpx, the ``client`` extra). Every error carries ``http_status``, the
status Pulsar's REST API answers with.
"""

from ..broker.retention import RetentionPolicies as RetentionPolicies
from .api import Admin as Admin
from .auth import (
    WILDCARD as WILDCARD,
    Authorization as Authorization,
    NamespaceOperation as NamespaceOperation,
    TopicOperation as TopicOperation,
)
from .errors import SubscriptionAlreadyExistsError as SubscriptionAlreadyExistsError
from .messaging import Messaging as Messaging
from .namespaces import Namespaces as Namespaces
from .remote import RemoteAdmin as RemoteAdmin
from .requests import (
    PAYLOAD_ERROR_PREFIX as PAYLOAD_ERROR_PREFIX,
    MessageIdItem as MessageIdItem,
    ResetCursorData as ResetCursorData,
    SkipMessageIdsRequest as SkipMessageIdsRequest,
)
from .stats import (
    CompactionStatsData as CompactionStatsData,
    ConsumerStatsData as ConsumerStatsData,
    CursorStats as CursorStats,
    LedgerInfo as LedgerInfo,
    PartitionedTopicInternalStats as PartitionedTopicInternalStats,
    PartitionedTopicMetadata as PartitionedTopicMetadata,
    PartitionedTopicStatsData as PartitionedTopicStatsData,
    PersistentTopicInternalStats as PersistentTopicInternalStats,
    PublisherStatsData as PublisherStatsData,
    SubscriptionStatsData as SubscriptionStatsData,
    TopicStatsData as TopicStatsData,
)
from .topics import CancelDelayedMessageResult as CancelDelayedMessageResult, Topics as Topics

__all__ = [
    "PAYLOAD_ERROR_PREFIX",
    "WILDCARD",
    "Admin",
    "Authorization",
    "CancelDelayedMessageResult",
    "CompactionStatsData",
    "ConsumerStatsData",
    "CursorStats",
    "LedgerInfo",
    "MessageIdItem",
    "Messaging",
    "NamespaceOperation",
    "Namespaces",
    "PartitionedTopicInternalStats",
    "PartitionedTopicMetadata",
    "PartitionedTopicStatsData",
    "PersistentTopicInternalStats",
    "PublisherStatsData",
    "RemoteAdmin",
    "ResetCursorData",
    "RetentionPolicies",
    "SkipMessageIdsRequest",
    "SubscriptionAlreadyExistsError",
    "SubscriptionStatsData",
    "TopicOperation",
    "TopicStatsData",
    "Topics",
]
