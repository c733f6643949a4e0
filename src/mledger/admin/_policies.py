"""The JSON form of policies in requests and responses (Pulsar's ``RetentionPolicies``, the
``compactionThreshold`` long,
schema compatibility strategy)."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field

from ..broker._retention import RetentionPolicies
from ..broker._schema_compat import SchemaCompatibilityStrategy
from ..core._errors import InvalidRequestError

__all__ = [
    "RetentionPoliciesData",
    "parse_actions_body",
    "parse_compaction_threshold_body",
    "parse_enum_body",
    "parse_json_object_body",
    "parse_strategy_body",
]


def parse_compaction_threshold_body(raw: bytes | str) -> int:
    """A ``compactionThreshold`` request body (a JSON integer, bytes); 400 naming what is
    wrong (a negative value passes here: the broker refuses it with 412)."""
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequestError(f"Invalid compactionThreshold body: not JSON ({exc})") from None
    if isinstance(value, bool) or not isinstance(value, int) or not -(1 << 63) <= value < 1 << 63:
        raise InvalidRequestError(f"Invalid compactionThreshold body: {value!r} is not a long")
    return value


class RetentionPoliciesData(BaseModel):
    """``{"retentionTimeInMinutes": 180, "retentionSizeInMB": 10240}``: -1 is unlimited, both 0
    keep nothing once consumed (absent fields are 0, as in Pulsar's class)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    retention_time_in_minutes: int = Field(0, alias="retentionTimeInMinutes", description="minutes; -1: unlimited")
    retention_size_in_mb: int = Field(0, alias="retentionSizeInMB", description="MB; -1: unlimited")

    @classmethod
    def parse_body(cls, raw: bytes | str) -> RetentionPolicies:
        """A request body as :class:`~mledger.broker.RetentionPolicies`; 400 naming what is wrong."""
        try:
            value = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidRequestError(f"Invalid retention policies body: not JSON ({exc})") from None
        try:
            return RetentionPolicies.from_json(value)
        except InvalidRequestError as exc:
            raise InvalidRequestError(f"Invalid retention policies body: {exc}") from None

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
