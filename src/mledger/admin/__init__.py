"""The admin API: request models, authorization and ``Admin.topics``.

Admin logic lives in :mod:`mledger.admin._topics` once; the ``mledger-admin`` CLI
(:mod:`mledger.cli`) and the REST server (:mod:`mledger.rest`) call it. :class:`RemoteAdmin` is the same API over HTTP, against a
``mledger-admin serve`` (httpx, the ``client`` extra). Every error carries ``http_status``, the
status Pulsar's REST API answers with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import lazy_getattr

if TYPE_CHECKING:
    from ..broker import RetentionPolicies as RetentionPolicies
    from ._api import Admin as Admin
    from ._auth import (
        WILDCARD as WILDCARD,
        Authorization as Authorization,
        NamespaceOperation as NamespaceOperation,
        TopicOperation as TopicOperation,
    )
    from ._authentication import (
        AuthenticationError as AuthenticationError,
        AuthenticationSettings as AuthenticationSettings,
        AuthenticationThrottledError as AuthenticationThrottledError,
        Authenticator as Authenticator,
        Credentials as Credentials,
        TokenProvider as TokenProvider,
        add_authentication_arguments as add_authentication_arguments,
        basic_auth_conf_from_env as basic_auth_conf_from_env,
        build_authenticator as build_authenticator,
        common_name as common_name,
        load_token_file as load_token_file,
        read_key as read_key,
        settings_from_args as settings_from_args,
    )
    from ._bodies import (
        REQUESTS as REQUESTS,
        RESPONSES as RESPONSES,
        json_bytes as json_bytes,
        parse_bool_body as parse_bool_body,
    )
    from ._errors import SubscriptionAlreadyExistsError as SubscriptionAlreadyExistsError
    from ._files import MAX_SETTING_FILE_BYTES as MAX_SETTING_FILE_BYTES, read_setting_file as read_setting_file
    from ._messaging import Messaging as Messaging
    from ._namespaces import Namespaces as Namespaces
    from ._operations import (
        NON_PERSISTENT_BASE as NON_PERSISTENT_BASE,
        OPERATIONS as OPERATIONS,
        AdminOperation as AdminOperation,
        Group as Group,
        by_verb as by_verb,
        operations as operations,
    )
    from ._policies import (
        BacklogQuotaData as BacklogQuotaData,
        InactiveTopicPoliciesData as InactiveTopicPoliciesData,
        RetentionPoliciesData as RetentionPoliciesData,
        backlog_quotas_json as backlog_quotas_json,
    )
    from ._remote import LOCAL_ONLY_COMMANDS as LOCAL_ONLY_COMMANDS, RemoteAdmin as RemoteAdmin
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
    from ._wire import (
        CANCEL_RESULTS_HEADER as CANCEL_RESULTS_HEADER,
        ROLE_HEADER as ROLE_HEADER,
        ErrorBody as ErrorBody,
    )

# imported on first use (PEP 562): ``mledger standalone`` needs the authentication and
# authorization modules at start-up, not the admin operations, their stats models or httpx
_LAZY = {
    "..broker": ("RetentionPolicies",),
    "._api": ("Admin",),
    "._auth": ("WILDCARD", "Authorization", "NamespaceOperation", "TopicOperation"),
    "._authentication": (
        "AuthenticationError",
        "AuthenticationSettings",
        "AuthenticationThrottledError",
        "Authenticator",
        "Credentials",
        "TokenProvider",
        "add_authentication_arguments",
        "basic_auth_conf_from_env",
        "build_authenticator",
        "common_name",
        "load_token_file",
        "read_key",
        "settings_from_args",
    ),
    "._bodies": ("REQUESTS", "RESPONSES", "json_bytes", "parse_bool_body"),
    "._errors": ("SubscriptionAlreadyExistsError",),
    "._files": ("MAX_SETTING_FILE_BYTES", "read_setting_file"),
    "._messaging": ("Messaging",),
    "._namespaces": ("Namespaces",),
    "._operations": ("NON_PERSISTENT_BASE", "OPERATIONS", "AdminOperation", "Group", "by_verb", "operations"),
    "._policies": ("BacklogQuotaData", "InactiveTopicPoliciesData", "RetentionPoliciesData", "backlog_quotas_json"),
    "._remote": ("LOCAL_ONLY_COMMANDS", "RemoteAdmin"),
    "._requests": ("PAYLOAD_ERROR_PREFIX", "MessageIdItem", "ResetCursorData", "SkipMessageIdsRequest"),
    "._stats": (
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
    ),
    "._topics": ("CancelDelayedMessageResult", "Topics"),
    "._transport": ("AsyncRemoteAdmin",),
    "._wire": ("CANCEL_RESULTS_HEADER", "ROLE_HEADER", "ErrorBody"),
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
