"""The admin API: request models, authorization and ``Admin.topics``.

Admin logic lives in :mod:`mledger.admin._topics` once; the ``mledger-admin`` CLI
(:mod:`mledger.cli._admin`) and the REST server (:mod:`mledger.rest`) call it. :class:`RemoteAdmin` is the same API over HTTP, against a
``mledger-admin serve`` (httpx, the ``client`` extra). Every error carries ``http_status``, the
status Pulsar's REST API answers with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core._lazy import lazy_getattr

if TYPE_CHECKING:
    from ..broker._retention import RetentionPolicies as RetentionPolicies
    from ._api import Admin as Admin
    from ._auth import (
        WILDCARD as WILDCARD,
        Authorization as Authorization,
        NamespaceOperation as NamespaceOperation,
        TopicOperation as TopicOperation,
    )
    from ._errors import SubscriptionAlreadyExistsError as SubscriptionAlreadyExistsError
    from ._messaging import Messaging as Messaging
    from ._namespaces import Namespaces as Namespaces
    from ._remote import RemoteAdmin as RemoteAdmin
    from ._requests import (
        PAYLOAD_ERROR_PREFIX as PAYLOAD_ERROR_PREFIX,
        MessageIdItem as MessageIdItem,
        ResetCursorData as ResetCursorData,
        SkipMessageIdsRequest as SkipMessageIdsRequest,
    )
    from ._stats import (
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
    from ._topics import CancelDelayedMessageResult as CancelDelayedMessageResult, Topics as Topics
    from ._transport import AsyncRemoteAdmin as AsyncRemoteAdmin

# imported on first use (PEP 562): ``mledger standalone`` needs the authentication and
# authorization modules at start-up, not the admin operations, their stats models or httpx
_LAZY = {
    "RetentionPolicies": "..broker._retention",
    "Admin": "._api",
    "WILDCARD": "._auth",
    "Authorization": "._auth",
    "NamespaceOperation": "._auth",
    "TopicOperation": "._auth",
    "SubscriptionAlreadyExistsError": "._errors",
    "Messaging": "._messaging",
    "Namespaces": "._namespaces",
    "RemoteAdmin": "._remote",
    "AsyncRemoteAdmin": "._transport",
    "PAYLOAD_ERROR_PREFIX": "._requests",
    "MessageIdItem": "._requests",
    "ResetCursorData": "._requests",
    "SkipMessageIdsRequest": "._requests",
    "CompactionStatsData": "._stats",
    "ConsumerStatsData": "._stats",
    "CursorStats": "._stats",
    "LedgerInfo": "._stats",
    "PartitionedTopicInternalStats": "._stats",
    "PartitionedTopicMetadata": "._stats",
    "PartitionedTopicStatsData": "._stats",
    "PersistentTopicInternalStats": "._stats",
    "PublisherStatsData": "._stats",
    "SubscriptionStatsData": "._stats",
    "TopicStatsData": "._stats",
    "CancelDelayedMessageResult": "._topics",
    "Topics": "._topics",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = [
    "PAYLOAD_ERROR_PREFIX",
    "WILDCARD",
    "Admin",
    "AsyncRemoteAdmin",
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
