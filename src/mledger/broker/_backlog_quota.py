"""Backlog quotas (Pulsar's ``BacklogQuota``): by time (``message_age``) and by size
(``destination_storage``).

A quota of type ``message_age`` is ``limitTime`` (seconds; <= 0: none), one of type
``destination_storage`` is ``limitSize`` (bytes; < 0: none), and each has a ``policy`` saying
what happens once the topic's backlog is over the limit (the oldest unacknowledged message
older than ``limitTime``; the backlog's estimated size at or over ``limitSize``):

* ``producer_request_hold`` (Pulsar's default): new producers are refused with
  ``ProducerBlockedQuotaExceededError``; connected ones carry on (Pulsar holds nothing more);
* ``producer_exception``: connected producers are disconnected at the check and new ones are
  refused with ``ProducerBlockedQuotaExceededException``;
* ``consumer_backlog_eviction``: the old backlog is dropped, as Pulsar's
  ``BacklogQuotaManager.dropBacklogForTimeLimit`` / ``dropBacklogForSizeLimit`` do.

The quota of a type in force for a topic is its own (topic policies' ``backLogQuotaMap``), else
its namespace's (``backlog_quota_map`` in the namespace's policies), else the broker's default
quota (``backlog_quota_default_limit_bytes``, ``backlog_quota_default_limit_second`` and
``backlog_quota_default_retention_policy``, Pulsar's ``BacklogQuotaManager.getDefaultQuota``).
The check runs every ``backlog_quota_check_interval_in_seconds`` on the broker's timer queue
(Pulsar's ``BrokerService.monitorBacklogQuota``: the size quota first, the time quota when the
size is within its limit), and when a producer is created (both types).

"Older" is measured as Pulsar measures it (``PersistentTopic.checkTimeBacklogExceeded``): with
``precise_time_based_backlog_quota_check`` the publish time of the oldest unacknowledged entry
of the slowest subscription, otherwise the close time of the ledger holding that
subscription's mark-delete position (the current, open ledger never counts). Eviction is the
same pair: precise, every subscription expires what is older than 90 % of the limit (the
message-TTL path); otherwise the slowest subscription skips whole closed ledgers older than the
limit. By size (``isSizeBacklogExceeded``): the managed ledger's estimated backlog size (after
the slowest durable subscription) at or over ``limitSize``; eviction skips entries on the
slowest subscription until the backlog is down to 90 % of the limit
(``dropBacklogForSizeLimit``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..core import InvalidRequestError, PreconditionFailedError, ServerError
from ._types import enum_member

__all__ = [
    "BacklogQuota",
    "BacklogQuotaExceededError",
    "BacklogQuotaType",
    "BacklogRetentionPolicy",
]

EVICTION_REDUCTION_FACTOR = 0.9
"""Pulsar's ``dropBacklogForTimeLimit``: a precise eviction brings the backlog down to 90 % of
the time limit."""


class BacklogQuotaType(StrEnum):
    """Pulsar's ``BacklogQuota.BacklogQuotaType``: the key in a backlog quota map."""

    DESTINATION_STORAGE = "destination_storage"
    MESSAGE_AGE = "message_age"

    @classmethod
    def parse(cls, value: object) -> BacklogQuotaType:
        """A type from its name; ``InvalidRequestError`` (400) naming a bad one."""
        return enum_member(cls, value, "invalid backlogQuotaType")


class BacklogRetentionPolicy(StrEnum):
    """Pulsar's ``BacklogQuota.RetentionPolicy``: what happens once a quota is exceeded."""

    PRODUCER_REQUEST_HOLD = "producer_request_hold"
    PRODUCER_EXCEPTION = "producer_exception"
    CONSUMER_BACKLOG_EVICTION = "consumer_backlog_eviction"

    @classmethod
    def parse(cls, value: object) -> BacklogRetentionPolicy:
        """A policy from its name; ``InvalidRequestError`` naming a bad one."""
        return enum_member(cls, value, "invalid backlog quota policy")


class BacklogQuotaExceededError(PreconditionFailedError):
    """A producer was refused: the topic's backlog quota is exceeded (Pulsar's
    ``TopicBacklogQuotaExceededException``: ``ProducerBlockedQuotaExceededError`` under
    ``producer_request_hold``, ``ProducerBlockedQuotaExceededException`` under
    ``producer_exception``)."""

    def __init__(self, message: str, policy: BacklogRetentionPolicy) -> None:
        super().__init__(message)
        self.policy = policy
        self.server_error = (
            ServerError.ProducerBlockedQuotaExceededError
            if policy is BacklogRetentionPolicy.PRODUCER_REQUEST_HOLD
            else ServerError.ProducerBlockedQuotaExceededException
        )


@dataclass(frozen=True)
class BacklogQuota:
    """Pulsar's ``BacklogQuota``: ``limit_time`` seconds (<= 0: no time limit), ``limit_size``
    bytes (< 0: no size limit) and the :class:`BacklogRetentionPolicy`. A quota of type
    ``message_age`` is enforced by its ``limit_time``, one of type ``destination_storage`` by
    its ``limit_size``."""

    limit_time: int = -1
    policy: BacklogRetentionPolicy = BacklogRetentionPolicy.PRODUCER_REQUEST_HOLD
    limit_size: int = -1

    def __post_init__(self) -> None:
        for name, json_name, java_type, bits in (
            ("limit_time", "limitTime", "int", 31),
            ("limit_size", "limitSize", "long", 63),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidRequestError(f"invalid backlog quota {json_name} {value!r}: expected an integer")
            if not -(1 << bits) <= value < 1 << bits:
                raise InvalidRequestError(
                    f"invalid backlog quota {json_name} {value}: out of range for a Java {java_type}"
                )
        object.__setattr__(self, "policy", BacklogRetentionPolicy.parse(self.policy))

    @property
    def limit_time_ms(self) -> int:
        """The time limit in ms, 0 when there is none."""
        return self.limit_time * 1000 if self.limit_time > 0 else 0

    def to_json(self) -> dict[str, Any]:
        """Pulsar's JSON form (``limit`` is the deprecated name of ``limitSize``)."""
        return {
            "limit": self.limit_size,
            "limitSize": self.limit_size,
            "limitTime": self.limit_time,
            "policy": self.policy.value,
        }

    @classmethod
    def from_json(cls, value: Any) -> BacklogQuota:
        """Parse Pulsar's JSON form; ``InvalidRequestError`` for anything else."""
        if not isinstance(value, dict):
            raise InvalidRequestError(f"a backlog quota must be a JSON object, got {value!r}")
        size = value.get("limitSize")
        if size is None:  # Pulsar's getLimitSize: the older ``limit`` when ``limitSize`` is null
            size = value.get("limit", -1)
        policy = value.get("policy") or BacklogRetentionPolicy.PRODUCER_REQUEST_HOLD
        return cls(value.get("limitTime", -1), policy, size)


def quota_from_map(value: Any, quota_type: BacklogQuotaType) -> BacklogQuota | None:
    """The quota of ``quota_type`` in a stored backlog quota map, None when it has none."""
    if not isinstance(value, dict) or value.get(quota_type.value) is None:
        return None
    return BacklogQuota.from_json(value[quota_type.value])


def check_quota_map(value: Any) -> None:
    """``InvalidRequestError`` unless ``value`` is a backlog quota map (namespace policies)."""
    if not isinstance(value, dict):
        raise InvalidRequestError(f"invalid backlog_quota_map {value!r}: expected a JSON object")
    for key, quota in value.items():
        BacklogQuotaType.parse(key)
        BacklogQuota.from_json(quota)


def exceeds_size_limit(backlog_size: int, limit_size: int) -> bool:
    """Pulsar's ``isSizeBacklogExceeded``: a size limit (bytes; < 0: none) the estimated backlog
    size has reached."""
    return limit_size >= 0 and backlog_size >= limit_size


def exceeds_time_limit(
    now_ms: int,
    limit_ms: int,
    oldest_publish_ms: int | None,
    ledger_closed_ms: int | None,
    precise: bool,
) -> bool:
    """Pulsar's ``checkTimeBacklogExceeded``: ``oldest_publish_ms`` is the publish time of the
    oldest unacknowledged entry (None: no backlog), ``ledger_closed_ms`` the close time of the
    ledger holding the slowest mark-delete (None while that ledger is open)."""
    if limit_ms <= 0:
        return False
    if precise:
        return oldest_publish_ms is not None and now_ms - oldest_publish_ms > limit_ms
    return ledger_closed_ms is not None and ledger_closed_ms > 0 and now_ms - ledger_closed_ms > limit_ms


def eviction_target_seconds(quota: BacklogQuota) -> int:
    """The age a precise eviction expires down to (90 % of the limit, in whole seconds)."""
    return int(EVICTION_REDUCTION_FACTOR * quota.limit_time)


def eviction_target_bytes(quota: BacklogQuota) -> float:
    """The backlog size a size eviction brings the backlog down to (90 % of the limit)."""
    return EVICTION_REDUCTION_FACTOR * quota.limit_size
