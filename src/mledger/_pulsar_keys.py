"""Pulsar's broker keys of the managed ledger and its cursors, and how their text is read.

:class:`Key` maps one of Pulsar's ``broker.conf`` keys onto the mledger settings it fills
(``section.field``); :data:`MANAGED_LEDGER_KEYS` are those of the ``ledger``
(:class:`~mledger.ManagedLedgerConfig`) and ``factory``
(:class:`~mledger.ManagedLedgerFactoryConfig`) sections. ``mledger standalone
--config`` reads them among all its keys (:mod:`mledger._standalone_config`), and ``mledger
watch`` reads them from a broker's runtime configuration: this module imports nothing beyond
the core, so a client-side command can use the table without the server's libraries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["MANAGED_LEDGER_KEYS", "MAX_MESSAGE_SIZE_KEY", "Key", "keys", "read_bool", "read_int", "write_value"]


# -- values ------------------------------------------------------------------------------------


def read_int(text: str) -> int:
    """A Java integer's text."""
    return int(text)


def read_bool(text: str) -> bool:
    """A Java boolean's text (``ValueError`` for another word)."""
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false")
    return lowered == "true"


def _minutes_to_ms(text: str) -> int:
    minutes = int(text)
    return minutes if minutes < 0 else minutes * 60_000  # -1: unlimited stays -1


def _ms_to_minutes(value: Any) -> str:
    return str(value if value < 0 else value // 60_000)


def write_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list, frozenset, set)):
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class Key:
    """One Pulsar key: the settings it fills (``section.field``), how its text is read, and how
    the first setting's value is written back (``--print-config``)."""

    name: str
    targets: tuple[str, ...]
    read: Callable[[str], Any] = str
    write: Callable[[Any], str] = write_value
    secret: bool = False
    """Printed as ``<redacted>`` unless a ``file:`` URL (key material)."""
    java_type: str | None = None
    """The Java type that bounds the value (``int``, ``long``, ``double``, ...); None takes the
    one Pulsar's ``ServiceConfiguration`` declares (:func:`pulsar_fields`). Give it only for a
    key that is not Pulsar's."""


def keys(section: str, read: Callable[[str], Any], **names: str) -> list[Key]:
    """One :class:`Key` per ``pulsarName=field`` of ``section``, each read with ``read``."""
    return [Key(pulsar, (f"{section}.{target}",), read) for pulsar, target in names.items()]


MAX_MESSAGE_SIZE_KEY = Key("maxMessageSize", ("protocol.max_message_size", "factory.max_message_size"), read_int)
"""``maxMessageSize``: the protocol's limit, which also bounds the cursor ledger's entries (the
frame limit, as Pulsar's bookies)."""

MANAGED_LEDGER_KEYS: tuple[Key, ...] = (
    *keys(
        "ledger",
        read_int,
        managedLedgerMaxEntriesPerLedger="max_entries_per_ledger",
        managedLedgerMaxSizePerLedgerMbytes="max_size_per_ledger_mb",
        managedLedgerCursorMaxEntriesPerLedger="metadata_max_entries_per_ledger",
        managedLedgerCursorRolloverTimeInSeconds="ledger_rollover_timeout",
        managedLedgerMaxUnackedRangesToPersist="max_unacked_ranges_to_persist",
        managedLedgerMaxUnackedRangesToPersistInMetadataStore="max_unacked_ranges_to_persist_in_metadata_store",
        managedLedgerMaxBatchDeletedIndexToPersist="max_batch_deleted_index_to_persist",
        persistentUnackedRangesMaxEntrySize="persistent_unacked_ranges_max_entry_size",
        defaultRetentionSizeInMB="retention_size_in_mb",
    ),
    Key(
        "managedLedgerMinLedgerRolloverTimeMinutes",
        ("ledger.minimum_rollover_time_ms",),
        _minutes_to_ms,
        _ms_to_minutes,
    ),
    Key(
        "managedLedgerMaxLedgerRolloverTimeMinutes",
        ("ledger.maximum_rollover_time_ms",),
        _minutes_to_ms,
        _ms_to_minutes,
    ),
    Key("defaultRetentionTimeInMinutes", ("ledger.retention_time_ms",), _minutes_to_ms, _ms_to_minutes),
    Key("managedLedgerDefaultMarkDeleteRateLimit", ("ledger.throttle_mark_delete",), float),
    *keys(
        "ledger",
        read_bool,
        managedLedgerPersistIndividualAckAsLongArray="persist_individual_ack_as_long_array",
        acknowledgmentAtBatchIndexLevelEnabled="deletion_at_batch_index_level_enabled",
        persistentUnackedRangesWithMultipleEntriesEnabled=("persistent_unacked_ranges_with_multiple_entries_enabled"),
    ),
    Key("managedCursorInfoCompressionType", ("factory.managed_cursor_info_compression_type",)),
    Key("managedLedgerInfoCompressionType", ("factory.managed_ledger_info_compression_type",)),
    *keys(
        "factory",
        read_int,
        managedCursorInfoCompressionThresholdInBytes="managed_cursor_info_compression_threshold_in_bytes",
        managedLedgerInfoCompressionThresholdInBytes="managed_ledger_info_compression_threshold_in_bytes",
        managedLedgerCursorPositionFlushSeconds="cursor_position_flush_seconds",
    ),
)
"""The managed ledger's and its cursors' keys (ManagedLedgerConfig and
ManagedLedgerFactoryConfig under the broker's names)."""
