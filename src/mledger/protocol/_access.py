"""Producer access modes (Pulsar's ``ProducerAccessMode``) and client authentication.

Access modes, per topic, as Pulsar's ``AbstractTopic`` enforces them:

* ``Shared`` (0): any number of shared producers; refused with ``ProducerBusy`` while an
  exclusive producer holds the topic;
* ``Exclusive`` (1): refused with ``ProducerFenced`` while any other producer is connected;
* ``WaitForExclusive`` (2): answered "not ready" while others are connected and made ready
  (a second PRODUCER_SUCCESS) when the topic frees up, in arrival order;
* ``ExclusiveWithFencing`` (3): takes the topic, closing the producers already there.

Authentication: CONNECT's ``auth_method_name`` / ``auth_data`` go to the identity table both
servers share (:mod:`mledger.admin`: literal and JWT tokens, basic, TLS, the
anonymous role); the role is then checked by :class:`~mledger.admin.Authorization` for PRODUCE (PRODUCER), CONSUME
(SUBSCRIBE), any of LOOKUP / PRODUCE / CONSUME (LOOKUP, PARTITIONED_METADATA) and the
namespace's GET_TOPICS (GET_TOPICS_OF_NAMESPACE, what regex subscriptions ask: a namespace-level
PRODUCE or CONSUME grant, or a superuser, as Pulsar).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Protocol

from ..admin import AuthenticationSettings, Authenticator, NamespaceOperation, TopicOperation
from ..broker import ProducerBusyError, Topic, TopicName
from ..core import NotAllowedError, PermissionDeniedError, ServerError

if TYPE_CHECKING:
    from ..admin import Authorization

__all__ = ["AccessHolder", "ClientAuth", "ProducerAccess", "ProducerFencedError"]

SHARED, EXCLUSIVE, WAIT_FOR_EXCLUSIVE, EXCLUSIVE_WITH_FENCING = 0, 1, 2, 3

_LOOKUP_ALLOWED_BY = (TopicOperation.LOOKUP, TopicOperation.PRODUCE, TopicOperation.CONSUME)
"""A lookup (LOOKUP, PARTITIONED_METADATA) is allowed by any of these (Pulsar's ``canLookup``)."""


class ProducerFencedError(NotAllowedError):
    """An exclusive producer could not take the topic (Pulsar's ``ProducerFenced``)."""

    http_status = 409
    server_error = ServerError.ProducerFenced


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


class ClientAuth:
    """Authentication (the shared :class:`~mledger.admin.Authenticator`) and role
    authorization for the protocol server.

    ``authenticator``: the identity table, or a literal token map ``{"<token>": "<role>"}``.
    """

    def __init__(
        self, authenticator: Authenticator | Mapping[str, str], authorization: Authorization | None = None
    ) -> None:
        if isinstance(authenticator, Mapping):
            authenticator = Authenticator.from_settings(AuthenticationSettings(tokens=authenticator))
        self.authenticator = authenticator
        self.authorization = authorization

    def authenticate(
        self, method: str, data: bytes, peer_subject: object = None, address: str | None = None
    ) -> Future[str]:
        """A future of the role of a CONNECT's ``auth_method_name`` / ``auth_data`` from the
        client at ``address``, or of :class:`~mledger.admin.AuthenticationError`
        with the provider's reason. Never blocks: settled now for tokens and TLS, completed by
        the authenticator's pool for a password."""
        return self.authenticator.check(method, data, peer_subject, address)

    def authorize(
        self,
        role: str | None,
        operation: TopicOperation | str,
        topic: str | TopicName,
        subscription: str | None = None,
    ) -> None:
        """Raise ``PermissionDeniedError`` unless ``role`` may do ``operation`` (the admin layer's
        :class:`~mledger.admin.TopicOperation`, or its name) on ``topic`` (through
        ``subscription``, for a consumer)."""
        if self.authorization is not None:
            self.authorization.check(role, operation, topic, subscription)

    def authorize_lookup(self, role: str | None, topic: str | TopicName) -> None:
        """Lookups need LOOKUP, PRODUCE or CONSUME on the topic."""
        auth = self.authorization
        if auth is None:
            return
        if not any(auth.is_allowed(role, op, topic) for op in _LOOKUP_ALLOWED_BY):
            raise PermissionDeniedError(f"Client with role {role!r} is not authorized to look up {topic}")

    def authorize_topic_list(self, role: str | None, namespace: str) -> None:
        """Listing a namespace's topics needs GET_TOPICS on it (see :mod:`mledger.admin`);
        raises ``PermissionDeniedError`` with Pulsar's message, which names no topic."""
        auth = self.authorization
        if auth is not None and not auth.is_allowed(role, NamespaceOperation.GET_TOPICS, namespace):
            raise PermissionDeniedError(
                f"Client with role {role!r} is not authorized to GetTopicsOfNamespace {namespace}"
            )
