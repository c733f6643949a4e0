"""Broker configuration: frozen data, Pulsar's ``ServiceConfiguration`` names in snake_case.

Defaults are Pulsar's except where noted:

* ``delayed_delivery_deliver_at_time_strict`` defaults to True (Pulsar: false). With Pulsar's
  default a message whose deliver-at time is less than one tick (1 s) away is delivered at once;
  mledger's contract is that a delayed message is held until its time, so strict is the default.
  Set it to False to get Pulsar's tick-rounded behaviour.
* The ``deduplication_*`` options drop Pulsar's ``broker`` prefix
  (``brokerDeduplicationEnabled`` -> ``deduplication_enabled``), as the public API names them.
* ``authenticate_docs_endpoint`` is an mledger extension (Pulsar serves no API documents): the
  ``authenticate_metrics_endpoint`` switch for the admin server's ``/docs``, ``/redoc`` and
  ``/openapi.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from ..core import ConfigError, InvalidRequestError, ManagedLedgerConfig
from ._backlog_quota import BacklogRetentionPolicy
from ._errors import InvalidNameError
from ._inactive_topics import InactiveTopicDeleteMode
from ._names import check_cluster_name
from ._schema_compat import SchemaCompatibilityStrategy

__all__ = ["BROKER_MANAGED_LEDGER_CONFIG", "BrokerConfig"]


BROKER_MANAGED_LEDGER_CONFIG = ManagedLedgerConfig(minimum_rollover_time_ms=10 * 60_000)
"""A broker's topics' managed-ledger defaults: ``ManagedLedgerConfig()`` with Pulsar's broker
settings where they differ from the managed ledger's own, i.e. a ledger lives at least 10
minutes before it rolls over, however many entries it has (``managedLedgerMinLedgerRolloverTimeMinutes=10``
in broker.conf; ``ManagedLedgerConfig.minimumRolloverTimeMs`` is 0). So a short test against the
broker never sees a rollover, nor the trimming a rollover starts, unless it sets a config."""


@dataclass(frozen=True)
class BrokerConfig:
    """Settings of a :class:`~mledger.broker.Broker`; validated on construction (``ConfigError``)."""

    cluster_name: str = "standalone"
    """The broker's cluster, created if missing, and the prefix of generated producer names: a
    name Pulsar's rule accepts (:func:`~mledger.broker.check_cluster_name`)."""
    allow_auto_topic_creation: bool = True
    """Producers and subscribers create a missing non-partitioned topic (Pulsar's default)."""
    managed_ledger_config: ManagedLedgerConfig | None = None
    """Config of every topic's managed ledger (None: :data:`BROKER_MANAGED_LEDGER_CONFIG`,
    Pulsar's broker defaults)."""

    # Dispatch
    dispatcher_max_read_batch_size: int = 100
    """Entries read per dispatcher read (Pulsar's ``dispatcherMaxReadBatchSize``)."""
    max_unacked_messages_per_consumer: int = 50_000
    """A Shared/Key_Shared consumer holding this many unacked messages gets no more; 0 = no limit."""
    max_unacked_messages_per_subscription: int = 200_000
    """A Shared/Key_Shared subscription stops reading new entries while this many are unacked or
    waiting for redelivery; 0 = no limit."""
    receiver_queue_size: int = 1000
    """Default permits of a consumer (the client's receiver queue)."""
    subscription_key_shared_consistent_hashing_replica_points: int = 100
    """Points per consumer on the Key_Shared hash ring."""

    # Delayed delivery
    delayed_delivery_enabled: bool = True
    delayed_delivery_tick_time_millis: int = 1000
    delayed_delivery_deliver_at_time_strict: bool = True
    """True: hold a message until its deliver-at time exactly. False (Pulsar's default): deliver
    it once it is due within one tick."""

    # Deduplication (PIP-6, docs/dedup.md); used by the dedup layer.
    deduplication_enabled: bool = False
    deduplication_max_number_of_producers: int = 10_000
    deduplication_entries_interval: int = 1000
    deduplication_snapshot_frequency_in_seconds: int = 120
    deduplication_snapshot_interval_seconds: int = 120
    deduplication_producer_inactivity_timeout_minutes: int = 360
    replicator_prefix: str = "pulsar.repl"

    # Retention (docs/retention.md): how often run_due_tasks queues a trimming pass on every open
    # topic, so that ledgers whose retention time passed go (Pulsar's retentionCheckIntervalInSeconds).
    retention_check_interval_in_seconds: int = 120

    # Topic stats: rates are averages over this interval (Pulsar's statsUpdateFrequencyInSecs).
    stats_update_frequency_in_secs: int = 60

    # The admin web server (mledger.rest). Both need authentication (tokens or a trusted role
    # header); without them the server refuses to start.
    authenticate_metrics_endpoint: bool = False
    """``/metrics`` answers only callers with a role, 401 otherwise (Pulsar's
    ``authenticateMetricsEndpoint``; off by default, as in Pulsar: the scrape then shows every
    topic and subscription name to anyone who reaches the port)."""
    authenticate_docs_endpoint: bool = False
    """mledger extension: ``/docs``, ``/redoc`` and ``/openapi.json`` answer only callers with a
    role (the static script files of the docs stay public)."""

    # Compaction (mledger.broker._compaction): how often run_due_tasks checks every open topic
    # against its compactionThreshold policy (Pulsar's brokerServiceCompactionMonitorIntervalInSeconds),
    # and the threshold in bytes when no policy sets one (brokerServiceCompactionThresholdInBytes; 0: off).
    broker_service_compaction_monitor_interval_in_seconds: int = 60
    broker_service_compaction_threshold_in_bytes: int = 0

    # Message TTL (mledger.broker._monitors: checkMessageExpiry): every
    # message_expiry_check_interval_in_minutes, each subscription acknowledges what was published
    # more than the topic's TTL ago (its messageTTLInSeconds policy, else its namespace's
    # message_ttl_in_seconds, else ttl_duration_default_in_seconds; 0: no TTL).
    message_expiry_check_interval_in_minutes: int = 5
    ttl_duration_default_in_seconds: int = 0
    # Inactive topics (checkGC): every broker_delete_inactive_topics_frequency_seconds, a topic
    # inactive for max_inactive_duration_seconds (None: the frequency) is deleted; the mode and
    # the switch are the broker's default inactive-topic policy (docs/pulsar/behaviour.md).
    broker_delete_inactive_topics_enabled: bool = True
    broker_delete_inactive_topics_frequency_seconds: int = 60
    broker_delete_inactive_topics_mode: str = "delete_when_no_subscriptions"
    broker_delete_inactive_topics_max_inactive_duration_seconds: int | None = None
    broker_delete_inactive_partitioned_topic_metadata_enabled: bool = False
    # Backlog quotas (monitorBacklogQuota, mledger.broker._backlog_quota): checked every
    # backlog_quota_check_interval_in_seconds; the default quota is backlog_quota_default_limit_bytes
    # (by size, -1: none) and backlog_quota_default_limit_second (by time, -1: none) with
    # backlog_quota_default_retention_policy.
    backlog_quota_check_enabled: bool = True
    backlog_quota_check_interval_in_seconds: int = 60
    backlog_quota_default_limit_bytes: int = -1
    backlog_quota_default_limit_second: int = -1
    backlog_quota_default_retention_policy: str = "producer_request_hold"
    precise_time_based_backlog_quota_check: bool = False

    # Schemas: the compatibility strategy of topics whose namespace and topic policies set none
    # (Pulsar's schemaCompatibilityStrategy, default FULL; UNDEFINED also means FULL), and whether
    # producers may register new schema versions (isAllowAutoUpdateSchemaEnabled).
    schema_compatibility_strategy: str = "FULL"
    is_allow_auto_update_schema_enabled: bool = True

    @property
    def ledger_config(self) -> ManagedLedgerConfig:
        """The managed-ledger config of the broker's topics: ``managed_ledger_config`` or
        :data:`BROKER_MANAGED_LEDGER_CONFIG`."""
        return self.managed_ledger_config or BROKER_MANAGED_LEDGER_CONFIG

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _STRINGS:
                if not isinstance(value, str) or not value:
                    raise ConfigError(f"{f.name} must be a non-empty string, got {value!r}")
                if f.name == "cluster_name":
                    try:
                        check_cluster_name(value)
                    except InvalidNameError as exc:
                        raise ConfigError(f"cluster_name: {exc}") from None
            elif f.name == "schema_compatibility_strategy":
                try:
                    SchemaCompatibilityStrategy.parse(value)
                except InvalidRequestError as exc:
                    raise ConfigError(f"schema_compatibility_strategy: {exc}") from None
            elif f.name in _CHOICES:
                if value not in _CHOICES[f.name]:
                    raise ConfigError(f"{f.name} must be one of {', '.join(_CHOICES[f.name])}, got {value!r}")
            elif f.name == "broker_delete_inactive_topics_max_inactive_duration_seconds":
                if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                    raise ConfigError(f"{f.name} must be None or an integer >= 0, got {value!r}")
            elif f.name == "managed_ledger_config":
                if value is not None and not isinstance(value, ManagedLedgerConfig):
                    raise ConfigError(f"managed_ledger_config must be a ManagedLedgerConfig, got {value!r}")
            elif f.type in ("bool", bool):
                if not isinstance(value, bool):
                    raise ConfigError(f"{f.name} must be a bool, got {value!r}")
            else:
                minimum = 1 if f.name in _POSITIVE else -1 if f.name in _MINUS_ONE_IS_NONE else 0
                if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                    raise ConfigError(f"{f.name} must be an integer >= {minimum}, got {value!r}")

    @property
    def dedup_entries_interval(self) -> int:
        """Alias of ``deduplication_entries_interval`` (an older name of this model)."""
        return self.deduplication_entries_interval

    def with_changes(self, **changes: Any) -> BrokerConfig:
        """A validated copy with some settings changed."""
        return replace(self, **changes)

    @classmethod
    def for_pulsar(cls, name: str, **changes: Any) -> BrokerConfig:
        """A broker whose topics run Pulsar version ``name``'s cursor defaults and rules (a
        ``--defaults`` preset: ``pulsar-3.0``, ``pulsar-4.0``, ``pulsar-4.1``,
        ``pulsar-newest``): ``managed_ledger_config`` is
        :meth:`ManagedLedgerConfig.for_pulsar <mledger.core.ManagedLedgerConfig.for_pulsar>` over
        the broker's own ledger defaults (:data:`BROKER_MANAGED_LEDGER_CONFIG`); then ``changes``.
        Its cursors persist at that version's pace (the mark-delete rate limiter, the periodic
        flush) and answer an acknowledgement's receipt before persisting, as Pulsar does.
        ``ConfigError`` for an unknown name.

        >>> BrokerConfig.for_pulsar("pulsar-4.0").ledger_config.pulsar_rules
        'pulsar-4.0'
        """
        broker_defaults = {"minimum_rollover_time_ms": BROKER_MANAGED_LEDGER_CONFIG.minimum_rollover_time_ms}
        ledger = ManagedLedgerConfig.for_pulsar(name, **broker_defaults)
        return replace(cls(managed_ledger_config=ledger), **changes)


_STRINGS = {"cluster_name", "replicator_prefix"}
_POSITIVE = {
    "dispatcher_max_read_batch_size",
    "receiver_queue_size",
    "subscription_key_shared_consistent_hashing_replica_points",
    "delayed_delivery_tick_time_millis",
    "deduplication_max_number_of_producers",
    "deduplication_entries_interval",
    "deduplication_producer_inactivity_timeout_minutes",
    "retention_check_interval_in_seconds",
    "stats_update_frequency_in_secs",
    "broker_service_compaction_monitor_interval_in_seconds",
    "message_expiry_check_interval_in_minutes",
    "broker_delete_inactive_topics_frequency_seconds",
    "backlog_quota_check_interval_in_seconds",
}
_MINUS_ONE_IS_NONE = {"backlog_quota_default_limit_bytes", "backlog_quota_default_limit_second"}
_CHOICES = {
    "broker_delete_inactive_topics_mode": tuple(m.value for m in InactiveTopicDeleteMode),
    "backlog_quota_default_retention_policy": tuple(p.value for p in BacklogRetentionPolicy),
}
