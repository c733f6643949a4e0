"""Managed-ledger configuration: frozen data, Pulsar's names in snake_case, Pulsar's defaults.

Names and defaults follow ``ManagedLedgerConfig`` / ``ManagedLedgerFactoryConfig`` (Pulsar's
managed-ledger classes; docs/configuration.md), not the broker's ``ServiceConfiguration``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import Any, cast

from ._errors import ConfigError
from ._pulsar_versions import PULSAR_VERSIONS, preset_values

INDIVIDUAL_ACK_FORMATS = ("range", "long_array", "auto")
COMPRESSION_TYPES = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")
DEFAULT_MAX_STATE_SIZE_IN_BYTES = 64 * 1024 * 1024
"""Default bound on one stored state once decompressed or reassembled (64 MiB). The largest
legitimate states are a few MiB (10 million random holes take 6.3 MiB as BitSet words)."""
MAX_MESSAGE_SIZE = 5 * 1024 * 1024
"""Pulsar's broker default ``maxMessageSize`` (5 MiB)."""
MESSAGE_SIZE_FRAME_PADDING = 10 * 1024
"""Pulsar's ``Commands.MESSAGE_SIZE_FRAME_PADDING``: the broker sets the BookKeeper client's
``nettyMaxFrameSizeBytes`` to ``maxMessageSize`` plus this (``PulsarService``)."""
JUTE_MAXBUFFER = 10 * 1024 * 1024
"""``jute.maxbuffer`` as Pulsar's start scripts set it (``-Djute.maxbuffer=10485760`` in
``bin/pulsar``); ZooKeeper's own default is 1 MiB (1048575 bytes)."""
UNLIMITED = -1
"""``retention_time_ms`` / ``retention_size_in_mb`` value meaning "no limit" (Pulsar's -1)."""
UNACKED_RANGES_LIMIT: dict[str, str] = {
    "range": (
        "range format (the default): max_unacked_ranges_to_persist caps the number of ack ranges; "
        "the first N ranges in position order (nearest the mark-delete) are persisted, the rest are "
        "kept in memory only (Pulsar: ManagedCursorImpl.buildIndividualDeletedMessageRanges; N + 1 "
        "ranges before apache/pulsar#25548, unacked_ranges_limit_off_by_one=true)."
    ),
    "long_array": (
        "long-array format (persist_individual_ack_as_long_array=true): the same N caps acked "
        "entries, not ranges. Whole ledgers are persisted as BitSet words, in ascending order, while "
        "the sum of their acked entries stays <= N; the ledger that passes N and every later one are "
        "left out, all their ranges truncated, so it can truncate where the range format at the same "
        "N does not. When even the first ledger has more than N acked entries, the state is written "
        "in the range format instead, capped at N ranges (Pulsar: ManagedCursorImpl."
        "persistPositionToLedger -> RangeSetWrapper / OpenLongPairRangeSet.toRanges(N))."
    ),
    "auto": (
        "auto format (individual_ack_format=auto, mledger's own): N caps ranges as in the range "
        "format, then each ledger is written as ranges or BitSet words, whichever is smaller."
    ),
}
"""How each individual-ack format applies ``max_unacked_ranges_to_persist`` (for summaries
and reports that compare formats): format -> one paragraph."""
LIMIT_SETTINGS = (
    "max_unacked_ranges_to_persist",
    "persist_individual_ack_as_long_array",
    "individual_ack_format",
    "unacked_ranges_limit_off_by_one",
    "defaults",
)
"""The settings whose comparison needs :data:`UNACKED_RANGES_LIMIT` to be read right."""


def unacked_ranges_limit_notes(compared: Iterable[str], formats: Iterable[str]) -> list[str]:
    """The :data:`UNACKED_RANGES_LIMIT` paragraphs of ``formats`` (effective formats, each once,
    in :data:`INDIVIDUAL_ACK_FORMATS` order) when the ``compared`` settings include one of
    :data:`LIMIT_SETTINGS`; ``[]`` otherwise."""
    if not set(compared) & set(LIMIT_SETTINGS):
        return []
    used = set(formats)
    return [UNACKED_RANGES_LIMIT[f] for f in INDIVIDUAL_ACK_FORMATS if f in used]


@dataclass(frozen=True)
class ManagedLedgerConfig:
    """Settings of one managed ledger and its cursors."""

    # Data ledgers
    max_entries_per_ledger: int = 50_000
    max_size_per_ledger_mb: int = 100
    minimum_rollover_time_ms: int = 0
    maximum_rollover_time_ms: int = 4 * 3600 * 1000
    # Cursor ledgers (PositionInfo entries)
    metadata_max_entries_per_ledger: int = 50_000
    ledger_rollover_timeout: int = 4 * 3600  # seconds
    # Individual-ack persistence
    max_unacked_ranges_to_persist: int = 10_000
    """Ranges (or, in the long-array format, acked entries) persisted: :data:`UNACKED_RANGES_LIMIT`."""
    max_unacked_ranges_to_persist_in_metadata_store: int = 1_000
    """On close, a state with more ranges than this goes to the cursor ledger; -1 (as in
    Pulsar's tests) sends every closing state with a cursor ledger there."""
    max_batch_deleted_index_to_persist: int = 10_000
    persist_individual_ack_as_long_array: bool = False
    individual_ack_format: str | None = None
    """``"range"``, ``"long_array"`` or ``"auto"`` (smaller per ledger); None follows
    ``persist_individual_ack_as_long_array`` as Pulsar does."""
    deletion_at_batch_index_level_enabled: bool = True
    """Batch-index acks (the broker's ``acknowledgmentAtBatchIndexLevelEnabled``, Pulsar's
    ``ManagedLedgerConfig.deletionAtBatchIndexLevelEnabled``): off, an ack set is ignored."""
    # PIP-381 chunking of large PositionInfo
    persistent_unacked_ranges_with_multiple_entries_enabled: bool = False
    """Without ``pulsar_rules``: PIP-381 chunking (mledger's implementation of the proposal). With
    ``pulsar_rules``, what the flag does in that Apache release: it only tracks dirty ledgers
    (``RangeSetWrapper``), with no effect on the cap, the entry size or what is stored; PIP-381
    is then chosen by ``pip381``."""
    persistent_unacked_ranges_max_entry_size: int = 1024 * 1024
    """PIP-381's largest part; in force when PIP-381 chunking is (:attr:`pip381_chunking`). No
    Apache release has this setting."""
    pip381: bool = False
    """PIP-381 chunking as its design document describes it (a proposal: apache/pulsar#22799 is
    not merged), chosen by name whatever ``pulsar_rules`` says; the what-if an operator weighs."""
    cursor_info_compression_type: str = "NONE"
    unacked_ranges_limit_off_by_one: bool = False
    """mledger's switch for Pulsar before apache/pulsar#25548 (2026-04): the range format
    persisted ``max_unacked_ranges_to_persist + 1`` ranges (``buildIndividualDeletedMessageRanges``
    added a range before testing the count, a regression of #3819). Off: exactly N, as since
    #25548. The long-array cut-off (``toRanges``) had no such error."""
    # Mark-delete persistence rate (per second); 0 disables throttling
    throttle_mark_delete: float = 0.0
    pulsar_rules: str | None = None
    """The Pulsar version whose persist and recovery rules apply (a key of
    :data:`~mledger.core.PULSAR_VERSIONS`, as ``--defaults`` names it); None:
    mledger's own (:data:`~mledger.core.MLEDGER_RULES`)."""
    restart_as: str | None = None
    """The Pulsar version that recovers the state after a stop (an upgrade or a rollback), for
    the restart figures; None: the version that wrote it (``pulsar_rules``)."""
    # Retention of consumed ledgers (Pulsar's retentionTimeMs / retentionSizeInMB): 0 keeps
    # nothing once consumed, -1 is unlimited; a ledger goes when either limit is passed.
    retention_time_ms: int = 0
    retention_size_in_mb: int = 0
    retain_without_subscriptions: bool = False
    """False (Pulsar's behaviour): a ledger without durable cursors treats every closed ledger as
    consumed, so retention alone decides what stays (with the default 0/0, everything but the
    current ledger goes at the next rollover or retention check). True (the behaviour of earlier
    mledger versions, for embedded logs): a ledger without a durable consumer cursor (system cursors like
    ``pulsar.dedup`` do not count) trims nothing."""

    def __post_init__(self) -> None:
        _validate(self)

    def with_changes(self, **changes: Any) -> ManagedLedgerConfig:
        """A copy with some settings changed (validated)."""
        return replace(self, **changes)

    @classmethod
    def for_pulsar(cls, name: str, **changes: Any) -> ManagedLedgerConfig:
        """The settings of Pulsar version ``name`` (a ``--defaults`` preset: ``pulsar-3.0``,
        ``pulsar-4.0``, ``pulsar-4.1``, ``pulsar-newest``): its broker defaults and its persist
        and recovery rules (``pulsar_rules``), then ``changes``. ``ConfigError`` for an unknown
        name.

        >>> c = ManagedLedgerConfig.for_pulsar("pulsar-4.0")
        >>> c.pulsar_rules, c.throttle_mark_delete, c.deletion_at_batch_index_level_enabled
        ('pulsar-4.0', 1.0, False)
        """
        return cast(ManagedLedgerConfig, _with_preset(cls(), name, changes))

    @property
    def pip381_chunking(self) -> bool:
        """Whether PIP-381 chunking is in force: ``pip381``, or without ``pulsar_rules`` the
        flag ``persistent_unacked_ranges_with_multiple_entries_enabled`` (its meaning in mledger
        before the rules table; no Apache release gives the flag this effect)."""
        return self.pip381 or (
            self.pulsar_rules is None and self.persistent_unacked_ranges_with_multiple_entries_enabled
        )

    @property
    def effective_ack_format(self) -> str:
        """The individual-ack format in force: ``range``, ``long_array`` or ``auto``."""
        if self.individual_ack_format is not None:
            return self.individual_ack_format
        return "long_array" if self.persist_individual_ack_as_long_array else "range"


@dataclass(frozen=True)
class ManagedLedgerFactoryConfig:
    """Factory-wide settings (Pulsar's ``ManagedLedgerFactoryConfig``)."""

    managed_cursor_info_compression_type: str = "NONE"
    managed_cursor_info_compression_threshold_in_bytes: int = 0
    managed_ledger_info_compression_type: str = "NONE"
    managed_ledger_info_compression_threshold_in_bytes: int = 0
    max_state_size_in_bytes: int = DEFAULT_MAX_STATE_SIZE_IN_BYTES
    """The most one stored state (``ManagedLedgerInfo``, ``ManagedCursorInfo``, a cursor-ledger
    ``PositionInfo`` with its PIP-381 parts) may take once decompressed or reassembled: a
    reader allocates no more than this for it, and a writer never stores a cursor state
    larger (ranges beyond it are dropped like the range limit's, counted and logged)."""

    max_message_size: int = MAX_MESSAGE_SIZE
    """The broker's ``maxMessageSize``, from which the cursor-ledger frame limit is derived."""
    netty_max_frame_size_bytes: int = 0
    """BookKeeper's largest entry (``nettyMaxFrameSizeBytes``); 0 derives it as Pulsar does:
    ``max_message_size`` + :data:`MESSAGE_SIZE_FRAME_PADDING`. A cursor-ledger entry above it
    is flagged (``state_over_limit_at_ms``): a bookie would refuse it."""
    jute_maxbuffer: int = JUTE_MAXBUFFER
    """ZooKeeper's ``jute.maxbuffer``: a ``ManagedCursorInfo`` above it is flagged
    (``state_over_limit_at_ms``): ZooKeeper would refuse it."""
    cursor_position_flush_seconds: int = 60
    """Pulsar's ``cursorPositionFlushSeconds`` (broker ``managedLedgerCursorPositionFlushSeconds``):
    the period of the one factory-wide fixed-rate timer that flushes cursors a rate limiter left
    dirty (``ManagedLedgerFactoryImpl.flushCursors``; the owner of the factory schedules it and
    calls ``ManagedLedgerFactory.flush_cursors`` at each tick)."""

    def __post_init__(self) -> None:
        _validate(self)

    @classmethod
    def for_pulsar(cls, name: str, **changes: Any) -> ManagedLedgerFactoryConfig:
        """The factory settings of Pulsar version ``name`` (see
        :meth:`ManagedLedgerConfig.for_pulsar`): metadata compression, the frame limit,
        ``jute.maxbuffer``, the cursor flush period; then ``changes``."""
        return cast(ManagedLedgerFactoryConfig, _with_preset(cls(), name, changes))

    @property
    def frame_limit(self) -> int:
        """The cursor-ledger entry limit in force (``netty_max_frame_size_bytes`` or derived)."""
        if self.netty_max_frame_size_bytes > 0:
            return self.netty_max_frame_size_bytes
        return self.max_message_size + MESSAGE_SIZE_FRAME_PADDING


def parse_setting(key: str, raw: str, current: Any, annotation: Any) -> Any:
    """The value of setting ``key`` written as text (``--set``, a preset): ``none``/``null``/empty
    for an optional one, ``true``/``false`` (``1``/``0``, ``yes``/``no``, ``on``/``off``), an
    integer (``_`` allowed), a number, else the text. ``current`` and ``annotation`` (the field's
    value and type) say which; ``ConfigError`` names the key for a value of the wrong type."""
    text = str(annotation)
    lowered = raw.lower()
    if lowered in ("none", "null", "") and ("None" in text or current is None):
        return None
    if isinstance(current, bool) or text == "bool":
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{key} expects true or false, got {raw!r}")
    if isinstance(current, int) or text.startswith("int"):
        try:
            return int(raw.replace("_", ""))
        except ValueError:
            raise ConfigError(f"{key} expects an integer, got {raw!r}") from None
    if isinstance(current, float) or text == "float":
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"{key} expects a number, got {raw!r}") from None
    return raw


def _with_preset(config: Any, name: str, changes: dict[str, Any]) -> Any:
    """``config`` with the values preset ``name`` gives its fields, then ``changes``."""
    types = {f.name: f.type for f in fields(config)}
    values = {
        key: parse_setting(key, raw, getattr(config, key), types[key])
        for key, raw in preset_values(name).items()
        if key in types
    }
    return replace(config, **{**values, **changes})


def _validate(config: object) -> None:
    for f in fields(config):  # type: ignore[arg-type]
        value = getattr(config, f.name)
        if f.name.endswith("_compression_type"):
            if value is not None and value != "" and value not in COMPRESSION_TYPES:
                raise ConfigError(
                    f"{f.name}: No enum constant org.apache.bookkeeper.mledger.proto.CompressionType.{value}"
                )
        elif f.name in ("pulsar_rules", "restart_as"):
            if value is not None and value not in PULSAR_VERSIONS:
                raise ConfigError(f"{f.name}: unknown Pulsar version {value!r}; known: {', '.join(PULSAR_VERSIONS)}")
        elif f.name == "individual_ack_format":
            if value is not None and value not in INDIVIDUAL_ACK_FORMATS:
                raise ConfigError(f"individual_ack_format must be one of {INDIVIDUAL_ACK_FORMATS}, got {value!r}")
        elif isinstance(value, bool):
            continue
        elif isinstance(value, (int, float)):
            minimum = 1 if f.name in _POSITIVE else -1 if f.name in _MINUS_ONE_ALLOWED else 0
            if value < minimum:
                raise ConfigError(f"{f.name} must be >= {minimum}, got {value!r}")


_POSITIVE = {
    "max_entries_per_ledger",
    "max_size_per_ledger_mb",
    "metadata_max_entries_per_ledger",
    "ledger_rollover_timeout",
    "persistent_unacked_ranges_max_entry_size",
    "max_state_size_in_bytes",
    "max_message_size",
    "jute_maxbuffer",
    "cursor_position_flush_seconds",
}
_MINUS_ONE_ALLOWED = {
    "max_unacked_ranges_to_persist_in_metadata_store",
    "retention_time_ms",
    "retention_size_in_mb",
}
