"""What each Apache Pulsar version persists and recovers for a cursor: one table.

Theory of operation
-------------------
A durable cursor's state survives a broker stop only as far as Pulsar's ``ManagedCursorImpl``
writes it and reads it back, and both sides changed between releases. :data:`PULSAR_VERSIONS`
holds one :class:`PulsarVersion` per ``--defaults`` preset (``pulsar-3.0``, ``pulsar-4.0``,
``pulsar-4.1``, ``pulsar-newest``); :data:`MLEDGER_RULES` is mledger's own behaviour, in force
without a preset (``ManagedLedgerConfig.pulsar_rules`` None). The cursor state store, the cursor,
the broker and the replay read the row of :func:`rules_for` and nothing else, so a rule lives
here once. A row has two parts:

* **the defaults** (:attr:`PulsarVersion.defaults`): every setting a rule depends on, with that
  version's documented ``ServiceConfiguration`` default, as ``--set`` strings of
  ``ManagedLedgerConfig`` / ``ManagedLedgerFactoryConfig`` keys. Rules that have a setting in
  Pulsar stay settings (the caps, the long-array switch, the batch-index switch, the N + 1
  range cap), so a user can still change one of them on top of a preset;
* **the rules without a setting**, the fields of :class:`PulsarVersion` (how the long-array
  cut-off counts, whether the metadata store's batch indexes are read back, the rate limiter,
  the over-frame sequence, ...), each naming the Java method it follows.

Per version (the docs page "What Pulsar redelivers after a restart" prints this table):

=====================================  =========  =========  =========  =================
rule (Java method)                     3.0.x      4.0.x      4.1.x      newest (master)
=====================================  =========  =========  =========  =================
range cap (buildIndividualDeletedMes-  N + 1      N + 1      N + 1      N (#25548)
sageRanges)
long arrays (persistPositionToLedger)  off        off        on         on
long-array cut-off (toRanges)          getAndAdd  getAndAdd  getAndAdd  addAndGet +
                                                                        range fallback
batch-index acks                       off        off        on         on
(acknowledgmentAtBatchIndexLevel-
Enabled)
batch indexes read back from the       no         no         no         yes (#26474)
metadata store (recover, -1)
partial batch ack with no range        never      never      never      never
persisted by itself (asyncDelete,
#26498)
mark-delete limiter (RateLimiter,      Guava      Guava      Guava      Guava
SmoothBursty), 1/s; dirty until flush
close: metadata store up to            1000       1000       1000       200000
maxUnackedRangesToPersistInMetadata-
Store ranges (persistPositionWhen-
Closing)
caps: ranges / batch entries           10000      10000      10000      200000
=====================================  =========  =========  =========  =================

Every row also has: a bookie refuses a ``PositionInfo`` above ``nettyMaxFrameSizeBytes`` and the
cursor falls back to the metadata store (``persistPositionToLedger`` -> ``persistPositionToMetaStore``,
range format, capped), goes ``NoLedger``, and the next persist runs ``createNewMetadataLedger``
-> ``switchToNewLedger`` onto a ledger that stays empty (a crash there recovers the
mark-delete alone: ``recoverFromLedger`` with LAC < 0); ZooKeeper refuses a ``ManagedCursorInfo``
above ``jute.maxbuffer`` (the write fails, the record stays what it was); a cursor recovered
from a ledger closes through the metadata store until its first ledger switch
(``recoveredCursor`` sets ``isCursorLedgerReadOnly``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from ._errors import ConfigError

__all__ = [
    "MLEDGER_RULES",
    "PULSAR_VERSIONS",
    "CursorBehaviour",
    "LongArrayCutoff",
    "PulsarVersion",
    "preset_values",
    "pulsar_version",
    "rules_for",
]


class LongArrayCutoff(Enum):
    """How the long-array format applies ``maxUnackedRangesToPersist`` (``toRanges(max)``)."""

    GET_AND_ADD = "getAndAdd"
    """Every release: ``OpenLongPairRangeSet.toRanges`` keeps ledger k while the acked entries of
    the ledgers *before* it are at most ``max`` (``rangeCount.getAndAdd(cardinality) > max``
    skips it): the first ledger is always kept, so a non-empty set never falls back to ranges."""
    ADD_AND_GET = "addAndGet"
    """Master since apache/pulsar#26127: ``PositionRangeSet.toRanges`` keeps ledger k while the
    acked entries *up to and including* it are at most ``max``; when not even the first ledger
    fits, ``persistPositionToLedger`` writes the range format instead, capped (and counted by
    #25548's counter)."""


@dataclass(frozen=True)
class CursorBehaviour:
    """The rules of a version that change what a cursor *does* (when it persists), not only what
    a persist writes: two rows with the same behaviour replay the same acks at the same moments."""

    guava_rate_limiter: bool
    """True: the mark-delete rate limit is Guava's ``RateLimiter.create(rate)`` (SmoothBursty,
    one second of stored permits), created with the cursor (``ManagedCursorImpl`` constructor),
    asked by ``asyncMarkDelete``, ``asyncDelete`` and ``flush`` (see
    :class:`~mledger.core.SmoothBurstyLimiter`). False (mledger's own): at most one
    persist per ``1 / rate`` seconds after the last one, none before the first persist."""
    dirty_until_flush: bool
    """True: ``isDirty`` is set by a change the limiter refuses and cleared only by ``flush()``
    (``ManagedCursorImpl.flush``), which itself asks the limiter, so a flush tick after a refusal
    writes again even when a later granted persist wrote everything. False: every persist
    clears it."""
    batch_ack_without_range_persists: bool
    """False (apache/pulsar#26498, open in every version): ``asyncDelete`` returns right after
    updating ``batchDeletedIndexes`` when ``individualDeletedMessages`` is empty, before the
    limiter and without marking the cursor dirty: such partial batch acks ride along with a later
    persist only. True (mledger's own): every ack goes through the throttle."""
    receipt_after_persist: bool = False
    """False: an acknowledgement completes, and a client that asked for a receipt
    (``ACK_RESPONSE``) is answered, before its state is persisted: ``asyncMarkDelete`` and
    ``asyncDelete`` call ``markDeleteComplete`` / ``deleteComplete`` when the limiter refuses
    the write. True (mledger's own): the broker answers a receipt once the state it changed is
    stored, so an answered ack survives a crash."""


@dataclass(frozen=True)
class PulsarVersion:
    """One row of the table: what a Pulsar version persists and recovers (module docstring)."""

    name: str
    """The preset's name (``--defaults NAME``)."""
    follows: str
    """The Apache Pulsar code this row follows (releases, or the commit for master)."""
    defaults: Mapping[str, str]
    """The settings the rules depend on, with this version's documented defaults, as ``--set``
    strings (``ManagedLedgerConfig`` / ``ManagedLedgerFactoryConfig`` keys). Includes
    ``pulsar_rules`` naming this row."""
    long_array_cutoff: LongArrayCutoff
    batch_indexes_read_from_metadata_store: bool
    """``recover`` with ``cursorsLedgerId == -1`` reads ``ManagedCursorInfo``'s batch indexes:
    only since apache/pulsar#26474 (master). Before, a clean close through the metadata store
    loses every partial batch ack (written by ``persistPositionMetaStore``, never read)."""
    behaviour: CursorBehaviour
    over_frame_fails: bool = True
    """A ``PositionInfo`` above the frame limit is refused by the bookie (the add fails) and the
    over-frame fallback sequence runs (module docstring). False (mledger's own): it is written
    and flagged (``state_over_limit_at_ms``)."""
    over_jute_fails: bool = True
    """A ``ManagedCursorInfo`` above ``jute.maxbuffer`` is refused (the record stays as it was).
    False (mledger's own): written and flagged."""


_MLEDGER_BEHAVIOUR = CursorBehaviour(
    guava_rate_limiter=False, dirty_until_flush=False, batch_ack_without_range_persists=True, receipt_after_persist=True
)
_PULSAR_BEHAVIOUR = CursorBehaviour(
    guava_rate_limiter=True, dirty_until_flush=True, batch_ack_without_range_persists=False
)

_COMMON = {
    "throttle_mark_delete": "1.0",  # managedLedgerDefaultMarkDeleteRateLimit=1.0
    "cursor_position_flush_seconds": "60",  # managedLedgerCursorPositionFlushSeconds=60
    "metadata_max_entries_per_ledger": "50000",  # managedLedgerCursorMaxEntriesPerLedger
    "ledger_rollover_timeout": "14400",  # managedLedgerCursorRolloverTimeInSeconds
    "persistent_unacked_ranges_with_multiple_entries_enabled": "false",
    "pip381": "false",  # PIP-381 is a proposal: no release splits the state
    "max_message_size": str(5 * 1024 * 1024),  # maxMessageSize=5242880
    "netty_max_frame_size_bytes": "0",  # derived: maxMessageSize + 10 KB
    "jute_maxbuffer": str(10 * 1024 * 1024),  # -Djute.maxbuffer=10485760 in bin/pulsar
    "managed_cursor_info_compression_type": "NONE",
}
_RELEASED = {
    **_COMMON,
    "max_unacked_ranges_to_persist": "10000",
    "max_unacked_ranges_to_persist_in_metadata_store": "1000",
    "max_batch_deleted_index_to_persist": "10000",
    "unacked_ranges_limit_off_by_one": "true",  # buildIndividualDeletedMessageRanges before #25548
}


def _row(name: str, follows: str, defaults: dict[str, str], cutoff: LongArrayCutoff, read_back: bool) -> PulsarVersion:
    return PulsarVersion(
        name=name,
        follows=follows,
        defaults=MappingProxyType({**defaults, "pulsar_rules": name}),
        long_array_cutoff=cutoff,
        batch_indexes_read_from_metadata_store=read_back,
        behaviour=_PULSAR_BEHAVIOUR,
    )


PULSAR_VERSIONS: Mapping[str, PulsarVersion] = MappingProxyType(
    {
        "pulsar-3.0": _row(
            "pulsar-3.0",
            "Apache Pulsar 3.0.10 to 3.0.17 (ManagedCursorImpl of the 3.x release branch, 2025; "
            "long arrays readable since 3.0.10)",
            {
                **_RELEASED,
                "persist_individual_ack_as_long_array": "false",
                "deletion_at_batch_index_level_enabled": "false",  # acknowledgmentAtBatchIndexLevelEnabled
                "managed_cursor_info_compression_threshold_in_bytes": "0",  # key absent in 3.0.x
            },
            LongArrayCutoff.GET_AND_ADD,
            False,
        ),
        "pulsar-4.0": _row(
            "pulsar-4.0",
            "Apache Pulsar 4.0.3 to 4.0.13 (managedLedgerPersistIndividualAckAsLongArray from 4.0.3, #23759)",
            {
                **_RELEASED,
                "persist_individual_ack_as_long_array": "false",
                "deletion_at_batch_index_level_enabled": "false",
                "managed_cursor_info_compression_threshold_in_bytes": "16384",
            },
            LongArrayCutoff.GET_AND_ADD,
            False,
        ),
        "pulsar-4.1": _row(
            "pulsar-4.1",
            "Apache Pulsar 4.1.0 to 4.1.3 (long arrays on by default, #23888; batch-index acks on, "
            "PIP-391 #24203); 4.2.x behaves the same",
            {
                **_RELEASED,
                "persist_individual_ack_as_long_array": "true",
                "deletion_at_batch_index_level_enabled": "true",
                "managed_cursor_info_compression_threshold_in_bytes": "16384",
            },
            LongArrayCutoff.GET_AND_ADD,
            False,
        ),
        "pulsar-newest": _row(
            "pulsar-newest",
            "apache/pulsar master at a365c60ca9cbcfb479eb40f1e4e665b68e2feb8b, after #26474 (merged "
            "September 2026; no release carries it): #25548 (exact range cap, truncation counters), "
            "#25992 (200000 limits), #26127 "
            "(PositionRangeSet.toRanges, addAndGet), #26474 (batch indexes read back from the "
            "metadata store); #26498 still open",
            {
                **_COMMON,
                "max_unacked_ranges_to_persist": "200000",
                "max_unacked_ranges_to_persist_in_metadata_store": "200000",
                "max_batch_deleted_index_to_persist": "200000",
                "unacked_ranges_limit_off_by_one": "false",
                "persist_individual_ack_as_long_array": "true",
                "deletion_at_batch_index_level_enabled": "true",
                "managed_cursor_info_compression_type": "LZ4",
                "managed_cursor_info_compression_threshold_in_bytes": "16384",
            },
            LongArrayCutoff.ADD_AND_GET,
            True,
        ),
    }
)
"""The rows, by preset name."""

MLEDGER_RULES = PulsarVersion(
    name="mledger",
    follows="mledger's own defaults (no preset): Pulsar's formats and caps, the master long-array "
    "cut-off, batch indexes read back from either record, a state over a store limit written and "
    "flagged",
    defaults=MappingProxyType({}),
    long_array_cutoff=LongArrayCutoff.ADD_AND_GET,
    batch_indexes_read_from_metadata_store=True,
    behaviour=_MLEDGER_BEHAVIOUR,
    over_frame_fails=False,
    over_jute_fails=False,
)
"""The rules without a preset: what mledger did before the table existed, unchanged."""


def pulsar_version(name: str) -> PulsarVersion:
    """The row of preset ``name``; ``ConfigError`` naming the known presets otherwise."""
    try:
        return PULSAR_VERSIONS[name]
    except KeyError:
        raise ConfigError(f"unknown defaults {name!r}; known: {', '.join(PULSAR_VERSIONS)}") from None


def rules_for(name: str | None) -> PulsarVersion:
    """The row in force for ``ManagedLedgerConfig.pulsar_rules`` (or ``restart_as``):
    :data:`MLEDGER_RULES` for None."""
    return MLEDGER_RULES if name is None else pulsar_version(name)


def preset_values(name: str) -> dict[str, str]:
    """The ``--set`` values of preset ``name`` (a copy); ``ConfigError`` for an unknown name."""
    return dict(pulsar_version(name).defaults)
