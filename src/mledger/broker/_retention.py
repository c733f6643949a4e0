"""Retention policies of namespaces and topics (Pulsar's ``RetentionPolicies``).

A policy is ``retentionTimeInMinutes`` and ``retentionSizeInMB`` (both 0: keep nothing once
consumed; -1: unlimited for that limit). It is set on a namespace (``pulsar-admin namespaces
set-retention``, stored in the namespace's policies as ``retention_policies``, Pulsar's field
name) or on a topic (topic policies, ``pulsar-admin topics set-retention``, stored at
``/admin/topic-policies/<tenant>/<namespace>/persistent/<topic>`` as ``{"retentionPolicies":
...}``, a partitioned topic's covering its partitions). The policy in force for a topic is its
own, else its namespace's, else the broker's default (the retention settings of
``BrokerConfig.managed_ledger_config``); the broker applies it to the topic's managed ledger
(``ManagedLedger.set_config``) when the topic opens and whenever a policy changes.

Validation is Pulsar's: each limit must fit its Java type (``retentionTimeInMinutes`` an
``int``, ``retentionSizeInMB`` a ``long``; Pulsar's JSON reader refuses a larger number with 400,
and so does mledger, naming the value), then ``AdminResource.validateRetentionPolicies``: each
limit >= -1, and a single limit of 0 beside a non-zero one is refused (use -1 to ignore a limit;
both 0 disable retention), with Pulsar's messages and HTTP 412.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core import InvalidRequestError, PreconditionFailedError, StateCorruptedError
from ..storage import Store
from ._names import TopicName
from ._stored_json import decode_object, update_object

__all__ = ["TOPIC_POLICIES_ROOT", "RetentionPolicies", "TopicPolicies"]

TOPIC_POLICIES_ROOT = "/admin/topic-policies"
_MINUTE_MS = 60_000
_BOUNDS = {
    # field: (JSON name, Java type, lowest, highest)
    "retention_time_in_minutes": ("retentionTimeInMinutes", "int", -(1 << 31), (1 << 31) - 1),
    "retention_size_in_mb": ("retentionSizeInMB", "long", -(1 << 63), (1 << 63) - 1),
}


@dataclass(frozen=True)
class RetentionPolicies:
    """Pulsar's ``RetentionPolicies``: minutes and MB; -1 is unlimited, 0 keeps nothing."""

    retention_time_in_minutes: int = 0
    retention_size_in_mb: int = 0

    def __post_init__(self) -> None:
        for name in ("retention_time_in_minutes", "retention_size_in_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidRequestError(f"{name} must be an integer, got {value!r}")

    def validate(self) -> None:
        """Pulsar's rules: :meth:`check_range` (400), then ``validateRetentionPolicies``
        (``PreconditionFailedError``, 412)."""
        self.check_range()
        if self.retention_size_in_mb < -1:
            raise PreconditionFailedError("Invalid retention policy: size limit must be >= -1")
        if self.retention_time_in_minutes < -1:
            raise PreconditionFailedError("Invalid retention policy: time limit must be >= -1")
        if (self.retention_time_in_minutes == 0) != (self.retention_size_in_mb == 0):
            raise PreconditionFailedError(
                "Invalid retention policy: Setting a single time or size limit to 0 is invalid when one of the "
                "limits has a non-zero value. Use the value of -1 instead of 0 to ignore a specific limit. To "
                "disable retention both limits must be set to 0."
            )

    def check_range(self) -> None:
        """Raise ``InvalidRequestError`` (400) naming a limit that does not fit its Java type
        (Pulsar's clients could not read it back)."""
        for field, (json_name, java_type, lowest, highest) in _BOUNDS.items():
            value = getattr(self, field)
            if not lowest <= value <= highest:
                raise InvalidRequestError(
                    f"Invalid retention policy: {json_name} {value} is out of range for a Java {java_type} "
                    f"({lowest}..{highest}; -1 is unlimited)"
                )

    @property
    def retention_time_ms(self) -> int:
        """The time limit as ``ManagedLedgerConfig.retention_time_ms`` (-1 stays -1)."""
        return -1 if self.retention_time_in_minutes < 0 else self.retention_time_in_minutes * _MINUTE_MS

    @classmethod
    def from_ledger_config(cls, retention_time_ms: int, retention_size_in_mb: int) -> RetentionPolicies:
        """The policy a managed ledger's settings express (minutes rounded down)."""
        minutes = -1 if retention_time_ms < 0 else retention_time_ms // _MINUTE_MS
        return cls(minutes, retention_size_in_mb)

    def to_json(self) -> dict[str, int]:
        """Pulsar's JSON form."""
        return {
            "retentionTimeInMinutes": self.retention_time_in_minutes,
            "retentionSizeInMB": self.retention_size_in_mb,
        }

    @classmethod
    def from_json(cls, value: Any) -> RetentionPolicies:
        """Parse Pulsar's JSON form (absent fields are 0, as in Pulsar's class); raises
        ``InvalidRequestError`` (400) for anything else."""
        if not isinstance(value, dict):
            raise InvalidRequestError(f"retention policies must be a JSON object, got {value!r}")
        unknown = set(value) - {"retentionTimeInMinutes", "retentionSizeInMB"}
        if unknown:
            raise InvalidRequestError(f"unknown retention policy fields: {sorted(unknown)}")
        return cls(value.get("retentionTimeInMinutes", 0), value.get("retentionSizeInMB", 0))


class TopicPolicies:
    """Topic-level policies in the metadata store (compare-and-set, thread-safe): retention,
    the compaction threshold, and any other ``TopicPolicies`` field through :meth:`get_field` /
    :meth:`set_field`."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @staticmethod
    def path(topic: TopicName) -> str:
        """Where a topic's policies live; a partition's are its partitioned topic's."""
        owner = topic.partitioned_topic if topic.is_partition else topic
        return f"{TOPIC_POLICIES_ROOT}/{owner.managed_ledger_name}"

    def retention(self, topic: TopicName) -> RetentionPolicies | None:
        """The topic's own retention policy, None when it has none."""
        stored = self._store.get(self.path(topic))
        if stored is None:
            return None
        policies = decode_object(self.path(topic), stored.data)
        value = policies.get("retentionPolicies")
        try:
            return None if value is None else RetentionPolicies.from_json(value)
        except InvalidRequestError as exc:
            raise StateCorruptedError(f"topic policies at {self.path(topic)}: {exc}") from None

    def set_retention(self, topic: TopicName, policies: RetentionPolicies | None) -> None:
        """Set (or with None, remove) the topic's retention policy."""
        self.set_field(topic, "retentionPolicies", None if policies is None else policies.to_json())

    def compaction_threshold(self, topic: TopicName) -> int | None:
        """The topic's own ``compactionThreshold`` (bytes), None when it has none."""
        value = self.get_field(topic, "compactionThreshold")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def set_compaction_threshold(self, topic: TopicName, threshold: int | None) -> None:
        """Set (or with None, remove) the topic's compaction threshold."""
        self.set_field(topic, "compactionThreshold", threshold)

    def get_field(self, topic: TopicName, key: str) -> Any:
        """One stored topic policy by its Pulsar ``TopicPolicies`` field name (None when unset)."""
        stored = self._store.get(self.path(topic))
        return None if stored is None else decode_object(self.path(topic), stored.data).get(key)

    def set_field(self, topic: TopicName, key: str, value: Any) -> None:
        """Set (or with None, remove) one topic policy by its ``TopicPolicies`` field name."""

        def change(current: dict[str, Any]) -> None:
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value

        update_object(self._store, self.path(topic), change, str(topic), delete_empty=True)

    def delete(self, topic: TopicName) -> None:
        """Forget every policy of the topic (it was deleted)."""
        self._store.delete(self.path(topic))
