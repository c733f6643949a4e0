"""What a fault is: the frozen pydantic models a test, a scenario file and the REST API arm.

A fault has a *trigger* and an *action*. The trigger is a command kind (``command``: the client
command the broker receives, or ``MESSAGE``, a frame it sends a consumer), narrowed by regular
expressions on the topic, the client and the subscription; ``after`` matches pass untouched,
then the fault fires for the next ``count`` matches or for every match within ``duration_ms``
of being armed (neither given: one match). A fault without a command acts once, when armed
(close or half-open the matching connections, pause the broker, terminate a topic, ...). Store
faults (``disk_full``, ``slow_writes``) are triggered by the store's writes instead: ``after``
writes pass, then ``count`` writes or the writes within ``duration_ms`` (neither: until
cleared, as a disk stays full until space is freed).

The actions, one model each, told apart by ``action``:

=====================  ==========================================================================
``error``              answer the command with a Pulsar ``ServerError``, as Pulsar's broker does
                       (:data:`ERROR_ANSWERS`); only commands that have an answer
``delay``              hold the command, and those behind it on its connection, ``delay_ms``
                       (a number, or ``[low, high]`` drawn from the seeded random generator)
``close``              close the connection instead of handling the command (or at once)
``half_open``          stop reading (the command included), writing (its answer included) or both,
                       without closing: the broker becomes a dead peer for that connection
``pause``              stop serving every connection (sockets stay open) for ``pause_ms`` or
                       until resumed
``disk_full``          refuse the store's writes with SQLite's ``database or disk is full``
``slow_writes``        delay the store's writes by ``delay_ms``
``unload_topic``       unload the command's topic (or the topics ``topic`` matches): its clients
                       are disconnected and reconnect, their lookup loads it again
``restart``            restart the broker in place (``crash``: as a SIGKILL leaves it), on the
                       same ports: the command is not handled, clients reconnect
``terminate_topic``    terminate the command's topic (or the topics ``topic`` matches)
``delete_subscription``  delete a subscription under its consumers (they are disconnected)
``duplicate``          send a MESSAGE frame twice (same id, same redelivery count)
``redeliver``          redeliver a message right after sending it (redelivery count + 1)
=====================  ==========================================================================

Every model refuses a field it does not know and a combination that cannot fire (an error for
FLOW, a store fault with a topic, ...), with a message naming the field and the fix; a scenario
file's errors name the fault's index too (:func:`parse_scenario`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..core import ConfigError, InvalidRequestError, ServerError, did_you_mean
from ._fault_kinds import COMMAND_KINDS, ERROR_ANSWERS, MESSAGE, UNANSWERED

__all__ = [
    "CloseFault",
    "DelayFault",
    "DeleteSubscriptionFault",
    "DiskFullFault",
    "DuplicateFault",
    "ErrorFault",
    "FaultScenario",
    "FaultSpec",
    "FaultSpecError",
    "HalfOpenFault",
    "PauseFault",
    "RedeliverFault",
    "RestartFault",
    "SlowWritesFault",
    "TerminateTopicFault",
    "UnloadTopicFault",
    "load_scenario",
    "parse_fault",
    "parse_scenario",
]

_KINDS = (*COMMAND_KINDS, MESSAGE)
_MESSAGE_ID = re.compile(r"^(\d+):(\d+)$")


class FaultSpecError(InvalidRequestError, ConfigError):
    """A fault or a scenario that cannot be armed: the message names the field and why (400
    over REST; a ``ConfigError`` for ``mledger standalone --faults``)."""


def _regex(value: str | None, field: str) -> str | None:
    if value is None:
        return None
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{field} {value!r} is not a regular expression: {exc}") from None
    return value


def _delay(value: int | list[int] | tuple[int, int]) -> int | tuple[int, int]:
    if isinstance(value, bool):
        raise ValueError("delay_ms is a number of milliseconds or [low, high], not a boolean")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"delay_ms must be >= 0, got {value}")
        return value
    low, high = value if len(value) == 2 else (None, None)
    if low is None or high is None or not 0 <= low <= high:
        raise ValueError(f"delay_ms [low, high] needs 0 <= low <= high, got {list(value)}")
    return (low, high)


class _Fault(BaseModel):
    """What every fault has: the trigger (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str | None = Field(
        None, description="the command kind that triggers the fault (PRODUCER, SEND, ..., MESSAGE); none: act at once"
    )
    topic: str | None = Field(None, description="regular expression the whole topic name (or its last part) matches")
    client: str | None = Field(
        None, description="regular expression the producer or consumer name, role or host:port matches"
    )
    subscription: str | None = Field(None, description="regular expression the subscription name matches")
    after: int = Field(0, ge=0, description="matches (store faults: writes) that pass untouched first")
    count: int | None = Field(None, ge=1, description="fire for this many matches (or writes)")
    duration_ms: int | None = Field(None, ge=1, description="fire for every match within this window (real time)")

    needs_command: ClassVar[bool] = False
    """Whether the action only makes sense on a command (error, delay)."""
    kinds: ClassVar[tuple[str, ...]] = COMMAND_KINDS
    """The command kinds the action may be triggered by."""
    named_kinds: ClassVar[tuple[str, ...] | None] = None
    """The kinds a message about a missing command names (default: :attr:`kinds`)."""

    @field_validator("command", mode="before")
    @classmethod
    def _known_command(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError(f"command must be a command kind's name, got {value!r}")
        upper = value.strip().upper()
        if upper not in _KINDS:
            raise ValueError(f"unknown command kind {value!r}{did_you_mean(upper, _KINDS)}; kinds: {', '.join(_KINDS)}")
        return upper

    @field_validator("topic", "client", "subscription")
    @classmethod
    def _pattern(cls, value: str | None, info: ValidationInfo) -> str | None:
        return _regex(value, info.field_name or "pattern")

    @model_validator(mode="after")
    def _trigger(self) -> _Fault:
        action = self.action  # type: ignore[attr-defined]
        if self.command is None:
            if self.needs_command:
                kinds = self.named_kinds or self.kinds
                raise ValueError(f"{action} needs a command to act on (one of {', '.join(kinds)})")
            if self.after or self.count is not None or self.duration_ms is not None:
                raise ValueError(
                    f"{action} without a command acts once, at once: after, count and duration_ms need one"
                )
        elif self.command not in self.kinds:
            raise ValueError(f"{action} cannot act on {self.command}: it acts on {', '.join(self.kinds)}")
        return self

    @property
    def acts_at_once(self) -> bool:
        """Whether the fault acts when armed (no command triggers it)."""
        return self.command is None


class ErrorFault(_Fault):
    """Answer the command with a Pulsar error, as Pulsar's broker sends it (:data:`ERROR_ANSWERS`)."""

    action: Literal["error"] = "error"
    error: str = Field("ServiceNotReady", description="a ServerError name: TopicNotFound, ServiceNotReady, ...")
    message: str | None = Field(None, description="the error's message (default: says a fault injected it)")

    needs_command: ClassVar[bool] = True
    named_kinds: ClassVar[tuple[str, ...] | None] = tuple(ERROR_ANSWERS)

    @field_validator("error")
    @classmethod
    def _server_error(cls, value: str) -> str:
        names = [e.name for e in ServerError]
        if value not in names:
            raise ValueError(f"{value!r} is not a Pulsar ServerError{did_you_mean(value, names)}")
        return value

    @model_validator(mode="after")
    def _answered(self) -> ErrorFault:
        if self.command in UNANSWERED:
            raise ValueError(
                f"{self.command} has no answer to carry an error; an error fault acts on {', '.join(ERROR_ANSWERS)}"
                " (delay, close or half_open act on any command)"
            )
        return self


class DelayFault(_Fault):
    """Hold the command (and what follows it on its connection, so answers keep their order)."""

    action: Literal["delay"] = "delay"
    delay_ms: int | tuple[int, int] = Field(description="milliseconds, or [low, high] drawn from the seeded generator")
    clock: Literal["real", "broker"] = Field(
        "real", description="real: wall time (default); broker: the broker's clock (a manual clock's advance)"
    )

    needs_command: ClassVar[bool] = True

    @field_validator("delay_ms", mode="before")
    @classmethod
    def _check_delay(cls, value: Any) -> int | tuple[int, int]:
        return _delay(value)


class CloseFault(_Fault):
    """Close the connection (no goodbye: what is queued is dropped) instead of handling the
    command; without a command, close every matching connection now."""

    action: Literal["close"] = "close"


class HalfOpenFault(_Fault):
    """Stop reading, writing or both on the connection without closing it (a dead peer);
    without a command, every matching connection now. Lasts until the connection closes or the
    faults are cleared."""

    action: Literal["half_open"] = "half_open"
    direction: Literal["read", "write", "both"] = "both"


class PauseFault(_Fault):
    """Stop serving every connection: nothing read, nothing written, sockets open."""

    action: Literal["pause"] = "pause"
    pause_ms: int | None = Field(None, ge=1, description="how long (real time); none: until resumed or cleared")


class _StoreFault(_Fault):
    """A fault of the store's writes (every write: entries, cursors, metadata)."""

    @model_validator(mode="after")
    def _writes_only(self) -> _StoreFault:
        given = [f for f in ("command", "topic", "client", "subscription") if getattr(self, f) is not None]
        if given:
            raise ValueError(
                f"{self.action} acts on the store's writes, not on {', '.join(given)}: it takes after, count"  # type: ignore[attr-defined]
                " (writes) and duration_ms"
            )
        return self

    @model_validator(mode="after")
    def _trigger(self) -> _StoreFault:  # the writes trigger it: no command needed
        return self

    @property
    def acts_at_once(self) -> bool:
        return False


class DiskFullFault(_StoreFault):
    """Refuse writes as a full disk does (SQLite's ``database or disk is full``), not performed."""

    action: Literal["disk_full"] = "disk_full"


class SlowWritesFault(_StoreFault):
    """Delay each write, as a slow disk does (the writes of messages move to writer threads)."""

    action: Literal["slow_writes"] = "slow_writes"
    delay_ms: int | tuple[int, int] = Field(description="milliseconds, or [low, high] drawn from the seeded generator")

    @field_validator("delay_ms", mode="before")
    @classmethod
    def _check_delay(cls, value: Any) -> int | tuple[int, int]:
        return _delay(value)


class _TopicsFault(_Fault):
    """A fault acting on whole topics: the command's, or without a command every loaded topic
    ``topic`` matches (which must then be given)."""

    @model_validator(mode="after")
    def _target(self) -> _TopicsFault:
        if self.command is None and self.topic is None:
            action: str = self.action  # type: ignore[attr-defined]
            raise ValueError(
                f"{action} without a command needs topic (which topics to {action.removesuffix('_topic')})"
            )
        return self


class UnloadTopicFault(_TopicsFault):
    """Unload the command's topic, or without a command every loaded topic ``topic`` matches
    (Pulsar's ``unloadTopic``: producers and consumers disconnected, cursors closed; the clients
    reconnect and their lookup loads it again)."""

    action: Literal["unload_topic"] = "unload_topic"


class RestartFault(_Fault):
    """Restart the broker in place, on the same ports and data: ``crash`` True as a SIGKILL
    leaves it (connections dropped, what the mark-delete throttle held back lost), False a clean
    stop first. With a command, the broker stops serving at that command, which is not handled.
    Only a broker that can restart in place takes it (the pytest fixture, ``EmbeddedBroker``)."""

    action: Literal["restart"] = "restart"
    crash: bool = Field(False, description="true: as a SIGKILL leaves the broker; false: a clean stop first")

    @model_validator(mode="after")
    def _whole_broker(self) -> RestartFault:
        given = [f for f in ("topic", "client", "subscription") if getattr(self, f) is not None]
        if self.command is None and given:
            raise ValueError(f"restart without a command restarts the whole broker: {', '.join(given)} need a command")
        return self


class TerminateTopicFault(_TopicsFault):
    """Terminate the command's topic, or without a command every loaded topic ``topic`` matches."""

    action: Literal["terminate_topic"] = "terminate_topic"


class DeleteSubscriptionFault(_Fault):
    """Delete a subscription under its consumers (Pulsar's forced delete: they are disconnected
    and reconnect): the command's, or those ``subscription`` matches on the command's topic, or
    without a command on every loaded topic ``topic`` matches."""

    action: Literal["delete_subscription"] = "delete_subscription"

    @model_validator(mode="after")
    def _target(self) -> DeleteSubscriptionFault:
        if self.command is None and (self.topic is None or self.subscription is None):
            raise ValueError("delete_subscription without a command needs topic and subscription")
        return self


class _MessageFault(_Fault):
    """A fault of the MESSAGE frames the broker sends (``command`` is ``MESSAGE``)."""

    command: str | None = MESSAGE
    message_id: str | None = Field(None, description="only the message ledgerId:entryId")
    kinds: ClassVar[tuple[str, ...]] = (MESSAGE,)
    needs_command: ClassVar[bool] = True

    @field_validator("message_id")
    @classmethod
    def _message_id(cls, value: str | None) -> str | None:
        if value is not None and not _MESSAGE_ID.match(value):
            raise ValueError(f"message_id {value!r} is not ledgerId:entryId")
        return value


class DuplicateFault(_MessageFault):
    """Send the MESSAGE frame twice: the consumer receives the message again, same id and
    redelivery count (a client or network duplicate)."""

    action: Literal["duplicate"] = "duplicate"


class RedeliverFault(_MessageFault):
    """Redeliver the message as soon as it was sent (the broker's redelivery: Shared and
    Key_Shared that message, redelivery count + 1; Exclusive and Failover everything the
    consumer holds, as Pulsar rewinds single-consumer dispatchers)."""

    action: Literal["redeliver"] = "redeliver"


FaultSpec = Annotated[
    ErrorFault
    | DelayFault
    | CloseFault
    | HalfOpenFault
    | PauseFault
    | DiskFullFault
    | SlowWritesFault
    | UnloadTopicFault
    | RestartFault
    | TerminateTopicFault
    | DeleteSubscriptionFault
    | DuplicateFault
    | RedeliverFault,
    Field(discriminator="action"),
]
"""One fault: the model its ``action`` names."""


class FaultScenario(BaseModel):
    """A scenario file: the faults to arm when the broker starts, and the seed of their random
    draws (``mledger standalone --faults FILE``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int | None = Field(None, description="the seed of the faults' random draws (none: a random one, logged)")
    faults: tuple[FaultSpec, ...] = ()


_FAULT: TypeAdapter[FaultSpec] = TypeAdapter(FaultSpec)


def _problems(exc: ValidationError, tag_at: int) -> str:
    """pydantic's errors as ``place: problem; ...``, the union's tag (which pydantic puts in the
    location, at ``tag_at``) left out."""
    lines = []
    for error in exc.errors(include_url=False):
        loc = list(error["loc"])
        if len(loc) > tag_at and not error["type"].startswith("union_tag"):
            del loc[tag_at]
        message = error["msg"].removeprefix("Value error, ")
        place = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        lines.append(f"{place}: {message}" if place else message)
    return "; ".join(lines)


def parse_fault(data: Mapping[str, Any] | FaultSpec) -> FaultSpec:
    """A fault from its fields (a model passes through); ``FaultSpecError`` naming each problem."""
    if isinstance(data, _Fault):
        return data
    try:
        return _FAULT.validate_python(data)
    except ValidationError as exc:
        raise FaultSpecError(f"invalid fault: {_problems(exc, 0)}") from None


def parse_scenario(data: Any, source: str = "scenario") -> FaultScenario:
    """A scenario from decoded JSON or YAML (``{"seed": ..., "faults": [...]}``);
    ``FaultSpecError`` naming ``source`` and each problem's place (``faults.2.error``)."""
    if not isinstance(data, Mapping):
        raise FaultSpecError(f"{source}: a scenario is a mapping with 'faults' (and 'seed'), got {type(data).__name__}")
    try:
        return FaultScenario.model_validate(data)
    except ValidationError as exc:
        raise FaultSpecError(f"{source}: {_problems(exc, 2)}") from None


def load_scenario(path: str | Path) -> FaultScenario:
    """Read a scenario file: JSON (``.json``) or YAML (anything else; JSON is YAML too).
    ``FaultSpecError`` for a file that cannot be read or parsed, or a scenario that is invalid."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise FaultSpecError(f"cannot read the fault scenario {path}: {exc.strerror or exc}") from None
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml  # the server extra: mledger standalone reads YAML scenario files

            data = yaml.safe_load(text)
    except ValueError as exc:  # json.JSONDecodeError
        raise FaultSpecError(f"{path}: not JSON: {exc}") from None
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise FaultSpecError(f"{path}: YAML needs PyYAML (pip install 'mledger[server]'): {exc}") from None
    except Exception as exc:  # yaml.YAMLError, without importing yaml for JSON files
        raise FaultSpecError(f"{path}: not YAML: {exc}") from None
    return parse_scenario(data, str(path))
