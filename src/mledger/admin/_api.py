"""``Admin``: the entry point of the admin API over a broker.

``Admin(broker)`` is the embedded form: authorization is off and every call is allowed.
``Admin(broker, authorization=Authorization(...), role="ops")`` turns it on: each call is
checked for ``role`` before anything is read or changed (401 without a role, 403 without the
permission; see :mod:`mledger.admin._auth`). ``admin.as_role("other")`` is the same admin acting
for another role (what an HTTP front end does per request).

The operations live in :class:`~mledger.admin.Topics` (``admin.topics``),
:class:`~mledger.admin.Namespaces` (``admin.namespaces``: policies, permissions),
:mod:`~mledger.admin._tenants` (``admin.tenants``, ``admin.clusters``) and, for
trying things out, :class:`~mledger.admin.Messaging` (``admin.messaging``). Every
error they raise is an :class:`~mledger.core.MLedgerError` carrying ``http_status``.
Thread-safe as far as the broker is: the admin itself holds no mutable state.
"""

from __future__ import annotations

from ..broker import Broker, TopicName
from ..core import ConfigError, PermissionDeniedError, UnauthenticatedError
from ._auth import Authorization, NamespaceOperation, TopicOperation
from ._clock import ClockAdmin
from ._faults import FaultsAdmin
from ._messaging import Messaging
from ._namespaces import Namespaces
from ._nonpersistent import NonPersistentTopicsAdmin
from ._tenants import Clusters, Tenants
from ._topics import Topics

__all__ = ["Admin"]


class Admin:
    """Admin operations on ``broker``, authorized for ``role`` when ``authorization`` is given.

    Raises :class:`~mledger.core.ConfigError` for arguments of the wrong type.
    """

    def __init__(self, broker: Broker, authorization: Authorization | None = None, role: str | None = None) -> None:
        if not isinstance(broker, Broker):
            raise ConfigError(f"Admin needs a Broker, got {broker!r}")
        if authorization is not None and not isinstance(authorization, Authorization):
            raise ConfigError(f"authorization must be an Authorization or None, got {authorization!r}")
        if role is not None and not isinstance(role, str):
            raise ConfigError(f"role must be a string or None, got {role!r}")
        self.broker = broker
        self.authorization = None if authorization is None else authorization.bound_to(broker)
        """The authorization, bound to the broker's stored grants (tenants, permissions)."""
        self.role = role
        self.topics = Topics(self)
        self.namespaces = Namespaces(self)
        self.tenants = Tenants(self)
        self.clusters = Clusters(self)
        self.messaging = Messaging(self)
        self.non_persistent = NonPersistentTopicsAdmin(self)
        """The ``non-persistent://`` topics (:mod:`mledger.admin._nonpersistent`)."""
        self.faults = FaultsAdmin(self)
        """Fault injection, when the broker has it on (:mod:`mledger.admin._faults`)."""
        self.clock = ClockAdmin(self)
        """The broker's manual clock (:mod:`mledger.admin._clock`)."""

    @property
    def authorization_enabled(self) -> bool:
        """Whether calls are checked (an ``Authorization`` was given)."""
        return self.authorization is not None

    def as_role(self, role: str | None) -> Admin:
        """The same broker and authorization, acting for ``role``."""
        return Admin(self.broker, self.authorization, role)

    def check_topic(self, operation: TopicOperation, topic: str | TopicName) -> TopicName:
        """Parse ``topic`` (400 for a bad name) and check ``operation`` on it; returns the name.

        Raises ``UnauthenticatedError`` (401) / ``PermissionDeniedError`` (403) when
        authorization is on and the role may not; never when it is off.
        """
        name = TopicName.parse(topic)
        if self.authorization is not None:
            self.authorization.check(self.role, operation, name)
        return name

    def check_namespace(self, operation: NamespaceOperation, namespace: str) -> None:
        """Check a namespace operation (see :meth:`check_topic`)."""
        if self.authorization is not None:
            self.authorization.check(self.role, operation, namespace)

    def authenticate(self) -> None:
        """Raise ``UnauthenticatedError`` (401) when authorization is on and there is no role."""
        if self.authorization is not None and not self.role:
            raise UnauthenticatedError("Need to authenticate to perform the request")

    def check_superuser(self, action: str) -> None:
        """Cluster and tenant changes: authenticate, then require a superuser role when
        authorization is on; ``PermissionDeniedError`` (403) names ``action``."""
        self.authenticate()
        if self.authorization is not None and not self.authorization.is_superuser(self.role):
            raise PermissionDeniedError(f"Role {self.role!r} is not a superuser: it may not {action}")

    def check_tenant_admin(self, tenant: str, action: str) -> None:
        """Namespace administration (policies, permissions): authenticate, then require a
        superuser or a role in ``tenant``'s ``adminRoles`` when authorization is on (Pulsar's
        ``validateTenantOperation``); ``PermissionDeniedError`` (403) names ``action``."""
        self.authenticate()
        if self.authorization is not None and not self.authorization.is_tenant_admin(self.role, tenant):
            raise PermissionDeniedError(
                f"Role {self.role!r} is neither a superuser nor an admin of tenant {tenant}: it may not {action}"
            )

    def may(self, operation: TopicOperation | NamespaceOperation, resource: str | TopicName) -> bool:
        """Whether the role may run ``operation`` on ``resource`` (always True when off)."""
        return self.authorization is None or self.authorization.is_allowed(self.role, operation, resource)

    def __repr__(self) -> str:
        auth = "off" if self.authorization is None else f"on, role={self.role!r}"
        return f"Admin({self.broker!r}, authorization {auth})"
