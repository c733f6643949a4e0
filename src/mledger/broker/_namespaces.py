"""Namespaces and their policies, where Pulsar keeps them: ``/admin/policies/<tenant>/<ns>``.

A namespace exists once created (its policies node holds JSON like Pulsar's ``Policies``, of
which mledger models ``deduplicationEnabled``: true, false or null for "the broker's setting",
``retention_policies``: Pulsar's ``RetentionPolicies`` or null, ``compaction_threshold``: bytes
or null, ``message_ttl_in_seconds``, ``inactive_topic_policies`` and ``backlog_quota_map``
(:mod:`mledger.broker._time_policies`), and the schema policies ``schema_compatibility_strategy``,
``schema_auto_update_compatibility_strategy`` and ``is_allow_auto_update_schema``, each absent
or null when unset, and ``auth_policies``: Pulsar's ``AuthPolicies``, the roles' actions on the
namespace and its topics, which :class:`~mledger.admin.Authorization` reads). A namespace's
tenant (:mod:`mledger.broker._tenants`) is the node above it. Automatic topic creation
makes topics in namespaces that exist, never namespaces (Pulsar); a namespace that holds topics
without a policies node (written by mledger versions that created namespaces on first use)
still counts as existing. Every broker creates ``public/default`` (:data:`DEFAULT_NAMESPACE`)
and its tenant if missing (unless told not to), so embedded use needs no set-up; the standalone
broker creates :data:`STANDALONE_NAMESPACES`, as Pulsar's standalone does, without authorization.

Thread-safe through the metadata store's compare-and-set; the broker applies a changed
deduplication policy to the namespace's open topics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from ..core import (
    InvalidRequestError,
    MLedgerError,
    NotFoundError,
    PreconditionFailedError,
    StateCorruptedError,
)
from ..storage import Store
from ._errors import TopicAlreadyExistsError
from ._names import check_namespace_name, check_tenant_name
from ._retention import RetentionPolicies
from ._schema_compat import AUTO_UPDATE_POLICIES, SchemaCompatibilityStrategy
from ._stored_json import create_object, decode_object, update_object
from ._time_policies import check_time_policies

__all__ = [
    "AUTH_ACTIONS",
    "DEFAULT_NAMESPACE",
    "AuthPolicies",
    "POLICIES_ROOT",
    "STANDALONE_NAMESPACES",
    "NamespaceAlreadyExistsError",
    "NamespaceNotEmptyError",
    "NamespaceNotFoundError",
    "Namespaces",
]

POLICIES_ROOT = "/admin/policies"
DEFAULT_NAMESPACE = "public/default"
"""The namespace of short topic names, created by every broker if missing."""
STANDALONE_NAMESPACES = ("public/default", "pulsar/system", "sample/ns1")
"""What Pulsar's standalone creates on start (``PulsarStandalone``: the default namespace, the
system namespace and the sample one); ``mledger standalone`` creates them too."""


class NamespaceAlreadyExistsError(TopicAlreadyExistsError):
    """``create`` named a namespace that exists (409 "Namespace already exists")."""


class NamespaceNotFoundError(NotFoundError):
    """A topic named a namespace that does not exist (404 "Namespace does not exist"; a client
    creating a producer or consumer there gets ``TopicNotFound``)."""


class NamespaceNotEmptyError(MLedgerError):
    """``delete`` of a namespace that still has topics (409 "Cannot delete non empty namespace")."""

    http_status = 409


AUTH_ACTIONS = ("produce", "consume", "functions", "sources", "sinks", "packages")
"""Pulsar's ``AuthAction`` names (mledger's servers decide on ``produce`` and ``consume``)."""


def check_actions(actions: Iterable[str]) -> frozenset[str]:
    """Validated ``AuthAction`` names; ``InvalidRequestError`` naming an unknown one."""
    if isinstance(actions, str) or not isinstance(actions, Iterable):
        raise InvalidRequestError(f'invalid actions {actions!r}: expected a list like ["produce", "consume"]')
    found = frozenset(actions)
    unknown = sorted(str(a) for a in found if a not in AUTH_ACTIONS)
    if unknown:
        raise InvalidRequestError(f"unknown actions {unknown}: expected some of {', '.join(AUTH_ACTIONS)}")
    return found


def check_role(role: object) -> str:
    """A role name; ``InvalidRequestError`` for an empty or non-string one."""
    if not isinstance(role, str) or not role.strip():
        raise InvalidRequestError(f"invalid role {role!r}: expected a non-empty name")
    return role


Grants = Mapping[str, frozenset[str]]


@dataclass(frozen=True)
class AuthPolicies:
    """Pulsar's ``AuthPolicies`` in a namespace's policies: ``namespace_auth`` (role -> actions),
    ``destination_auth`` (topic -> role -> actions) and ``subscription_auth_roles``
    (subscription -> roles), kept as given."""

    namespace_auth: Mapping[str, frozenset[str]] = field(default_factory=dict)
    destination_auth: Mapping[str, Grants] = field(default_factory=dict)
    subscription_auth_roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: object) -> AuthPolicies:
        """From Pulsar's JSON (None: empty); ``InvalidRequestError`` for a bad shape or action."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise InvalidRequestError(f"invalid auth_policies {data!r}: expected a JSON object")
        destinations = data.get("destination_auth") or {}
        subscriptions = data.get("subscription_auth_roles") or {}
        if not isinstance(destinations, Mapping) or not isinstance(subscriptions, Mapping):
            raise InvalidRequestError("invalid auth_policies: destination_auth and subscription_auth_roles are objects")
        return cls(
            _grants(data.get("namespace_auth") or {}),
            {str(topic): _grants(roles) for topic, roles in destinations.items()},
            {str(sub): tuple(check_role(r) for r in roles) for sub, roles in subscriptions.items()},
        )

    def to_json(self) -> dict[str, object]:
        """Pulsar's JSON form (sorted, so it is stable)."""
        return {
            "namespace_auth": _grants_json(self.namespace_auth),
            "destination_auth": {t: _grants_json(g) for t, g in sorted(self.destination_auth.items())},
            "subscription_auth_roles": {s: sorted(r) for s, r in sorted(self.subscription_auth_roles.items())},
        }

    def with_grant(self, role: str, actions: frozenset[str], topic: str | None) -> AuthPolicies:
        """A copy where ``role`` has exactly ``actions`` on the namespace or ``topic``."""
        if topic is None:
            return replace(self, namespace_auth={**self.namespace_auth, role: actions})
        per_topic = {**self.destination_auth.get(topic, {}), role: actions}
        return replace(self, destination_auth={**self.destination_auth, topic: per_topic})

    def with_subscription_roles(self, subscription: str, roles: tuple[str, ...]) -> AuthPolicies:
        """A copy where only ``roles`` may consume through ``subscription`` (none: anyone who may
        consume); Pulsar's ``grantPermissionOnSubscription`` replaces the list."""
        rest = {s: r for s, r in self.subscription_auth_roles.items() if s != subscription}
        return replace(self, subscription_auth_roles={**rest, subscription: roles} if roles else rest)

    def without_grant(self, role: str, topic: str | None) -> AuthPolicies:
        """A copy without ``role``'s actions on the namespace or ``topic``."""
        if topic is None:
            return replace(self, namespace_auth={r: a for r, a in self.namespace_auth.items() if r != role})
        per_topic = {r: a for r, a in self.destination_auth.get(topic, {}).items() if r != role}
        rest = {t: g for t, g in self.destination_auth.items() if t != topic}
        return replace(self, destination_auth={**rest, topic: per_topic} if per_topic else rest)


def _grants(data: object) -> dict[str, frozenset[str]]:
    if not isinstance(data, Mapping):
        raise InvalidRequestError(f"invalid grants {data!r}: expected an object of role -> actions")
    return {check_role(role): check_actions(actions) for role, actions in data.items()}


def _grants_json(grants: Grants) -> dict[str, list[str]]:
    return {role: sorted(actions) for role, actions in sorted(grants.items())}


def check_policies(policies: Mapping[str, object]) -> dict[str, object]:
    """A ``Policies`` body for a new namespace, its modelled fields checked (``auth_policies``,
    ``deduplicationEnabled``, ``retention_policies``, ``compaction_threshold``, the schema
    policies); ``InvalidRequestError`` naming a bad one. Other fields are kept as given."""
    if not isinstance(policies, Mapping):
        raise InvalidRequestError(f"invalid namespace policies {policies!r}: expected a JSON object")
    body = {str(k): v for k, v in policies.items() if v is not None}
    if "auth_policies" in body:
        body["auth_policies"] = AuthPolicies.from_json(body["auth_policies"]).to_json()
    if "deduplicationEnabled" in body and not isinstance(body["deduplicationEnabled"], bool):
        raise InvalidRequestError(f"invalid deduplicationEnabled {body['deduplicationEnabled']!r}: expected a boolean")
    if "retention_policies" in body:
        RetentionPolicies.from_json(body["retention_policies"]).validate()
    threshold = body.get("compaction_threshold")
    if threshold is not None and (not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 0):
        raise InvalidRequestError(f"invalid compaction_threshold {threshold!r}: expected bytes >= 0")
    if "schema_compatibility_strategy" in body:
        body["schema_compatibility_strategy"] = SchemaCompatibilityStrategy.parse(
            body["schema_compatibility_strategy"]
        ).value
    auto = body.get("schema_auto_update_compatibility_strategy")
    if auto is not None and auto not in AUTO_UPDATE_POLICIES:
        raise InvalidRequestError(f"Invalid schema auto-update strategy {auto!r}")
    allow = body.get("is_allow_auto_update_schema")
    if allow is not None and not isinstance(allow, bool):
        raise InvalidRequestError(f"invalid is_allow_auto_update_schema {allow!r}: expected a boolean")
    check_time_policies(body)
    return body


class Namespaces:
    """The namespaces stored in one metadata store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def create(self, name: str, policies: Mapping[str, object] | None = None) -> None:
        """Create ``tenant/namespace`` with ``policies`` (Pulsar's ``Policies`` JSON, the body of
        ``PUT /admin/v2/namespaces/{t}/{ns}``: the fields mledger models are checked, others kept
        as given); ``NamespaceAlreadyExistsError``, ``InvalidRequestError`` for a bad field."""
        check_namespace_name(name)
        body = {"deduplicationEnabled": None, **check_policies(policies or {})}
        if not create_object(self._store, f"{POLICIES_ROOT}/{name}", body):
            raise NamespaceAlreadyExistsError(f"Namespace already exists: {name}")

    def ensure(self, name: str) -> bool:
        """Create ``tenant/namespace`` unless it was created already; True when this call did."""
        try:
            self.create(name)
        except NamespaceAlreadyExistsError:
            return False
        return True

    def exists(self, name: str) -> bool:
        """Whether ``name`` was created (topics alone do not count here)."""
        check_namespace_name(name)
        return self._store.get(f"{POLICIES_ROOT}/{name}") is not None

    def list(self, tenant: str | None = None) -> list[str]:
        """Created namespaces (of ``tenant``), sorted."""
        tenants = [check_tenant_name(tenant)] if tenant is not None else self._store.children(POLICIES_ROOT)
        return sorted(f"{t}/{ns}" for t in tenants for ns in self._store.children(f"{POLICIES_ROOT}/{t}"))

    def delete(self, name: str) -> None:
        """Forget the namespace's policies; ``NotFoundError`` when it was not created."""
        check_namespace_name(name)
        path = f"{POLICIES_ROOT}/{name}"
        if self._store.get(path) is None:
            raise NotFoundError(f"Namespace {name} does not exist")
        self._store.delete(path)

    def deduplication(self, name: str) -> bool | None:
        """The namespace's deduplication policy: True, False, or None (the broker's setting)."""
        value = self._policies(name).get("deduplicationEnabled")
        return value if isinstance(value, bool) else None

    def set_deduplication(self, name: str, enabled: bool | None) -> None:
        """Set (or with None, remove) the deduplication policy; creates the namespace's node
        (the broker checks first that the namespace exists)."""
        self._update(name, "deduplicationEnabled", enabled)

    def retention(self, name: str) -> RetentionPolicies | None:
        """The namespace's retention policy (Pulsar's ``retention_policies``), None when unset."""
        check_namespace_name(name)
        value = self._policies(name).get("retention_policies")
        try:
            return None if value is None else RetentionPolicies.from_json(value)
        except InvalidRequestError as exc:
            raise StateCorruptedError(f"policies of {name}: {exc}") from None

    def set_retention(self, name: str, policies: RetentionPolicies | None) -> None:
        """Set (or with None, remove) the retention policy; creates the namespace's node (the
        broker checks first that the namespace exists)."""
        self._update(name, "retention_policies", None if policies is None else policies.to_json())

    def compaction_threshold(self, name: str) -> int | None:
        """The namespace's ``compaction_threshold`` (bytes; 0: no automatic compaction), None
        when unset."""
        check_namespace_name(name)
        value = self._policies(name).get("compaction_threshold")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def set_compaction_threshold(self, name: str, threshold: int | None) -> None:
        """Set (or with None, remove) the compaction threshold; creates the namespace's node."""
        self._update(name, "compaction_threshold", threshold)

    def schema_compatibility_strategy(self, name: str) -> SchemaCompatibilityStrategy | None:
        """The namespace's strategy in force for its topics: its ``schema_compatibility_strategy``,
        else (unset or ``UNDEFINED``) its older ``schema_auto_update_compatibility_strategy``
        mapped as Pulsar maps it; None when neither is set (the broker's setting applies)."""
        check_namespace_name(name)
        policies = self._policies(name)
        value = policies.get("schema_compatibility_strategy")
        if value is not None and value != SchemaCompatibilityStrategy.UNDEFINED.value:
            return self._stored_strategy(name, value)
        auto = policies.get("schema_auto_update_compatibility_strategy")
        if auto is None:
            return None
        return SchemaCompatibilityStrategy.from_auto_update_policy(str(auto))

    def set_schema_compatibility_strategy(self, name: str, strategy: SchemaCompatibilityStrategy | None) -> None:
        """Set (None: remove) ``schema_compatibility_strategy``; creates the namespace's node."""
        value = None if strategy is None else SchemaCompatibilityStrategy.parse(strategy).value
        self._update(name, "schema_compatibility_strategy", value)

    def schema_auto_update_compatibility_strategy(self, name: str) -> str | None:
        """The older policy (``Full``, ``Backward``, ..., ``AutoUpdateDisabled``), None when unset."""
        check_namespace_name(name)
        value = self._policies(name).get("schema_auto_update_compatibility_strategy")
        return None if value is None else str(value)

    def set_schema_auto_update_compatibility_strategy(self, name: str, policy: str | None) -> None:
        """Set (None: remove) the older policy; ``InvalidRequestError`` naming a bad value."""
        if policy is not None and policy not in AUTO_UPDATE_POLICIES:
            names = ", ".join(sorted(AUTO_UPDATE_POLICIES))
            raise InvalidRequestError(f"Invalid schema auto-update strategy {policy!r}: expected one of {names}")
        self._update(name, "schema_auto_update_compatibility_strategy", policy)

    def is_allow_auto_update_schema(self, name: str) -> bool | None:
        """``is_allow_auto_update_schema``: True, False, or None (the broker's setting)."""
        check_namespace_name(name)
        value = self._policies(name).get("is_allow_auto_update_schema")
        return value if isinstance(value, bool) else None

    def set_is_allow_auto_update_schema(self, name: str, allowed: bool | None) -> None:
        """Set (None: remove) ``is_allow_auto_update_schema``; creates the namespace's node."""
        self._update(name, "is_allow_auto_update_schema", allowed)

    def get_field(self, name: str, key: str) -> object:
        """One field of the namespace's stored ``Policies`` JSON (None when unset)."""
        check_namespace_name(name)
        return self._policies(name).get(key)

    def set_field(self, name: str, key: str, value: object) -> None:
        """Set (None: clear) one field of the namespace's ``Policies`` JSON; creates the
        namespace's node (the broker checks first that the namespace exists)."""
        self._update(name, key, value)

    def policies(self, name: str) -> dict[str, object]:
        """The namespace's stored ``Policies`` JSON (``auth_policies`` always present, in
        Pulsar's form); ``{}``-like for a namespace that only holds topics."""
        check_namespace_name(name)
        stored = self._policies(name)
        return {**stored, "auth_policies": AuthPolicies.from_json(stored.get("auth_policies")).to_json()}

    def auth_policies(self, name: str) -> AuthPolicies:
        """The namespace's ``auth_policies`` (empty when unset or the namespace is unknown)."""
        check_namespace_name(name)
        try:
            return AuthPolicies.from_json(self._policies(name).get("auth_policies"))
        except InvalidRequestError as exc:
            raise StateCorruptedError(f"policies of {name}: {exc}") from None

    def grant(self, name: str, role: str, actions: Iterable[str], topic: str | None = None) -> None:
        """Set ``role``'s actions on the namespace, or with ``topic`` on that topic (Pulsar's
        grant replaces the role's earlier actions there); the broker checks the namespace exists."""
        granted = check_actions(actions)
        check_role(role)

        def change(auth: AuthPolicies) -> AuthPolicies:
            return auth.with_grant(role, granted, topic)

        self._modify_auth(name, change)

    def revoke(self, name: str, role: str, topic: str | None = None) -> None:
        """Remove ``role``'s actions on the namespace or ``topic``; ``PreconditionFailedError``
        (412) for a topic where the role has none (Pulsar's "Permissions are not set at the topic
        level"); a namespace revoke of an ungranted role changes nothing."""
        check_role(role)

        def change(auth: AuthPolicies) -> AuthPolicies:
            if topic is not None and role not in auth.destination_auth.get(topic, {}):
                raise PreconditionFailedError(f"Permissions are not set at the topic level: {topic} role {role}")
            return auth.without_grant(role, topic)

        self._modify_auth(name, change)

    def grant_subscription(self, name: str, subscription: str, roles: Iterable[str]) -> None:
        """Let only ``roles`` consume through ``subscription`` in the namespace (Pulsar's
        ``subscription_auth_roles``; superusers and tenant admins are never restricted)."""
        allowed = tuple(sorted({check_role(r) for r in roles}))
        if not isinstance(subscription, str) or not subscription:
            raise InvalidRequestError(f"invalid subscription {subscription!r}")
        self._modify_auth(name, lambda auth: auth.with_subscription_roles(subscription, allowed))

    def revoke_subscription(self, name: str, subscription: str, role: str) -> None:
        """Remove ``role`` from the roles of ``subscription``; 412 when it is not among them."""

        def change(auth: AuthPolicies) -> AuthPolicies:
            roles = auth.subscription_auth_roles.get(subscription, ())
            if role not in roles:
                raise PreconditionFailedError(f"Role {role} has no permission on subscription {subscription}")
            return auth.with_subscription_roles(subscription, tuple(r for r in roles if r != role))

        self._modify_auth(name, change)

    def _modify_auth(self, name: str, change: Callable[[AuthPolicies], AuthPolicies]) -> None:
        def apply(policies: dict[str, object]) -> None:
            policies["auth_policies"] = change(AuthPolicies.from_json(policies.get("auth_policies"))).to_json()

        check_namespace_name(name)
        update_object(self._store, f"{POLICIES_ROOT}/{name}", apply, name)

    @staticmethod
    def _stored_strategy(name: str, value: object) -> SchemaCompatibilityStrategy:
        try:
            return SchemaCompatibilityStrategy.parse(value)
        except InvalidRequestError as exc:
            raise StateCorruptedError(f"policies of {name}: {exc}") from None

    def _update(self, name: str, key: str, value: object) -> None:
        check_namespace_name(name)
        update_object(self._store, f"{POLICIES_ROOT}/{name}", lambda policies: policies.update({key: value}), name)

    def _policies(self, name: str) -> dict[str, object]:
        path = f"{POLICIES_ROOT}/{name}"
        stored = self._store.get(path)
        return {} if stored is None else decode_object(path, stored.data)
