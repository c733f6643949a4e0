"""Authorization: roles, per-topic operation grants, superusers.

Theory of operation
-------------------
An :class:`Authorization` is frozen data: ``permissions`` maps a role to grants, each grant a
resource (a topic name, a namespace ``tenant/namespace``, or the wildcard ``"*"``) and the set of
operations allowed on it. A check ``(role, operation, resource)`` passes when

* the role is a superuser (``super_user_roles``, Pulsar's ``superUserRoles``), or
* the role has the operation on ``"*"``, on the resource itself, or - for a partition
  ``<topic>-partition-<i>`` - on its partitioned topic (a partition inherits its parent's
  permissions), or - for a topic - on the topic's namespace ``tenant/namespace``, or
* the operation is GET_TOPICS (the namespace's topic list) and the role may PRODUCE or CONSUME
  on the whole namespace (a grant on ``tenant/namespace`` or ``"*"``), as Pulsar's
  ``allowNamespaceOperationAsync`` (apache/pulsar#12600). A grant on single topics does not
  reveal the names of the namespace's other topics. The tenant's admins may list too (below).

Stored grants (what ``PUT /admin/v2/tenants``, ``.../permissions/{role}`` and ``auth_policies``
of a namespace's policies set) add to these once the authorization is bound to a broker
(:meth:`Authorization.bound_to`, which :class:`~mledger.admin.Admin` and the protocol server
do), following Pulsar's ``PulsarAuthorizationProvider``:

* a role in the tenant's ``adminRoles`` may do everything in the tenant's namespaces and topics
  (``isSuperUserOrTenantAdmin``), including granting and revoking;
* ``produce`` on the namespace (``namespace_auth``) or the topic (``destination_auth``; for a
  partition, its partitioned topic) allows PRODUCE; ``consume`` allows CONSUME, SUBSCRIBE,
  UNSUBSCRIBE, SKIP, EXPIRE_MESSAGES, PEEK_MESSAGES, RESET_CURSOR and GET_SUBSCRIPTIONS;
  either allows LOOKUP, GET_STATS and GET_METADATA (``canLookup``); either on the namespace
  allows its GET_TOPICS. Other operations need a tenant admin or a superuser;
* a subscription listed in the namespace's ``subscription_auth_roles`` may be consumed through
  only by its roles (and tenant admins, superusers), whatever else the role may do (a check
  given the subscription: the protocol server's SUBSCRIBE).

Role names are matched literally (Pulsar's wildcard matching is off unless
``authorizationAllowWildcardsMatching``, which mledger does not model).

Topic names in grants are normalised like the names in calls (``orders`` is
``persistent://public/default/orders``), so either spelling grants the same topic.

Authorization is *off* when the :class:`~mledger.admin.Admin` has none (embedded use: every
call is allowed) and *on* when one is given. When on, a call without a role raises
:class:`~mledger.core.UnauthenticatedError` (401) and a role without the operation
:class:`~mledger.core.PermissionDeniedError` (403); both are raised before anything is
changed. The messages are Pulsar's (``PulsarWebResource.validateTopicOperationAsync``); Pulsar
itself answers a denied topic operation with 401, PIP-423 documents 403, and mledger uses 403.

File form (``Authorization.from_json``; operation names are case-insensitive)::

    {"superUserRoles": ["admin"],
     "permissions": {"ops": {"persistent://public/default/orders": ["skip", "cancel_delayed_message"],
                             "*": ["get_stats", "lookup"]}}}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..broker import TopicName, check_namespace_name
from ..core import ConfigError, PermissionDeniedError, UnauthenticatedError
from ._files import read_setting_file

if TYPE_CHECKING:
    from ..broker import Broker

__all__ = ["WILDCARD", "Authorization", "NamespaceOperation", "TopicOperation"]

WILDCARD = "*"


class TopicOperation(Enum):
    """Operations on a topic (Pulsar's ``TopicOperation``, plus PIP-423's CANCEL_DELAYED_MESSAGE)."""

    LOOKUP = "LOOKUP"
    PRODUCE = "PRODUCE"
    CONSUME = "CONSUME"
    COMPACT = "COMPACT"
    EXPIRE_MESSAGES = "EXPIRE_MESSAGES"
    OFFLOAD = "OFFLOAD"
    PEEK_MESSAGES = "PEEK_MESSAGES"
    RESET_CURSOR = "RESET_CURSOR"
    SKIP = "SKIP"
    TERMINATE = "TERMINATE"
    UNLOAD = "UNLOAD"
    GRANT_PERMISSION = "GRANT_PERMISSION"
    GET_PERMISSION = "GET_PERMISSION"
    REVOKE_PERMISSION = "REVOKE_PERMISSION"
    SUBSCRIBE = "SUBSCRIBE"
    GET_SUBSCRIPTIONS = "GET_SUBSCRIPTIONS"
    UNSUBSCRIBE = "UNSUBSCRIBE"
    GET_STATS = "GET_STATS"
    GET_METADATA = "GET_METADATA"
    UPDATE_METADATA = "UPDATE_METADATA"
    DELETE_METADATA = "DELETE_METADATA"
    CANCEL_DELAYED_MESSAGE = "CANCEL_DELAYED_MESSAGE"

    def __str__(self) -> str:
        return self.value


class NamespaceOperation(Enum):
    """Operations on a namespace that the admin API needs (a subset of Pulsar's)."""

    CREATE_TOPIC = "CREATE_TOPIC"
    GET_TOPICS = "GET_TOPICS"
    DELETE_TOPIC = "DELETE_TOPIC"

    def __str__(self) -> str:
        return self.value


Operation = TopicOperation | NamespaceOperation

_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    NamespaceOperation.GET_TOPICS: frozenset({TopicOperation.PRODUCE, TopicOperation.CONSUME}),
    # canLookup: a role that may produce or consume may look the topic up, over HTTP as over the
    # binary protocol (ProtocolAccess.authorize_lookup)
    TopicOperation.LOOKUP: frozenset({TopicOperation.PRODUCE, TopicOperation.CONSUME}),
}
"""Namespace operations that a namespace-level grant of other operations also allows (Pulsar's
``PulsarAuthorizationProvider``: GET_TOPICS for a role that may produce or consume there)."""

_NEEDS_PRODUCE = frozenset({TopicOperation.PRODUCE})
_NEEDS_CONSUME = frozenset(
    {
        TopicOperation.CONSUME,
        TopicOperation.SUBSCRIBE,
        TopicOperation.UNSUBSCRIBE,
        TopicOperation.SKIP,
        TopicOperation.EXPIRE_MESSAGES,
        TopicOperation.PEEK_MESSAGES,
        TopicOperation.RESET_CURSOR,
        TopicOperation.GET_SUBSCRIPTIONS,
    }
)
_NEEDS_EITHER = frozenset({TopicOperation.LOOKUP, TopicOperation.GET_STATS, TopicOperation.GET_METADATA})


def _stored_actions(op: Operation) -> frozenset[str]:
    """The stored ``AuthAction``s any one of which allows ``op`` (Pulsar's ``allowTopicOperation``)."""
    if op in _NEEDS_PRODUCE:
        return frozenset({"produce"})
    if op in _NEEDS_CONSUME:
        return frozenset({"consume"})
    if op in _NEEDS_EITHER or op is NamespaceOperation.GET_TOPICS:
        return frozenset({"produce", "consume"})
    return frozenset()


_BY_NAME: dict[str, Operation] = {
    **{op.value: op for op in NamespaceOperation},
    **{op.value: op for op in TopicOperation},
}


def parse_operation(name: str | Operation) -> Operation:
    """An operation from its enum member or its name (case-insensitive, ``-`` allowed for ``_``)."""
    if isinstance(name, (TopicOperation, NamespaceOperation)):
        return name
    if isinstance(name, str):
        op = _BY_NAME.get(name.strip().upper().replace("-", "_"))
        if op is not None:
            return op
    raise ConfigError(f"unknown operation {name!r}; known: {', '.join(sorted(_BY_NAME))}")


class Authorization:
    """Frozen role permissions; see the module docstring for the rules.

    ``permissions``: ``{role: {resource: operations}}`` where a resource is a topic name, a
    namespace ``tenant/namespace`` or ``"*"``, and operations are enum members or their names.
    Construction validates everything and raises :class:`~mledger.core.ConfigError`.
    Checks are O(1) (a few dictionary look-ups).

    >>> auth = Authorization({"ops": {"orders": {TopicOperation.SKIP}}}, super_user_roles={"root"})
    >>> auth.is_allowed("ops", TopicOperation.SKIP, "persistent://public/default/orders-partition-1")
    True
    >>> auth.is_allowed("ops", TopicOperation.RESET_CURSOR, "orders"), auth.is_allowed("root", "skip", "x")
    (False, True)
    """

    def __init__(
        self,
        permissions: Mapping[str, Mapping[str, Iterable[str | Operation]]] | None = None,
        super_user_roles: Iterable[str] = (),
    ) -> None:
        grants: dict[str, dict[str, frozenset[Operation]]] = {}
        for role, resources in (permissions or {}).items():
            if not isinstance(role, str) or not role:
                raise ConfigError(f"invalid role {role!r}: expected a non-empty string")
            if not isinstance(resources, Mapping):
                raise ConfigError(f"permissions of role {role!r} must map resources to operations")
            per_role: dict[str, frozenset[Operation]] = {}
            for resource, operations in resources.items():
                key = _resource_key(resource)
                if isinstance(operations, (str, TopicOperation, NamespaceOperation)):
                    operations = [operations]
                ops = frozenset(parse_operation(op) for op in operations)
                per_role[key] = per_role.get(key, frozenset()) | ops
            grants[role] = per_role
        superusers = [super_user_roles] if isinstance(super_user_roles, str) else list(super_user_roles)
        for role in superusers:
            if not isinstance(role, str) or not role:
                raise ConfigError(f"invalid superuser role {role!r}: expected a non-empty string")
        self._grants: Mapping[str, Mapping[str, frozenset[Operation]]] = MappingProxyType(
            {role: MappingProxyType(g) for role, g in grants.items()}
        )
        self._superusers = frozenset(superusers)
        self._broker: Broker | None = None

    def bound_to(self, broker: Broker) -> Authorization:
        """This authorization plus the grants stored in ``broker``'s metadata (tenants' admin
        roles, namespaces' ``auth_policies``); ``self`` when already bound to it."""
        if self._broker is broker:
            return self
        bound = Authorization.__new__(Authorization)
        bound._grants, bound._superusers, bound._broker = self._grants, self._superusers, broker
        return bound

    # -- construction from files -------------------------------------------------------------

    @classmethod
    def from_json(cls, source: str | Path | Mapping[str, Any]) -> Authorization:
        """From the file form: a path, JSON text, or an already-decoded mapping.

        Raises :class:`~mledger.core.ConfigError` for unreadable files, bad JSON or bad content.
        """
        data: Any = source
        if isinstance(source, Path) or (isinstance(source, str) and not source.lstrip().startswith("{")):
            try:
                data = read_setting_file(source, "authorization file").decode("utf-8")
            except UnicodeDecodeError as e:
                raise ConfigError(f"authorization file {str(source)!r} is not UTF-8: {e}") from None
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError as e:
                raise ConfigError(f"authorization file is not valid JSON: {e}") from None
        if not isinstance(data, Mapping):
            raise ConfigError("authorization must be a JSON object with 'permissions' and 'superUserRoles'")
        unknown = set(data) - {"permissions", "superUserRoles"}
        if unknown:
            raise ConfigError(f"unknown authorization keys: {', '.join(sorted(unknown))}")
        return cls(data.get("permissions") or {}, data.get("superUserRoles") or ())

    def to_json(self) -> dict[str, Any]:
        """The file form of this authorization (sorted, so it is stable)."""
        return {
            "superUserRoles": sorted(self._superusers),
            "permissions": {
                role: {res: sorted(op.value for op in ops) for res, ops in sorted(g.items())}
                for role, g in sorted(self._grants.items())
            },
        }

    # -- checks ------------------------------------------------------------------------------

    @property
    def super_user_roles(self) -> frozenset[str]:
        return self._superusers

    def is_superuser(self, role: str | None) -> bool:
        return role is not None and role in self._superusers

    def is_allowed(
        self,
        role: str | None,
        operation: str | Operation,
        resource: str | TopicName,
        subscription: str | None = None,
    ) -> bool:
        """Whether ``role`` may run ``operation`` on ``resource`` (a topic, or a namespace for a
        :class:`NamespaceOperation`), through ``subscription`` when given (a namespace's
        ``subscription_auth_roles`` then restrict who consumes, tenant admins aside, as Pulsar's
        ``canConsume``). Never raises for an unknown role: it is simply not allowed."""
        if role is None:
            return False
        if role in self._superusers:
            return True
        op = parse_operation(operation)
        if subscription and op in _NEEDS_CONSUME and not self._may_use_subscription(role, resource, subscription):
            return False
        grants = self._grants.get(role)
        if grants:
            implied = _IMPLIED_BY.get(op, frozenset())
            for key in _candidate_keys(op, resource):
                allowed = grants.get(key)
                if allowed is not None and (op in allowed or not implied.isdisjoint(allowed)):
                    return True
        return self._broker is not None and _stored_allows(self._broker, role, op, resource)

    def _may_use_subscription(self, role: str, resource: str | TopicName, subscription: str) -> bool:
        if self._broker is None:
            return True
        topic = resource if isinstance(resource, TopicName) else TopicName.parse(resource)
        roles = self._broker.namespaces.auth_policies(topic.namespace_name).subscription_auth_roles.get(subscription)
        return not roles or role in roles or role in self._broker.tenants.admin_roles(topic.tenant)

    def is_tenant_admin(self, role: str | None, tenant: str) -> bool:
        """Whether ``role`` is a superuser or in ``tenant``'s stored ``adminRoles``."""
        if role is None:
            return False
        if role in self._superusers:
            return True
        return self._broker is not None and role in self._broker.tenants.admin_roles(tenant)

    def check(
        self,
        role: str | None,
        operation: str | Operation,
        resource: str | TopicName,
        subscription: str | None = None,
    ) -> None:
        """Raise :class:`UnauthenticatedError` (401) without a role, :class:`PermissionDeniedError`
        (403) when the role lacks the operation; return quietly otherwise."""
        if role is None or role == "":
            raise UnauthenticatedError("Need to authenticate to perform the request")
        if self.is_allowed(role, operation, resource, subscription):
            return
        op = parse_operation(operation)
        if isinstance(op, NamespaceOperation):
            raise PermissionDeniedError(
                f"Unauthorized to validateNamespaceOperation for operation [{op}] on namespace [{resource}]"
            )
        raise PermissionDeniedError(
            f"Unauthorized to validateTopicOperation for operation [{op}] on topic [{_topic_text(resource)}]"
        )

    def __repr__(self) -> str:
        return f"Authorization(roles={sorted(self._grants)}, super_user_roles={sorted(self._superusers)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Authorization) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]


def _stored_allows(broker: Broker, role: str, op: Operation, resource: str | TopicName) -> bool:
    """Whether the grants stored in ``broker`` let ``role`` run ``op`` (see the module docstring)."""
    if isinstance(op, NamespaceOperation):
        namespace = resource.namespace_name if isinstance(resource, TopicName) else str(resource)
        topic = None
    else:
        topic = resource if isinstance(resource, TopicName) else TopicName.parse(resource)
        namespace = topic.namespace_name
    if "/" not in namespace:
        return False
    if role in broker.tenants.admin_roles(namespace.split("/", 1)[0]):
        return True
    needed = _stored_actions(op)
    if not needed or (topic is None and op is not NamespaceOperation.GET_TOPICS):
        return False
    auth = broker.namespaces.auth_policies(namespace)
    if not needed.isdisjoint(auth.namespace_auth.get(role, ())):
        return True
    if topic is None:
        return False
    names = [str(topic), str(topic.partitioned_topic)] if topic.is_partition else [str(topic)]
    return any(not needed.isdisjoint(auth.destination_auth.get(n, {}).get(role, ())) for n in names)


def _resource_key(resource: object) -> str:
    if isinstance(resource, TopicName):
        return str(resource)
    if not isinstance(resource, str) or not resource:
        raise ConfigError(f"invalid resource {resource!r}: expected a topic, a namespace or '*'")
    if resource == WILDCARD:
        return WILDCARD
    try:
        if "://" not in resource and resource.count("/") == 1:
            return check_namespace_name(resource)
        return str(TopicName.parse(resource))
    except Exception as e:
        raise ConfigError(f"invalid resource {resource!r} in authorization: {e}") from None


def _candidate_keys(op: Operation, resource: str | TopicName) -> list[str]:
    if isinstance(op, NamespaceOperation):
        namespace = resource.namespace_name if isinstance(resource, TopicName) else str(resource)
        return [WILDCARD, namespace]
    topic = resource if isinstance(resource, TopicName) else TopicName.parse(resource)
    keys = [WILDCARD, str(topic), topic.namespace_name]
    if topic.is_partition:
        keys.append(str(topic.partitioned_topic))
    return keys


def _topic_text(resource: str | TopicName) -> str:
    if isinstance(resource, TopicName):
        return str(resource)
    try:
        return str(TopicName.parse(resource))
    except Exception:
        return str(resource)
