"""The admin API: request models, authorization and ``Admin.topics``.

Admin logic lives in :mod:`mledger.admin.topics` once; the ``mledger-admin`` CLI
(:mod:`mledger.cli.admin`) and the REST server (:mod:`mledger.rest`) call it. :class:`RemoteAdmin` is the same API over HTTP, against a
``mledger-admin serve`` (httpx, the ``client`` extra). Every error carries ``http_status``, the
status Pulsar's REST API answers with.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# imported on first use (PEP 562): ``mledger standalone`` needs the authentication and
# authorization modules at start-up, not the admin operations, their stats models or httpx
_LAZY = {
    "RetentionPolicies": "..broker.retention",
    "Admin": ".api",
    "WILDCARD": ".auth",
    "Authorization": ".auth",
    "NamespaceOperation": ".auth",
    "TopicOperation": ".auth",
    "SubscriptionAlreadyExistsError": ".errors",
    "Messaging": ".messaging",
    "Namespaces": ".namespaces",
    "RemoteAdmin": ".remote",
    "PAYLOAD_ERROR_PREFIX": ".requests",
    "MessageIdItem": ".requests",
    "ResetCursorData": ".requests",
    "SkipMessageIdsRequest": ".requests",
    "CompactionStatsData": ".stats",
    "ConsumerStatsData": ".stats",
    "CursorStats": ".stats",
    "LedgerInfo": ".stats",
    "PartitionedTopicInternalStats": ".stats",
    "PartitionedTopicMetadata": ".stats",
    "PartitionedTopicStatsData": ".stats",
    "PersistentTopicInternalStats": ".stats",
    "PublisherStatsData": ".stats",
    "SubscriptionStatsData": ".stats",
    "TopicStatsData": ".stats",
    "CancelDelayedMessageResult": ".topics",
    "Topics": ".topics",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


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
