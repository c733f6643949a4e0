"""``admin.topics``: Pulsar's ``PersistentTopics`` admin operations, once, for every front end.

Theory of operation
-------------------
Each operation runs the same steps in Pulsar's order, and changes nothing until all of them
passed:

1. parse the topic name (400 ``InvalidRequestError`` for a bad one) and check the arguments
   before authorization (``cancel_delayed_message``: negative ids are 412
   ``PreconditionFailedError("ledgerId, entryId must be non-negative.")``, Pulsar's check; the
   same rule for the message id of ``reset_cursor`` / ``create_subscription``, where -1:-1 is
   the earliest message, and a negative ``reset_cursor_by_time`` timestamp is 400: Pulsar takes
   both and resets to the first entry, a typo's silent rewind that mledger refuses);
2. authorize (when on): 401 without a role, 403 without the operation on the topic (a
   partition inherits its parent's grants), see :mod:`mledger.admin._auth`;
3. look up the topic and the subscription(s): 404 ``NotFoundError``;
4. act through the broker's subscription (a :class:`~mledger.broker.PartitionedSubscription`
   for a partitioned topic fans out to every partition, routing message ids to the partition
   holding their ledger), whose errors pass through with their status: 405 for a
   cumulative-ack subscription in ``skip_messages``, 400 for a batch index outside its batch,
   412 for a message that is not in the topic.

========================  ==========================  ==================================
method                    operation checked           Pulsar endpoint / CLI
========================  ==========================  ==================================
list_topics               GET_TOPICS (namespace)      ``topics list``
list_partitioned_topics   GET_TOPICS (namespace)      ``topics list-partitioned-topics``
create_topic              CREATE_TOPIC (namespace)    ``topics create`` / ``create-partitioned-topic``
delete_topic              DELETE_TOPIC (namespace)    ``topics delete``
partitioned_topic_metadata LOOKUP                     ``topics get-partitioned-topic-metadata``
lookup                    LOOKUP                      ``topics lookup`` (``GET /lookup/v2/topic/...``)
list_subscriptions        GET_SUBSCRIPTIONS           ``topics subscriptions``
create_subscription       SUBSCRIBE                   ``topics create-subscription``
delete_subscription       UNSUBSCRIBE                 ``topics unsubscribe``
stats                     GET_STATS                   ``topics stats``
partitioned_stats         GET_STATS                   ``topics partitioned-stats``
internal_stats            GET_STATS                   ``topics stats-internal``
partitioned_internal_stats GET_STATS                  ``topics partitioned-stats-internal``
reset_cursor              RESET_CURSOR                ``topics reset-cursor``
reset_cursor_by_time      RESET_CURSOR                ``POST .../resetcursor/{timestamp}``
skip                      SKIP                        ``topics skip``
clear_backlog             SKIP                        ``topics clear-backlog``
skip_messages             SKIP                        ``topics skip-messages`` (PIP-423)
cancel_delayed_message    CANCEL_DELAYED_MESSAGE      ``topics cancel-delayed-message`` (PIP-423)
get_retention             (tenant admin)              ``topics get-retention [--applied]``
set_retention             (tenant admin)              ``topics set-retention``
remove_retention          (tenant admin)              ``topics remove-retention``
trigger_compaction        COMPACT                     ``topics compact``
compaction_status         COMPACT                     ``topics compaction-status``
get_compaction_threshold  (tenant admin)              ``topics get-compaction-threshold [--applied]``
set_compaction_threshold  (tenant admin)              ``topics set-compaction-threshold``
remove_compaction_threshold (tenant admin)            ``topics remove-compaction-threshold``
terminate                 TERMINATE                   ``topics terminate``
terminate_partitioned     TERMINATE                   ``topics partitioned-terminate``
get_schema_compatibility_strategy (tenant admin)      ``topicPolicies get-schema-compatibility-strategy``
set_schema_compatibility_strategy (tenant admin)      ``topicPolicies set-schema-compatibility-strategy``
remove_schema_compatibility_strategy (tenant admin)   ``topicPolicies remove-schema-compatibility-strategy``
get_message_ttl           (tenant admin)              ``topics get-message-ttl [--applied]``
set_message_ttl           (tenant admin)              ``topics set-message-ttl``
remove_message_ttl        (tenant admin)              ``topics remove-message-ttl``
get_backlog_quota_map     (tenant admin)              ``topics get-backlog-quotas [--applied]``
set_backlog_quota         (tenant admin)              ``topics set-backlog-quota``
remove_backlog_quota      (tenant admin)              ``topics remove-backlog-quota``
get_inactive_topic_policies (tenant admin)            ``topics get-inactive-topic-policies [--applied]``
set_inactive_topic_policies (tenant admin)            ``topics set-inactive-topic-policies``
remove_inactive_topic_policies (tenant admin)         ``topics remove-inactive-topic-policies``
expire_messages           EXPIRE_MESSAGES             ``topics expire-messages --expireTime``
expire_messages_by_position EXPIRE_MESSAGES           ``topics expire-messages --position``
expire_messages_for_all_subscriptions EXPIRE_MESSAGES ``topics expire-messages-all-subscriptions``
========================  ==========================  ==================================

Topic policies (retention, compaction threshold, schema compatibility strategy, message TTL,
backlog quotas, inactive topics, permissions), reads included, need a superuser or an admin of
the topic's tenant (Pulsar's
``PulsarAuthorizationProvider.allowTopicPolicyOperationAsync`` returns
``validateTenantAdminAccess``): ``produce`` and ``consume`` grants never let a role read a
policy. The role is checked before the topic is looked up, so a refused caller gets the same 403
whether the topic exists or not (stricter than Pulsar, whose tenant check answers 404 for a
tenant that does not exist).

``clear_backlog`` checks SKIP because Pulsar's ``skipAllMessages`` does. The message TTL, backlog
quota and inactive-topic policies are a topic's, never a partition's: a partition's name is 412
"Not allowed to set/get topic policy for a partition" (Pulsar's ``preValidation``).

Blocking: every method may block on storage I/O (the broker's and the cursors' locks are held
while state is persisted).
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from ..broker import (
    BacklogQuota,
    BacklogQuotaType,
    Broker,
    InactiveTopicPolicies,
    InitialPosition,
    LongRunningProcessStatus,
    NamespaceNotFoundError,
    PartitionedSubscription,
    PartitionedTopic,
    RetentionPolicies,
    SchemaCompatibilityStrategy,
    Subscription,
    SubscriptionType,
    Topic,
    TopicName,
    check_namespace_name,
    local_name_problem,
)
from ..codec import MessageId, as_position
from ..core import (
    EARLIEST,
    LATEST,
    InvalidRequestError,
    NotAllowedError,
    NotFoundError,
    Position,
    PreconditionFailedError,
)
from ._auth import NamespaceOperation, TopicOperation
from ._context import AdminContext
from ._errors import ExpiryNotIssuedError, SubscriptionAlreadyExistsError
from ._requests import ResetCursorData, SkipMessageIdsRequest
from ._stats import (
    PartitionedTopicInternalStats,
    PartitionedTopicMetadata,
    PartitionedTopicStatsData,
    PersistentTopicInternalStats,
    TopicStatsData,
    partitioned_topic_stats,
    topic_internal_stats,
    topic_stats,
)

__all__ = ["CancelDelayedMessageResult", "Topics"]

_INT64_MAX = (1 << 63) - 1


class CancelDelayedMessageResult(BaseModel):
    """What ``cancel_delayed_message`` did, per subscription.

    ``results[name]`` is True when the message is now acknowledged on that subscription (on
    every partition of a partitioned topic), False when the subscription's type uses
    cumulative acknowledgement (Exclusive, Failover) and nothing was changed there (PIP-423).
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    topic: str
    ledger_id: int = Field(alias="ledgerId")
    entry_id: int = Field(alias="entryId")
    results: dict[str, bool]

    @property
    def cancelled(self) -> list[str]:
        """Subscriptions on which the message is cancelled."""
        return [name for name, ok in self.results.items() if ok]

    @property
    def refused(self) -> list[str]:
        """Subscriptions that refused (cumulative-ack types)."""
        return [name for name, ok in self.results.items() if not ok]

    @property
    def refusal(self) -> str | None:
        """Why the cancellation failed (the REST API's 412 reason, ``mledger-admin``'s error),
        naming the refusing subscriptions; ``None`` when none refused."""
        refused = self.refused
        if not refused:
            return None
        return (
            f"Failed to cancel delayed message on subscription(s) {', '.join(refused)}: "
            "their type uses cumulative acknowledgement"
        )

    def to_json(self, indent: int | None = 2) -> str:
        """``{"topic", "ledgerId", "entryId", "results": {subscription: bool}}``."""
        return self.model_dump_json(by_alias=True, indent=indent)


class Topics:
    """The topic operations of an :class:`~mledger.admin.Admin` (``admin.topics``)."""

    def __init__(self, admin: AdminContext) -> None:
        self._admin = admin

    @property
    def _broker(self) -> Broker:
        return self._admin.broker

    # -- topics ------------------------------------------------------------------------------

    def list_topics(self, namespace: str | None = None) -> list[str]:
        """Topic names, sorted (a partitioned topic by its own name, not its partitions).

        With ``namespace`` (``tenant/namespace``): that namespace's topics, after checking
        GET_TOPICS on it (403). Without: every namespace's topics the role may list (when
        authorization is on, the others are left out rather than refused).
        """
        if namespace is not None:
            check_namespace_name(namespace)
            self._admin.check_namespace(NamespaceOperation.GET_TOPICS, namespace)
            return self._broker.list_topics(namespace)
        self._admin.authenticate()
        names = self._broker.list_topics()
        return [n for n in names if self._admin.may(NamespaceOperation.GET_TOPICS, TopicName.parse(n).namespace_name)]

    def list_partitioned_topics(self, namespace: str | None = None) -> list[str]:
        """Partitioned topic names, sorted; ``namespace`` and authorization as ``list_topics``."""
        if namespace is not None:
            check_namespace_name(namespace)
            self._admin.check_namespace(NamespaceOperation.GET_TOPICS, namespace)
        self._admin.authenticate()
        names = self._broker.list_partitioned_topics()
        out = []
        for n in names:
            ns = TopicName.parse(n).namespace_name
            if (namespace is None and self._admin.may(NamespaceOperation.GET_TOPICS, ns)) or ns == namespace:
                out.append(n)
        return out

    def create_topic(self, topic: str, partitions: int = 0) -> str:
        """Create a non-partitioned topic (``partitions=0``) or a partitioned one; returns its
        full name. CREATE_TOPIC on its namespace. 409 ``TopicAlreadyExistsError``; 400 for a
        partition's name or a bad count (Pulsar: 406/412 for counts; mledger: 400)."""
        name = TopicName.parse(topic)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 0:
            raise InvalidRequestError(f"invalid number of partitions {partitions!r}: must be an integer >= 0")
        self._admin.check_namespace(NamespaceOperation.CREATE_TOPIC, name.namespace_name)
        self._broker.create_topic(str(name), partitions=partitions)
        return str(name)

    def delete_topic(self, topic: str, force: bool = False) -> None:
        """Delete a topic (all partitions of a partitioned one) with its data. DELETE_TOPIC on
        its namespace. 404; 412 ``TopicBusyError`` while producers or consumers are connected
        unless ``force``; 400 for a partition of a partitioned topic."""
        name = TopicName.parse(topic)
        self._admin.check_namespace(NamespaceOperation.DELETE_TOPIC, name.namespace_name)
        self._broker.delete_topic(str(name), force=force)

    # -- permissions ---------------------------------------------------------------------------

    def grant_permission(self, topic: str, role: str, actions: Iterable[str]) -> None:
        """Grant ``actions`` (``produce``, ``consume``, ...) on ``topic`` to ``role`` (``topics
        grant-permission``; the topic need not exist yet, its namespace must: 404). Tenant admin.
        400 for an unknown action."""
        name = TopicName.parse(topic)
        self._admin.check_tenant_admin(name.tenant, f"grant permissions on topic {name}")
        self._broker.grant_permission(name.namespace_name, role, list(actions), topic=str(name))

    def revoke_permission(self, topic: str, role: str) -> None:
        """Revoke ``role``'s actions on ``topic`` (``topics revoke-permission``). Tenant admin.
        412 when the role has none on the topic (Pulsar's "Permissions are not set at the topic
        level"), 404 for an unknown namespace."""
        name = TopicName.parse(topic)
        self._admin.check_tenant_admin(name.tenant, f"revoke permissions on topic {name}")
        self._broker.revoke_permission(name.namespace_name, role, topic=str(name))

    def permissions(self, topic: str) -> dict[str, list[str]]:
        """``{role: [actions]}`` on ``topic``: its namespace's grants, then the topic's own for
        the same roles (``topics permissions``, as Pulsar merges them). Tenant admin."""
        name = self._read_policy(topic, "permissions")
        if not self._broker.namespace_exists(name.namespace_name):
            raise NamespaceNotFoundError(f"Namespace does not exist: {name.namespace_name}")
        auth = self._broker.namespaces.auth_policies(name.namespace_name)
        merged = {**auth.namespace_auth, **auth.destination_auth.get(str(name), {})}
        return {role: sorted(actions) for role, actions in sorted(merged.items())}

    def partitioned_topic_metadata(
        self, topic: str, check_allow_auto_creation: bool = False
    ) -> PartitionedTopicMetadata:
        """The number of partitions (0: not partitioned). LOOKUP. 404 for an unknown topic,
        unless ``check_allow_auto_creation`` (Pulsar's ``checkAllowAutoCreation``, what clients'
        HTTP lookups send) and the topic would be created on first use: then 0, as the client
        will create it non-partitioned."""
        name = self._admin.check_topic(TopicOperation.LOOKUP, topic)
        try:
            partitions = self._broker.partitioned_topic_metadata(str(name))
        except NotFoundError:
            if not check_allow_auto_creation:
                raise
            self._broker.check_auto_creation(str(name))  # 404 when it would not be created
            partitions = 0
        return PartitionedTopicMetadata(partitions=partitions)

    def lookup(self, topic: str) -> TopicName:
        """Check a lookup of ``topic`` (Pulsar's ``TopicLookupBase``): LOOKUP, then 404 ``Topic
        not found <topic>`` unless the topic exists or would be created on first use (404 for a
        namespace that does not exist). Returns the name; which broker address to answer is the
        front end's (the protocol server's listeners)."""
        name = self._admin.check_topic(TopicOperation.LOOKUP, topic)
        if not self._broker.topic_exists(str(name)):
            try:
                self._broker.check_auto_creation(str(name))
            except NamespaceNotFoundError:
                raise
            except NotFoundError:
                raise NotFoundError(f"Topic not found {name}") from None
        return name

    # -- subscriptions -------------------------------------------------------------------------

    def list_subscriptions(self, topic: str) -> list[str]:
        """Subscription names, sorted (of any partition, for a partitioned topic).
        GET_SUBSCRIPTIONS. 404 for an unknown topic."""
        name = self._admin.check_topic(TopicOperation.GET_SUBSCRIPTIONS, topic)
        return self._topic(name).subscription_names()

    def create_subscription(
        self,
        topic: str,
        subscription: str,
        position: Position | MessageId = LATEST,
        subscription_type: SubscriptionType | str | None = None,
    ) -> None:
        """Create a durable subscription starting at ``position`` (``LATEST`` by default, as
        Pulsar; ``EARLIEST``; or a position/message id to start from, via a cursor reset).

        ``subscription_type`` (default Exclusive, the broker's default) is stored with it. On a
        partitioned topic a specific position applies to the partition holding it (a
        ``MessageId`` with a partition: that one); the other partitions start at the earliest
        position.
        SUBSCRIBE. 404 for an unknown topic (no auto-creation here), 409
        ``SubscriptionAlreadyExistsError``, 400 for a bad name or type, 412 for negative ids
        other than -1:-1 (as :meth:`reset_cursor`). If the start position
        is refused, the new subscription is removed again.
        """
        if isinstance(position, (Position, MessageId)):
            _check_reset_position(position)
        name = self._admin.check_topic(TopicOperation.SUBSCRIBE, topic)
        problem = local_name_problem(subscription) if isinstance(subscription, str) else "not a string"
        if problem:
            raise InvalidRequestError(f"Invalid subscription name {subscription!r}: {problem}")
        sub_type = SubscriptionType.EXCLUSIVE
        if subscription_type is not None:
            sub_type = SubscriptionType.parse(subscription_type)
        target = as_position(position)
        found = self._topic(name)
        if subscription in found.subscription_names():
            raise SubscriptionAlreadyExistsError(f"Subscription already exists for topic: {subscription!r} on {name}")
        if target == LATEST:
            found.subscribe(subscription, sub_type, InitialPosition.LATEST)
            return
        created = found.subscribe(subscription, sub_type, InitialPosition.EARLIEST)
        if target == EARLIEST:
            return
        try:
            created.reset_cursor(position if isinstance(position, MessageId) else target)
        except BaseException:
            found.delete_subscription(subscription)
            raise

    def delete_subscription(self, topic: str, subscription: str) -> None:
        """Delete a subscription (every partition's). UNSUBSCRIBE. 404; 412
        ``SubscriptionBusyError`` while consumers are connected."""
        name = self._admin.check_topic(TopicOperation.UNSUBSCRIBE, topic)
        self._topic(name).delete_subscription(subscription)

    # -- stats ---------------------------------------------------------------------------------

    def stats(
        self,
        topic: str,
        get_precise_backlog: bool = False,
        subscription_backlog_size: bool = True,
        get_earliest_time_in_backlog: bool = False,
    ) -> TopicStatsData:
        """The stats of a non-partitioned topic or of one partition (Pulsar's ``TopicStats``:
        rates, counters, publishers, subscriptions with their consumers; see
        :func:`~mledger.admin._stats.topic_stats`).

        Pulsar's options: ``get_precise_backlog`` is accepted and changes nothing (mledger's
        backlog is always precise); ``subscription_backlog_size=False`` leaves each
        subscription's ``backlogSize`` at -1; ``get_earliest_time_in_backlog`` reads each
        backlog's first entry for its publish time. GET_STATS. 400 for an option that is not a
        bool; 404 for an unknown topic; 405 for a partitioned topic's own name (use
        :meth:`partitioned_stats`).
        """
        _check_flags(
            getPreciseBacklog=get_precise_backlog,
            subscriptionBacklogSize=subscription_backlog_size,
            getEarliestTimeInBacklog=get_earliest_time_in_backlog,
        )
        name = self._admin.check_topic(TopicOperation.GET_STATS, topic)
        found = self._topic(name)
        if isinstance(found, PartitionedTopic):
            raise NotAllowedError(f"{name} is a partitioned topic: use partitioned_stats (partitioned-stats)")
        return self._topic_stats(found, subscription_backlog_size, get_earliest_time_in_backlog)

    def partitioned_stats(
        self,
        topic: str,
        per_partition: bool = True,
        get_precise_backlog: bool = False,
        subscription_backlog_size: bool = True,
        get_earliest_time_in_backlog: bool = False,
    ) -> PartitionedTopicStatsData:
        """The stats of a partitioned topic: its partitions' added up, ``metadata.partitions``
        and, with ``per_partition`` (Pulsar's REST default), each partition's stats under
        ``partitions``. Options as :meth:`stats`. GET_STATS. 400 for an option that is not a
        bool; 404 for an unknown topic or one that is not partitioned (Pulsar: "Partitioned
        Topic not found")."""
        _check_flags(
            perPartition=per_partition,
            getPreciseBacklog=get_precise_backlog,
            subscriptionBacklogSize=subscription_backlog_size,
            getEarliestTimeInBacklog=get_earliest_time_in_backlog,
        )
        name = self._admin.check_topic(TopicOperation.GET_STATS, topic)
        found = self._topic(name)
        if not isinstance(found, PartitionedTopic):
            raise NotFoundError(f"Partitioned Topic not found: {name} is not a partitioned topic")
        parts = [
            (p.name, self._topic_stats(p, subscription_backlog_size, get_earliest_time_in_backlog))
            for p in found.partitions
        ]
        return partitioned_topic_stats(parts, per_partition)

    def internal_stats(self, topic: str) -> PersistentTopicInternalStats:
        """Internal stats of a non-partitioned topic or of one partition (``...-partition-i``).

        GET_STATS. 404 for an unknown topic; 405 for a partitioned topic's own name (use
        :meth:`partitioned_internal_stats`).
        """
        name = self._admin.check_topic(TopicOperation.GET_STATS, topic)
        found = self._topic(name)
        if isinstance(found, PartitionedTopic):
            raise NotAllowedError(
                f"{name} is a partitioned topic: use partitioned_internal_stats (partitioned-stats-internal)"
            )
        return topic_internal_stats(found.managed_ledger, found.compaction.view)

    def partitioned_internal_stats(self, topic: str) -> PartitionedTopicInternalStats:
        """Internal stats of every partition of a partitioned topic. GET_STATS. 404 for an
        unknown topic or one that is not partitioned (Pulsar: "Partitioned Topic not found")."""
        name = self._admin.check_topic(TopicOperation.GET_STATS, topic)
        found = self._topic(name)
        if not isinstance(found, PartitionedTopic):
            raise NotFoundError(f"Partitioned Topic not found: {name} is not a partitioned topic")
        return PartitionedTopicInternalStats(
            metadata=PartitionedTopicMetadata(partitions=found.num_partitions),
            partitions={p.name: topic_internal_stats(p.managed_ledger, p.compaction.view) for p in found.partitions},
        )

    # -- cursor operations ---------------------------------------------------------------------

    def reset_cursor(self, topic: str, subscription: str, position: Position | MessageId) -> None:
        """Reset a subscription to re-consume from ``position`` (``EARLIEST``/``LATEST`` too).

        Acknowledgements after it are forgotten; connected consumers keep their connection and
        get the messages again. On a partitioned topic, EARLIEST/LATEST reset every partition
        and a position the partition holding it (a ``MessageId`` with a partition: that one).
        RESET_CURSOR. 404; 400 for something that is not a position; 412 for negative ids other
        than -1:-1 (EARLIEST) and for a position in no partition; 409 when another reset is running.
        """
        if not isinstance(position, (Position, MessageId)):
            raise InvalidRequestError(f"invalid reset position {position!r}: expected a Position or a MessageId")
        _check_reset_position(position)
        name = self._admin.check_topic(TopicOperation.RESET_CURSOR, topic)
        self._subscription(name, subscription).reset_cursor(position)

    def reset_cursor_by_time(self, topic: str, subscription: str, timestamp_ms: int) -> None:
        """Reset a subscription to the first entry published at or after ``timestamp_ms`` (every
        partition of a partitioned topic). RESET_CURSOR. 404; 400 for a time that is not an
        integer in 0..2**63-1."""
        if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int):
            raise InvalidRequestError(f"invalid timestamp {timestamp_ms!r}: expected epoch milliseconds")
        if not 0 <= timestamp_ms <= _INT64_MAX:
            raise InvalidRequestError(f"invalid timestamp {timestamp_ms}: epoch milliseconds must be >= 0")
        name = self._admin.check_topic(TopicOperation.RESET_CURSOR, topic)
        self._subscription(name, subscription).reset_cursor_by_time(timestamp_ms)

    def skip(self, topic: str, subscription: str, num_messages: int) -> None:
        """Skip the next ``num_messages`` unacknowledged entries (every partition's). SKIP.
        404; 400 for a negative or non-integer count."""
        name = self._admin.check_topic(TopicOperation.SKIP, topic)
        if isinstance(num_messages, bool) or not isinstance(num_messages, int) or num_messages < 0:
            raise InvalidRequestError(f"invalid number of messages to skip {num_messages!r}: must be >= 0")
        self._subscription(name, subscription).skip(num_messages)

    def clear_backlog(self, topic: str, subscription: str) -> None:
        """Acknowledge everything published so far (every partition's). SKIP. 404."""
        name = self._admin.check_topic(TopicOperation.SKIP, topic)
        self._subscription(name, subscription).clear_backlog()

    # -- topic policies --------------------------------------------------------------------------

    def get_retention(self, topic: str, applied: bool = False) -> RetentionPolicies | None:
        """The topic's own retention policy (None when unset), or with ``applied`` the one in
        force (its own, else its namespace's, else the broker's default). A partition's is its
        partitioned topic's. Tenant admin. 404 for an unknown topic."""
        name = self._read_policy(topic, "retention")
        return self._broker.topic_retention(str(name), applied=applied)

    def set_retention(self, topic: str, policies: RetentionPolicies) -> None:
        """Set the topic's retention policy (``topics set-retention``; a partitioned topic's
        covers its partitions), applied at once. Tenant admin. 404; 400 for a value out of its Java
        type's range, 412 for an invalid policy (:meth:`RetentionPolicies.validate`)."""
        name = TopicName.parse(topic)
        self._admin.check_tenant_admin(name.tenant, f"set the retention of topic {name}")
        if not isinstance(policies, RetentionPolicies):
            raise InvalidRequestError(f"invalid retention policies {policies!r}: expected RetentionPolicies")
        policies.validate()
        self._broker.set_topic_retention(str(name), policies)

    def get_compaction_threshold(self, topic: str, applied: bool = False) -> int | None:
        """The topic's own compaction threshold in bytes (None when unset), or with ``applied``
        the one in force (its own, its namespace's, the broker's). Tenant admin. 404."""
        name = self._read_policy(topic, "compaction threshold")
        return self._broker.topic_compaction_threshold(str(name), applied=applied)

    def set_compaction_threshold(self, topic: str, threshold: int) -> None:
        """Compact the topic automatically once ``threshold`` bytes are not compacted yet (0:
        never). Tenant admin. 404; 412 for a negative threshold."""
        name = TopicName.parse(topic)
        self._admin.check_tenant_admin(name.tenant, f"set the compaction threshold of topic {name}")
        self._broker.set_topic_compaction_threshold(str(name), threshold)

    def remove_compaction_threshold(self, topic: str) -> None:
        """Remove the topic's compaction threshold (its namespace's or the broker's applies).
        Tenant admin. 404."""
        name = TopicName.parse(topic)
        self._admin.check_tenant_admin(name.tenant, f"remove the compaction threshold of topic {name}")
        self._broker.set_topic_compaction_threshold(str(name), None)

    # -- message TTL, backlog quotas, inactive topics (Pulsar's PersistentTopics v2) -----------

    def get_message_ttl(self, topic: str, applied: bool = False) -> int | None:
        """The topic's own message TTL in seconds (None when unset), or with ``applied`` the one in
        force (its own, else its namespace's, else ``ttl_duration_default_in_seconds``). Tenant
        admin. 412 for a partition, 404."""
        name = self._topic_policy(topic, "read the message TTL")
        return self._broker.topic_message_ttl(str(name), applied=applied)

    def set_message_ttl(self, topic: str, seconds: int) -> None:
        """Expire what the topic's subscriptions have not acknowledged ``seconds`` after it was
        published (``topics set-message-ttl -t 1h``; 0: never). Tenant admin. 412 for a
        partition, 404; 412 "Invalid value for message TTL" for a negative one."""
        name = self._topic_policy(topic, "set the message TTL")
        self._broker.set_topic_message_ttl(str(name), seconds)

    def remove_message_ttl(self, topic: str) -> None:
        """Remove the topic's message TTL (its namespace's, or the broker's, applies). Tenant admin."""
        name = self._topic_policy(topic, "remove the message TTL")
        self._broker.set_topic_message_ttl(str(name), None)

    def get_backlog_quota_map(self, topic: str, applied: bool = False) -> dict[BacklogQuotaType, BacklogQuota]:
        """The topic's own backlog quotas by type (``{}`` when it has none), or with ``applied``
        those in force: its own if any, else its namespace's if any, else the broker's default
        for each type (Pulsar's ``internalGetBacklogQuota``). Tenant admin. 412 for a partition, 404."""
        name = self._topic_policy(topic, "read the backlog quotas")
        return self._broker.topic_backlog_quotas(str(name), applied=applied)

    def set_backlog_quota(
        self,
        topic: str,
        quota: BacklogQuota,
        quota_type: BacklogQuotaType | str = BacklogQuotaType.DESTINATION_STORAGE,
    ) -> None:
        """Set the topic's backlog quota of ``quota_type`` (``topics set-backlog-quota``). Tenant
        admin. 400 for a bad quota or type, 412 for a partition, 404; 412 "Backlog Quota exceeds
        configured retention quota for topic. ..." when the retention the topic has (its own,
        else its namespace's) does not cover it."""
        name = self._topic_policy(topic, "set a backlog quota")
        if not isinstance(quota, BacklogQuota):
            raise InvalidRequestError(f"invalid backlog quota {quota!r}: expected a BacklogQuota")
        self._broker.set_topic_backlog_quota(str(name), quota, BacklogQuotaType.parse(quota_type))

    def remove_backlog_quota(
        self, topic: str, quota_type: BacklogQuotaType | str = BacklogQuotaType.DESTINATION_STORAGE
    ) -> None:
        """Remove the topic's backlog quota of ``quota_type``. Tenant admin. 412 for a partition, 404."""
        name = self._topic_policy(topic, "remove a backlog quota")
        self._broker.set_topic_backlog_quota(str(name), None, BacklogQuotaType.parse(quota_type))

    def get_inactive_topic_policies(self, topic: str, applied: bool = False) -> InactiveTopicPolicies | None:
        """The topic's own inactive-topic policy (None when unset), or with ``applied`` the one in
        force (its own, its namespace's, the broker's settings). Tenant admin. 412 for a
        partition, 404."""
        name = self._topic_policy(topic, "read the inactive topic policies")
        return self._broker.topic_inactive_topic_policies(str(name), applied=applied)

    def set_inactive_topic_policies(self, topic: str, policies: InactiveTopicPolicies) -> None:
        """Set the topic's inactive-topic policy (``topics set-inactive-topic-policies``). Tenant
        admin. 400, 412 for a partition, 404."""
        name = self._topic_policy(topic, "set the inactive topic policies")
        if not isinstance(policies, InactiveTopicPolicies):
            raise InvalidRequestError(f"invalid inactive topic policies {policies!r}: expected InactiveTopicPolicies")
        self._broker.set_topic_inactive_topic_policies(str(name), policies)

    def remove_inactive_topic_policies(self, topic: str) -> None:
        """Remove the topic's inactive-topic policy. Tenant admin. 412 for a partition, 404."""
        name = self._topic_policy(topic, "remove the inactive topic policies")
        self._broker.set_topic_inactive_topic_policies(str(name), None)

    # -- message expiry (Pulsar's expireMessages) --------------------------------------------------

    def expire_messages(self, topic: str, subscription: str, expire_time_seconds: int) -> None:
        """Acknowledge what the subscription holds that was published more than
        ``expire_time_seconds`` ago (``topics expire-messages -t 1h``), on every partition of a
        partitioned topic (:meth:`Subscription.expire_messages`). EXPIRE_MESSAGES. 404; 409
        :class:`ExpiryNotIssuedError` (Pulsar's "Expire message by timestamp not issued ...")
        for a (partition's) subscription without backlog, or with a connected consumer and a
        backlog the TTL rule leaves alone; the other partitions are expired all the same."""
        seconds = _expire_time(expire_time_seconds)
        name = self._admin.check_topic(TopicOperation.EXPIRE_MESSAGES, topic)
        for sub in _partitions(self._subscription(name, subscription)):
            _issued_by_timestamp(sub, seconds)

    def expire_messages_by_position(
        self, topic: str, subscription: str, position: ResetCursorData | Position | MessageId
    ) -> None:
        """Acknowledge every message up to ``position`` included (``topics expire-messages -p L:E``);
        a :class:`ResetCursorData` with ``isExcluded`` names the message after it, as Pulsar's
        ``calculatePositionAckSet`` does (unless a batch index short of its batch's last
        message names the same entry, which expires whole, as in Pulsar). EXPIRE_MESSAGES. 404; 405 "Expire message at position is not supported for
        partitioned-topic" (name a partition); 409 :class:`ExpiryNotIssuedError` ("Expire message
        by position not issued ...") for a position past the topic's last message."""
        data = position if isinstance(position, ResetCursorData) else ResetCursorData.of(position)
        name = self._admin.check_topic(TopicOperation.EXPIRE_MESSAGES, topic)
        sub = self._subscription(name, subscription)
        if not isinstance(sub, Subscription):
            raise NotAllowedError("Expire message at position is not supported for partitioned-topic")
        target = Position(data.ledger_id, data.entry_id)
        if data.is_excluded and not 0 <= data.batch_index < _batch_size(self._topic(name), target) - 1:
            target = target.next()
        if not sub.expire_messages_up_to(target):
            raise ExpiryNotIssuedError(
                f"Expire message by position not issued on topic {sub.topic} for subscription {sub.name} due to "
                "ongoing message expiration not finished or invalid message position provided."
            )

    def expire_messages_for_all_subscriptions(self, topic: str, expire_time_seconds: int) -> None:
        """:meth:`expire_messages` on every subscription of the topic (every partition's;
        ``topics expire-messages-all-subscriptions -t 1h``). EXPIRE_MESSAGES. 404; 409 when the
        expiry was not issued on one of them (the others are expired all the same)."""
        seconds = _expire_time(expire_time_seconds)
        name = self._admin.check_topic(TopicOperation.EXPIRE_MESSAGES, topic)
        found = self._topic(name)
        topics = found.partitions if isinstance(found, PartitionedTopic) else [found]
        refused: list[ExpiryNotIssuedError] = []
        for partition in topics:
            for sub in list(partition.subscriptions.values()):
                try:
                    _issued_by_timestamp(sub, seconds)
                except ExpiryNotIssuedError as exc:
                    refused.append(exc)
        if refused:
            raise refused[0]

    # -- compaction ------------------------------------------------------------------------------

    def trigger_compaction(self, topic: str, wait: bool = False) -> None:
        """Start compacting the topic (each partition of a partitioned one) in the background;
        with ``wait``, return once every run ended (a process about to exit: the CLI over a
        data directory). COMPACT. 404; 409 "Compaction already in progress"."""
        name = self._admin.check_topic(TopicOperation.COMPACT, topic)
        found = self._topic(name)
        topics = found.partitions if isinstance(found, PartitionedTopic) else [found]
        for t in topics:
            t.trigger_compaction()
        for t in topics if wait else []:
            t.compaction.wait()

    def compaction_status(self, topic: str) -> LongRunningProcessStatus:
        """The status of the topic's last compaction (``NOT_RUN`` before any). COMPACT. 404;
        405 for a partitioned topic's own name (ask a partition)."""
        name = self._admin.check_topic(TopicOperation.COMPACT, topic)
        found = self._topic(name)
        if isinstance(found, PartitionedTopic):
            raise NotAllowedError(f"{name} is a partitioned topic: ask the compaction status of a partition")
        return found.compaction_status()

    def remove_retention(self, topic: str) -> None:
        """Remove the topic's retention policy: its namespace's (or the broker's) applies.
        Tenant admin. 404."""
        name = TopicName.parse(topic)
        self._admin.check_tenant_admin(name.tenant, f"remove the retention of topic {name}")
        self._broker.set_topic_retention(str(name), None)

    def get_schema_compatibility_strategy(
        self, topic: str, applied: bool = False
    ) -> SchemaCompatibilityStrategy | None:
        """The topic's own schema compatibility strategy (None when unset), or with ``applied``
        the one in force (its own, else its namespace's, else the broker's). Tenant admin. 404."""
        name = self._read_policy(topic, "schema compatibility strategy")
        own = self._broker.topic_schema_compatibility_strategy(str(name))  # 404 for an unknown topic
        return self._broker.schema_compatibility_strategy(str(name)) if applied else own

    def set_schema_compatibility_strategy(self, topic: str, strategy: SchemaCompatibilityStrategy | str) -> None:
        """Set the topic's schema compatibility strategy (a partitioned topic's covers its
        partitions); the next schema check uses it. Tenant admin. 400 for an unknown strategy."""
        name = TopicName.parse(topic)
        self._admin.check_tenant_admin(name.tenant, f"set the schema compatibility strategy of topic {name}")
        self._broker.set_topic_schema_compatibility_strategy(str(name), SchemaCompatibilityStrategy.parse(strategy))

    def remove_schema_compatibility_strategy(self, topic: str) -> None:
        """Remove the topic's strategy: its namespace's (or the broker's) applies. Tenant admin."""
        name = TopicName.parse(topic)
        self._admin.check_tenant_admin(name.tenant, f"remove the schema compatibility strategy of topic {name}")
        self._broker.set_topic_schema_compatibility_strategy(str(name), None)

    # -- termination -----------------------------------------------------------------------------

    def terminate(self, topic: str) -> MessageId:
        """Terminate a non-partitioned topic (or one partition): the id of its last message.
        Producers are refused from then on; consumers hear the end of the topic once they
        acknowledged everything. TERMINATE (403). 404; 405 for a partitioned topic ("Termination
        of a partitioned topic is not allowed")."""
        name = self._admin.check_topic(TopicOperation.TERMINATE, topic)
        return self._broker.terminate_topic(str(name))

    def terminate_partitioned(self, topic: str) -> dict[int, MessageId]:
        """Terminate every partition of a partitioned topic: partition index -> its last
        message's id. TERMINATE (403). 404 for a topic that is not partitioned."""
        name = self._admin.check_topic(TopicOperation.TERMINATE, topic)
        return self._broker.terminate_partitioned_topic(str(name))

    # -- unloading -----------------------------------------------------------------------------

    def unload(self, topic: str) -> None:
        """Unload a topic, every partition of a partitioned one (Pulsar's ``unloadTopic``): its
        producers and consumers are disconnected and reconnect, its cursors closed through their
        close path, and the next lookup loads it again (``Broker.unload_topic``). UNLOAD (403).
        404."""
        name = self._admin.check_topic(TopicOperation.UNLOAD, topic)
        self._broker.unload_topic(str(name))

    # -- PIP-423 -------------------------------------------------------------------------------

    def skip_messages(self, topic: str, subscription: str, request: SkipMessageIdsRequest | bytes | str) -> None:
        """Skip messages by id (PIP-423): acknowledge whole entries or batch indexes.

        ``request`` is a parsed :class:`SkipMessageIdsRequest` or a raw JSON body in either of
        Pulsar's formats (parsed first: 400 with Pulsar's message). SKIP (403). 404 for an
        unknown topic or subscription; 405 ``NotAllowedError("Unsupported subscription
        type.")`` for Exclusive and Failover; 400 for a batch index outside its entry's batch;
        412 for a message that is not in the topic. The whole request is validated before
        anything is acknowledged.
        """
        if isinstance(request, (bytes, bytearray, str)):
            request = SkipMessageIdsRequest.parse_body(request)
        elif not isinstance(request, SkipMessageIdsRequest):
            raise InvalidRequestError(
                f"invalid skip request {request!r}: expected a SkipMessageIdsRequest or a JSON body"
            )
        name = self._admin.check_topic(TopicOperation.SKIP, topic)
        sub = self._subscription(name, subscription)
        sub.skip_messages(request.to_skip_entries())

    def cancel_delayed_message(
        self,
        topic: str,
        ledger_id: int,
        entry_id: int,
        subscription_names: Iterable[str] | str | None = None,
    ) -> CancelDelayedMessageResult:
        """Cancel a delayed message (PIP-423) on the named subscriptions, or on every one.

        The message ``ledger_id:entry_id`` is acknowledged individually on each Shared and
        Key_Shared subscription, so it is never delivered there; Exclusive and Failover
        subscriptions refuse (False in the result, nothing changed). A comma-separated string
        of names is accepted, empty names are ignored, and no names (None or empty) means every
        subscription of the topic.

        412 ``PreconditionFailedError("ledgerId, entryId must be non-negative.")`` for negative
        ids (checked first, as Pulsar); 400 for ids that are not int64; CANCEL_DELAYED_MESSAGE
        (403); 404 for an unknown topic or any unknown named subscription (checked before
        anything changes); 412 for a message that is not in the topic.
        """
        for field, value in (("ledgerId", ledger_id), ("entryId", entry_id)):
            if isinstance(value, bool) or not isinstance(value, int) or value > _INT64_MAX:
                raise InvalidRequestError(f"invalid {field} {value!r}: not an int64")
        name = TopicName.parse(topic)
        if ledger_id < 0 or entry_id < 0:
            raise PreconditionFailedError("ledgerId, entryId must be non-negative.")
        self._admin.check_topic(TopicOperation.CANCEL_DELAYED_MESSAGE, name)
        found = self._topic(name)
        names = _subscription_names(subscription_names)
        if not names:
            names = found.subscription_names()
        subs = [(n, found.get_subscription(n)) for n in names]
        results = {n: sub.cancel_delayed_message(ledger_id, entry_id) for n, sub in subs}
        return CancelDelayedMessageResult(topic=str(name), ledger_id=ledger_id, entry_id=entry_id, results=results)

    # -- helpers -------------------------------------------------------------------------------

    def _read_policy(self, topic: str, policy: str) -> TopicName:
        """A policy read's checks, in this order: the name (400), then the role (tenant admin:
        Pulsar's ``allowTopicPolicyOperationAsync``, 403 whether the topic exists or not). The
        caller looks the topic up after (404). Returns the parsed name."""
        name = TopicName.parse(topic)
        self._admin.check_tenant_admin(name.tenant, f"read the {policy} of topic {name}")
        return name

    def _topic_stats(self, topic: Topic, subscription_backlog_size: bool, earliest: bool) -> TopicStatsData:
        """:func:`topic_stats` with the limits of the backlog quotas in force."""
        policies, name = self._broker.time_policies, topic.topic_name
        limits = (
            policies.backlog_quota(name, BacklogQuotaType.DESTINATION_STORAGE).limit_size,
            policies.backlog_quota(name, BacklogQuotaType.MESSAGE_AGE).limit_time,
        )
        return topic_stats(topic, subscription_backlog_size, earliest, backlog_quota_limits=limits)

    def _topic_policy(self, topic: str, action: str) -> TopicName:
        """The checks of a topic-level policy of Pulsar's ``TopicPolicies`` (message TTL, backlog
        quotas, inactive topics), in order: the name (400), the role (tenant admin, 403), not a
        partition (412, Pulsar's ``preValidation``); the broker looks the topic up (404)."""
        name = TopicName.parse(topic)
        self._admin.check_tenant_admin(name.tenant, f"{action} of topic {name}")
        if name.is_partition:
            raise PreconditionFailedError("Not allowed to set/get topic policy for a partition")
        return name

    def _topic(self, name: TopicName) -> Topic | PartitionedTopic:
        return self._broker.get_topic(str(name))

    def _subscription(self, name: TopicName, subscription: str) -> Subscription | PartitionedSubscription:
        if not isinstance(subscription, str) or not subscription:
            raise InvalidRequestError(f"invalid subscription name {subscription!r}")
        return self._topic(name).get_subscription(subscription)


def _subscription_names(value: Iterable[str] | str | None) -> list[str]:
    if value is None:
        return []
    parts = value.split(",") if isinstance(value, str) else list(value)
    names: list[str] = []
    for part in parts:
        if not isinstance(part, str):
            raise InvalidRequestError(f"invalid subscription name {part!r}")
        part = part.strip()
        if part and part not in names:
            names.append(part)
    return names


def _check_flags(**flags: object) -> None:
    for option, value in flags.items():
        if not isinstance(value, bool):
            raise InvalidRequestError(f"invalid {option} {value!r}: expected a bool")


def _check_reset_position(position: Position | MessageId) -> None:
    """412 naming the id for negative ledger or entry ids, except -1:-1 (EARLIEST): the rule
    ``cancel_delayed_message`` has (Pulsar's), for the position a cursor is reset to."""
    ledger_id, entry_id = position.ledger_id, position.entry_id
    if (ledger_id, entry_id) != (EARLIEST.ledger_id, EARLIEST.entry_id) and (ledger_id < 0 or entry_id < 0):
        raise PreconditionFailedError(
            f"Invalid reset position {ledger_id}:{entry_id}: ledgerId, entryId must be non-negative "
            "(-1:-1 is the earliest message)"
        )


def _expire_time(seconds: object) -> int:
    """An ``expireTimeInSeconds``: 400 unless an int >= 0 (Pulsar's path parameter is a Java ``int``)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 0 <= seconds < 1 << 31:
        raise InvalidRequestError(f"invalid expireTimeInSeconds {seconds!r}: expected seconds >= 0")
    return seconds


def _partitions(sub: Subscription | PartitionedSubscription) -> list[Subscription]:
    return sub.partitions if isinstance(sub, PartitionedSubscription) else [sub]


def _issued_by_timestamp(sub: Subscription, seconds: int) -> None:
    """``sub.expire_messages(seconds)``; Pulsar's 409 when it was not issued."""
    if not sub.expire_messages(seconds):
        raise ExpiryNotIssuedError(
            f"Expire message by timestamp not issued on topic {sub.topic} for subscription {sub.name} due to "
            "ongoing message expiration not finished or subscription almost catch  up. If it's performed on a "
            "partitioned topic operation might succeeded on other partitions, please check stats of individual "
            "partition."
        )


def _batch_size(topic: Topic | PartitionedTopic, position: Position) -> int:
    """The number of messages in the entry at ``position`` (0 when there is none, as Pulsar's
    ``getEntryBatchSize`` falls back)."""
    if not isinstance(topic, Topic) or not topic.managed_ledger.is_valid_position(position):
        return 0
    return topic.managed_ledger.read_entry(position).metadata.num_messages
