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
backlog quota by time      ``backLogQuotaMap``      ``backlog_quota_map``      ``backlog_quota_default_*``
=========================  =======================  =========================  ===============================

Validation is Pulsar's: a negative TTL is ``PreconditionFailedError`` (412, "Invalid value for
message TTL"); malformed inactive-topic policies or backlog quotas are ``InvalidRequestError``.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from ..core._errors import InvalidRequestError, PreconditionFailedError
from ._backlog_quota import BacklogQuota, BacklogQuotaType, check_quota_map, quota_from_map
from ._config import BrokerConfig
from ._inactive_topics import InactiveTopicPolicies
from ._names import TopicName

Owner = TypeVar("Owner", contravariant=True)


class FieldStore(Protocol[Owner]):
    """Policies stored as JSON fields per owner: :class:`~mledger.broker._namespaces.Namespaces`
    (a namespace name) and :class:`~mledger.broker._retention.TopicPolicies` (a topic name)."""

    def get_field(self, owner: Owner, key: str) -> Any: ...

    def set_field(self, owner: Owner, key: str, value: Any) -> None: ...


__all__ = ["TimePolicies", "check_time_policies"]

# (topic policies field, namespace policies field) per policy
MESSAGE_TTL = ("messageTTLInSeconds", "message_ttl_in_seconds")
INACTIVE_TOPICS = ("inactiveTopicPolicies", "inactive_topic_policies")
BACKLOG_QUOTAS = ("backLogQuotaMap", "backlog_quota_map")


def checked_message_ttl(seconds: object) -> int | None:
    """A TTL to store (None: remove); ``PreconditionFailedError`` (412) for a negative one,
    ``InvalidRequestError`` for a non-integer."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise InvalidRequestError(f"invalid message TTL {seconds!r}: expected seconds as an integer")
    if seconds < 0:
        raise PreconditionFailedError(f"Invalid value for message TTL: {seconds} (must be >= 0)")
    return seconds


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

    # -- message TTL ---------------------------------------------------------------------------
    def message_ttl_seconds(self, topic: TopicName) -> int:
        """The TTL in force for ``topic`` in seconds (0: none)."""
        value = self._lookup(topic, MESSAGE_TTL)
        return (
            value
            if isinstance(value, int) and not isinstance(value, bool)
            else self._config.ttl_duration_default_in_seconds
        )

    def set_namespace_message_ttl(self, namespace: str, seconds: int | None) -> None:
        """Set (None: remove) a namespace's message TTL."""
        self._namespaces.set_field(namespace, MESSAGE_TTL[1], checked_message_ttl(seconds))

    def set_topic_message_ttl(self, topic: TopicName, seconds: int | None) -> None:
        """Set (None: remove) a topic's own message TTL."""
        self._topics.set_field(topic, MESSAGE_TTL[0], checked_message_ttl(seconds))

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

    def set_namespace_inactive_topic_policies(self, namespace: str, policies: InactiveTopicPolicies | None) -> None:
        """Set (None: remove) a namespace's inactive-topic policy."""
        self._namespaces.set_field(namespace, INACTIVE_TOPICS[1], None if policies is None else policies.to_json())

    def set_topic_inactive_topic_policies(self, topic: TopicName, policies: InactiveTopicPolicies | None) -> None:
        """Set (None: remove) a topic's own inactive-topic policy."""
        self._topics.set_field(topic, INACTIVE_TOPICS[0], None if policies is None else policies.to_json())

    # -- backlog quotas ------------------------------------------------------------------------
    def backlog_quota(
        self, topic: TopicName, quota_type: BacklogQuotaType = BacklogQuotaType.MESSAGE_AGE
    ) -> BacklogQuota | None:
        """The backlog quota of ``quota_type`` in force for ``topic``, None when there is none."""
        own = quota_from_map(self._topics.get_field(topic, BACKLOG_QUOTAS[0]), quota_type)
        if own is None:
            own = quota_from_map(self._namespaces.get_field(topic.namespace_name, BACKLOG_QUOTAS[1]), quota_type)
        if own is not None:
            return own
        config = self._config
        if quota_type is BacklogQuotaType.MESSAGE_AGE and config.backlog_quota_default_limit_second > 0:
            return BacklogQuota(
                config.backlog_quota_default_limit_second,
                config.backlog_quota_default_retention_policy,  # type: ignore[arg-type]
            )
        return None

    def set_namespace_backlog_quota(
        self,
        namespace: str,
        quota: BacklogQuota | None,
        quota_type: BacklogQuotaType = BacklogQuotaType.MESSAGE_AGE,
    ) -> None:
        """Set (None: remove) a namespace's backlog quota of ``quota_type``."""
        current = self._namespaces.get_field(namespace, BACKLOG_QUOTAS[1])
        self._namespaces.set_field(namespace, BACKLOG_QUOTAS[1], _with_quota(current, quota_type, quota))

    def set_topic_backlog_quota(
        self,
        topic: TopicName,
        quota: BacklogQuota | None,
        quota_type: BacklogQuotaType = BacklogQuotaType.MESSAGE_AGE,
    ) -> None:
        """Set (None: remove) a topic's own backlog quota of ``quota_type``."""
        current = self._topics.get_field(topic, BACKLOG_QUOTAS[0])
        self._topics.set_field(topic, BACKLOG_QUOTAS[0], _with_quota(current, quota_type, quota))


def _with_quota(current: Any, quota_type: BacklogQuotaType, quota: BacklogQuota | None) -> dict[str, Any] | None:
    quotas = dict(current) if isinstance(current, dict) else {}
    if quota is None:
        quotas.pop(quota_type.value, None)
    else:
        quotas[quota_type.value] = quota.to_json()
    return quotas or None
