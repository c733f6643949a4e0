"""The policies the broker's expiry timers read: message TTL, inactive topics, backlog quotas.

Each is looked up as Pulsar's ``TopicPolicies`` resolve it: the topic's own (stored in its
topic policies under Pulsar's ``TopicPolicies`` field name; a partition's are its partitioned
topic's), else its namespace's (a field of the namespace's ``Policies`` JSON), else the broker's
setting. Two store reads per lookup; the timers look each topic up once per check.

=========================  =======================  =========================  ===============================
policy                     topic field              namespace field            broker setting
=========================  =======================  =========================  ===============================
message TTL (seconds)      ``messageTTLInSeconds``  ``message_ttl_in_seconds`` ``ttl_duration_default_in_seconds``
inactive topics            ``inactiveTopicPolicies`` ``inactive_topic_policies`` ``broker_delete_inactive_topics_*``
backlog quotas (by type)   ``backLogQuotaMap``      ``backlog_quota_map``      ``backlog_quota_default_*``
=========================  =======================  =========================  ===============================

Each level's own policy is read back as set (``namespace_*`` / ``topic_*``: None or ``{}`` when
unset), the policy in force as above.

Validation is Pulsar's: a negative TTL is ``PreconditionFailedError`` (412, the namespace's
"Invalid value for message TTL, message TTL must >= 0", the topic's "Invalid value for message
TTL"); malformed inactive-topic policies or backlog quotas are ``InvalidRequestError`` (400). A
backlog quota and a retention policy must agree (``AdminResource.checkBacklogQuota``: a quota
whose ``limitSize`` reaches the retention size, or whose ``limitTime`` reaches the retention
time, is 412): :func:`check_quota_fits_retention`, which the broker runs when either changes.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from ..core import InvalidRequestError, PreconditionFailedError
from ._backlog_quota import BacklogQuota, BacklogQuotaType, check_quota_map, quota_from_map
from ._config import BrokerConfig
from ._inactive_topics import InactiveTopicPolicies
from ._names import TopicName
from ._retention import RetentionPolicies

Owner = TypeVar("Owner", contravariant=True)


class FieldStore(Protocol[Owner]):
    """Policies stored as JSON fields per owner: :class:`~mledger.broker._namespaces.Namespaces`
    (a namespace name) and :class:`~mledger.broker._retention.TopicPolicies` (a topic name)."""

    def get_field(self, owner: Owner, key: str) -> Any: ...

    def set_field(self, owner: Owner, key: str, value: Any) -> None: ...


__all__ = [
    "NAMESPACE_TTL_ERROR",
    "TOPIC_TTL_ERROR",
    "TimePolicies",
    "check_quota_fits_retention",
    "check_time_policies",
]

# (topic policies field, namespace policies field) per policy
MESSAGE_TTL = ("messageTTLInSeconds", "message_ttl_in_seconds")
INACTIVE_TOPICS = ("inactiveTopicPolicies", "inactive_topic_policies")
BACKLOG_QUOTAS = ("backLogQuotaMap", "backlog_quota_map")


# The fields the quota check reads: (topic policies field, namespace policies field)
RETENTION = ("retentionPolicies", "retention_policies")

NAMESPACE_TTL_ERROR = "Invalid value for message TTL, message TTL must >= 0"
"""Pulsar's 412 reason for a negative namespace TTL (``NamespacesBase.internalSetNamespaceMessageTTLAsync``)."""
TOPIC_TTL_ERROR = "Invalid value for message TTL"
"""Pulsar's 412 reason for a negative topic TTL (``PersistentTopicsBase.internalSetMessageTTL``)."""
_INT32 = 1 << 31


def checked_message_ttl(seconds: object, refusal: str = NAMESPACE_TTL_ERROR) -> int | None:
    """A TTL to store (None: remove); ``PreconditionFailedError`` (412, ``refusal``) for a
    negative one, ``InvalidRequestError`` (400) for a non-integer or one beyond a Java ``int``."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not -_INT32 <= seconds < _INT32:
        raise InvalidRequestError(f"invalid message TTL {seconds!r}: expected seconds as a Java int")
    if seconds < 0:
        raise PreconditionFailedError(refusal)
    return seconds


def check_quota_fits_retention(quota: BacklogQuota, retention: RetentionPolicies | None, level: str) -> None:
    """Pulsar's ``AdminResource.checkBacklogQuota``: ``PreconditionFailedError`` (412) when a
    retention policy limits size or time and ``quota``'s ``limitSize`` (bytes) reaches the
    retention size, or its ``limitTime`` (seconds) the retention time; the message is Pulsar's
    for the quota's ``level`` (``"namespace"`` or ``"topic"``). O(1)."""
    if retention is None or (retention.retention_size_in_mb <= 0 and retention.retention_time_in_minutes <= 0):
        return
    size, minutes = retention.retention_size_in_mb, retention.retention_time_in_minutes
    if (size > 0 and quota.limit_size >= size * 1024 * 1024) or (minutes > 0 and quota.limit_time >= minutes * 60):
        raise PreconditionFailedError(
            f"Backlog Quota exceeds configured retention quota for {level}. Please increase retention quota and retry"
        )


def check_time_policies(body: dict[str, object]) -> None:
    """Check the fields of a namespace's ``Policies`` JSON this module reads (a new namespace's
    body); raises as the setters do."""
    checked_message_ttl(body.get(MESSAGE_TTL[1]))
    if body.get(INACTIVE_TOPICS[1]) is not None:
        InactiveTopicPolicies.from_json(body[INACTIVE_TOPICS[1]])
    if body.get(BACKLOG_QUOTAS[1]) is not None:
        check_quota_map(body[BACKLOG_QUOTAS[1]])


class TimePolicies:
    """Reads and writes the three policies (module docstring). Thread-safe (the stores'
    compare-and-set); existence checks are the broker's."""

    def __init__(self, namespaces: FieldStore[str], topics: FieldStore[TopicName], config: BrokerConfig) -> None:
        self._namespaces = namespaces
        self._topics = topics
        self._config = config

    def _lookup(self, topic: TopicName, fields: tuple[str, str]) -> Any:
        own = self._topics.get_field(topic, fields[0])
        return own if own is not None else self._namespaces.get_field(topic.namespace_name, fields[1])

    @staticmethod
    def _int(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    # -- message TTL ---------------------------------------------------------------------------
    def message_ttl_seconds(self, topic: TopicName) -> int:
        """The TTL in force for ``topic`` in seconds (0: none)."""
        value = self._int(self._lookup(topic, MESSAGE_TTL))
        return value if value is not None else self._config.ttl_duration_default_in_seconds

    def namespace_message_ttl(self, namespace: str) -> int | None:
        """A namespace's own message TTL in seconds, None when unset."""
        return self._int(self._namespaces.get_field(namespace, MESSAGE_TTL[1]))

    def topic_message_ttl(self, topic: TopicName) -> int | None:
        """A topic's own message TTL in seconds, None when unset."""
        return self._int(self._topics.get_field(topic, MESSAGE_TTL[0]))

    def set_namespace_message_ttl(self, namespace: str, seconds: int | None) -> None:
        """Set (None: remove) a namespace's message TTL."""
        self._namespaces.set_field(namespace, MESSAGE_TTL[1], checked_message_ttl(seconds))

    def set_topic_message_ttl(self, topic: TopicName, seconds: int | None) -> None:
        """Set (None: remove) a topic's own message TTL."""
        self._topics.set_field(topic, MESSAGE_TTL[0], checked_message_ttl(seconds, TOPIC_TTL_ERROR))

    # -- inactive topics -----------------------------------------------------------------------
    def inactive_topic_policies(self, topic: TopicName) -> InactiveTopicPolicies:
        """The inactive-topic policy in force for ``topic``."""
        value = self._lookup(topic, INACTIVE_TOPICS)
        if value is not None:
            return InactiveTopicPolicies.from_json(value)
        config = self._config
        duration = config.broker_delete_inactive_topics_max_inactive_duration_seconds
        return InactiveTopicPolicies(
            config.broker_delete_inactive_topics_mode,  # type: ignore[arg-type]
            config.broker_delete_inactive_topics_frequency_seconds if duration is None else duration,
            config.broker_delete_inactive_topics_enabled,
        )

    def namespace_inactive_topic_policies(self, namespace: str) -> InactiveTopicPolicies | None:
        """A namespace's own inactive-topic policy, None when unset."""
        value = self._namespaces.get_field(namespace, INACTIVE_TOPICS[1])
        return None if value is None else InactiveTopicPolicies.from_json(value)

    def topic_inactive_topic_policies(self, topic: TopicName) -> InactiveTopicPolicies | None:
        """A topic's own inactive-topic policy, None when unset."""
        value = self._topics.get_field(topic, INACTIVE_TOPICS[0])
        return None if value is None else InactiveTopicPolicies.from_json(value)

    def set_namespace_inactive_topic_policies(self, namespace: str, policies: InactiveTopicPolicies | None) -> None:
        """Set (None: remove) a namespace's inactive-topic policy."""
        self._namespaces.set_field(namespace, INACTIVE_TOPICS[1], None if policies is None else policies.to_json())

    def set_topic_inactive_topic_policies(self, topic: TopicName, policies: InactiveTopicPolicies | None) -> None:
        """Set (None: remove) a topic's own inactive-topic policy."""
        self._topics.set_field(topic, INACTIVE_TOPICS[0], None if policies is None else policies.to_json())

    # -- backlog quotas ------------------------------------------------------------------------
    def default_backlog_quota(self) -> BacklogQuota:
        """The broker's default quota (Pulsar's ``BacklogQuotaManager.getDefaultQuota``), of
        either type: ``backlog_quota_default_limit_bytes``, ``backlog_quota_default_limit_second``
        and ``backlog_quota_default_retention_policy``."""
        config = self._config
        return BacklogQuota(
            config.backlog_quota_default_limit_second,
            config.backlog_quota_default_retention_policy,  # type: ignore[arg-type]
            config.backlog_quota_default_limit_bytes,
        )

    def backlog_quota(self, topic: TopicName, quota_type: BacklogQuotaType) -> BacklogQuota:
        """The backlog quota of ``quota_type`` in force for ``topic`` (Pulsar's
        ``getBacklogQuota(type)``): its own, else its namespace's, else the broker's default."""
        own = quota_from_map(self._topics.get_field(topic, BACKLOG_QUOTAS[0]), quota_type)
        if own is None:
            own = quota_from_map(self._namespaces.get_field(topic.namespace_name, BACKLOG_QUOTAS[1]), quota_type)
        return own if own is not None else self.default_backlog_quota()

    def namespace_backlog_quotas(self, namespace: str) -> dict[BacklogQuotaType, BacklogQuota]:
        """A namespace's own backlog quotas by type (``{}`` when it has none)."""
        return _quotas(self._namespaces.get_field(namespace, BACKLOG_QUOTAS[1]))

    def topic_backlog_quotas(self, topic: TopicName) -> dict[BacklogQuotaType, BacklogQuota]:
        """A topic's own backlog quotas by type (``{}`` when it has none)."""
        return _quotas(self._topics.get_field(topic, BACKLOG_QUOTAS[0]))

    def applied_backlog_quotas(self, topic: TopicName) -> dict[BacklogQuotaType, BacklogQuota]:
        """Pulsar's ``internalGetBacklogQuota(applied=true)``: the topic's own quotas if it has
        any, else its namespace's if it has any, else the broker's default for each type."""
        quotas = self.topic_backlog_quotas(topic) or self.namespace_backlog_quotas(topic.namespace_name)
        return quotas or {quota_type: self.default_backlog_quota() for quota_type in BacklogQuotaType}

    def set_namespace_backlog_quota(
        self,
        namespace: str,
        quota: BacklogQuota | None,
        quota_type: BacklogQuotaType = BacklogQuotaType.MESSAGE_AGE,
    ) -> None:
        """Set (None: remove) a namespace's backlog quota of ``quota_type``. A quota is checked
        against the namespace's retention policy first, as Pulsar's ``setBacklogQuotaAsync``
        does: a ``destination_storage`` quota itself, any other the broker's default quota (412)."""
        if quota is not None:
            retention = self._retention(self._namespaces.get_field(namespace, RETENTION[1]))
            checked = quota if quota_type is BacklogQuotaType.DESTINATION_STORAGE else self.default_backlog_quota()
            check_quota_fits_retention(checked, retention, "namespace")
        current = self._namespaces.get_field(namespace, BACKLOG_QUOTAS[1])
        self._namespaces.set_field(namespace, BACKLOG_QUOTAS[1], _with_quota(current, quota_type, quota))

    def set_topic_backlog_quota(
        self,
        topic: TopicName,
        quota: BacklogQuota | None,
        quota_type: BacklogQuotaType = BacklogQuotaType.MESSAGE_AGE,
    ) -> None:
        """Set (None: remove) a topic's own backlog quota of ``quota_type``, checked first (a
        removal: the broker's default quota) against the retention the topic has, its own
        else its namespace's (Pulsar's ``internalSetBacklogQuota``; 412)."""
        retention = self._retention(self._lookup(topic, RETENTION))
        check_quota_fits_retention(quota if quota is not None else self.default_backlog_quota(), retention, "topic")
        current = self._topics.get_field(topic, BACKLOG_QUOTAS[0])
        self._topics.set_field(topic, BACKLOG_QUOTAS[0], _with_quota(current, quota_type, quota))

    # -- retention against the quotas --------------------------------------------------------
    def check_namespace_retention(self, namespace: str, retention: RetentionPolicies) -> None:
        """Pulsar's ``internalSetRetention`` check: a namespace with backlog quotas takes a
        retention policy only if its ``destination_storage`` quota (else the broker's default)
        fits it; 412 "Retention Quota must exceed configured backlog quota for namespace."."""
        quotas = self.namespace_backlog_quotas(namespace)
        if not quotas:
            return
        quota = quotas.get(BacklogQuotaType.DESTINATION_STORAGE, self.default_backlog_quota())
        try:
            check_quota_fits_retention(quota, retention, "namespace")
        except PreconditionFailedError:
            raise PreconditionFailedError(
                "Retention Quota must exceed configured backlog quota for namespace."
            ) from None

    def check_topic_retention(self, topic: TopicName, retention: RetentionPolicies) -> None:
        """Pulsar's topic ``internalSetRetention`` check: each type's quota, the topic's own else
        its namespace's (else the broker's default), must fit the retention policy (412)."""
        own, namespace = self.topic_backlog_quotas(topic), self.namespace_backlog_quotas(topic.namespace_name)
        for quota_type in BacklogQuotaType:
            quota = own.get(quota_type) or namespace.get(quota_type) or self.default_backlog_quota()
            try:
                check_quota_fits_retention(quota, retention, "topic")
            except PreconditionFailedError:
                raise PreconditionFailedError(
                    "Retention Quota must exceed configured backlog quota for topic. "
                    "Please increase retention quota and retry"
                ) from None

    @staticmethod
    def _retention(value: Any) -> RetentionPolicies | None:
        return None if value is None else RetentionPolicies.from_json(value)


def _quotas(value: Any) -> dict[BacklogQuotaType, BacklogQuota]:
    """The quotas of a stored backlog quota map, by type."""
    found = {quota_type: quota_from_map(value, quota_type) for quota_type in BacklogQuotaType}
    return {quota_type: quota for quota_type, quota in found.items() if quota is not None}


def _with_quota(current: Any, quota_type: BacklogQuotaType, quota: BacklogQuota | None) -> dict[str, Any] | None:
    quotas = dict(current) if isinstance(current, dict) else {}
    if quota is None:
        quotas.pop(quota_type.value, None)
    else:
        quotas[quota_type.value] = quota.to_json()
    return quotas or None
