"""Why a stop would redeliver what it would (issue 33 item 7, ``--explain``): the crash and unload
answers split per rule, on the hand-made logs of tests/test_restart_rules.py, whose answers follow
from the Java methods their docstrings cite. Each explanation must add up to the figure the
cursor reports and to what a real recovery redelivers, and name the rule the Java code applies."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from restart_logs import Log, redelivered, settings_for, three_ledgers

from mledger.managed_ledger import RedeliveryExplanation, RedeliveryRule as Rule
from mledger.replay import ReplaySettings


def explain(log: Log) -> RedeliveryExplanation:
    explanation = log.cursor.explain_redelivery()
    assert explanation is not None
    persistence = log.cursor.stats().persistence
    for stop, figure in (
        (explanation.crash, persistence.redelivered_after_crash),
        (explanation.unload, persistence.redelivered_after_unload),
    ):
        assert (stop.messages, stop.entries) == (figure.messages, figure.entries), stop
    return explanation


def shares(stop: object) -> dict[Rule, tuple[int, int]]:
    return {s.rule: (s.messages, s.entries) for s in stop.rules}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("preset", "lost", "shown"), [("pulsar-4.0", 1, "(1:8..1:9]"), ("pulsar-newest", 2, "(1:6..1:7]")]
)
def test_the_range_cap_and_the_close_path_cap(preset: str, lost: int, shown: str) -> None:
    """``buildIndividualDeletedMessageRanges``: acks 1, 3, 5, 7, 9 (five ranges), N = 3, every ack
    persisted; 4.0 keeps N + 1 = 4 ranges (9 lost), master N (7 and 9 lost). An unload writes the
    same range format to the metadata store (5 ranges <= 1000: ``persistPositionWhenClosing``),
    capped the same way: the close path's cap."""
    log = Log(settings_for(preset, max_unacked_ranges_to_persist=3, persist_individual_ack_as_long_array=False))
    positions = log.produce([1] * 10)
    for k in (1, 3, 5, 7, 9):
        log.cursor.delete(positions[k])
    explanation = explain(log)
    assert shares(explanation.crash) == {Rule.RANGE_CAP: (lost, lost)}
    assert shares(explanation.unload) == {Rule.CLOSE_CAP: (lost, lost)}
    cap = explanation.crash.share(Rule.RANGE_CAP)
    assert cap is not None and cap.shown[0] == shown and cap.ranges == lost
    assert explanation.crash.record == "cursor ledger" and explanation.unload.record == "metadata store"
    assert redelivered(log.acked(), log.crash_recovery()) == (lost, lost)


def test_the_long_array_cut_off() -> None:
    """``OpenLongPairRangeSet.toRanges`` (4.1, ``getAndAdd``): three ledgers with acks x:1 and x:3,
    max 3: ledger 3 is cut (4 > 3), its 2 acks lost in a crash; the close writes the node in the
    range format (6 ranges <= 1000), N + 1 = 4 ranges: ledger 3's two ranges lost too."""
    log = three_ledgers("pulsar-4.1")
    last = log.ml.last_confirmed_entry.ledger_id  # the third data ledger (cursor ledgers draw ids too)
    explanation = explain(log)
    assert shares(explanation.crash) == {Rule.LONG_ARRAY_CUTOFF: (2, 2)}
    share = explanation.crash.share(Rule.LONG_ARRAY_CUTOFF)
    assert share is not None and share.shown == (f"({last}:0..{last}:1]", f"({last}:2..{last}:3]")
    assert shares(explanation.unload) == {Rule.CLOSE_CAP: (2, 2)}


@pytest.mark.parametrize(
    ("preset", "unload"),
    [("pulsar-4.1", {Rule.NODE_BATCH_NOT_READ: (4, 4)}), ("pulsar-newest", {Rule.BATCH_CAP: (2, 2)})],
)
def test_the_batch_index_cap_and_the_metadata_store_batch_indexes(
    preset: str, unload: dict[Rule, tuple[int, int]]
) -> None:
    """``buildBatchEntryDeletionIndexInfoList`` keeps the first 2 states: message 0 of entries 2
    and 3 lost in a crash. A clean close writes the node, whose batch states 4.1 does not read
    back (``recover`` with ``cursorsLedgerId == -1``, before #26474): all four lost; master reads
    them back and loses the two past the cap."""
    log = Log(settings_for(preset, max_batch_deleted_index_to_persist=2))
    positions = log.produce([2] * 6)
    log.cursor.delete(positions[5])
    for k in range(4):
        log.ack_indexes(positions[k], [0], 2)
    explanation = explain(log)
    assert shares(explanation.crash) == {Rule.BATCH_CAP: (2, 2)}
    share = explanation.crash.share(Rule.BATCH_CAP)
    assert share is not None and share.shown == ("1:2 [indexes 0]", "1:3 [indexes 0]")
    assert shares(explanation.unload) == unload


def test_a_partial_batch_ack_with_no_range_is_26498_until_another_ack_persists() -> None:
    """``asyncDelete`` returns after updating ``batchDeletedIndexes`` when
    ``individualDeletedMessages`` is empty (#26498): message 0 of entry 0 is lost in a crash,
    though a persist now would write it; once entry 2 is acked whole (a range, a persist), the
    record carries it."""
    log = Log(settings_for("pulsar-4.1", throttle_mark_delete=1.0))
    positions = log.produce([2, 2, 2, 2])
    log.at(10)
    log.ack_indexes(positions[0], [0], 2)
    assert shares(explain(log).crash) == {Rule.ISSUE_26498: (1, 1)}
    log.at(45)
    log.cursor.delete(positions[2])
    assert explain(log).crash.rules == ()


def test_acks_the_limiter_has_not_persisted_yet() -> None:
    """``asyncDelete`` asks ``markDeleteLimiter.tryAcquire()`` (1/s, Guava SmoothBursty): the ack of
    entry 1 at 10 s is written (a stored permit after the idle second), so is the ack of entry 3
    at 10.5 s (back to back: N was 10 s), the ack of entry 5 at 10.7 s is refused (N = 11 s;
    ``isDirty``, nothing written): a crash now redelivers it, and a persist now would keep it: not yet persisted, no
    limit involved; an unload (the close writes everything) redelivers nothing."""
    log = Log(settings_for("pulsar-4.1", throttle_mark_delete=1.0))
    positions = log.produce([1] * 6)
    log.at(10)
    log.cursor.delete(positions[1])
    log.at(10.5)
    log.cursor.delete(positions[3])
    log.at(10.7)
    log.cursor.delete(positions[5])
    explanation = explain(log)
    assert shares(explanation.crash) == {Rule.NOT_PERSISTED: (1, 1)}
    assert explanation.unload.rules == ()
    assert redelivered(log.acked(), log.crash_recovery()) == (1, 1)


@pytest.mark.parametrize("preset", ["pulsar-3.0", "pulsar-4.0"])
def test_batch_index_acks_off(preset: str) -> None:
    """``acknowledgmentAtBatchIndexLevelEnabled=false`` (3.0.x, 4.0.x): ``asyncDelete`` ignores an
    ack set, so messages 0 and 1 of entry 0 are acknowledged by the consumer only; entry 0 comes
    back whole after either stop."""
    log = Log(settings_for(preset))
    positions = log.produce([3, 3, 3])
    log.ack_indexes(positions[0], [0, 1], 3)
    log.cursor.delete(positions[1])
    explanation = explain(log)
    assert shares(explanation.crash) == shares(explanation.unload) == {Rule.BATCH_ACKS_OFF: (2, 1)}


def test_the_frame_limit_fallback() -> None:
    """``persistPositionToLedger``: a ``PositionInfo`` over ``nettyMaxFrameSizeBytes`` (40 bytes
    here) fails the add and falls back to the metadata store in the range format, capped (N + 1 =
    4 of 6 ranges under 4.0): 9 and 11 lost in a crash, by the fallback. The close writes the
    node directly (6 ranges <= 1000): the close path's cap."""
    log = Log(settings_for("pulsar-4.0", max_unacked_ranges_to_persist=3, netty_max_frame_size_bytes=40))
    positions = log.produce([1] * 20)
    for second, k in enumerate((1, 3, 5, 7, 9, 11), start=2):
        log.at(second)
        log.cursor.delete(positions[k])
    explanation = explain(log)
    assert shares(explanation.crash) == {Rule.FRAME_LIMIT: (2, 2)}
    assert explanation.crash.record == "metadata store"
    assert shares(explanation.unload) == {Rule.CLOSE_CAP: (2, 2)}


def test_replay_explain_agrees_with_the_cursors_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``mledger replay ... --explain SUBSCRIPTION``: per topic-partition, the crash and unload
    figures split per rule add up to the ``cursors`` output's end values; a sweep is refused."""
    from mledger.cli import main
    from mledger.replay import GeneratorConfig, explain_replay, generate

    generate(str(tmp_path / "log"), GeneratorConfig(topics=1, partitions=2, events=3_000, seed=3))
    args = ["replay", str(tmp_path / "log"), str(tmp_path / "out"), "--single-process", "--quiet"]
    limits = ["--set", "max_unacked_ranges_to_persist=2", "--defaults", "pulsar-4.0"]
    assert main([*args, *limits]) == 0
    cursors = pq.read_table(str(tmp_path / "out" / "cursors")).to_pylist()
    subscription = str(cursors[0]["subscription"])
    settings = ReplaySettings.from_pairs(["defaults=pulsar-4.0", "max_unacked_ranges_to_persist=2"])
    found = explain_replay(str(tmp_path / "log"), subscription, settings)
    rows = {(r["topic"], r["partition"]): r for r in cursors if r["subscription"] == subscription}
    assert len(found) == len(rows) > 0
    for item in found:
        row = rows[(item.topic, item.partition)]
        crash, unload = item.explanation.crash, item.explanation.unload
        assert (crash.messages, crash.entries) == (
            row["redelivered_after_crash"],
            row["redelivered_after_crash_entries"],
        )
        assert (unload.messages, unload.entries) == (
            row["redelivered_after_unload"],
            row["redelivered_after_unload_entries"],
        )
    assert any(item.explanation.unload.share(Rule.CLOSE_CAP) for item in found)
    capsys.readouterr()
    args[2] = str(tmp_path / "explained")
    assert main([*args, *limits, "--explain", subscription]) == 0
    text = capsys.readouterr().out
    assert f"subscription {subscription}" in text and "close path cap" in text
    args[2] = str(tmp_path / "swept")
    assert main([*args, "--sweep", "max_unacked_ranges_to_persist=1,2", "--explain", subscription]) != 0
    assert "--explain explains one setting" in capsys.readouterr().err
