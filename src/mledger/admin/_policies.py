"""The JSON form of policies in requests and responses (Pulsar's ``RetentionPolicies``,
``BacklogQuota``, ``InactiveTopicPolicies``, the ``compactionThreshold`` long, the message TTL
int, schema compatibility strategy)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ..broker import (
    BacklogQuota,
    BacklogQuotaType,
    BacklogRetentionPolicy,
    InactiveTopicDeleteMode,
    InactiveTopicPolicies,
    RetentionPolicies,
    SchemaCompatibilityStrategy,
)
from ..core import InvalidRequestError

Policy = TypeVar("Policy")

__all__ = [
    "BacklogQuotaData",
    "InactiveTopicPoliciesData",
    "RetentionPoliciesData",
    "backlog_quotas_json",
    "parse_message_ttl_body",
    "parse_actions_body",
    "parse_compaction_threshold_body",
    "parse_enum_body",
    "parse_json_object_body",
    "parse_strategy_body",
]


def _json_body(raw: bytes | str, what: str) -> object:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequestError(f"Invalid {what} body: not JSON ({exc})") from None


def _policy_body(raw: bytes | str, what: str, from_json: Callable[[Any], Policy]) -> Policy:
    """A policy's JSON body read by ``from_json``; 400 "Invalid <what> body: ..." naming the problem."""
    value = _json_body(raw, what)
    try:
        return from_json(value)
    except InvalidRequestError as exc:
        raise InvalidRequestError(f"Invalid {what} body: {exc}") from None


def _integer_body(raw: bytes | str, what: str, bits: int, expected: str) -> int:
    """A JSON integer body within a signed Java type of ``bits`` + 1 bits; 400 "Invalid <what>
    body: <value> is not <expected>" otherwise."""
    value = _json_body(raw, what)
    if isinstance(value, bool) or not isinstance(value, int) or not -(1 << bits) <= value < 1 << bits:
        raise InvalidRequestError(f"Invalid {what} body: {value!r} is not {expected}")
    return value


def parse_compaction_threshold_body(raw: bytes | str) -> int:
    """A ``compactionThreshold`` request body (a JSON integer, bytes); 400 naming what is
    wrong (a negative value passes here: the broker refuses it with 412)."""
    return _integer_body(raw, "compactionThreshold", 63, "a long")


def parse_message_ttl_body(raw: bytes | str) -> int:
    """A namespace's ``messageTTL`` request body: a JSON integer, seconds (Pulsar's ``int``); 400
    naming what is wrong (a negative value passes here: the broker refuses it with 412)."""
    return _integer_body(raw, "message TTL", 31, "an int (seconds)")


class BacklogQuotaData(BaseModel):
    """Pulsar's ``BacklogQuota`` JSON: ``{"limitSize": 10737418240, "limitTime": -1, "policy":
    "producer_request_hold"}`` (``limit``, the older name of ``limitSize``, is written too and
    read when ``limitSize`` is absent). A quota of type ``destination_storage`` limits the
    backlog's size, one of type ``message_age`` its age."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    limit: int = Field(-1, description="deprecated: limitSize")
    limit_size: int = Field(-1, alias="limitSize", description="bytes (destination_storage); -1: none")
    limit_time: int = Field(-1, alias="limitTime", description="seconds (message_age); -1: none")
    policy: BacklogRetentionPolicy = Field(
        BacklogRetentionPolicy.PRODUCER_REQUEST_HOLD, description="what happens once the backlog is over the limit"
    )

    @classmethod
    def parse_body(cls, raw: bytes | str) -> BacklogQuota:
        """A request body as :class:`~mledger.broker.BacklogQuota`; 400 naming what is wrong."""
        return _policy_body(raw, "backlog quota", BacklogQuota.from_json)


def backlog_quotas_json(quotas: dict[BacklogQuotaType, BacklogQuota]) -> dict[str, object]:
    """A backlog quota map as Pulsar writes it: ``{"destination_storage": {...}, ...}``."""
    return {quota_type.value: quota.to_json() for quota_type, quota in sorted(quotas.items())}


class InactiveTopicPoliciesData(BaseModel):
    """Pulsar's ``InactiveTopicPolicies`` JSON: ``{"inactiveTopicDeleteMode":
    "delete_when_no_subscriptions", "maxInactiveDurationSeconds": 60, "deleteWhileInactive": true}``."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    inactive_topic_delete_mode: InactiveTopicDeleteMode = Field(
        InactiveTopicDeleteMode.DELETE_WHEN_NO_SUBSCRIPTIONS, alias="inactiveTopicDeleteMode"
    )
    max_inactive_duration_seconds: int = Field(60, alias="maxInactiveDurationSeconds", description="seconds")
    delete_while_inactive: bool = Field(True, alias="deleteWhileInactive")

    @classmethod
    def parse_body(cls, raw: bytes | str) -> InactiveTopicPolicies:
        """A request body as :class:`~mledger.broker.InactiveTopicPolicies`; 400 naming what is wrong."""
        return _policy_body(raw, "inactive topic policies", InactiveTopicPolicies.from_json)


class RetentionPoliciesData(BaseModel):
    """``{"retentionTimeInMinutes": 180, "retentionSizeInMB": 10240}``: -1 is unlimited, both 0
    keep nothing once consumed (absent fields are 0, as in Pulsar's class)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    retention_time_in_minutes: int = Field(0, alias="retentionTimeInMinutes", description="minutes; -1: unlimited")
    retention_size_in_mb: int = Field(0, alias="retentionSizeInMB", description="MB; -1: unlimited")

    @classmethod
    def parse_body(cls, raw: bytes | str) -> RetentionPolicies:
        """A request body as :class:`~mledger.broker.RetentionPolicies`; 400 naming what is wrong."""
        return _policy_body(raw, "retention policies", RetentionPolicies.from_json)

    @classmethod
    def of(cls, policies: RetentionPolicies) -> RetentionPoliciesData:
        """The JSON form of ``policies``."""
        return cls(
            retention_time_in_minutes=policies.retention_time_in_minutes,
            retention_size_in_mb=policies.retention_size_in_mb,
        )


def parse_enum_body(raw: bytes | str, what: str) -> str:
    """A request body holding one enum name, as Pulsar's admin client sends it (a JSON string,
    ``"FULL"``) or bare (``FULL``); 400 naming what is wrong."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = text.strip()
    if not text:
        raise InvalidRequestError(f"Invalid {what} body: empty")
    try:
        value = json.loads(text)
    except ValueError:
        value = text
    if not isinstance(value, str):
        raise InvalidRequestError(f"Invalid {what} body: expected a name, got {text[:40]!r}")
    return value


def parse_strategy_body(raw: bytes | str) -> SchemaCompatibilityStrategy:
    """A ``schemaCompatibilityStrategy`` request body; 400 for an unknown strategy."""
    return SchemaCompatibilityStrategy.parse(parse_enum_body(raw, "schema compatibility strategy"))


def parse_actions_body(raw: bytes | str, what: str = "actions") -> list[str]:
    """The body of a permission grant: a JSON array of strings, ``AuthAction`` names (``["produce",
    "consume"]``, Pulsar's ``grantPermissionOnNamespace``) or roles (``what="roles"``, its
    ``grantPermissionOnSubscription``); ``InvalidRequestError`` otherwise (the names themselves
    are checked when granted)."""
    try:
        value = json.loads(raw) if raw else None
    except ValueError as exc:
        raise InvalidRequestError(f"the body must be a JSON array of {what}: {exc}") from None
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise InvalidRequestError(f"the body must be a JSON array of {what}, got {value!r}")
    return value


def parse_json_object_body(raw: bytes | str, what: str, empty_ok: bool = True) -> dict[str, object]:
    """A JSON object body (``TenantInfo``, ``ClusterData``, ``Policies``); an empty body is ``{}``
    when ``empty_ok``. ``InvalidRequestError`` naming ``what`` otherwise."""
    if not raw or not raw.strip():
        if empty_ok:
            return {}
        raise InvalidRequestError(f"the body must be the {what} as a JSON object")
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise InvalidRequestError(f"the body must be the {what} as a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidRequestError(f"the body must be the {what} as a JSON object, got {value!r}")
    return value
