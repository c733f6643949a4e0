"""Namespaces and their policies, where Pulsar keeps them: ``/admin/policies/<tenant>/<ns>``.

A namespace exists once created (its policies node holds JSON like Pulsar's ``Policies``, of
which mledger models ``deduplicationEnabled``: true, false or null for "the broker's setting",
``retention_policies``: Pulsar's ``RetentionPolicies`` or null, ``compaction_threshold``: bytes
or null, and the schema policies ``schema_compatibility_strategy``,
``schema_auto_update_compatibility_strategy`` and ``is_allow_auto_update_schema``, each absent
or null when unset). Automatic topic creation
makes topics in namespaces that exist, never namespaces (Pulsar); a namespace that holds topics
without a policies node (written by mledger versions that created namespaces on first use)
still counts as existing. Every broker creates ``public/default`` (:data:`DEFAULT_NAMESPACE`)
if missing, so embedded use needs no set-up; the standalone broker creates
:data:`STANDALONE_NAMESPACES`, as Pulsar's standalone does.

Thread-safe through the metadata store's compare-and-set; the broker applies a changed
deduplication policy to the namespace's open topics.
"""

from __future__ import annotations

import json
import re

from ..core.errors import BadVersionError, InvalidRequestError, MLedgerError, NotFoundError, StateCorruptedError
from ..storage import NEW_NODE, Store
from .errors import TopicAlreadyExistsError
from .retention import RetentionPolicies
from .schema_compat import AUTO_UPDATE_POLICIES, SchemaCompatibilityStrategy

__all__ = [
    "DEFAULT_NAMESPACE",
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
_SEGMENT = re.compile(r"^[-=:.\w]+$")


class NamespaceAlreadyExistsError(TopicAlreadyExistsError):
    """``create`` named a namespace that exists (409 "Namespace already exists")."""


class NamespaceNotFoundError(NotFoundError):
    """A topic named a namespace that does not exist (404 "Namespace does not exist"; a client
    creating a producer or consumer there gets ``TopicNotFound``)."""


class NamespaceNotEmptyError(MLedgerError):
    """``delete`` of a namespace that still has topics (409 "Cannot delete non empty namespace")."""

    http_status = 409


def check_namespace(name: str) -> tuple[str, str]:
    """``tenant/namespace`` -> its two parts; ``InvalidRequestError`` naming a bad name."""
    parts = name.split("/") if isinstance(name, str) else []
    if len(parts) != 2 or not all(_SEGMENT.match(p) for p in parts):
        raise InvalidRequestError(f"Invalid namespace name: {name!r} (expected tenant/namespace)")
    return parts[0], parts[1]


class Namespaces:
    """The namespaces stored in one metadata store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def create(self, name: str) -> None:
        """Create ``tenant/namespace`` with default policies; ``NamespaceAlreadyExistsError``."""
        check_namespace(name)
        try:
            self._store.put(f"{POLICIES_ROOT}/{name}", json.dumps({"deduplicationEnabled": None}).encode(), NEW_NODE)
        except BadVersionError:
            raise NamespaceAlreadyExistsError(f"Namespace already exists: {name}") from None

    def ensure(self, name: str) -> bool:
        """Create ``tenant/namespace`` unless it was created already; True when this call did."""
        try:
            self.create(name)
        except NamespaceAlreadyExistsError:
            return False
        return True

    def exists(self, name: str) -> bool:
        """Whether ``name`` was created (topics alone do not count here)."""
        check_namespace(name)
        return self._store.get(f"{POLICIES_ROOT}/{name}") is not None

    def list(self, tenant: str | None = None) -> list[str]:
        """Created namespaces (of ``tenant``), sorted."""
        tenants = [tenant] if tenant is not None else self._store.children(POLICIES_ROOT)
        return sorted(f"{t}/{ns}" for t in tenants for ns in self._store.children(f"{POLICIES_ROOT}/{t}"))

    def delete(self, name: str) -> None:
        """Forget the namespace's policies; ``NotFoundError`` when it was not created."""
        check_namespace(name)
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
        check_namespace(name)
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
        check_namespace(name)
        value = self._policies(name).get("compaction_threshold")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def set_compaction_threshold(self, name: str, threshold: int | None) -> None:
        """Set (or with None, remove) the compaction threshold; creates the namespace's node."""
        self._update(name, "compaction_threshold", threshold)

    def schema_compatibility_strategy(self, name: str) -> SchemaCompatibilityStrategy | None:
        """The namespace's strategy in force for its topics: its ``schema_compatibility_strategy``,
        else (unset or ``UNDEFINED``) its older ``schema_auto_update_compatibility_strategy``
        mapped as Pulsar maps it; None when neither is set (the broker's setting applies)."""
        check_namespace(name)
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
        check_namespace(name)
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
        check_namespace(name)
        value = self._policies(name).get("is_allow_auto_update_schema")
        return value if isinstance(value, bool) else None

    def set_is_allow_auto_update_schema(self, name: str, allowed: bool | None) -> None:
        """Set (None: remove) ``is_allow_auto_update_schema``; creates the namespace's node."""
        self._update(name, "is_allow_auto_update_schema", allowed)

    @staticmethod
    def _stored_strategy(name: str, value: object) -> SchemaCompatibilityStrategy:
        try:
            return SchemaCompatibilityStrategy.parse(value)
        except InvalidRequestError as exc:
            raise StateCorruptedError(f"policies of {name}: {exc}") from None

    def _update(self, name: str, key: str, value: object) -> None:
        check_namespace(name)
        path = f"{POLICIES_ROOT}/{name}"
        for _ in range(5):
            stored = self._store.get(path)
            policies = self._decode(path, stored.data) if stored is not None else {}
            policies[key] = value
            try:
                self._store.put(path, json.dumps(policies).encode(), NEW_NODE if stored is None else stored.version)
                return
            except BadVersionError:
                continue
        raise BadVersionError(f"policies of {name} changed concurrently; retry")

    def _policies(self, name: str) -> dict[str, object]:
        path = f"{POLICIES_ROOT}/{name}"
        stored = self._store.get(path)
        return {} if stored is None else self._decode(path, stored.data)

    @staticmethod
    def _decode(path: str, data: bytes) -> dict[str, object]:
        try:
            value = json.loads(data)
        except ValueError as exc:
            raise StateCorruptedError(f"policies at {path} are not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise StateCorruptedError(f"policies at {path} are not a JSON object")
        return value
