"""What each Pulsar version persists and recovers (issue 33 item 2): one hand-made log per rule of
the table (:mod:`mledger.core._pulsar_versions`), whose answer follows from the Java method its
docstring cites (derivations in the research notes on issue 33, §1-§9).

Each log drives a real managed ledger and cursor through the public API on a manual clock under
a preset, asserts the crash and unload figures, and checks them against a real recovery: a
broker reopened on a copy of the store (a crash) or after closing the managed ledger (an
unload), counting the acknowledged messages the recovered cursor delivers again."""

from __future__ import annotations

import pytest
from restart_logs import Log, recover, redelivered, settings_for, three_ledgers

from mledger import ManagedLedgerConfig, ManagedLedgerFactoryConfig
from mledger.core import MLEDGER_RULES, PULSAR_VERSIONS, LongArrayCutoff, preset_values, rules_for
from mledger.replay import ReplaySettings


def crash_figure(log: Log) -> tuple[int, int]:
    f = log.cursor.stats().persistence.redelivered_after_crash
    return f.messages, f.entries


def unload_figure(log: Log) -> tuple[int, int]:
    f = log.cursor.stats().persistence.redelivered_after_unload
    return f.messages, f.entries


# -- the table ----------------------------------------------------------------------------------
def test_every_preset_sets_every_key_its_rules_read_with_that_versions_default() -> None:
    """research §10: the documented ServiceConfiguration defaults per version."""
    keys = set(preset_values("pulsar-3.0"))
    for name, row in PULSAR_VERSIONS.items():
        assert set(row.defaults) == keys, name
        s = ReplaySettings().with_values({"defaults": name})  # every value parses
        assert s.ledger.pulsar_rules == name and s.ledger.throttle_mark_delete == 1.0
        assert s.factory.cursor_position_flush_seconds == 60
        assert not s.ledger.pip381 and not s.ledger.pip381_chunking
        assert ManagedLedgerConfig.for_pulsar(name) == s.ledger  # the library takes the same preset
        assert ManagedLedgerFactoryConfig.for_pulsar(name) == s.factory
    batch = {
        name: ReplaySettings().with_values({"defaults": name}).ledger.deletion_at_batch_index_level_enabled
        for name in PULSAR_VERSIONS
    }
    assert batch == {"pulsar-3.0": False, "pulsar-4.0": False, "pulsar-4.1": True, "pulsar-newest": True}
    assert {n: r.long_array_cutoff for n, r in PULSAR_VERSIONS.items()} == {
        "pulsar-3.0": LongArrayCutoff.GET_AND_ADD,
        "pulsar-4.0": LongArrayCutoff.GET_AND_ADD,
        "pulsar-4.1": LongArrayCutoff.GET_AND_ADD,
        "pulsar-newest": LongArrayCutoff.ADD_AND_GET,
    }
    assert [n for n, r in PULSAR_VERSIONS.items() if r.batch_indexes_read_from_metadata_store] == ["pulsar-newest"]
    assert "#26474" in PULSAR_VERSIONS["pulsar-newest"].follows and "master" in PULSAR_VERSIONS["pulsar-newest"].follows
    assert all(not r.behaviour.batch_ack_without_range_persists for r in PULSAR_VERSIONS.values())  # #26498
    assert rules_for(None) is MLEDGER_RULES and ManagedLedgerConfig().pulsar_rules is None


# -- range cap --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("preset", "lost", "truncating_builds"), [("pulsar-4.0", 1, 1), ("pulsar-newest", 2, 2)])
def test_range_cap_keeps_n_plus_one_ranges_in_releases_and_n_on_master(
    preset: str, lost: int, truncating_builds: int
) -> None:
    """``buildIndividualDeletedMessageRanges`` before #25548 (every release) adds a range, then
    tests ``rangeList.size() <= max``: N + 1 ranges; master tests ``size() >= maxRanges`` first:
    exactly N, and counts each build that had more (``incrementPersistUnackedRangesTruncated``).

    Entries 0-9, acks 1, 3, 5, 7, 9 (five ranges), N = 3, every ack persisted: 4.0 keeps
    1, 3, 5, 7 and loses 9 (one build dropped something: the one after 9); master keeps 1, 3, 5
    and loses 7 and 9 (the builds after 7 and after 9). The close path writes the same range
    format to the metadata store, so an unload loses as much."""
    log = Log(settings_for(preset, max_unacked_ranges_to_persist=3, persist_individual_ack_as_long_array=False))
    positions = log.produce([1] * 10)
    for k in (1, 3, 5, 7, 9):
        log.cursor.delete(positions[k])
    stats = log.cursor.stats().persistence
    assert crash_figure(log) == unload_figure(log) == (lost, lost)
    assert stats.persist_unacked_ranges_truncated == truncating_builds and stats.persist_long_array_truncated == 0
    assert redelivered(log.acked(), log.crash_recovery()) == (lost, lost)
    assert redelivered(log.acked(), log.unload_recovery()) == (lost, lost)


# -- long-array cut-off ------------------------------------------------------------------------------
@pytest.mark.parametrize(("preset", "lost", "cut_builds"), [("pulsar-4.1", 2, 2), ("pulsar-newest", 4, 3)])
def test_long_array_cut_off_counts_the_ledgers_before_in_releases_and_the_ledger_itself_on_master(
    preset: str, lost: int, cut_builds: int
) -> None:
    """``persistPositionToLedger`` with ``managedLedgerPersistIndividualAckAsLongArray`` writes
    ``individualDeletedMessages.toRanges(max)``. Releases (``OpenLongPairRangeSet.toRanges``):
    ``if (rangeCount.getAndAdd(card) > max) return``, so ledger k stays while the entries of the
    ledgers before it are <= max. Master (#26127, ``PositionRangeSet.toRanges``): ``addAndGet``,
    the ledger itself counted.

    Three ledgers with 2 acked entries each, max 3: 4.1 keeps ledger 1 (0 <= 3) and 2 (2 <= 3),
    cuts 3 (4 > 3): its 2 acks lost; the cut-off cut at the acks of 3:1 and 3:3 (2 builds).
    Master keeps ledger 1 (2 <= 3) and cuts 2 (4 > 3): 4 acks lost; cut at 2:3, 3:1, 3:3. No
    build fell back to the range format: #25548's range counter sees none of it
    (``persist_long_array_truncated`` does)."""
    log = three_ledgers(preset)
    stats = log.cursor.stats().persistence
    assert crash_figure(log) == (lost, lost)
    assert (stats.persist_long_array_truncated, stats.persist_unacked_ranges_truncated) == (cut_builds, 0)
    assert redelivered(log.acked(), log.crash_recovery()) == (lost, lost)


@pytest.mark.parametrize(("preset", "lost", "range_builds"), [("pulsar-4.1", 0, 0), ("pulsar-newest", 2, 2)])
def test_a_first_ledger_over_the_cap_is_kept_in_releases_and_falls_back_to_ranges_on_master(
    preset: str, lost: int, range_builds: int
) -> None:
    """One ledger with 5 acked entries in 5 ranges, max 3. Releases: ``getAndAdd`` returns 0 for
    the first ledger, which is always kept (all 5 acks stored as one long array). Master:
    ``addAndGet`` 5 > 3 leaves the map empty, and ``persistPositionToLedger`` writes
    ``buildIndividualDeletedMessageRanges()`` instead: 3 ranges (7 and 9 lost), and that
    builder counts (the builds after the 4th and the 5th ack)."""
    log = Log(settings_for(preset, max_unacked_ranges_to_persist=3))
    positions = log.produce([1] * 10)
    for k in (1, 3, 5, 7, 9):
        log.cursor.delete(positions[k])
    stats = log.cursor.stats().persistence
    assert crash_figure(log) == (lost, lost)
    assert (stats.persist_unacked_ranges_truncated, stats.persist_long_array_truncated) == (range_builds, 0)
    assert redelivered(log.acked(), log.crash_recovery()) == (lost, lost)


# -- batch-index cap ------------------------------------------------------------------------------
@pytest.mark.parametrize(("preset", "unload_lost"), [("pulsar-4.1", 4), ("pulsar-newest", 2)])
def test_batch_index_cap_keeps_the_first_states_and_counts_each_build_that_dropped_one(
    preset: str, unload_lost: int
) -> None:
    """``buildBatchEntryDeletionIndexInfoList`` iterates ``batchDeletedIndexes`` (ascending
    positions) ``while (iterator.hasNext() && result.size() < getMaxBatchDeletedIndexToPersist())``:
    the first ``max`` states are kept; #25548 adds ``if (iterator.hasNext())
    incrementPersistBatchDeletedIndexesTruncated(this)``, once per build with more.

    Cap 2, entries 0-5 batches of 2; entry 5 acked whole (a range: #26498 does not apply), then
    message 0 of entries 0, 1, 2, 3, each persisted: the builds after the 3rd and 4th partial
    acks dropped a state (counter 2; 1 + 2 states dropped in all); a crash loses entries 2 and 3's
    acked message. A clean close writes the node (one range <= 1000), whose batch states only
    master reads back (#26474): 4.1 loses all four, master the two past the cap."""
    log = Log(settings_for(preset, max_batch_deleted_index_to_persist=2))
    positions = log.produce([2] * 6)
    log.cursor.delete(positions[5])
    for k in range(4):
        log.ack_indexes(positions[k], [0], 2)
    stats = log.cursor.stats().persistence
    assert (stats.persist_batch_deleted_indexes_truncated, stats.truncated_batch_indexes_total) == (2, 3)
    assert crash_figure(log) == (2, 2)
    assert unload_figure(log) == (unload_lost, unload_lost)
    assert redelivered(log.acked(), log.crash_recovery()) == (2, 2)
    assert redelivered(log.acked(), log.unload_recovery()) == (unload_lost, unload_lost)


# -- batch indexes, the metadata store and the close path ----------------------------------------
def partial_batch(preset: str, **values: object) -> Log:
    """Entries 0-3, batches of 2; 2 acked whole, then message 0 of entry 0 (so a range exists
    when the partial ack comes: apache/pulsar#26498's early return does not apply)."""
    log = Log(settings_for(preset, **values))
    positions = log.produce([2, 2, 2, 2])
    log.cursor.delete(positions[2])
    log.ack_indexes(positions[0], [0], 2)
    return log


@pytest.mark.parametrize(("preset", "unload_lost"), [("pulsar-4.1", 1), ("pulsar-newest", 0)])
def test_batch_indexes_a_clean_close_writes_to_the_metadata_store_are_read_back_only_since_26474(
    preset: str, unload_lost: int
) -> None:
    """A persist writes the batch state to the cursor ledger (``persistPositionToLedger`` ->
    ``buildBatchEntryDeletionIndexInfoList``), and ``recoverFromLedger`` reads it back
    (``recoverBatchDeletedIndexes``): a crash redelivers nothing. A clean close with one range
    (<= ``maxUnackedRangesToPersistInMetadataStore``) goes through
    ``persistPositionWhenClosing`` -> ``persistPositionMetaStore(-1, ..., true)``, which writes
    the batch state too; but ``recover`` with ``cursorsLedgerId == -1`` reads only the mark-delete
    and the ranges in 3.0-4.2 (apache/pulsar#26474 added the batch read on master): after an
    unload under 4.1, message 0 of entry 0 comes back (research §2 step 5)."""
    log = partial_batch(preset)
    assert crash_figure(log) == (0, 0)
    assert unload_figure(log) == (unload_lost, unload_lost)
    assert redelivered(log.acked(), log.crash_recovery()) == (0, 0)
    assert redelivered(log.acked(), log.unload_recovery()) == (unload_lost, unload_lost)


def test_a_close_with_more_ranges_than_the_metadata_store_takes_writes_the_ledger_and_keeps_batches() -> None:
    """``shouldPersistUnackRangesToLedger``: a writable cursor ledger and more ranges than
    ``maxUnackedRangesToPersistInMetadataStore`` (0 here, 1 range): the close appends a last
    ``PositionInfo`` (batch state included) and ``ManagedCursorInfo`` keeps pointing at the
    ledger, so even 4.1 reads the batch state back after the unload (research §6 step 7)."""
    log = partial_batch("pulsar-4.1", max_unacked_ranges_to_persist_in_metadata_store=0)
    assert unload_figure(log) == (0, 0)
    assert redelivered(log.acked(), log.unload_recovery()) == (0, 0)


def test_a_recovered_cursor_closes_through_the_metadata_store_until_its_first_persist() -> None:
    """``recoveredCursor`` sets ``isCursorLedgerReadOnly``; until ``switchToNewLedger`` clears
    it (the first persist after the load), ``shouldPersistUnackRangesToLedger`` is false and a
    close goes to the metadata store whatever the range count: under 4.1 the batch state is then
    lost, where the same close before the crash kept it (the ledger branch, as above)."""
    log = partial_batch("pulsar-4.1", max_unacked_ranges_to_persist_in_metadata_store=0)
    acked = log.acked()
    recovered = log.crash_recovery()
    figure = recovered.stats().persistence.redelivered_after_unload
    assert (figure.messages, figure.entries) == (1, 1)
    recovered.ledger.close()  # the recovered broker unloads the topic
    assert redelivered(acked, recover(recovered.ledger.store, log.settings, 0)) == (1, 1)


@pytest.mark.parametrize("preset", ["pulsar-4.1", "pulsar-newest"])
def test_a_partial_batch_ack_with_no_range_is_not_persisted_until_another_ack_persists(preset: str) -> None:
    """apache/pulsar#26498 (open in every version; research §2): ``ManagedCursorImpl.asyncDelete``
    updates ``batchDeletedIndexes`` and then ``if (individualDeletedMessages.isEmpty()) return``,
    before ``markDeleteLimiter.tryAcquire()`` and without ``isDirty = true``; ``flush()`` returns
    at ``if (!isDirty)``. Later persists build the batch state from the live map
    (``buildBatchEntryDeletionIndexInfoList``), so they carry it.

    Rate 1.0, entries 0-3 batches of 2, nothing persisted above the mark-delete:

    * t=10 message 0 of entry 0 acked: no range exists, nothing written, the cursor stays clean;
      a crash redelivers it (1 message), lost until something else persists (the limits part);
    * the flush tick at 30 s writes nothing (not dirty);
    * t=45 entry 2 acked whole: a range, the limiter grants, the record carries entry 0's state:
      a crash now redelivers nothing."""
    log = Log(settings_for(preset, throttle_mark_delete=1.0))
    positions = log.produce([2, 2, 2, 2])
    written = log.cursor.stats().persistence.persist_count
    log.at(10)
    log.ack_indexes(positions[0], [0], 2)
    stats = log.cursor.stats()
    assert stats.persistence.persist_count == written and not stats.dirty
    assert crash_figure(log) == (1, 1)
    limits = stats.persistence.redelivered_after_crash_limits
    assert (limits.messages, limits.entries) == (1, 1)
    assert redelivered(log.acked(), log.crash_recovery()) == (1, 1)
    log.at(30)
    assert log.factory.flush_cursors() == 0
    log.at(45)
    log.cursor.delete(positions[2])
    assert log.cursor.stats().persistence.persist_count > written  # a new cursor ledger, then the pending write
    assert crash_figure(log) == (0, 0)
    assert redelivered(log.acked(), log.crash_recovery()) == (0, 0)


def test_without_a_preset_a_partial_batch_ack_persists_by_itself() -> None:
    """mledger's own rules (no preset): every acknowledgement goes through the throttle, so the
    lone partial ack is written and a crash redelivers nothing."""
    log = Log(settings_for(None))
    positions = log.produce([2, 2])
    log.ack_indexes(positions[0], [0], 2)
    assert crash_figure(log) == (0, 0)
    assert redelivered(log.acked(), log.crash_recovery()) == (0, 0)


@pytest.mark.parametrize("preset", ["pulsar-3.0", "pulsar-4.0"])
def test_without_batch_index_acks_a_partially_acked_batch_comes_back_whole(preset: str) -> None:
    """``acknowledgmentAtBatchIndexLevelEnabled=false`` (3.0.x and 4.0.x; research §3):
    ``BrokerService`` passes it as ``setDeletionAtBatchIndexLevelEnabled``, and the cursor then
    has no ``batchDeletedIndexes``. ``asyncDelete`` ignores a position carrying a non-empty ack
    set (``else if (batchDeletedIndexes != null)`` has no else) and, with no range, returns
    (#26498); ``ackBatchPosition`` returns ``ledger.getPreviousPosition(position)`` for a
    cumulative ack inside a batch; ``recoverFromLedger`` reads no batch state.

    Entries 0-2, batches of 3. Individual: messages 0 and 1 of entry 0 acked (ignored), entry 1
    acked whole (a range, persisted): a crash or an unload redelivers entry 0 whole, that is 2
    acknowledged messages. Cumulative: messages 0 and 1 of entry 1 (ack set 0b100): the
    mark-delete goes to entry 0 and entry 1 comes back whole: 2 acknowledged messages."""
    log = Log(settings_for(preset))
    positions = log.produce([3, 3, 3])
    log.ack_indexes(positions[0], [0, 1], 3)
    log.cursor.delete(positions[1])
    assert log.cursor.batch_ack_set(positions[0]) is None  # ignored
    assert crash_figure(log) == unload_figure(log) == (2, 1)
    assert redelivered(log.acked(), log.crash_recovery()) == (2, 1)
    assert redelivered(log.acked(), log.unload_recovery()) == (2, 1)

    cumulative = Log(settings_for(preset))
    positions = cumulative.produce([3, 3, 3])
    cumulative.cursor.mark_delete(positions[1], ack_set=0b100)
    acked = {positions[0]: {0, 1, 2}, positions[1]: {0, 1}}
    assert cumulative.cursor.mark_delete_position == positions[0]
    assert crash_figure(cumulative) == unload_figure(cumulative) == (2, 1)
    assert redelivered(acked, cumulative.crash_recovery()) == (2, 1)


# -- a version-crossing restart ------------------------------------------------------------------
@pytest.mark.parametrize(("reader", "lost"), [(None, 0), ("pulsar-4.1", 0), ("pulsar-4.0", 1), ("pulsar-3.0", 1)])
def test_state_written_by_41_and_recovered_by_another_version(reader: str | None, lost: int) -> None:
    """research §9 (apache/pulsar#23759): 4.1 writes ``PositionInfo`` with long arrays (field 6)
    and the batch state (field 5). 4.0.3+ and 3.0.10+ read field 6 whatever their own setting,
    but ``recoverFromLedger`` reads field 5 only ``if (getConfig().isDeletionAtBatchIndexLevelEnabled()
    ...)``, false by default there: entry 6's acknowledged message 0 comes back. ``restart_as``
    gives the figure before the rollback; reopening under the older preset confirms it."""
    log = Log(settings_for("pulsar-4.1", restart_as=reader) if reader else settings_for("pulsar-4.1"))
    positions = log.produce([1, 1, 1, 1, 1, 1, 2, 1, 1, 1])
    for k in (1, 2, 4):
        log.cursor.delete(positions[k])
    log.ack_indexes(positions[6], [0], 2)
    assert crash_figure(log) == (lost, lost) and unload_figure(log) == (1, 1)
    assert redelivered(log.acked(), log.crash_recovery(reader)) == (lost, lost)


# -- over the frame limit -------------------------------------------------------------------------
def test_a_state_over_the_frame_limit_falls_back_to_the_metadata_store_through_an_empty_ledger() -> None:
    """research §7, ``persistPositionToLedger`` / ``createNewMetadataLedger`` /
    ``switchToNewLedger`` / ``recoverFromLedger``: pulsar-4.0 (range format, N + 1 = 4 ranges),
    a 40-byte frame limit, acks of entries 1, 3, ..., 11 one a second.

    * t=2 (1 range, fits): NoLedger -> a new ledger takes the state, the node points at it.
    * t=3 (2 ranges, over the frame): the add fails -> ``persistPositionToMetaStore`` (node -1,
      the ranges) -> NoLedger. A crash loses nothing.
    * t=4: NoLedger -> ``createNewMetadataLedger``: the add fails, the node takes the state,
      then ``switchToNewLedger`` points the node at the new, empty ledger: a crash there recovers
      ``getRollbackPosition`` (the mark-delete) alone: 1, 3, 5 redelivered (the maximum, 3, at
      4 s); the pending mark-delete's own add fails and falls back to the node again.
    * t=5: Open on that ledger: its add fails -> the node (no window).
    * t=6 (5 ranges): the window again (5 acks); the fallback keeps 4 ranges: 9 is lost.
      Four builds of the range format dropped a range (ledger attempt, fallback, pending
      attempt, fallback): #25548's counter counts each.
    * t=7 (6 ranges): ledger attempt and fallback, 2 more builds: 9 and 11 lost.
    """
    log = Log(settings_for("pulsar-4.0", max_unacked_ranges_to_persist=3, netty_max_frame_size_bytes=40))
    positions = log.produce([1] * 20)
    for second, k in enumerate((1, 3, 5, 7, 9, 11), start=2):
        log.at(second)
        log.cursor.delete(positions[k])
    stats = log.cursor.stats().persistence
    crash = stats.redelivered_after_crash
    assert (crash.messages, crash.messages_max, crash.messages_max_at_ms) == (2, 5, 6000)
    assert stats.redelivered_after_crash_limits.messages == 2
    assert stats.persist_unacked_ranges_truncated == 6
    assert stats.state_over_limit_at_ms == 3000
    assert redelivered(log.acked(), log.crash_recovery()) == (2, 2)
    assert unload_figure(log) == (2, 2)  # 6 ranges <= 1000: the close writes the node directly
    assert redelivered(log.acked(), log.unload_recovery()) == (2, 2)


def test_a_node_over_jute_maxbuffer_is_refused_and_the_last_record_stands() -> None:
    """``persistPositionMetaStore`` fails when ZooKeeper refuses the node (``jute.maxbuffer``);
    after a refused ledger add, ``persistPositionToMetaStore`` then fails the mark-delete and
    nothing new is stored: the node still names the ledger whose last entry holds ack 1. Frame
    and jute limits of 40 bytes: the 1-range state fits, the 2-range one fits neither."""
    log = Log(settings_for("pulsar-4.0", netty_max_frame_size_bytes=40, jute_maxbuffer=40))
    positions = log.produce([1] * 10)
    log.cursor.delete(positions[1])
    log.cursor.delete(positions[3])
    assert crash_figure(log) == (1, 1)
    assert redelivered(log.acked(), log.crash_recovery()) == (1, 1)


# -- PIP-381 is a what-if --------------------------------------------------------------------------
def test_the_multiple_entries_flag_does_what_apache_releases_do_and_pip381_is_chosen_by_name() -> None:
    """``persistentUnackedRangesWithMultipleEntriesEnabled`` reaches only ``RangeSetWrapper``'s
    dirty-ledger tracking in every release (research §11): under pulsar-4.0 it changes neither
    the cap (N + 1 = 4 of 5 ranges kept: 9 lost) nor the entry (one ``PositionInfo`` per
    persist), and ``persistentUnackedRangesMaxEntrySize`` does not exist. ``pip381=true`` is
    PIP-381 as its design describes it: with ``max_unacked_ranges_to_persist=0`` nothing is
    capped and the state goes in parts of at most the entry size, with the JSON footer."""
    released = Log(
        settings_for(
            "pulsar-4.0",
            max_unacked_ranges_to_persist=3,
            persistent_unacked_ranges_with_multiple_entries_enabled=True,
            persistent_unacked_ranges_max_entry_size=32,
        )
    )
    pip381 = Log(
        settings_for(
            "pulsar-4.0", max_unacked_ranges_to_persist=0, pip381=True, persistent_unacked_ranges_max_entry_size=32
        )
    )
    for log in (released, pip381):
        positions = log.produce([1] * 10)
        for k in (1, 3, 5, 7, 9):
            log.cursor.delete(positions[k])
    assert crash_figure(released) == (1, 1) and released.cursor.stats().persistence.last_persist_chunks == 1
    assert crash_figure(pip381) == (0, 0) and pip381.cursor.stats().persistence.last_persist_chunks > 2
    assert redelivered(released.acked(), released.crash_recovery()) == (1, 1)
    assert redelivered(pip381.acked(), pip381.crash_recovery()) == (0, 0)


def test_without_a_preset_the_multiple_entries_flag_keeps_its_pip381_meaning() -> None:
    config = ManagedLedgerConfig(persistent_unacked_ranges_with_multiple_entries_enabled=True)
    assert config.pip381_chunking and not config.with_changes(pulsar_rules="pulsar-4.1").pip381_chunking
    assert config.with_changes(pulsar_rules="pulsar-4.1", pip381=True).pip381_chunking


# -- the mark-delete rate limiter and the flush ---------------------------------------------------
def test_back_to_back_persists_after_an_idle_second_and_a_flush_that_writes_again() -> None:
    """research §1.5, rate 1.0 (``RateLimiter.create`` in the ``ManagedCursorImpl`` constructor,
    ``tryAcquire`` in ``asyncDelete``, ``flush``): the cursor is created at 0 s (N = 0).

    * 10.000 ack 0: granted (stored permit), N = 10.000: MD 0.
    * 10.001 ack 2: granted back to back (0.001 stored + 0.999 fresh), N = 11.000: MD 0 + {2}.
    * 10.500 ack 4, 10.999 ack 5: refused, ``isDirty``; a crash at 10.5 loses 4 (mledger's
      old throttle, one persist a second after the last, would have refused 2 too), at 10.999
      4 and 5 (the maximum, 2 messages at 10.999 s).
    * 11.000 ack 6: granted, N = 12.000: everything persisted, but ``isDirty`` stays set
      (only ``flush`` clears it).
    * the flush tick at 30 s (``flushCursors``): ``isDirty`` -> ``asyncMarkDelete`` -> granted
      (N = 12 <= 30): the same state written again. A second tick finds the cursor clean."""
    log = Log(settings_for("pulsar-4.1", throttle_mark_delete=1.0))
    positions = log.produce([1] * 10)
    for second, k in ((10.0, 0), (10.001, 2), (10.5, 4)):
        log.at(second)
        log.cursor.delete(positions[k])
    assert crash_figure(log) == (1, 1)
    assert redelivered(log.acked(), log.crash_recovery()) == (1, 1)
    log.at(10.999)
    log.cursor.delete(positions[5])
    log.at(11.0)
    log.cursor.delete(positions[6])
    stats = log.cursor.stats()
    crash = stats.persistence.redelivered_after_crash
    assert (crash.messages, crash.messages_max, crash.messages_max_at_ms) == (0, 2, 10_999)
    assert stats.dirty  # a granted persist leaves isDirty set
    written = stats.persistence.persist_count
    log.at(30.0)
    assert log.factory.flush_cursors() == 1
    assert log.cursor.stats().persistence.persist_count == written + 1 and not log.cursor.is_dirty
    assert log.factory.flush_cursors() == 0


def test_a_partial_idle_shortens_the_next_wait_and_a_refused_flush_leaves_the_cursor_dirty() -> None:
    """Grants at 0.4 s (N = 1.0) and 1.4 s (N = 2.0: the grid of N, not 2.4), 1.401 refused,
    2.0 granted. A flush at 2.5 s is refused (N = 3.0): ``flush`` cleared ``isDirty``, then
    ``asyncMarkDelete`` found no permit and set it again; at 3.0 it writes."""
    log = Log(settings_for("pulsar-4.0", throttle_mark_delete=1.0))
    positions = log.produce([1] * 10)
    counts = []
    for second, k in ((0.4, 1), (1.4, 3), (1.401, 5), (2.0, 7), (2.2, 9)):
        log.at(second)
        log.cursor.delete(positions[k])
        counts.append(log.cursor.stats().persistence.persist_count)
    assert [b - a for a, b in zip(counts, counts[1:], strict=False)] == [1, 0, 1, 0]
    log.at(2.5)
    assert not log.cursor.flush() and log.cursor.is_dirty
    log.at(3.0)
    assert log.cursor.flush() and not log.cursor.is_dirty
    assert crash_figure(log) == (0, 0)


def test_pulsar_newest_names_the_commit_it_follows() -> None:
    """``pulsar-newest`` follows apache/pulsar master at a commit that carries #26474 (its
    ``recover`` reads ``ManagedCursorInfo``'s batch indexes for ``cursorsLedgerId == -1``), named
    in full in the table and on the docs page."""
    import re
    from pathlib import Path

    follows = PULSAR_VERSIONS["pulsar-newest"].follows
    commit = re.search(r"\b[0-9a-f]{40}\b", follows)
    assert commit is not None and "#26474" in follows
    page = (Path(__file__).resolve().parent.parent / "docs" / "restarts.md").read_text(encoding="utf-8")
    assert commit.group(0) in page
