"""The broker: topics over a managed-ledger factory, found again after a restart.

Theory of operation
-------------------
``Broker(factory)`` serves topics whose data lives in ``factory``'s store. Nothing is loaded
up front: a topic is opened on first use (``get_topic``, ``create_producer``, ``subscribe``),
which re-opens its managed ledger and, with it, every durable cursor, i.e. every subscription
with its stored type. So a broker over a :class:`~mledger.storage.SqliteStore` directory that
an earlier broker wrote finds its topics, subscriptions, acknowledgements and cancellations.

Topics live in namespaces that exist (:mod:`mledger.broker._namespaces`): creating a topic,
explicitly or on first use, in a namespace that does not exist raises
``NamespaceNotFoundError`` (404), as Pulsar refuses it; a new broker creates ``public/default``
if missing, so short topic names need no set-up.

* non-partitioned topic ``T`` = managed ledger ``T.managed_ledger_name``;
* partitioned topic ``T`` with N partitions = metadata node ``/admin/partitioned-topics/...``
  holding ``{"partitions": N}`` plus the N partition topics ``T-partition-i``.

Time comes from the broker's clock (``clock``, else the factory's): publish times, deliver-at
checks, and the broker-semantic timers of :attr:`Broker.timers` (:mod:`mledger.broker._monitors`:
message TTL, inactive topics, backlog quotas, retention, compaction, deduplication, stats, delayed
delivery), which ``timers.advance(ms)`` (a manual clock), :meth:`Broker.run_due_tasks` or the
protocol server fire; ``receive`` checks due delayed messages by itself too.

Randomness: the broker's one random source is :attr:`Broker.random`, a ``random.Random`` seeded
with :attr:`Broker.seed` (``seed=``; none given: one drawn from the OS, so it can be logged and
given again). Whatever the broker draws at random draws from it, so a run with the same seed and
the same client commands draws the same numbers; the fault registry's draws (a fault's random
delay) come from its own generator, seeded with the same seed unless it was given its own. Nothing else in the
broker is random: dispatch order, redelivery order, Key_Shared ranges (hashes of consumer
names), ledger ids, producer and consumer names follow from the commands alone
(docs/pulsar/deterministic.md).

Thread-safe: one lock guards the topic cache and is held while a topic is opened or created
(storage I/O); topic, subscription and producer operations take their own locks.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping

from ..codec import MessageId
from ..core import (
    BadVersionError,
    Clock,
    ConfigError,
    InvalidRequestError,
    InvalidTopicNameError,
    ManualClock,
    NotAllowedError,
    NotFoundError,
    TimerQueue,
)
from ..managed_ledger import ML_ROOT, InitialPosition, ManagedLedgerFactory
from ..storage import NEW_NODE
from ._backlog_quota import (
    BacklogQuota,
    BacklogQuotaExceededError,
    BacklogQuotaType,
    BacklogRetentionPolicy,
    exceeds_size_limit,
)
from ._compaction import check_compaction_threshold
from ._config import BrokerConfig
from ._dedup import MessageDeduplication
from ._errors import (
    AlreadyClosedError,
    ClockNotManualError,
    MetadataStoreError,
    PersistenceError,
    TopicAlreadyExistsError,
    TopicBusyError,
    store_failures,
)
from ._faults import Faults
from ._hooks import DEDUPLICATION_CURSOR_NAME, Deduplication
from ._inactive_topics import InactiveTopicDeleteMode, InactiveTopicPolicies
from ._journal import BrokerJournal
from ._monitors import BrokerMonitors, time_backlog_exceeded
from ._names import (
    PARTITIONED_TOPICS_ROOT,
    ProducerNameGenerator,
    TopicName,
    check_namespace_name,
    decode_partitioned_metadata,
    encode_partitioned_metadata,
)
from ._namespaces import (
    DEFAULT_NAMESPACE,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    Namespaces,
)
from ._nonpersistent import NonPersistentTopic, NonPersistentTopics
from ._partitioned import PartitionedSubscription, PartitionedTopic
from ._producer import PartitionedProducer, Producer
from ._retention import RetentionPolicies, TopicPolicies
from ._schema_compat import SchemaCompatibilityStrategy
from ._schemas import SchemaInfo, SchemaRegistry
from ._subscription import Subscription
from ._tenants import Clusters, TenantInfo, TenantNotFoundError, Tenants
from ._time_policies import TimePolicies
from ._topic import Topic
from ._types import SubscriptionType

__all__ = ["AnyTopic", "Broker"]

log = logging.getLogger(__name__)

AnyTopic = Topic | PartitionedTopic
"""What ``create_topic`` / ``get_topic`` return."""

DedupFactory = Callable[[Topic], Deduplication]

SCHEMA_STRATEGY_POLICY = "schemaCompatibilityStrategy"
"""The topic policy field of the schema compatibility strategy (Pulsar's ``TopicPolicies``)."""


class Broker:
    """Topics, producers and subscriptions over one :class:`~mledger.managed_ledger.ManagedLedgerFactory`.

    ``dedup_factory`` builds each topic's deduplication hook (see :mod:`mledger.broker._hooks`).
    ``journal`` hears every stored entry and cursor change (see :mod:`mledger.broker._journal`;
    ``mledger.replay.Recorder`` records them as the replay's raw logs) and is
    closed by :meth:`close`. ``faults`` is the fault registry to serve (:class:`Faults`;
    default: one with fault injection off). The broker does not close the factory. It creates its cluster
    (``config.cluster_name``) and, unless ``default_namespace`` is False (a standalone with
    authorization on: the set-up script creates tenants and namespaces), ``public/default`` and
    its tenant when missing. ``seed`` seeds :attr:`random` (see the module docstring).
    """

    def __init__(
        self,
        factory: ManagedLedgerFactory,
        config: BrokerConfig | None = None,
        clock: Clock | None = None,
        dedup_factory: DedupFactory | None = None,
        journal: BrokerJournal | None = None,
        default_namespace: bool = True,
        faults: Faults | None = None,
        seed: int | None = None,
    ) -> None:
        if not isinstance(factory, ManagedLedgerFactory):
            raise ConfigError(f"Broker needs a ManagedLedgerFactory, got {factory!r}")
        self.factory = factory
        self.config = config if config is not None else BrokerConfig()
        if not isinstance(self.config, BrokerConfig):
            raise ConfigError(f"config must be a BrokerConfig, got {self.config!r}")
        self.clock: Clock = clock if clock is not None else factory.clock
        self.timers = TimerQueue(self.clock)
        """The broker-semantic timers (:mod:`mledger.broker._monitors`), on :attr:`clock`."""
        self.clock_driver: Callable[[int], int] | None = None
        """What :meth:`advance_clock` runs (thread-safe, returning the new time): set by the front
        end serving the broker (the protocol server: on its loop, dispatching what came due);
        None: :meth:`TimerQueue.advance <mledger.core.TimerQueue.advance>` here."""
        self.seed: int = seed if seed is not None else random.SystemRandom().randrange(1 << 32)
        """The seed of :attr:`random` (``seed=``, else drawn from the OS)."""
        self.random = random.Random(self.seed)
        """The broker's one random source, seeded with :attr:`seed`: every random choice the broker
        makes draws from it (the faults' draws: from a generator seeded with :attr:`seed`), so the
        same seed and the same client commands draw the same numbers. Not thread-safe for reproducible draws: draw on one thread (the
        protocol server's loop)."""
        self._default = self._default_dedup_factory()
        self._dedup_factory = dedup_factory if dedup_factory is not None else self._default
        self._lock = threading.RLock()
        self._topics: dict[TopicName, AnyTopic] = {}
        self._names: ProducerNameGenerator | None = None
        self.schemas = SchemaRegistry(factory.store)
        """The topics' schema histories (:mod:`mledger.broker._schemas`)."""
        self.namespaces = Namespaces(factory.store)
        """Created namespaces and their policies (:mod:`mledger.broker._namespaces`)."""
        self.clusters = Clusters(factory.store)
        """Clusters (:mod:`mledger.broker._tenants`); the broker's own is created if missing."""
        self.tenants = Tenants(factory.store, self.clusters)
        """Tenants and their admin roles (:mod:`mledger.broker._tenants`)."""
        self.clusters.ensure(self.config.cluster_name)
        if default_namespace:
            self.ensure_namespace(DEFAULT_NAMESPACE)
        self.topic_policies = TopicPolicies(factory.store)
        """Topic-level policies (retention; :mod:`mledger.broker._retention`)."""
        self.time_policies = TimePolicies(self.namespaces, self.topic_policies, self.config)
        """Message TTL, inactive-topic and backlog-quota policies (:mod:`mledger.broker._time_policies`)."""
        self.journal = journal
        """What hears the broker's stored entries and cursor changes (None: nothing does)."""
        self.non_persistent = NonPersistentTopics(factory.store, self.clock.now_ms, self.generate_producer_name)
        """The ``non-persistent://`` topics, in memory (:mod:`mledger.broker._nonpersistent`)."""
        self.faults = faults if faults is not None else Faults(enabled=False)
        """The fault registry (:mod:`mledger.broker._faults`): off unless given one (the front
        ends give one when started with fault injection; it outlives a restart)."""
        self.faults.bind(self)
        self._closed = False
        self._monitors = BrokerMonitors(self)

    # -- the manual clock --------------------------------------------------------------------
    @property
    def clock_is_manual(self) -> bool:
        """Whether :attr:`clock` is a :class:`~mledger.core.ManualClock` (only
        :meth:`advance_clock` moves it)."""
        return isinstance(self.clock, ManualClock)

    def advance_clock(self, ms: int) -> int:
        """Move the manual clock ``ms`` forward, firing every broker-semantic timer due on the way
        in time order (through :attr:`clock_driver`, which dispatches what came due); returns the
        new time. ``InvalidRequestError`` (400) unless ``ms`` is a positive int,
        ``ClockNotManualError`` (409) on the system clock. Blocks while the timers fire."""
        if isinstance(ms, bool) or not isinstance(ms, int) or ms <= 0:
            raise InvalidRequestError(f"invalid clock advance {ms!r}: expected a positive integer of milliseconds")
        if not self.clock_is_manual:
            raise ClockNotManualError(
                "the broker runs on the system clock: only a manual clock advances "
                "(start it with mledger standalone --deterministic)"
            )
        driver = self.clock_driver
        return driver(ms) if driver is not None else self.timers.advance(ms)

    # -- topics ------------------------------------------------------------------------------
    def create_topic(self, topic: str, partitions: int = 0) -> AnyTopic:
        """Create a topic: non-partitioned with ``partitions=0``, else with that many partitions.

        Raises ``TopicAlreadyExistsError`` (409), ``NamespaceNotFoundError`` (404) when its
        namespace does not exist, ``InvalidRequestError`` for a bad name (a partitioned topic's
        name may not contain ``-partition-``) or partition count.
        """
        name = TopicName.parse(topic)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 0:
            raise InvalidRequestError(f"invalid number of partitions {partitions!r}: must be an integer >= 0")
        if name.is_partition:
            raise InvalidTopicNameError(
                f"Invalid topic name {name}: it should not contain '-partition-' (that names a partition)"
            )
        with self._lock:
            self._check_open()
            if self._exists(name):
                raise TopicAlreadyExistsError(f"This topic already exists: {name}")
            self._require_namespace(name)
            if partitions == 0:
                return self._open_topic(name)
            try:
                metadata = encode_partitioned_metadata(partitions)
                self.factory.store.put(name.partitioned_metadata_path, metadata, NEW_NODE)
            except BadVersionError:
                raise TopicAlreadyExistsError(f"This topic already exists: {name}") from None
            return self._open_partitioned(name, partitions)

    def open_partition(self, topic: str, index: int) -> Topic:
        """Partition ``index`` of the partitioned topic ``topic`` as a topic of its own, opened
        (or created) without its sibling partitions and without the partition-count metadata:
        for tools that handle one partition per process, like the Spark replay.

        Raises ``InvalidRequestError`` for a bad name, a name that already is a partition's,
        or a bad index; ``NamespaceNotFoundError`` when it is missing and so is its namespace.
        """
        name = TopicName.parse(topic)
        if name.is_partition:
            raise InvalidTopicNameError(f"Invalid topic name {name}: it names a partition already")
        partition = name.partition(index)
        with self._lock:
            self._check_open()
            cached = self._topics.get(partition)
            if isinstance(cached, Topic):
                return cached
            if not self.factory.exists(partition.managed_ledger_name):
                self._require_namespace(partition)
            return self._open_topic(partition)

    def get_topic(self, topic: str) -> AnyTopic:
        """The topic (opening it from the store if needed); a partition's name gives that
        partition's :class:`Topic`. Raises ``NotFoundError`` (404); a store failure is
        ``PersistenceError`` while the topic loads, ``MetadataStoreError`` before."""
        name = TopicName.parse(topic)
        with self._lock, store_failures(MetadataStoreError, f"topic {name} could not be looked up"):
            self._check_open()
            return self._found(name)

    def open_topic(self, topic: str) -> AnyTopic:
        """The topic, created if missing and automatic topic creation is on (what a producer or
        a subscription does). Raises ``NotFoundError`` when it is missing and may not be
        created (``NamespaceNotFoundError`` when its namespace does not exist), or names a
        partition a partitioned topic does not have. A store failure is ``PersistenceError``
        while the topic loads or is created (Pulsar's ``BrokerService.createPersistentTopic``),
        ``MetadataStoreError`` while its metadata is read; the store's own error is the cause."""
        return self._get_or_create(topic)

    def check_auto_creation(self, topic: str) -> None:
        """Raise ``NotFoundError`` unless a missing ``topic`` would be created on first use:
        automatic topic creation is off, the name is a partition's, or its namespace does not
        exist (``NamespaceNotFoundError``). Pulsar's ``isAllowAutoTopicCreation`` for a
        lookup that precedes a producer or consumer."""
        name = TopicName.parse(topic)
        with self._lock, store_failures(MetadataStoreError, f"topic {name} could not be looked up"):
            self._check_open()
            self._check_auto_creation(name)

    def open_non_persistent_topic(self, topic: str) -> NonPersistentTopic:
        """The ``non-persistent://`` topic (or partition) ``topic``, created on first use as a
        persistent one is: ``NotFoundError`` when automatic creation is off or it names a
        partition its partitioned topic does not have, ``NamespaceNotFoundError`` when its
        namespace does not exist, ``InvalidRequestError`` for a partitioned topic's own name."""
        name = NonPersistentTopics.name_of(topic)
        registry = self.non_persistent
        with self._lock:
            self._check_open()
            if registry.get(name) is None:
                if name.is_partition:
                    count = registry.partitions(name.partitioned_topic)
                    if name.partition_index >= count:
                        raise NotFoundError(f"Topic {name} not found")
                elif not self.config.allow_auto_topic_creation and not registry.partitions(name):
                    raise NotFoundError(f"Topic {name} not found (automatic topic creation is off)")
                self._require_namespace(name)
            return registry.open(name)

    def check_topic_namespace(self, topic: str) -> None:
        """``NamespaceNotFoundError`` (404) unless the topic exists or its namespace does (what
        a lookup checks: Pulsar finds no bundle owner for a namespace that does not exist)."""
        name = TopicName.parse(topic, any_domain=True)
        with self._lock, store_failures(MetadataStoreError, f"topic {name} could not be looked up"):
            self._check_open()
            exists = self._exists(name) if name.is_persistent else self.non_persistent.exists(name)
            if not exists:
                self._require_namespace(name)

    def namespace_exists(self, namespace: str) -> bool:
        """Whether ``tenant/namespace`` exists: created, or holding topics (data written by
        mledger versions that created namespaces with their first topic). ``InvalidNameError``
        (412) for a bad name."""
        check_namespace_name(namespace)
        with self._lock:
            self._check_open()
            return self._namespace_exists(namespace)

    def topic_exists(self, topic: str) -> bool:
        """Whether the topic (or partition) exists."""
        try:
            self.get_topic(topic)
        except NotFoundError:
            return False
        return True

    def partitioned_topic_metadata(self, topic: str) -> int:
        """The number of partitions, 0 for a non-partitioned topic; ``NotFoundError``. A
        ``non-persistent://`` topic that was never used answers 0 when its namespace exists."""
        name = TopicName.parse(topic, any_domain=True)
        if not name.is_persistent:
            with self._lock, store_failures(MetadataStoreError, f"topic {name} could not be looked up"):
                self._check_open()
                if not self.non_persistent.exists(name):
                    self._require_namespace(name)
                return self.non_persistent.partitions(name)
        found = self.get_topic(topic)
        return found.num_partitions if isinstance(found, PartitionedTopic) else 0

    def list_topics(self, namespace: str | None = None, include_partitions: bool = False) -> list[str]:
        """Names of the topics in the store (``tenant/ns`` to filter), sorted.

        Partitioned topics are listed by their name; with ``include_partitions`` their
        partitions are listed too. ``InvalidNameError`` (412) for a bad namespace name.
        """
        if namespace is not None:
            check_namespace_name(namespace)
        with self._lock:
            self._check_open()
            partitioned = dict(self._stored_partitioned())
            names: set[str] = set()
            for ml_name in self.factory.list_managed_ledgers():
                name = TopicName.from_managed_ledger_name(ml_name)
                if name is None:
                    continue
                parent = name.partitioned_topic
                if name.is_partition and parent in partitioned:
                    if include_partitions:
                        names.add(str(name))
                    continue
                names.add(str(name))
            names.update(str(n) for n in partitioned)
            if namespace is not None:
                names = {n for n in names if TopicName.parse(n).namespace_name == namespace}
            return sorted(names)

    def list_partitioned_topics(self) -> list[str]:
        """Names of the partitioned topics, sorted."""
        with self._lock:
            self._check_open()
            return sorted(str(n) for n, _ in self._stored_partitioned())

    def delete_topic(self, topic: str, force: bool = False) -> None:
        """Delete a topic (every partition of a partitioned one) with its data and subscriptions.

        Raises ``NotFoundError``, ``InvalidRequestError`` for a partition's name, and
        ``TopicBusyError`` (412) while producers or consumers are connected unless ``force``.
        """
        name = TopicName.parse(topic)
        with self._lock:
            self._check_open()
            found = self._found(name)
            if name.is_partition and isinstance(found, Topic) and self._partition_count(name.partitioned_topic):
                raise InvalidRequestError(f"{name} is a partition: delete the partitioned topic instead")
            if found.has_connections() and not force:
                raise TopicBusyError(f"Topic {name} has active producers/subscriptions")
            found.close()
            self._forget_topics(name, found.partitions if isinstance(found, PartitionedTopic) else [found])
            if isinstance(found, PartitionedTopic):
                self.factory.store.delete(name.partitioned_metadata_path)
            self._topics.pop(name, None)
            self.topic_policies.delete(name)  # a topic created again later starts without them

    def unload_topic(self, topic: str) -> None:
        """Unload a topic (every partition of a partitioned one; a partition's name: that
        partition alone), as Pulsar's ``unloadTopic`` closes it (``PersistentTopic.close``):
        its producers and consumers are disconnected, so the clients reconnect and their lookup
        loads it again from the store; its managed ledger is closed, every cursor through its
        close path (``persistPositionWhenClosing``: what the mark-delete throttle held back is
        written, within the limits of that path). A topic that is not loaded is loaded first
        and then closed, as Pulsar's ``getTopicIfExists`` loads it (a recovered cursor's state
        then moves to the metadata store). Raises ``NotFoundError``. May block on storage."""
        name = TopicName.parse(topic)
        with self._lock:
            self._check_open()
            found = self._found(name)
            if self.journal is not None:  # the raw logs have no event for a close
                self.journal.not_recorded(f"unload of topic {name}", self.clock.now_ms())
            for partition in found.partitions if isinstance(found, PartitionedTopic) else [found]:
                partition.close()
                self._topics.pop(partition.topic_name, None)
            if name.is_partition:  # its partitioned topic's object holds it: loaded again on next use
                self._topics.pop(name.partitioned_topic, None)
            self._topics.pop(name, None)
        log.info("unloaded topic %s", name)

    def _forget_topics(self, name: TopicName, topics: list[Topic]) -> None:
        """Delete closed ``topics`` (the topic ``name``, or its partitions) from the store and
        the cache (caller holds the lock)."""
        if self.journal is not None:  # the raw logs have no event for it
            self.journal.not_recorded(f"deletion of topic {name}", self.clock.now_ms())
        for t in topics:
            t.compaction.delete()
            self.factory.delete(t.topic_name.managed_ledger_name)
            self._topics.pop(t.topic_name, None)

    def delete_inactive_topic(self, topic: Topic, mode: InactiveTopicDeleteMode) -> bool:
        """Delete ``topic`` (a topic or one partition) for inactivity, as Pulsar's ``checkGC``
        calls ``delete``: not while producers or consumers are connected, nor (by ``mode``)
        while it has subscriptions or a subscription has a backlog; with
        ``delete_when_subscriptions_caught_up`` its subscriptions go with it. A partition goes
        alone (its partitioned topic is loaded again, and the partition created again empty,
        on next use) unless ``broker_delete_inactive_partitioned_topic_metadata_enabled`` and
        no partition is left. Returns whether it was deleted."""
        name = topic.topic_name
        with self._lock:
            if self._closed or self._topics.get(name) is not topic or topic.has_connections():
                return False
            subs = topic.subscriptions.values()
            if mode is InactiveTopicDeleteMode.DELETE_WHEN_NO_SUBSCRIPTIONS and subs:
                return False
            if any(sub.backlog() > 0 for sub in subs):
                return False
            topic.close()
            self._forget_topics(name, [topic])
            if not name.is_partition:
                self.topic_policies.delete(name)
                return True
            parent = name.partitioned_topic
            self._topics.pop(parent, None)  # its partition objects: loaded again on next use
            count = self._partition_count(parent)
            gone = not any(self.factory.exists(parent.partition(i).managed_ledger_name) for i in range(count))
            if self.config.broker_delete_inactive_partitioned_topic_metadata_enabled and gone:
                for i in range(count):
                    cached = self._topics.pop(parent.partition(i), None)
                    if cached is not None:
                        cached.close()
                self.factory.store.delete(parent.partitioned_metadata_path)
                self.topic_policies.delete(parent)
            return True

    # -- namespaces --------------------------------------------------------------------------
    def create_namespace(self, namespace: str, policies: Mapping[str, object] | None = None) -> None:
        """Create ``tenant/namespace`` with ``policies`` (Pulsar's ``Policies`` JSON, see
        :meth:`Namespaces.create`); ``TenantNotFoundError`` (404) when its tenant does not
        exist, ``NamespaceAlreadyExistsError`` (409) if it exists."""
        tenant = check_namespace_name(namespace).split("/", 1)[0]
        with self._lock:
            self._check_open()
            if not self.tenants.exists(tenant):
                raise TenantNotFoundError("Tenant does not exist")
            self.namespaces.create(namespace, policies)

    def ensure_namespace(self, namespace: str) -> bool:
        """Create ``tenant/namespace`` and its tenant (allowed on this broker's cluster) unless
        they exist: the namespaces a broker sets up itself. True when the namespace was new."""
        tenant = check_namespace_name(namespace).split("/", 1)[0]
        self.tenants.ensure(tenant, TenantInfo(allowed_clusters=(self.config.cluster_name,)))
        return self.namespaces.ensure(namespace)

    def grant_permission(self, namespace: str, role: str, actions: Iterable[str], topic: str | None = None) -> None:
        """Grant ``actions`` (``produce``, ``consume``, ...) to ``role`` on the namespace or on
        one of its topics; ``NamespaceNotFoundError`` (404) when the namespace does not exist."""
        with self._namespace_locked(namespace):
            self.namespaces.grant(namespace, role, actions, topic)

    def set_subscription_roles(self, namespace: str, subscription: str, roles: Iterable[str]) -> None:
        """Let only ``roles`` consume through ``subscription`` in the namespace (404 for an
        unknown namespace)."""
        with self._namespace_locked(namespace):
            self.namespaces.grant_subscription(namespace, subscription, roles)

    def revoke_subscription_role(self, namespace: str, subscription: str, role: str) -> None:
        """Remove ``role`` from ``subscription``'s roles (404, 412 when it is not among them)."""
        with self._namespace_locked(namespace):
            self.namespaces.revoke_subscription(namespace, subscription, role)

    def revoke_permission(self, namespace: str, role: str, topic: str | None = None) -> None:
        """Revoke ``role``'s actions on the namespace or one of its topics (404 for an unknown
        namespace, 412 for a topic where the role has none)."""
        with self._namespace_locked(namespace):
            self.namespaces.revoke(namespace, role, topic)

    def list_namespaces(self, tenant: str | None = None) -> list[str]:
        """Namespaces created, or holding topics (of ``tenant``), sorted; ``InvalidNameError``
        (412) for a bad tenant name."""
        with self._lock:
            self._check_open()
            names = set(self.namespaces.list(tenant))
            for topic in self.list_topics():
                ns = TopicName.parse(topic).namespace_name
                if tenant is None or ns.split("/", 1)[0] == tenant:
                    names.add(ns)
            return sorted(names)

    def delete_namespace(self, namespace: str, force: bool = False) -> None:
        """Delete a namespace: ``NamespaceNotEmptyError`` (409) while it has topics unless
        ``force`` (which deletes them); ``NotFoundError`` when it does not exist."""
        check_namespace_name(namespace)
        with self._lock:
            self._check_open()
            topics = self.list_topics(namespace)
            if not topics and not self.namespaces.exists(namespace):
                raise NotFoundError(f"Namespace {namespace} does not exist")
            if topics and not force:
                raise NamespaceNotEmptyError(f"Cannot delete non empty namespace {namespace}")
            for topic in topics:
                self.delete_topic(topic, force=True)
            if self.namespaces.exists(namespace):
                self.namespaces.delete(namespace)

    def namespace_deduplication(self, namespace: str) -> bool | None:
        """The namespace's deduplication policy (None: the broker's setting);
        ``NamespaceNotFoundError`` (404) when the namespace does not exist."""
        return self.namespaces.deduplication(self._existing_namespace(namespace))

    def set_namespace_deduplication(self, namespace: str, enabled: bool | None) -> None:
        """Turn deduplication on or off for a namespace's topics (None: follow
        ``BrokerConfig.deduplication_enabled``); applied to its open topics at once (which
        blocks on storage while they recover or drop their dedup state).
        ``NamespaceNotFoundError`` (404) when the namespace does not exist."""
        with self._namespace_locked(namespace):
            self.namespaces.set_deduplication(namespace, enabled)
            topics = [
                t for t in self._topics.values() if isinstance(t, Topic) and t.topic_name.namespace_name == namespace
            ]
        effective = self.config.deduplication_enabled if enabled is None else enabled
        for topic in topics:
            dedup = topic.deduplication
            set_enabled = getattr(dedup, "set_enabled", None)
            if set_enabled is not None and not topic.is_closed:
                set_enabled(effective)

    # -- retention policies (docs/retention.md) ---------------------------------------------------
    def namespace_retention(self, namespace: str) -> RetentionPolicies | None:
        """The namespace's retention policy, None when unset; ``NamespaceNotFoundError`` (404)
        when the namespace does not exist."""
        return self.namespaces.retention(self._existing_namespace(namespace))

    def set_namespace_retention(self, namespace: str, policies: RetentionPolicies | None) -> None:
        """Set (None: remove) a namespace's retention policy (``pulsar-admin namespaces
        set-retention``); its open topics without a policy of their own take it at once.
        Raises ``PreconditionFailedError`` (412) for an invalid policy or one its backlog quota
        reaches (:meth:`TimePolicies.check_namespace_retention`) and ``NamespaceNotFoundError``
        (404) when the namespace does not exist."""
        if policies is not None:
            policies.validate()
        with self._namespace_locked(namespace):
            if policies is not None:
                self.time_policies.check_namespace_retention(namespace, policies)
            self.namespaces.set_retention(namespace, policies)
            topics = [
                t for t in self._topics.values() if isinstance(t, Topic) and t.topic_name.namespace_name == namespace
            ]
        for topic in topics:
            self._apply_retention(topic)

    def topic_retention(self, topic: str, applied: bool = False) -> RetentionPolicies | None:
        """A topic's own retention policy (None when unset), or with ``applied`` the one in force:
        its own, else its namespace's, else the broker's default. ``NotFoundError`` (404) for a
        topic that does not exist."""
        name = self._existing(topic)
        own = self.topic_policies.retention(name)
        return self._effective_retention(name) if applied else own

    def set_topic_retention(self, topic: str, policies: RetentionPolicies | None) -> None:
        """Set (None: remove) a topic's own retention policy (``pulsar-admin topics
        set-retention``; a partitioned topic's covers every partition), applied to the open
        topic at once. ``NotFoundError`` (404) for a topic that does not exist,
        ``PreconditionFailedError`` (412) for an invalid policy or one a backlog quota reaches
        (:meth:`TimePolicies.check_topic_retention`)."""
        name = TopicName.parse(topic)
        if policies is not None:
            policies.validate()
        with self._topic_locked(name):
            if policies is not None:
                self.time_policies.check_topic_retention(name, policies)
            self.topic_policies.set_retention(name, policies)
            owner = name.partitioned_topic if name.is_partition else name
            topics = [
                t
                for t in self._topics.values()
                if isinstance(t, Topic)
                and (t.topic_name == owner or (t.topic_name.is_partition and t.topic_name.partitioned_topic == owner))
            ]
        for t in topics:
            self._apply_retention(t)

    def _effective_retention(self, name: TopicName) -> RetentionPolicies:
        own = self.topic_policies.retention(name)
        if own is not None:
            return own
        namespace = self.namespaces.retention(name.namespace_name)
        if namespace is not None:
            return namespace
        default = self.config.ledger_config
        return RetentionPolicies.from_ledger_config(default.retention_time_ms, default.retention_size_in_mb)

    def _apply_retention(self, topic: Topic) -> None:
        """Give the topic's managed ledger the retention in force (Pulsar's ``setConfig`` on a
        policy change); a change queues a trimming pass."""
        name = topic.topic_name
        own = self.topic_policies.retention(name) or self.namespaces.retention(name.namespace_name)
        ml = topic.managed_ledger
        default = self.config.ledger_config
        if own is None:  # the broker's default, exactly (milliseconds, not rounded to minutes)
            time_ms, size_mb = default.retention_time_ms, default.retention_size_in_mb
        else:
            time_ms, size_mb = own.retention_time_ms, own.retention_size_in_mb
        if (ml.config.retention_time_ms, ml.config.retention_size_in_mb) != (time_ms, size_mb):
            ml.set_config(ml.config.with_changes(retention_time_ms=time_ms, retention_size_in_mb=size_mb))

    # -- schema policies (Pulsar's schemaCompatibilityStrategy, isAllowAutoUpdateSchema) -------
    def schema_compatibility_strategy(self, topic: str) -> SchemaCompatibilityStrategy:
        """The strategy in force for ``topic``: its own ``schemaCompatibilityStrategy`` policy,
        else its namespace's (``schema_compatibility_strategy``, else the mapped
        ``schema_auto_update_compatibility_strategy``), else the broker's setting
        (``UNDEFINED`` anywhere means "not set here"; the broker's ``UNDEFINED`` is ``FULL``)."""
        name = TopicName.parse(topic)
        own = self.topic_policies.get_field(name, SCHEMA_STRATEGY_POLICY)
        if own is not None and own != SchemaCompatibilityStrategy.UNDEFINED.value:
            return SchemaCompatibilityStrategy.parse(own)
        namespace = self.namespaces.schema_compatibility_strategy(name.namespace_name)
        if namespace is not None:
            return namespace
        return self.broker_schema_compatibility_strategy

    @property
    def broker_schema_compatibility_strategy(self) -> SchemaCompatibilityStrategy:
        """The broker's ``schema_compatibility_strategy`` setting (``UNDEFINED`` is ``FULL``)."""
        strategy = SchemaCompatibilityStrategy.parse(self.config.schema_compatibility_strategy)
        return SchemaCompatibilityStrategy.FULL if strategy is SchemaCompatibilityStrategy.UNDEFINED else strategy

    def topic_schema_compatibility_strategy(self, topic: str) -> SchemaCompatibilityStrategy | None:
        """``topic``'s own strategy policy (a partition's is its partitioned topic's), None when
        unset. ``NotFoundError`` (404) for a topic that does not exist."""
        name = self._existing(topic)
        own = self.topic_policies.get_field(name, SCHEMA_STRATEGY_POLICY)
        return None if own is None else SchemaCompatibilityStrategy.parse(own)

    def set_topic_schema_compatibility_strategy(self, topic: str, strategy: SchemaCompatibilityStrategy | None) -> None:
        """Set (None: remove) ``topic``'s own strategy (``pulsar-admin topicPolicies
        set-schema-compatibility-strategy``); it applies to the next schema check.
        ``NotFoundError`` (404) for a topic that does not exist."""
        value = None if strategy is None else SchemaCompatibilityStrategy.parse(strategy).value
        self.topic_policies.set_field(self._existing(topic), SCHEMA_STRATEGY_POLICY, value)

    def _existing(self, topic: str) -> TopicName:
        name = TopicName.parse(topic)
        with self._topic_locked(name):
            return name

    @contextlib.contextmanager
    def _topic_locked(self, name: TopicName) -> Iterator[None]:
        """Hold the broker lock over a topic known to exist: ``NotFoundError`` (404) otherwise."""
        with self._lock:
            self._check_open()
            if not self._exists(name):
                raise NotFoundError(f"Topic not found: {name}")
            yield

    def is_allow_auto_update_schema(self, topic: str) -> bool:
        """Whether producers may register new schema versions on ``topic``: the namespace's
        ``is_allow_auto_update_schema``, else the broker's ``is_allow_auto_update_schema_enabled``."""
        allowed = self.namespaces.is_allow_auto_update_schema(TopicName.parse(topic).namespace_name)
        return self.config.is_allow_auto_update_schema_enabled if allowed is None else allowed

    def add_schema(self, topic: str, schema: SchemaInfo) -> int:
        """Pulsar's ``AbstractTopic.addSchema`` (a producer's schema): the version of an equal
        schema, or a new version if auto-update is allowed and the topic's strategy accepts it.
        Raises ``IncompatibleSchemaError``, ``PersistenceError`` when the store fails."""
        with store_failures(PersistenceError, f"the schema of topic {topic} could not be stored"):
            return self.schemas.get_or_create(
                topic, schema, self.schema_compatibility_strategy(topic), self.is_allow_auto_update_schema(topic)
            )

    def add_schema_if_idle_or_check_compatible(self, topic: Topic, schema: SchemaInfo) -> None:
        """Pulsar's ``addSchemaIfIdleOrCheckCompatible`` (a consumer's schema): a topic without
        a schema, producers, consumers or data takes the schema as its first version; any other
        gets the consumer check (:meth:`SchemaRegistry.check_consumer`). Raises
        ``IncompatibleSchemaError``, ``PersistenceError`` when the store fails."""
        name = topic.name
        with store_failures(PersistenceError, f"the schema of topic {name} could not be read"):
            idle = (
                not self.schemas.versions(name)
                and not topic.producers
                and not any(sub.consumers for sub in topic.subscriptions.values())
                and topic.managed_ledger.total_size == 0
            )
            if idle:
                self.add_schema(name, schema)
            else:
                self.schemas.check_consumer(name, schema, self.schema_compatibility_strategy(name))

    # -- termination (Pulsar's PersistentTopic.terminate) --------------------------------------
    def terminate_topic(self, topic: str) -> MessageId:
        """Terminate a non-partitioned topic (or one partition): no more messages are accepted,
        consumers hear ``REACHED_END_OF_TOPIC`` once they acknowledged everything. Returns the
        id of the last message. Idempotent. Raises ``NotFoundError``; a partitioned topic is
        ``NotAllowedError`` (405, "Termination of a partitioned topic is not allowed"), as in
        Pulsar: use :meth:`terminate_partitioned_topic`."""
        name = TopicName.parse(topic)
        found = self.get_topic(str(name))
        if isinstance(found, PartitionedTopic):
            raise NotAllowedError("Termination of a partitioned topic is not allowed")
        return found.terminate()

    def terminate_partitioned_topic(self, topic: str) -> dict[int, MessageId]:
        """Terminate every partition of a partitioned topic (``POST .../terminate/partitions``):
        partition index -> the id of its last message. ``NotFoundError`` for a topic that is
        not partitioned, as Pulsar's "Partitioned topic ... not found"."""
        name = TopicName.parse(topic)
        found = self.get_topic(str(name))
        if not isinstance(found, PartitionedTopic):
            raise NotFoundError(f"Partitioned topic {name} not found")
        return {index: partition.terminate() for index, partition in enumerate(found.partitions)}

    # -- producers and subscriptions --------------------------------------------------------
    def create_producer(
        self, topic: str, producer_name: str | None = None, initial_sequence_id: int | None = None
    ) -> Producer | PartitionedProducer:
        """A producer on ``topic`` (created if missing and auto-creation is on).

        ``producer_name`` None gets a broker-unique name. See ``Topic.create_producer``.
        """
        return self._get_or_create(topic).create_producer(producer_name, initial_sequence_id)

    def subscribe(
        self,
        topic: str,
        subscription: str,
        sub_type: SubscriptionType | str = SubscriptionType.EXCLUSIVE,
        initial_position: InitialPosition = InitialPosition.LATEST,
    ) -> Subscription | PartitionedSubscription:
        """Create or get a subscription (on every partition of a partitioned topic).

        Defaults are Pulsar's: Exclusive, starting at the latest position. The topic is created
        if missing and auto-creation is on. See ``Topic.subscribe``.
        """
        return self._get_or_create(topic).subscribe(subscription, sub_type, initial_position)

    def get_subscription(self, topic: str, subscription: str) -> Subscription | PartitionedSubscription:
        """An existing subscription; ``NotFoundError`` for an unknown topic or subscription."""
        return self.get_topic(topic).get_subscription(subscription)

    def unsubscribe(self, topic: str, subscription: str) -> None:
        """Delete a subscription (``SubscriptionBusyError`` while consumers are connected)."""
        self.get_topic(topic).delete_subscription(subscription)

    # -- time --------------------------------------------------------------------------------
    def run_due_tasks(self) -> int:
        """Dispatch on every open topic what is deliverable by the broker's clock (delayed
        messages whose time came), then fire the broker's timers due by it (:attr:`timers`: the
        periodic checks of :mod:`mledger.broker._monitors` and the subscriptions'
        delayed-delivery timers). Returns the messages dispatched. May block on storage (what
        the checks do). A clock that jumped fires each periodic check once; to fire each at its
        own due time on a :class:`~mledger.core.ManualClock`, use ``timers.advance(ms)``."""
        if self._closed:
            return 0
        dispatched = sum(t.run_due_tasks() for t in self.loaded_topics())
        self.timers.run_due()
        return dispatched

    def loaded_topics(self) -> list[Topic]:
        """The topics and partitions loaded now (Pulsar's ``forEachTopic``), a copy."""
        with self._lock:
            return [t for t in self._topics.values() if isinstance(t, Topic)]

    # -- compaction --------------------------------------------------------------------------
    def topic_compaction_threshold(self, topic: str, applied: bool = False) -> int | None:
        """A topic's own ``compactionThreshold`` in bytes (None when unset), or with ``applied``
        the one in force: its own, else its namespace's, else
        ``broker_service_compaction_threshold_in_bytes``. ``NotFoundError`` (404)."""
        name = self._existing(topic)
        return self.compaction_threshold_in_force(name) if applied else self.topic_policies.compaction_threshold(name)

    def set_topic_compaction_threshold(self, topic: str, threshold: int | None) -> None:
        """Set (None: remove) a topic's own compaction threshold (``pulsar-admin topics
        set-compaction-threshold``; a partitioned topic's covers its partitions).
        ``NotFoundError`` (404), ``PreconditionFailedError`` (412) for a negative one."""
        name = TopicName.parse(topic)
        check_compaction_threshold(threshold)
        with self._topic_locked(name):
            self.topic_policies.set_compaction_threshold(name, threshold)

    def set_namespace_compaction_threshold(self, namespace: str, threshold: int | None) -> None:
        """Set (None: remove) a namespace's compaction threshold (``pulsar-admin namespaces
        set-compaction-threshold``). ``PreconditionFailedError`` (412) for a negative one."""
        check_compaction_threshold(threshold)
        with self._lock:
            self._check_open()
            self.namespaces.set_compaction_threshold(namespace, threshold)

    def compaction_threshold_in_force(self, name: TopicName) -> int:
        """The compaction threshold that applies to ``name``: its own, else its namespace's,
        else ``broker_service_compaction_threshold_in_bytes`` (bytes; 0: none)."""
        own = self.topic_policies.compaction_threshold(name)
        if own is None:
            own = self.namespaces.compaction_threshold(name.namespace_name)
        return own if own is not None else self.config.broker_service_compaction_threshold_in_bytes

    # -- message TTL, inactive topics, backlog quotas (mledger.broker._time_policies) ----------
    def namespace_message_ttl(self, namespace: str) -> int | None:
        """A namespace's own message TTL in seconds, None when unset. ``NamespaceNotFoundError`` (404)."""
        return self.time_policies.namespace_message_ttl(self._existing_namespace(namespace))

    def topic_message_ttl(self, topic: str, applied: bool = False) -> int | None:
        """A topic's own message TTL in seconds (None when unset), or with ``applied`` the one in
        force (its own, else its namespace's, else ``ttl_duration_default_in_seconds``).
        ``NotFoundError`` (404)."""
        name = self._existing(topic)
        policies = self.time_policies
        return policies.message_ttl_seconds(name) if applied else policies.topic_message_ttl(name)

    def namespace_inactive_topic_policies(self, namespace: str) -> InactiveTopicPolicies | None:
        """A namespace's own inactive-topic policy, None when unset. ``NamespaceNotFoundError`` (404)."""
        return self.time_policies.namespace_inactive_topic_policies(self._existing_namespace(namespace))

    def topic_inactive_topic_policies(self, topic: str, applied: bool = False) -> InactiveTopicPolicies | None:
        """A topic's own inactive-topic policy (None when unset), or with ``applied`` the one in
        force (its own, else its namespace's, else the broker's settings). ``NotFoundError`` (404)."""
        name = self._existing(topic)
        policies = self.time_policies
        return policies.inactive_topic_policies(name) if applied else policies.topic_inactive_topic_policies(name)

    def namespace_backlog_quotas(self, namespace: str) -> dict[BacklogQuotaType, BacklogQuota]:
        """A namespace's own backlog quotas by type (``{}``: none). ``NamespaceNotFoundError`` (404)."""
        return self.time_policies.namespace_backlog_quotas(self._existing_namespace(namespace))

    def topic_backlog_quotas(self, topic: str, applied: bool = False) -> dict[BacklogQuotaType, BacklogQuota]:
        """A topic's own backlog quotas by type (``{}``: none), or with ``applied`` those in force
        (:meth:`TimePolicies.applied_backlog_quotas`). ``NotFoundError`` (404)."""
        name = self._existing(topic)
        policies = self.time_policies
        return policies.applied_backlog_quotas(name) if applied else policies.topic_backlog_quotas(name)

    def set_namespace_message_ttl(self, namespace: str, seconds: int | None) -> None:
        """Set (None: remove) a namespace's message TTL in seconds (``pulsar-admin namespaces
        set-message-ttl``; 0: none). ``NamespaceNotFoundError`` (404), ``PreconditionFailedError``
        (412) for a negative one."""
        self._set_namespace_policy(namespace, lambda: self.time_policies.set_namespace_message_ttl(namespace, seconds))

    def set_topic_message_ttl(self, topic: str, seconds: int | None) -> None:
        """Set (None: remove) a topic's own message TTL (``pulsar-admin topics set-message-ttl``;
        a partitioned topic's covers its partitions). ``NotFoundError`` (404), 412 for a negative one."""
        name = self._existing(topic)
        self.time_policies.set_topic_message_ttl(name, seconds)

    def set_namespace_inactive_topic_policies(self, namespace: str, policies: InactiveTopicPolicies | None) -> None:
        """Set (None: remove) a namespace's inactive-topic policy (``pulsar-admin namespaces
        set-inactive-topic-policies``). ``NamespaceNotFoundError`` (404)."""
        self._set_namespace_policy(
            namespace, lambda: self.time_policies.set_namespace_inactive_topic_policies(namespace, policies)
        )

    def set_topic_inactive_topic_policies(self, topic: str, policies: InactiveTopicPolicies | None) -> None:
        """Set (None: remove) a topic's own inactive-topic policy. ``NotFoundError`` (404)."""
        name = self._existing(topic)
        self.time_policies.set_topic_inactive_topic_policies(name, policies)

    def set_namespace_backlog_quota(
        self,
        namespace: str,
        quota: BacklogQuota | None,
        quota_type: BacklogQuotaType = BacklogQuotaType.MESSAGE_AGE,
    ) -> None:
        """Set (None: remove) a namespace's backlog quota of ``quota_type`` (``pulsar-admin
        namespaces set-backlog-quota``). ``NamespaceNotFoundError`` (404); 412 for a quota its
        retention does not cover (:meth:`TimePolicies.set_namespace_backlog_quota`)."""
        self._set_namespace_policy(
            namespace, lambda: self.time_policies.set_namespace_backlog_quota(namespace, quota, quota_type)
        )

    def set_topic_backlog_quota(
        self,
        topic: str,
        quota: BacklogQuota | None,
        quota_type: BacklogQuotaType = BacklogQuotaType.MESSAGE_AGE,
    ) -> None:
        """Set (None: remove) a topic's own backlog quota of ``quota_type``. ``NotFoundError``
        (404); 412 for a quota its retention does not cover."""
        name = self._existing(topic)
        self.time_policies.set_topic_backlog_quota(name, quota, quota_type)

    def check_producer_backlog_quota(self, topic: Topic, producer_name: str) -> None:
        """Pulsar's ``checkBacklogQuotaExceeded`` when a producer is created, for the size quota
        then the time quota: under a ``producer_request_hold`` or ``producer_exception`` quota
        that the topic's backlog exceeds, raise ``BacklogQuotaExceededError`` ("Cannot create
        producer on topic with backlog quota exceeded"). Reads the policies and at most one entry."""
        policies, name = self.time_policies, topic.topic_name
        size_quota = policies.backlog_quota(name, BacklogQuotaType.DESTINATION_STORAGE)
        if _holds_producers(size_quota) and exceeds_size_limit(
            topic.managed_ledger.estimated_backlog_size(), size_quota.limit_size
        ):
            self._refuse_producer(topic, producer_name, size_quota)
        quota = policies.backlog_quota(name, BacklogQuotaType.MESSAGE_AGE)
        precise = self.config.precise_time_based_backlog_quota_check
        if _holds_producers(quota) and time_backlog_exceeded(topic, quota.limit_time_ms, precise, self.clock.now_ms()):
            self._refuse_producer(topic, producer_name, quota)

    @staticmethod
    def _refuse_producer(topic: Topic, producer_name: str, quota: BacklogQuota) -> None:
        log.info("%s: backlog quota exceeded; cannot create producer %s", topic.name, producer_name)
        raise BacklogQuotaExceededError(
            f"Cannot create producer on topic with backlog quota exceeded: {topic.name}", quota.policy
        )

    def _set_namespace_policy(self, namespace: str, store: Callable[[], None]) -> None:
        self._existing_namespace(namespace)
        store()

    def _existing_namespace(self, namespace: str) -> str:
        with self._namespace_locked(namespace):
            return namespace

    @contextlib.contextmanager
    def _namespace_locked(self, namespace: str) -> Iterator[None]:
        """Hold the broker lock over a namespace known to exist: ``InvalidNameError`` (412) for a
        bad name, ``NamespaceNotFoundError`` (404) for an unknown one."""
        check_namespace_name(namespace)
        with self._lock:
            self._check_open()
            self._require_namespace_exists(namespace)
            yield

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close every open topic (cursors persist their state) and disarm the timers; the
        factory stays open. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.timers.clear()
            topics = [t for t in self._topics.values() if isinstance(t, Topic)]
            self._topics.clear()
        for topic in topics:
            topic.close()
        self.non_persistent.close()
        if self.journal is not None:
            self.journal.close()  # after the topics: their last writes are reported

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------
    def _get_or_create(self, topic: str) -> AnyTopic:
        name = TopicName.parse(topic)
        with self._lock, store_failures(MetadataStoreError, f"topic {name} could not be looked up"):
            self._check_open()
            found = self._load(name)
            if found is not None:
                return found
            self._check_auto_creation(name)
            return self._open_topic(name)

    def _check_auto_creation(self, name: TopicName) -> None:
        if not self.config.allow_auto_topic_creation:
            raise NotFoundError(f"Topic {name} not found (automatic topic creation is off)")
        if name.is_partition:
            raise NotFoundError(f"Topic {name} not found: partitions are created with their partitioned topic")
        self._require_namespace(name)

    def _require_namespace(self, name: TopicName) -> None:
        """``NamespaceNotFoundError`` unless the topic's namespace exists (caller holds the lock)."""
        self._require_namespace_exists(name.namespace_name, f" (topic {name})")

    def _require_namespace_exists(self, namespace: str, context: str = "") -> None:
        # Pulsar answers a topic creation or policy call in a namespace that does not exist with
        # 404 rather than creating the namespace.
        if not self._namespace_exists(namespace):
            raise NamespaceNotFoundError(f"Namespace does not exist: {namespace}{context}")

    def _namespace_exists(self, namespace: str) -> bool:
        if self.namespaces.exists(namespace):
            return True
        store = self.factory.store
        return bool(
            store.children(f"{ML_ROOT}/{namespace}/persistent")
            or store.children(f"{PARTITIONED_TOPICS_ROOT}/{namespace}/persistent")
        )

    def _found(self, name: TopicName) -> AnyTopic:
        """The cached or stored topic ``name``; raises ``NotFoundError`` (caller holds the lock)."""
        found = self._load(name)
        if found is None:
            raise NotFoundError(f"Topic {name} not found")
        return found

    def _load(self, name: TopicName) -> AnyTopic | None:
        """The cached or stored topic ``name``, None if it does not exist (caller holds the lock)."""
        cached = self._topics.get(name)
        if cached is not None:
            return cached
        if name.is_partition:
            count = self._partition_count(name.partitioned_topic)
            if count:
                parent = self._load(name.partitioned_topic)
                if name.partition_index < count and isinstance(parent, PartitionedTopic):
                    return parent.partitions[name.partition_index]
                return None
        else:
            count = self._partition_count(name)
            if count:
                return self._open_partitioned(name, count)
        if self.factory.exists(name.managed_ledger_name):
            return self._open_topic(name)
        return None

    def _exists(self, name: TopicName) -> bool:
        return name in self._topics or self._partition_count(name) > 0 or self.factory.exists(name.managed_ledger_name)

    def _partition_count(self, name: TopicName) -> int:
        stored = self.factory.store.get(name.partitioned_metadata_path)
        return 0 if stored is None else decode_partitioned_metadata(name.partitioned_metadata_path, stored.data)

    def _stored_partitioned(self) -> list[tuple[TopicName, int]]:
        out = []
        store = self.factory.store
        for tenant in store.children(PARTITIONED_TOPICS_ROOT):
            for ns in store.children(f"{PARTITIONED_TOPICS_ROOT}/{tenant}"):
                for local in store.children(f"{PARTITIONED_TOPICS_ROOT}/{tenant}/{ns}/persistent"):
                    name = TopicName.from_managed_ledger_name(f"{tenant}/{ns}/persistent/{local}")
                    if name is not None:
                        out.append((name, self._partition_count(name)))
        return out

    def _open_topic(self, name: TopicName) -> Topic:
        with store_failures(PersistenceError, f"topic {name} could not be loaded"):
            ml = self.factory.open(
                name.managed_ledger_name, self.config.ledger_config, derived_cursors=(DEDUPLICATION_CURSOR_NAME,)
            )
            topic = Topic(self, name, ml)
        self._topics[name] = topic
        self._apply_retention(topic)
        return topic

    def _open_partitioned(self, name: TopicName, partitions: int) -> PartitionedTopic:
        topics = []
        for i in range(partitions):
            pname = name.partition(i)
            cached = self._topics.get(pname)
            topics.append(cached if isinstance(cached, Topic) else self._open_topic(pname))
        topic = PartitionedTopic(self, name, topics)
        self._topics[name] = topic
        return topic

    def generate_producer_name(self) -> str:
        """A producer name unique within the cluster (Pulsar's ``<cluster>-<broker id>-<n>``)."""
        with self._lock:
            if self._names is None:
                self._names = ProducerNameGenerator(self.factory.store, self.config.cluster_name)
            names = self._names
        return names.next_name()

    def _default_dedup_factory(self) -> DedupFactory:
        # Built even when deduplication is off: a disabled MessageDeduplication deletes a
        # leftover ``pulsar.dedup`` cursor on load (as Pulsar does), which would otherwise hold
        # ledger trimming back forever.
        return MessageDeduplication

    def make_deduplication(self, topic: Topic) -> Deduplication:
        """The deduplication hook for a topic being opened: the namespace policy when set (with
        the default hook), else the broker's factory. Topics call this as they open."""
        policy = self.namespaces.deduplication(topic.topic_name.namespace_name)
        if policy is not None and self._dedup_factory is self._default:
            return MessageDeduplication(topic, enabled=policy)
        return self._dedup_factory(topic)

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError("the broker is closed")

    def __repr__(self) -> str:
        return f"Broker(topics={len(self._topics)})"


def _holds_producers(quota: BacklogQuota) -> bool:
    """Whether an exceeded ``quota`` refuses new producers (not ``consumer_backlog_eviction``)."""
    return quota.policy is not BacklogRetentionPolicy.CONSUMER_BACKLOG_EVICTION
