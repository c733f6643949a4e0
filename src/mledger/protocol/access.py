"""Producer access modes (Pulsar's ``ProducerAccessMode``) and token authentication.

Access modes, per topic, as Pulsar's ``AbstractTopic`` enforces them:

* ``Shared`` (0): any number of shared producers; refused with ``ProducerBusy`` while an
  exclusive producer holds the topic;
* ``Exclusive`` (1): refused with ``ProducerFenced`` while any other producer is connected;
* ``WaitForExclusive`` (2): answered "not ready" while others are connected and made ready
  (a second PRODUCER_SUCCESS) when the topic frees up, in arrival order;
* ``ExclusiveWithFencing`` (3): takes the topic, closing the producers already there.

Authentication: the token of CONNECT (``auth_method_name = "token"``) is looked up in the same
token -> role map the REST server reads (``{"<token>": "<role>"}``), in constant time; the role
is then checked by :class:`~mledger.admin.Authorization` for PRODUCE (PRODUCER), CONSUME
(SUBSCRIBE), any of LOOKUP / PRODUCE / CONSUME (LOOKUP, PARTITIONED_METADATA) and the
namespace's GET_TOPICS (GET_TOPICS_OF_NAMESPACE, what regex subscriptions ask: a namespace-level
PRODUCE or CONSUME grant, or a superuser, as Pulsar).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..broker import ProducerBusyError, Topic
from ..core.errors import ConfigError, NotAllowedError, PermissionDeniedError

if TYPE_CHECKING:
    from ..admin import Authorization

__all__ = ["AccessHolder", "ProducerAccess", "ProducerFencedError", "TokenAuth", "load_tokens"]

SHARED, EXCLUSIVE, WAIT_FOR_EXCLUSIVE, EXCLUSIVE_WITH_FENCING = 0, 1, 2, 3


class ProducerFencedError(NotAllowedError):
    """An exclusive producer could not take the topic (Pulsar's ``ProducerFenced``)."""

    http_status = 409


class AccessHolder(Protocol):
    """A client's producer as :class:`ProducerAccess` sees it (the session's producer handle)."""

    name: str
    """The producer's name (in ``ProducerBusy`` messages)."""
    access_mode: int
    """Its ``ProducerAccessMode`` number."""

    def fence(self) -> None:
        """An ``ExclusiveWithFencing`` producer took the topic: close this one and tell its client."""
        ...


class _TopicAccess:
    __slots__ = ("exclusive", "producers", "waiting")

    def __init__(self) -> None:
        self.producers: list[AccessHolder] = []
        self.exclusive: AccessHolder | None = None
        self.waiting: list[tuple[AccessHolder, Callable[[], None]]] = []


class ProducerAccess:
    """Which producers hold which topic. Used from the event loop thread only."""

    def __init__(self) -> None:
        self._topics: dict[str, _TopicAccess] = {}

    def check(self, topic: Topic, mode: int) -> bool:
        """Whether a new producer of ``mode`` may join now (False) or must wait (True);
        raises ``ProducerBusyError`` / :class:`ProducerFencedError` when it is refused.
        ``ExclusiveWithFencing`` closes the producers already connected."""
        state = self._topics.get(topic.name)
        if state is None or (not state.producers and state.exclusive is None):
            return False
        if mode == SHARED:
            if state.exclusive is not None:
                raise ProducerBusyError(f"Topic has an existing exclusive producer: {state.exclusive.name}")
            return False
        if mode == EXCLUSIVE:
            raise ProducerFencedError(f"Topic {topic.name} has existing producers")
        if mode == WAIT_FOR_EXCLUSIVE:
            return True
        for handle in list(state.producers):
            handle.fence()
        return False

    def add(self, topic: Topic, handle: AccessHolder) -> None:
        """``handle`` joined ``topic`` (after :meth:`check` allowed it)."""
        state = self._topics.setdefault(topic.name, _TopicAccess())
        state.producers.append(handle)
        if handle.access_mode != SHARED:
            state.exclusive = handle

    def wait(self, topic: Topic, handle: AccessHolder, granted: Callable[[], None]) -> None:
        """Queue a WaitForExclusive producer; ``granted()`` runs when it holds the topic."""
        self._topics.setdefault(topic.name, _TopicAccess()).waiting.append((handle, granted))

    def remove(self, topic: Topic, handle: AccessHolder) -> None:
        """``handle`` left ``topic``: the next waiting exclusive producer may take it."""
        state = self._topics.get(topic.name)
        if state is None:
            return
        if handle in state.producers:
            state.producers.remove(handle)
        if state.exclusive is handle:
            state.exclusive = None
        state.waiting = [(h, g) for h, g in state.waiting if h is not handle]
        if not state.producers and state.waiting:
            waiter, granted = state.waiting.pop(0)
            state.producers.append(waiter)
            state.exclusive = waiter
            granted()
        if not state.producers and not state.waiting:
            del self._topics[topic.name]


class TokenAuth:
    """Token authentication and role authorization for the protocol server."""

    def __init__(self, tokens: Mapping[str, str], authorization: Authorization | None = None) -> None:
        checked = {}
        for token, role in tokens.items():
            if not isinstance(token, str) or not token.strip() or not isinstance(role, str) or not role.strip():
                raise ConfigError("tokens must map non-empty token strings to non-empty role strings")
            checked[token.strip()] = role.strip()
        self._tokens = checked
        self.authorization = authorization

    def authenticate(self, method: str, token: str) -> str | None:
        """The role of a CONNECT's credentials, None when they are missing or unknown."""
        if method != "token" or not token:
            return None
        found = None
        for known, role in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.strip().encode()):
                found = role
        return found

    def authorize(self, role: str | None, operation: str, topic: str) -> None:
        """Raise ``PermissionDeniedError`` unless ``role`` may do ``operation`` on ``topic``."""
        if self.authorization is not None:
            self.authorization.check(role, operation, topic)

    def authorize_lookup(self, role: str | None, topic: str) -> None:
        """Lookups need LOOKUP, PRODUCE or CONSUME on the topic."""
        auth = self.authorization
        if auth is None:
            return
        if not any(auth.is_allowed(role, op, topic) for op in ("LOOKUP", "PRODUCE", "CONSUME")):
            raise PermissionDeniedError(f"Client with role {role!r} is not authorized to look up {topic}")

    def authorize_topic_list(self, role: str | None, namespace: str) -> None:
        """Listing a namespace's topics needs GET_TOPICS on it (see :mod:`mledger.admin.auth`);
        raises ``PermissionDeniedError`` with Pulsar's message, which names no topic."""
        auth = self.authorization
        if auth is not None and not auth.is_allowed(role, "GET_TOPICS", namespace):
            raise PermissionDeniedError(
                f"Client with role {role!r} is not authorized to GetTopicsOfNamespace {namespace}"
            )


def load_tokens(path: str | Path) -> dict[str, str]:
    """Read a token file ``{"<token>": "<role>", ...}`` (the REST server's format)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read token file {str(path)!r}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"token file {str(path)!r} must be a JSON object mapping tokens to roles")
    return data
