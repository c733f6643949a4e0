"""The bodies of the admin operations: one codec per kind the operation table names
(:mod:`mledger.admin._operations`, its ``request`` and ``response`` columns).

A request kind (:data:`REQUESTS`) is read by the REST server from the raw body into the argument
the admin call takes, with Pulsar's error messages (400 ``InvalidRequestError``), and written by
:class:`~mledger.admin.RemoteAdmin` from that argument; ``schema``, ``description`` and
``required`` document it in ``/openapi.json``. A response kind (:data:`RESPONSES`) is written by
the server from what the admin call returns (compact JSON, as Pulsar's Jackson writes it) and read
back by ``RemoteAdmin`` from the decoded JSON into the same value (``ValueError``, ``TypeError``,
``KeyError`` or ``InvalidRequestError`` for an answer that is not one); ``model``, when set,
documents it.

A new operation whose bodies are of a kind listed here needs no codec of its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..broker import (
    ArmedFault,
    BacklogQuota,
    BacklogQuotaType,
    CompactionStatus,
    FaultScenario,
    FaultSpecError,
    FaultStats,
    FiredFault,
    InactiveTopicPolicies,
    LongRunningProcessStatus,
    RetentionPolicies,
    SchemaCompatibilityStrategy,
    TenantInfo,
    parse_fault,
    parse_scenario,
)
from ..codec import MessageId
from ..core import InvalidRequestError
from ._clock import ClockReading
from ._nonpersistent import NonPersistentTopicStatsData
from ._policies import (
    BacklogQuotaData,
    InactiveTopicPoliciesData,
    RetentionPoliciesData,
    backlog_quotas_json,
    parse_actions_body,
    parse_compaction_threshold_body,
    parse_enum_body,
    parse_json_object_body,
    parse_message_ttl_body,
    parse_strategy_body,
)
from ._requests import ResetCursorData, SkipMessageIdsRequest, partitions_from_body
from ._stats import (
    PartitionedTopicInternalStats,
    PartitionedTopicMetadata,
    PartitionedTopicStatsData,
    PersistentTopicInternalStats,
    TopicStatsData,
)

__all__ = ["REQUESTS", "RESPONSES", "RequestBody", "ResponseBody", "json_bytes", "message_id_json", "parse_bool_body"]


@dataclass(frozen=True, slots=True)
class RequestBody:
    """A request body kind: ``read`` (server: raw bytes -> the call's argument; 400 naming what
    is wrong), ``write`` (client: the argument -> the body, None for none) and its documentation."""

    read: Callable[[bytes], Any]
    write: Callable[[Any], bytes | None]
    schema: dict[str, Any]
    description: str | None = None
    required: bool = True


@dataclass(frozen=True, slots=True)
class ResponseBody:
    """A response body kind: ``write`` (server: the call's result -> JSON bytes), ``read``
    (client: the decoded JSON -> that result) and the model documenting it, if any."""

    write: Callable[[Any], bytes]
    read: Callable[[Any], Any]
    model: Any = None


def json_bytes(value: Any) -> bytes:
    """``value`` as compact JSON."""
    return json.dumps(value, separators=(",", ":")).encode()


def message_id_json(mid: MessageId) -> dict[str, int]:
    """Pulsar's ``MessageIdImpl`` as its REST API writes it."""
    return {"ledgerId": mid.ledger_id, "entryId": mid.entry_id, "partitionIndex": mid.partition}


def parse_bool_body(raw: bytes) -> bool:
    """A ``true`` / ``false`` body (any case, blanks around); 400 otherwise."""
    body = raw.strip().lower()
    if body not in (b"true", b"false"):
        raise InvalidRequestError(f"the body must be true or false, got {body[:20]!r}")
    return body == b"true"


def _bool_body(value: Any) -> bytes:
    if not isinstance(value, bool):
        raise InvalidRequestError(f"invalid body {value!r}: expected true or false")
    return json_bytes(value)


def _int_body(value: Any) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequestError(f"invalid body {value!r}: expected an integer")
    return json_bytes(value)


def _expiry_position(raw: bytes) -> ResetCursorData:
    body = ResetCursorData.parse_body(raw, "expire messages", allow_excluded=True)
    if body is None:
        raise InvalidRequestError('Invalid expire messages body: empty (expected {"ledgerId": L, "entryId": E})')
    return body


def _names_body(names: Any) -> bytes:
    return json_bytes(sorted(names))


def _reset_position(raw: bytes) -> MessageId:
    body = ResetCursorData.parse_body(raw, "reset cursor")
    if body is None:
        raise InvalidRequestError('Invalid reset cursor body: empty (expected {"ledgerId": L, "entryId": E})')
    return body.to_message_id()


def _skip_body(request: Any) -> bytes:
    if isinstance(request, SkipMessageIdsRequest):
        return request.to_body("messageId").encode()
    if isinstance(request, str):
        return request.encode("utf-8")
    if isinstance(request, (bytes, bytearray)):
        return bytes(request)
    raise InvalidRequestError(f"invalid skip request {request!r}: expected a SkipMessageIdsRequest or a JSON body")


def _tenant_body(info: TenantInfo | Mapping[str, object]) -> bytes:
    return json_bytes(info.to_json() if isinstance(info, TenantInfo) else dict(info))


def _json_body(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise FaultSpecError(f"the body must be {what} as JSON: {exc}") from None


def _fault_body(fault: Any) -> bytes:
    return json_bytes(parse_fault(fault).model_dump(exclude_none=True))


def _scenario_body(scenario: Any) -> bytes:
    if not isinstance(scenario, FaultScenario):
        scenario = parse_scenario(scenario, "the scenario")
    return json_bytes(scenario.model_dump(exclude_none=True))


def _armed_fault(value: Any) -> ArmedFault:
    return ArmedFault(int(value["faultId"]), parse_fault(value["fault"]), int(value["matches"]), int(value["fired"]))


def _fired_fault(value: Any) -> FiredFault:
    return FiredFault(
        int(value["faultId"]),
        str(value["action"]),
        value.get("command"),
        value.get("topic"),
        value.get("subscription"),
        value.get("client"),
        str(value["detail"]),
        int(value["atMs"]),
    )


def _fault_stats_json(stats: FaultStats) -> bytes:
    return json_bytes(
        {"seed": stats.seed, "armed": stats.armed, "fired": stats.fired, "firedByAction": dict(stats.fired_by_action)}
    )


def _fault_stats(value: Any) -> FaultStats:
    return FaultStats(int(value["seed"]), int(value["armed"]), int(value["fired"]), dict(value["firedByAction"]))


def _fault_ids(value: Any) -> list[int]:
    if not isinstance(value, list) or not all(type(v) is int for v in value):
        raise TypeError("not a list of fault ids")
    return value


def _advance_body(raw: bytes) -> int:
    """A clock advance's body: a JSON integer of milliseconds; 400 naming a value that is not
    one (its sign is the broker's to check: :meth:`~mledger.broker.Broker.advance_clock`)."""
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        text = raw[:100].decode(errors="replace")
        raise InvalidRequestError(
            f"invalid clock advance {text!r}: expected a positive integer of milliseconds"
        ) from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequestError(f"invalid clock advance {value!r}: expected a positive integer of milliseconds")
    return value


def _clock_reading(value: Any) -> ClockReading:
    return ClockReading(int(value["nowMs"]), bool(value["manual"]))


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}
_NAMES: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
_AUTO_UPDATE = "schema auto-update compatibility strategy"

REQUESTS: dict[str, RequestBody] = {
    "int": RequestBody(partitions_from_body, json_bytes, {"type": "integer", "minimum": 1}, "the number of partitions"),
    "long": RequestBody(
        parse_compaction_threshold_body,
        json_bytes,
        {"type": "integer", "format": "int64"},
        "bytes not compacted yet that trigger compaction",
    ),
    "bool": RequestBody(parse_bool_body, _bool_body, {"type": "boolean"}, "true or false"),
    "list[AuthAction]": RequestBody(parse_actions_body, _names_body, _NAMES, 'actions, e.g. ["produce", "consume"]'),
    "list[str]": RequestBody(
        lambda raw: parse_actions_body(raw, "roles"), _names_body, _NAMES, 'roles, e.g. ["billing"]'
    ),
    "RetentionPoliciesData": RequestBody(
        RetentionPoliciesData.parse_body,
        lambda policies: json_bytes(policies.to_json()),
        _ref("RetentionPoliciesData"),
        "retentionTimeInMinutes and retentionSizeInMB",
    ),
    "SchemaCompatibilityStrategy": RequestBody(
        parse_strategy_body,
        lambda strategy: json_bytes(SchemaCompatibilityStrategy.parse(strategy).value),
        {"type": "string"},
        'the strategy, e.g. "BACKWARD"',
    ),
    "SchemaAutoUpdateCompatibilityStrategy": RequestBody(
        lambda raw: parse_enum_body(raw, _AUTO_UPDATE), json_bytes, {"type": "string"}, 'the policy, e.g. "Full"'
    ),
    "Policies": RequestBody(
        lambda raw: parse_json_object_body(raw, "namespace's Policies"),
        lambda policies: json_bytes(dict(policies)) if policies else None,
        _OBJECT,
        required=False,
    ),
    "ClusterData": RequestBody(
        lambda raw: parse_json_object_body(raw, "ClusterData"),
        lambda data: json_bytes(dict(data or {})),
        _OBJECT,
        "ClusterData",
        required=False,
    ),
    "TenantInfo": RequestBody(
        lambda raw: parse_json_object_body(raw, "TenantInfo"), _tenant_body, _OBJECT, "TenantInfo", required=False
    ),
    "SkipMessageIdsBody": RequestBody(
        SkipMessageIdsRequest.parse_body, _skip_body, _ref("SkipMessageIdsBody"), "the messages to skip"
    ),
    "ResetCursorData": RequestBody(
        _reset_position,
        lambda position: ResetCursorData.of(position).to_body().encode(),
        _ref("ResetCursorData"),
        "the message id to reset to",
    ),
    "FaultSpec": RequestBody(
        lambda raw: parse_fault(_json_body(raw, "a fault")),
        _fault_body,
        _OBJECT,
        'a fault, e.g. {"action": "error", "command": "PRODUCER", "error": "TopicNotFound"}',
    ),
    "milliseconds": RequestBody(
        _advance_body, json_bytes, {"type": "integer", "format": "int64"}, "how far to advance, in milliseconds"
    ),
    "FaultScenario": RequestBody(
        lambda raw: parse_scenario(_json_body(raw, "a scenario"), "the scenario"),
        _scenario_body,
        _OBJECT,
        'a scenario: {"seed": 7, "faults": [...]}',
    ),
    "ExpiryPosition": RequestBody(
        _expiry_position,
        lambda position: (
            (position if isinstance(position, ResetCursorData) else ResetCursorData.of(position)).to_body().encode()
        ),
        _ref("ResetCursorData"),
        "the message id to expire up to (isExcluded: the one after it)",
    ),
    "seconds": RequestBody(
        parse_message_ttl_body, _int_body, {"type": "integer", "format": "int32"}, "the message TTL in seconds"
    ),
    "BacklogQuota": RequestBody(
        BacklogQuotaData.parse_body,
        lambda quota: json_bytes(quota.to_json()),
        _ref("BacklogQuotaData"),
        "limitSize (destination_storage), limitTime (message_age) and policy",
    ),
    "InactiveTopicPolicies": RequestBody(
        InactiveTopicPoliciesData.parse_body,
        lambda policies: json_bytes(policies.to_json()),
        _ref("InactiveTopicPoliciesData"),
        "inactiveTopicDeleteMode, maxInactiveDurationSeconds and deleteWhileInactive",
    ),
}


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("not a list of strings")
    return value


def _grants(value: Any) -> dict[str, list[str]]:
    if not isinstance(value, dict):
        raise TypeError("not permissions")
    return {str(role): sorted(str(a) for a in actions) for role, actions in sorted(value.items())}


def _object(value: Any) -> dict[str, object]:
    if not isinstance(value, dict):
        raise TypeError("not a JSON object")
    return value


def _exactly(kind: type, nullable: bool = True) -> Callable[[Any], Any]:
    """A reader of a JSON scalar of type ``kind`` (``null`` too when ``nullable``)."""

    def read(value: Any) -> Any:
        if type(value) is not kind and not (nullable and value is None):
            raise TypeError(f"not a {kind.__name__}")
        return value

    return read


def _message_id(value: Any) -> MessageId:
    return MessageId(int(value["ledgerId"]), int(value["entryId"]), int(value.get("partitionIndex", -1)))


def _process_status(value: Any) -> LongRunningProcessStatus:
    return LongRunningProcessStatus(CompactionStatus(value["status"]), str(value.get("lastError") or ""))


def _backlog_quotas(value: Any) -> dict[BacklogQuotaType, BacklogQuota]:
    return {BacklogQuotaType.parse(key): BacklogQuota.from_json(quota) for key, quota in _object(value).items()}


def _model(cls: type[BaseModel]) -> ResponseBody:
    return ResponseBody(lambda stats: stats.to_json(indent=None).encode(), cls.model_validate, cls)


RESPONSES: dict[str, ResponseBody] = {
    "list[str]": ResponseBody(json_bytes, _strings, list[str]),
    "dict[str, list[str]]": ResponseBody(json_bytes, _grants),
    "bool": ResponseBody(json_bytes, _exactly(bool, nullable=False)),
    "long": ResponseBody(json_bytes, _exactly(int)),
    "seconds": ResponseBody(json_bytes, _exactly(int)),
    "dict[BacklogQuotaType, BacklogQuota]": ResponseBody(
        lambda quotas: json_bytes(backlog_quotas_json(quotas)),
        _backlog_quotas,
        dict[BacklogQuotaType, BacklogQuotaData],
    ),
    "InactiveTopicPolicies": ResponseBody(
        lambda policies: json_bytes(None if policies is None else policies.to_json()),
        lambda value: None if value is None else InactiveTopicPolicies.from_json(value),
        InactiveTopicPoliciesData | None,
    ),
    "Policies": ResponseBody(json_bytes, _object),
    "ClusterData": ResponseBody(json_bytes, _object),
    "TenantInfo": ResponseBody(lambda info: json_bytes(info.to_json()), TenantInfo.from_json),
    "RetentionPoliciesData": ResponseBody(
        lambda policies: json_bytes(None if policies is None else policies.to_json()),
        lambda value: None if value is None else RetentionPolicies.from_json(value),
        RetentionPoliciesData | None,
    ),
    "SchemaCompatibilityStrategy": ResponseBody(
        lambda strategy: json_bytes(None if strategy is None else strategy.value),
        lambda value: None if value is None else SchemaCompatibilityStrategy.parse(value),
    ),
    "SchemaAutoUpdateCompatibilityStrategy": ResponseBody(json_bytes, _exactly(str)),
    "MessageIdImpl": ResponseBody(lambda mid: json_bytes(message_id_json(mid)), _message_id),
    "dict[str, MessageIdImpl]": ResponseBody(
        lambda ids: json_bytes({str(index): message_id_json(mid) for index, mid in ids.items()}),
        lambda value: {int(index): _message_id(mid) for index, mid in value.items()},
    ),
    "LongRunningProcessStatus": ResponseBody(lambda status: json_bytes(status.to_json()), _process_status),
    "PartitionedTopicMetadata": _model(PartitionedTopicMetadata),
    "TopicStatsData": _model(TopicStatsData),
    "PartitionedTopicStatsData": _model(PartitionedTopicStatsData),
    "PersistentTopicInternalStats": _model(PersistentTopicInternalStats),
    "PartitionedTopicInternalStats": _model(PartitionedTopicInternalStats),
    "NonPersistentTopicStatsData": _model(NonPersistentTopicStatsData),
    "list[ArmedFault]": ResponseBody(
        lambda faults: json_bytes([f.as_dict() for f in faults]), lambda value: [_armed_fault(v) for v in value]
    ),
    "FaultId": ResponseBody(lambda fault_id: json_bytes({"faultId": fault_id}), lambda value: int(value["faultId"])),
    "list[FaultId]": ResponseBody(json_bytes, _fault_ids),
    "list[FiredFault]": ResponseBody(
        lambda fired: json_bytes([f.as_dict() for f in fired]), lambda value: [_fired_fault(v) for v in value]
    ),
    "FaultStats": ResponseBody(_fault_stats_json, _fault_stats),
    "ClockReading": ResponseBody(lambda reading: json_bytes(reading.as_dict()), _clock_reading),
}
