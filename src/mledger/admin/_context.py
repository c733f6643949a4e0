"""What the parts of the admin API need from the :class:`~mledger.admin.Admin` that owns them.

``Admin`` builds its parts (``admin.topics``, ``admin.messaging``) and hands each itself as an
:class:`AdminContext`: the broker, and the authentication and authorization checks every call
runs first. The parts import this protocol, never ``Admin``, so the admin package has no cycle.
"""

from __future__ import annotations

from typing import Protocol

from ..broker import Broker, TopicName
from ._auth import NamespaceOperation, TopicOperation

__all__ = ["AdminContext"]


class AdminContext(Protocol):
    """The broker and the checks of the admin the call runs under."""

    broker: Broker

    def check_topic(self, operation: TopicOperation, topic: str | TopicName) -> TopicName:
        """Authenticate and authorize ``operation`` on ``topic``; return its parsed name."""
        ...

    def check_namespace(self, operation: NamespaceOperation, namespace: str) -> None:
        """Authenticate and authorize ``operation`` on ``namespace``."""
        ...

    def authenticate(self) -> None:
        """Raise ``UnauthenticatedError`` when authorization is on and no role is given."""
        ...

    def check_superuser(self, action: str) -> None:
        """Authenticate and require a superuser role (when authorization is on)."""
        ...

    def check_tenant_admin(self, tenant: str, action: str) -> None:
        """Authenticate and require a superuser or an admin of ``tenant`` (when authorization is on)."""
        ...

    def may(self, operation: TopicOperation | NamespaceOperation, resource: str | TopicName) -> bool:
        """Whether the role may run ``operation`` on ``resource``."""
        ...
