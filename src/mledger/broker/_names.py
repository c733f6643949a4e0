"""Names: Pulsar topic names, their managed-ledger names, and unique producer names.

A topic ``persistent://tenant/ns/local`` is stored in the managed ledger
``tenant/ns/persistent/<encoded local>`` (Pulsar's ``TopicName.getPersistenceNamingEncoding``,
the local name URL-encoded as Java's ``URLEncoder`` does). Partition ``i`` of a partitioned
topic is the topic ``<topic>-partition-<i>``, a managed ledger of its own; the partition count
is kept where Pulsar keeps it, as JSON ``{"partitions": N}`` at
``/admin/partitioned-topics/tenant/ns/persistent/<encoded local>`` in the metadata store.

Short names are Pulsar's too: ``orders`` means ``persistent://public/default/orders`` and
``acme/prod/orders`` means ``persistent://acme/prod/orders``.

``non-persistent://tenant/ns/local`` names a non-persistent topic (nothing stored; see
:mod:`mledger.broker._nonpersistent`): :meth:`TopicName.parse` accepts it only when asked to
(``any_domain=True``), so the persistent machinery never sees one. A partitioned
non-persistent topic's count is kept at Pulsar's path too,
``/admin/partitioned-topics/tenant/ns/non-persistent/<encoded local>``.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from urllib.parse import quote_plus, unquote_plus

from ..core import BadVersionError, InvalidRequestError, InvalidTopicNameError, StateCorruptedError
from ..storage import NEW_NODE, MetadataStore
from ._errors import InvalidNameError

__all__ = [
    "check_cluster_name",
    "check_namespace_name",
    "check_tenant_name",
    "local_name_problem",
    "named_entity_problem",
    "NON_PERSISTENT",
    "PARTITIONED_TOPICS_ROOT",
    "PARTITION_SUFFIX",
    "ProducerNameGenerator",
    "TopicName",
]

PARTITION_SUFFIX = "-partition-"
PARTITIONED_TOPICS_ROOT = "/admin/partitioned-topics"
"""Where partitioned-topic metadata lives (Pulsar's path)."""

_DOMAIN = "persistent"
NON_PERSISTENT = "non-persistent"
"""The domain of non-persistent topics."""
_DOMAINS = frozenset({_DOMAIN, NON_PERSISTENT})
_PARTITION = re.compile(r"^(?P<base>.+)-partition-(?P<index>0|[1-9][0-9]{0,9})$")
_NAMED_ENTITY = re.compile(r"[-=:.\w]+", re.ASCII)  # Pulsar's NamedEntity rule (Java's \w is ASCII), fullmatch
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_DOT_SEGMENTS = frozenset({".", ".."})
_DEFAULT_TENANT = "public"
_DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True, slots=True)
class TopicName:
    """A parsed, normalised topic name (Pulsar's ``TopicName``): persistent unless parsed with
    ``any_domain=True`` from a ``non-persistent://`` name.

    Construction through :meth:`parse` raises :class:`~mledger.core.InvalidTopicNameError`
    (400) naming the bad text.

    >>> t = TopicName.parse("orders-partition-2")
    >>> str(t), t.partition_index, str(t.partitioned_topic)
    ('persistent://public/default/orders-partition-2', 2, 'persistent://public/default/orders')
    >>> t.managed_ledger_name
    'public/default/persistent/orders-partition-2'
    """

    tenant: str
    namespace: str
    local_name: str
    domain: str = _DOMAIN
    """``persistent`` or ``non-persistent``."""

    @classmethod
    def parse(cls, text: str | TopicName, *, any_domain: bool = False) -> TopicName:
        """Parse a full or short name (a short name is persistent). O(len(text)).

        A ``non-persistent://`` name is refused (400) unless ``any_domain``."""
        if isinstance(text, TopicName):
            if text.domain != _DOMAIN and not any_domain:
                raise InvalidTopicNameError(
                    f"Invalid topic name {str(text)!r}: only the 'persistent' domain is supported"
                )
            return text
        if not isinstance(text, str) or not text or text != text.strip():
            raise InvalidTopicNameError(f"Invalid topic name: {text!r}")
        if "://" not in text:
            parts = text.split("/")
            if len(parts) == 1:
                text = f"{_DOMAIN}://{_DEFAULT_TENANT}/{_DEFAULT_NAMESPACE}/{text}"
            elif len(parts) == 3:
                text = f"{_DOMAIN}://{text}"
            else:
                raise InvalidTopicNameError(
                    f"Invalid short topic name '{text}', it should be in the format of"
                    " <tenant>/<namespace>/<topic> or <topic>"
                )
        domain, rest = text.split("://", 1)
        if domain not in _DOMAINS or (domain != _DOMAIN and not any_domain):
            raise InvalidTopicNameError(f"Invalid topic name {text!r}: only the 'persistent' domain is supported")
        parts = rest.split("/")
        if len(parts) != 3 or not all(parts):
            raise InvalidTopicNameError(
                f"Invalid topic name {text!r}: expected {domain}://<tenant>/<namespace>/<topic>"
            )
        tenant, namespace, local = parts
        for what, value in (("tenant", tenant), ("namespace", namespace)):
            problem = named_entity_problem(value)
            if problem:
                raise InvalidTopicNameError(f"Invalid topic name {text!r}: invalid {what} {value!r} ({problem})")
        problem = local_name_problem(local)
        if problem:
            raise InvalidTopicNameError(f"Invalid topic name {text!r}: {problem}")
        return cls(tenant, namespace, local, domain)

    @classmethod
    def from_managed_ledger_name(cls, name: str) -> TopicName | None:
        """The topic stored in managed ledger ``name``, or None if it is not a topic's ledger."""
        parts = name.split("/")
        if len(parts) != 4 or parts[2] != _DOMAIN or not all(parts):
            return None
        try:
            return cls.parse(f"{_DOMAIN}://{parts[0]}/{parts[1]}/{unquote_plus(parts[3])}")
        except InvalidRequestError:
            return None

    @property
    def is_persistent(self) -> bool:
        """Whether the topic is persistent (its messages are stored)."""
        return self.domain == _DOMAIN

    @property
    def namespace_name(self) -> str:
        """``tenant/namespace``."""
        return f"{self.tenant}/{self.namespace}"

    @property
    def encoded_local_name(self) -> str:
        """The local name URL-encoded like Java's ``URLEncoder.encode(name, UTF-8)``."""
        # quote_plus keeps '~', Java's URLEncoder does not.
        return quote_plus(self.local_name, safe="*").replace("~", "%7E")

    @property
    def managed_ledger_name(self) -> str:
        """Pulsar's persistence naming: ``tenant/ns/<domain>/<encoded local name>``."""
        return f"{self.tenant}/{self.namespace}/{self.domain}/{self.encoded_local_name}"

    @property
    def partitioned_metadata_path(self) -> str:
        """Metadata-store path of this topic's partition count (when it is partitioned)."""
        return f"{PARTITIONED_TOPICS_ROOT}/{self.managed_ledger_name}"

    @property
    def partition_index(self) -> int:
        """The partition index, or -1 when this is not a partition's name."""
        match = _PARTITION.match(self.local_name)
        return int(match["index"]) if match else -1

    @property
    def is_partition(self) -> bool:
        """Whether the name is ``<topic>-partition-<i>``."""
        return self.partition_index >= 0

    @property
    def partitioned_topic(self) -> TopicName:
        """The parent of a partition, or this name itself."""
        match = _PARTITION.match(self.local_name)
        if match is None:
            return self
        return TopicName(self.tenant, self.namespace, match["base"], self.domain)

    def partition(self, index: int) -> TopicName:
        """The name of partition ``index`` of this topic."""
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise InvalidRequestError(f"invalid partition index {index!r}")
        return TopicName(self.tenant, self.namespace, f"{self.local_name}{PARTITION_SUFFIX}{index}", self.domain)

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local_name}"


def named_entity_problem(value: object) -> str | None:
    r"""Why ``value`` is not a valid tenant, namespace or cluster name, or None when it is. O(len).

    The one rule of those names, read by :func:`check_tenant_name`, :func:`check_namespace_name`,
    :func:`check_cluster_name` and :meth:`TopicName.parse`. Pulsar's ``NamedEntity.checkName``
    (``^[-=:.\w]*$`` without ``UNICODE_CHARACTER_CLASS``, so ``\w`` is ASCII ``[a-zA-Z_0-9]``):
    ASCII letters, digits and ``-=:._``, the whole string (no trailing newline), not empty
    (``NamespaceName.validateNamespaceName``). And not ``.`` or ``..``, which ``checkName`` lets
    through but no Pulsar can hold: HTTP clients and servers resolve them as dot segments
    (RFC 3986 5.2.4) before a route sees them, and ZooKeeper refuses them as node names
    (``PathUtils.validatePath``, "relative paths not allowed").
    """
    if not isinstance(value, str):
        return "not a string"
    if not value:
        return "the name must not be empty"
    if not _NAMED_ENTITY.fullmatch(value):
        return "only ASCII letters, digits and -=:._ are allowed"
    if value in _DOT_SEGMENTS:
        return f"{value!r} is not a name"
    return None


def _named(kind: str, name: object, problem: str | None) -> str:
    if problem is not None or not isinstance(name, str):
        raise InvalidNameError(f"{kind} name is not valid: {name!r} ({problem})")
    return name


def check_tenant_name(name: object) -> str:
    """``name`` when it is a valid tenant name (:func:`named_entity_problem`); else
    :class:`~mledger.broker.InvalidNameError`, 412 "Tenant name is not valid: <name> (<why>)"
    (Pulsar's ``TenantsBase.createTenant`` and ``NamespacesBase.internalGetTenantNamespaces``)."""
    return _named("Tenant", name, named_entity_problem(name))


def check_cluster_name(name: object) -> str:
    """``name`` when it is a valid cluster name (:func:`named_entity_problem`); else
    :class:`~mledger.broker.InvalidNameError`, 412 "Cluster name is not valid: <name> (<why>)"
    (Pulsar's ``ClustersBase.createCluster``)."""
    return _named("Cluster", name, named_entity_problem(name))


def check_namespace_name(namespace: object) -> str:
    """``tenant/namespace`` when both are valid names (:func:`named_entity_problem`); else
    :class:`~mledger.broker.InvalidNameError`, 412 "Namespace name is not valid: <name> (<why>)",
    whichever part is bad (Pulsar's ``AdminResource.validateNamespaceName`` over
    ``NamespaceName.get``; mledger has no v1 ``tenant/cluster/namespace`` namespaces)."""
    parts = namespace.split("/") if isinstance(namespace, str) else []
    if len(parts) != 2:
        return _named("Namespace", namespace, "expected <tenant>/<namespace>")
    for what, value in zip(("tenant", "namespace"), parts, strict=True):
        problem = named_entity_problem(value)
        if problem:
            return _named("Namespace", namespace, f"invalid {what} {value!r}: {problem}")
    return _named("Namespace", namespace, None)


def local_name_problem(value: str) -> str | None:
    """Why ``value`` is not a valid topic local name or subscription name, or None when it is:
    empty or blank, ``.`` or ``..``, or holding a control character (NUL included)."""
    if not value or not value.strip():
        return "the name must not be blank"
    if value in _DOT_SEGMENTS:
        return f"{value!r} is not a name"
    bad = _CONTROL.search(value)
    if bad:
        return f"control character {bad.group()!r} at index {bad.start()}"
    return None


def encode_partitioned_metadata(partitions: int) -> bytes:
    """Pulsar's ``PartitionedTopicMetadata`` JSON."""
    return json.dumps({"partitions": partitions}).encode()


def decode_partitioned_metadata(path: str, data: bytes) -> int:
    """The partition count stored at ``path``; raises ``StateCorruptedError`` when unreadable."""
    try:
        value = json.loads(data)["partitions"]
    except (ValueError, KeyError, TypeError) as exc:
        raise StateCorruptedError(f"unreadable partitioned-topic metadata at {path}: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise StateCorruptedError(f"invalid partition count {value!r} at {path}")
    return value


class ProducerNameGenerator:
    """Broker-unique producer names: ``<cluster>-<instance>-<n>`` (Pulsar's ``DistributedIdGenerator``).

    Each generator takes a fresh instance number from a counter node in the metadata store
    (compare-and-set), so names stay unique across restarts and across brokers sharing a store;
    ``n`` counts within the instance. Thread-safe; construction does one store round trip.
    """

    PATH = "/counters/producer-name"

    def __init__(self, store: MetadataStore, prefix: str) -> None:
        self._prefix = prefix
        self._lock = threading.Lock()
        self._next = 0
        self._instance = self._claim_instance(store)

    @classmethod
    def _claim_instance(cls, store: MetadataStore) -> int:
        for _ in range(100):
            stored = store.get(cls.PATH)
            current = -1 if stored is None else int(stored.data.decode() or -1)
            try:
                store.put(cls.PATH, str(current + 1).encode(), NEW_NODE if stored is None else stored.version)
            except BadVersionError:
                continue
            return current + 1
        raise BadVersionError(f"could not claim a producer-name instance at {cls.PATH} after 100 attempts")

    @property
    def instance(self) -> int:
        """This generator's instance number."""
        return self._instance

    def next_name(self) -> str:
        """A name no other generator over the same store hands out. O(1)."""
        with self._lock:
            n = self._next
            self._next += 1
        return f"{self._prefix}-{self._instance}-{n}"
