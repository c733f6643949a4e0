"""Admin operations on ``non-persistent://`` topics (Pulsar's ``NonPersistentTopics`` resource).

``admin.non_persistent`` (an :class:`~mledger.admin.Admin`'s) lists a namespace's
non-persistent topics, creates partitioned ones, reads a topic's stats (Pulsar's
``NonPersistentTopicStats``: the persistent stats plus ``msgDropRate`` on the topic, each
publisher and each subscription) and unloads a topic. Authorization as for persistent topics:
GET_TOPICS / CREATE_TOPIC / DELETE_TOPIC on the namespace, GET_STATS and LOOKUP on the topic.
Names are checked first (400), then the permissions (401/403), then the topic (404).
"""

from __future__ import annotations

from pydantic import Field

from ..broker import (
    NON_PERSISTENT,
    NamespaceNotFoundError,
    NonPersistentSubscriptionStats,
    NonPersistentTopicStats,
    TopicAlreadyExistsError,
    TopicName,
    check_namespace_name,
)
from ..core import InvalidRequestError, NotFoundError, PermissionDeniedError
from ._auth import NamespaceOperation, TopicOperation
from ._context import AdminContext
from ._stats import (
    ConsumerStatsData,
    PartitionedTopicMetadata,
    PublisherStatsData,
    SubscriptionStatsData,
    TopicStatsData,
    _consumer_stats,
    _publisher_stats,
)

__all__ = [
    "NonPersistentPublisherStatsData",
    "NonPersistentSubscriptionStatsData",
    "NonPersistentTopicStatsData",
    "NonPersistentTopicsAdmin",
    "non_persistent_name",
    "non_persistent_topic_stats",
]


class NonPersistentPublisherStatsData(PublisherStatsData):
    """Pulsar's ``NonPersistentPublisherStatsImpl``: ``msgDropRate`` (the broker never refuses
    a message here, so it is 0)."""

    msg_drop_rate: float = 0.0


class NonPersistentSubscriptionStatsData(SubscriptionStatsData):
    """Pulsar's ``NonPersistentSubscriptionStatsImpl``: ``msgDropRate``, messages per second
    no consumer of the subscription had a permit for, over the last stats interval."""

    msg_drop_rate: float = 0.0


class NonPersistentTopicStatsData(TopicStatsData):
    """Pulsar's ``NonPersistentTopicStatsImpl``: the persistent topic's stats (nothing stored:
    no storage, no backlog) plus ``msgDropRate``, the publishers' and subscriptions' added up."""

    msg_drop_rate: float = 0.0
    publishers: list[NonPersistentPublisherStatsData] = Field(default_factory=list)  # type: ignore[assignment]
    subscriptions: dict[str, NonPersistentSubscriptionStatsData] = Field(default_factory=dict)  # type: ignore[assignment]


def _subscription_stats(s: NonPersistentSubscriptionStats) -> NonPersistentSubscriptionStatsData:
    consumers: list[ConsumerStatsData] = [_consumer_stats(c, False) for c in s.consumers]
    return NonPersistentSubscriptionStatsData(
        msg_rate_out=s.msg_rate_out,
        msg_throughput_out=s.msg_throughput_out,
        bytes_out_counter=s.bytes_out_counter,
        msg_out_counter=s.msg_out_counter,
        type=s.type.value,
        active_consumer_name=s.active_consumer_name,
        consumers=consumers,
        is_durable=False,
        msg_drop_rate=s.msg_drop_rate,
    )


def non_persistent_topic_stats(stats: NonPersistentTopicStats) -> NonPersistentTopicStatsData:
    """The REST form of a non-persistent topic's stats snapshot."""
    publishers = [
        NonPersistentPublisherStatsData(**_publisher_stats(p).model_dump(by_alias=False)) for p in stats.producers
    ]
    return NonPersistentTopicStatsData(
        msg_rate_in=stats.msg_rate_in,
        msg_throughput_in=stats.msg_throughput_in,
        msg_rate_out=sum(s.msg_rate_out for s in stats.subscriptions.values()),
        msg_throughput_out=sum(s.msg_throughput_out for s in stats.subscriptions.values()),
        bytes_in_counter=stats.bytes_in_counter,
        msg_in_counter=stats.msg_in_counter,
        bytes_out_counter=sum(s.bytes_out_counter for s in stats.subscriptions.values()),
        msg_out_counter=sum(s.msg_out_counter for s in stats.subscriptions.values()),
        average_msg_size=stats.msg_throughput_in / stats.msg_rate_in if stats.msg_rate_in else 0.0,
        publishers=publishers,
        subscriptions={name: _subscription_stats(s) for name, s in stats.subscriptions.items()},
        msg_drop_rate=stats.msg_drop_rate,
    )


def non_persistent_name(topic: str) -> TopicName:
    """``topic`` as a non-persistent name: a short name or ``tenant/ns/local`` is taken in the
    non-persistent domain; a ``persistent://`` name is 400."""
    if "://" not in topic:
        parts = topic.split("/")
        topic = f"{NON_PERSISTENT}://{topic if len(parts) == 3 else 'public/default/' + topic}"
    name = TopicName.parse(topic, any_domain=True)
    if name.domain != NON_PERSISTENT:
        raise InvalidRequestError(f"{name} is not a non-persistent topic")
    return name


class NonPersistentTopicsAdmin:
    """``admin.non_persistent``: the admin calls on non-persistent topics."""

    def __init__(self, admin: AdminContext) -> None:
        self._admin = admin

    def _name(self, topic: str) -> TopicName:
        return non_persistent_name(topic)

    def _check_topic(self, operation: TopicOperation, name: TopicName) -> None:
        # Admin.check_topic parses persistent names only
        self._admin.authenticate()
        if not self._admin.may(operation, name):
            raise PermissionDeniedError(
                f"Unauthorized to validateTopicOperation for operation [{operation}] on topic [{name}]"
            )

    def list_topics(self, namespace: str) -> list[str]:
        """The namespace's non-persistent topics loaded now, sorted: partitions by their own
        names, not their partitioned topic's (Pulsar's ``getListOfNonPersistentTopics``).
        GET_TOPICS on the namespace."""
        check_namespace_name(namespace)
        self._admin.check_namespace(NamespaceOperation.GET_TOPICS, namespace)
        registry = self._admin.broker.non_persistent
        parents = set(registry.list_partitioned(namespace))
        return [t for t in registry.topic_names(namespace) if t not in parents]

    def list_partitioned_topics(self, namespace: str) -> list[str]:
        """The namespace's partitioned non-persistent topics, sorted. GET_TOPICS."""
        check_namespace_name(namespace)
        self._admin.check_namespace(NamespaceOperation.GET_TOPICS, namespace)
        return self._admin.broker.non_persistent.list_partitioned(namespace)

    def create_topic(self, topic: str, partitions: int = 0) -> str:
        """Load a non-partitioned topic (``partitions=0``) or record a partitioned one; returns
        its full name. CREATE_TOPIC on its namespace; 404 for a namespace that does not exist,
        409 when the topic is loaded or partitioned already (Pulsar's ``checkTopicExists``)."""
        name = self._name(topic)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 0:
            raise InvalidRequestError(f"invalid number of partitions {partitions!r}: must be an integer >= 0")
        self._admin.check_namespace(NamespaceOperation.CREATE_TOPIC, name.namespace_name)
        broker = self._admin.broker
        if not broker.namespace_exists(name.namespace_name):
            raise NamespaceNotFoundError(f"Namespace does not exist: {name.namespace_name}")
        registry = broker.non_persistent
        if partitions:
            registry.create_partitioned(name, partitions)
            return str(name)
        if registry.exists(name):
            raise TopicAlreadyExistsError(f"This topic already exists: {name}")
        broker.open_non_persistent_topic(str(name))
        return str(name)

    def partitioned_topic_metadata(self, topic: str) -> PartitionedTopicMetadata:
        """The number of partitions (0: not partitioned). LOOKUP."""
        name = self._name(topic)
        self._check_topic(TopicOperation.LOOKUP, name)
        return PartitionedTopicMetadata(partitions=self._admin.broker.partitioned_topic_metadata(str(name)))

    def delete_topic(self, topic: str, force: bool = False) -> None:
        """Unload a topic: 404 when it is not loaded, 412 while it has producers or
        subscriptions unless ``force``. DELETE_TOPIC on its namespace."""
        name = self._name(topic)
        self._admin.check_namespace(NamespaceOperation.DELETE_TOPIC, name.namespace_name)
        self._admin.broker.non_persistent.delete(name, force=force)

    def delete_partitioned_topic(self, topic: str, force: bool = False) -> None:
        """Delete a partitioned topic (its partition count; its loaded partitions unloaded):
        404 when it is not partitioned, 412 while a partition has clients unless ``force``.
        DELETE_TOPIC on its namespace."""
        name = self._name(topic)
        self._admin.check_namespace(NamespaceOperation.DELETE_TOPIC, name.namespace_name)
        self._admin.broker.non_persistent.delete_partitioned(name, force=force)

    def stats(self, topic: str) -> NonPersistentTopicStatsData:
        """Pulsar's ``NonPersistentTopicStats`` of a loaded topic (404 otherwise). GET_STATS."""
        name = self._name(topic)
        self._check_topic(TopicOperation.GET_STATS, name)
        broker = self._admin.broker
        found = broker.non_persistent.get(name)
        if found is None:
            raise NotFoundError(f"Topic {name} not found")
        return non_persistent_topic_stats(found.stats(broker.config.stats_update_frequency_in_secs * 1000))
