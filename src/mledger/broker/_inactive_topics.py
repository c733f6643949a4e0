"""Inactive topic deletion (Pulsar's ``PersistentTopic.checkGC`` and ``InactiveTopicPolicies``).

Every ``broker_delete_inactive_topics_frequency_seconds`` the broker's ``checkGC`` timer looks at
each loaded topic whose policy says ``deleteWhileInactive``. A topic is *active* while producers
or consumers are connected, and also, by the policy's ``inactiveTopicDeleteMode``:

* ``delete_when_no_subscriptions`` (Pulsar's default): while it has subscriptions;
* ``delete_when_subscriptions_caught_up``: while a subscription has a backlog.

An active topic's ``lastActive`` time is set to now; an inactive one is deleted once it has
been inactive for ``maxInactiveDurationSeconds`` (measured from its load or its last active
check, on the broker's clock) and its retention time does not cover that span (Pulsar's
``shouldTopicBeRetained``: a retention time of -1 keeps it forever). Deleting takes its data, its
cursors (with ``delete_when_subscriptions_caught_up``, its caught-up subscriptions) and its
policies, as ``delete_topic`` does. A partition is deleted alone (its partitioned topic's
metadata stays, and the partition is created again empty when next used), unless
``broker_delete_inactive_partitioned_topic_metadata_enabled`` and every partition is gone.
System topics (a local name starting ``__``) are never deleted.

The policy in force for a topic: its own (topic policies' ``inactiveTopicPolicies``), else its
namespace's (``inactive_topic_policies``), else the broker's settings
(``broker_delete_inactive_topics_mode``, ``..._max_inactive_duration_seconds`` (None: the check
frequency) and ``..._enabled``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..core import InvalidRequestError
from ._types import enum_member

__all__ = ["InactiveTopicDeleteMode", "InactiveTopicPolicies"]


class InactiveTopicDeleteMode(StrEnum):
    """Pulsar's ``InactiveTopicDeleteMode``."""

    DELETE_WHEN_NO_SUBSCRIPTIONS = "delete_when_no_subscriptions"
    DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP = "delete_when_subscriptions_caught_up"


@dataclass(frozen=True)
class InactiveTopicPolicies:
    """Pulsar's ``InactiveTopicPolicies``: the delete mode, the inactive time (seconds) after
    which a topic goes, and whether inactive topics are deleted at all."""

    inactive_topic_delete_mode: InactiveTopicDeleteMode = InactiveTopicDeleteMode.DELETE_WHEN_NO_SUBSCRIPTIONS
    max_inactive_duration_seconds: int = 60
    delete_while_inactive: bool = True

    def __post_init__(self) -> None:
        mode = enum_member(InactiveTopicDeleteMode, self.inactive_topic_delete_mode, "invalid inactiveTopicDeleteMode")
        object.__setattr__(self, "inactive_topic_delete_mode", mode)
        seconds = self.max_inactive_duration_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 0:
            raise InvalidRequestError(f"invalid maxInactiveDurationSeconds {seconds!r}: expected seconds >= 0")
        if not isinstance(self.delete_while_inactive, bool):
            raise InvalidRequestError(f"invalid deleteWhileInactive {self.delete_while_inactive!r}: expected a boolean")

    def to_json(self) -> dict[str, Any]:
        """Pulsar's JSON form."""
        return {
            "inactiveTopicDeleteMode": self.inactive_topic_delete_mode.value,
            "maxInactiveDurationSeconds": self.max_inactive_duration_seconds,
            "deleteWhileInactive": self.delete_while_inactive,
        }

    @classmethod
    def from_json(cls, value: Any) -> InactiveTopicPolicies:
        """Parse Pulsar's JSON form (absent fields take Pulsar's defaults); ``InvalidRequestError``."""
        if not isinstance(value, dict):
            raise InvalidRequestError(f"inactive topic policies must be a JSON object, got {value!r}")
        return cls(
            value.get("inactiveTopicDeleteMode", InactiveTopicDeleteMode.DELETE_WHEN_NO_SUBSCRIPTIONS),
            value.get("maxInactiveDurationSeconds", 60),
            value.get("deleteWhileInactive", True),
        )
