"""Issue 33 item 7: broker and replay agree on what a restart redelivers, per Pulsar version.

For every ``--defaults`` preset and both stop kinds, a seeded workload drives ``mledger
standalone --defaults PRESET --record`` with the real ``pulsar-client`` (:class:`~rehearsal.
Workload`): plain and batched messages, a Shared subscription acknowledging with holes and
partial batches (``batch_index_ack_enabled=True``) and an Exclusive one acknowledging
cumulatively then individually, against limits of one range and one batch entry (:data:`LIMITS`)
so every stored state is truncated, in two rounds more than a second apart so that the
mark-delete limiter grants a persist and holds the next acknowledgements back. The client
acknowledges a few messages per subscription at a time, which its ack grouping sends as one ACK
command with several ids (one cursor change and one persist attempt in the broker; the
recording numbers the command's rows, and the replay applies them as one request). Before the
stop the test waits until a recorder flush holds every acknowledgement the client sent that
changes the cursor (the client groups acks for 100 ms; a SIGKILL loses the recorder's last
interval by design; under 3.0 and 4.0 the broker ignores ack sets), and reads the broker's
internal stats.
It stops the broker (SIGKILL, or SIGTERM: every cursor through its close path), starts it again
on the same data directory, and collects every message the client receives again. A message
counts as redelivered when its acknowledgement was recorded.

The replay of the recording under the same preset and limits predicts, per subscription and
stop kind, which acknowledged messages come back: after a crash, those the last record the
replay stored does not hold; after a clean stop, those the record of the cursor's close path
does not hold (both read back by ``CursorStateStore.recover`` and compared message by message
by :func:`~mledger.managed_ledger.redelivered_messages`). Its final cursors must equal the live
internal stats, its figures (``redelivered_after_crash``, ``redelivered_after_unload``) must
count the predicted messages, and the client must receive again exactly the predicted ones.
This compares mledger with mledger: Pulsar's truth is in the rules' hand-made logs
(tests/test_restart_rules.py).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from rehearsal import TOPIC, MessageKey, Standalone, Workload, entry_of, received_again, recorded_acks, wait_for

from mledger.core import PULSAR_VERSIONS, Position, rules_for
from mledger.managed_ledger import CursorStateStore, redelivered_messages
from mledger.replay import BrokerModel, ReplaySettings, run_single_process

pytestmark = [pytest.mark.timeout(240)]

LIMITS = {
    # Pulsar's key: the replay's setting, the value. States past small limits: the persists and the
    # close path truncate; no flush tick during a run, so what the limiter held back stays so.
    "managedLedgerMaxUnackedRangesToPersist": ("max_unacked_ranges_to_persist", "1"),
    "managedLedgerMaxUnackedRangesToPersistInMetadataStore": ("max_unacked_ranges_to_persist_in_metadata_store", "1"),
    "managedLedgerMaxBatchDeletedIndexToPersist": ("max_batch_deleted_index_to_persist", "1"),
    "managedLedgerCursorPositionFlushSeconds": ("cursor_position_flush_seconds", "3600"),
}


ACKS_PER_COMMAND = 2
"""Acknowledgements the client sends per subscription before the test waits for them: its ack
grouping (100 ms) puts a group's individual acknowledgements in one ACK command, which the
broker applies as one cursor change and one persist attempt, and so must the replay."""
PAUSE_AFTER = 3
"""Groups acknowledged before an idle second: the limiter has granted the first command's persist
and refused the next; after the pause it grants one to a state past the limits."""


def command_sizes(record: Path, topic: str) -> list[int]:
    """The rows of each acknowledgement request of ``topic`` in the recording (its ``command``)."""
    rows = pq.read_table(record / "acked").to_pylist()
    commands = Counter((r["subscription"], r["command"]) for r in rows if r["topic"] == topic)
    return list(commands.values())


def live_cursors(broker: Standalone, topic: str) -> dict[str, tuple[str, str]]:
    """Each subscription's mark-delete and individually deleted ranges, as the internal stats
    of the live broker say."""
    stats = broker.admin_get(f"/admin/v2/persistent/{topic.removeprefix('persistent://')}/internalStats")
    return {n: (c["markDeletePosition"], c["individuallyDeletedMessages"]) for n, c in stats["cursors"].items()}


def replay_prediction(
    record: Path, out: Path, defaults: str, topic: str, acked: dict[str, set[MessageKey]]
) -> tuple[dict[str, dict[bool, set[MessageKey]]], dict[str, dict[str, Any]]]:
    """Replay ``record`` under ``defaults`` and :data:`LIMITS`; per subscription of ``topic``,
    the acknowledged messages a crash (``True``) and a clean stop (``False``) would redeliver,
    and the replay's ``cursors`` rows."""
    # the default engine: every persist is observed however the log is cut into steps
    pairs = [f"defaults={defaults}", *(f"{k}={v}" for k, v in LIMITS.values())]
    settings = ReplaySettings.from_pairs(pairs)
    models: dict[str, BrokerModel] = {}

    def model(name: str, partition: int, settings: ReplaySettings) -> BrokerModel:
        models[name] = BrokerModel(name, partition, settings)
        return models[name]

    run_single_process(str(record), str(out), settings, model_factory=model)
    rows = {r["subscription"]: r for r in pq.read_table(out / "cursors").to_pylist() if r["topic"] == topic}
    replayed = models[topic]
    predicted: dict[str, dict[bool, set[MessageKey]]] = {}
    for name, messages in acked.items():
        keys = [(Position(m[0], m[1]), m[2]) for m in messages]
        cursor = replayed.cursor(name)
        assert cursor is not None
        # the end of the log leaves the cursor idle through a rewind, which persists nothing
        # (Pulsar's ManagedCursorImpl.rewind): the store holds what a crash then would recover
        crashed = CursorStateStore(cursor.ledger, name).recover()
        assert crashed is not None
        crash = redelivered_messages(crashed, keys)
        cursor.close()  # the close path, as a clean stop or an unload
        recovered = CursorStateStore(cursor.ledger, name).recover()
        assert recovered is not None
        unload = redelivered_messages(recovered, keys)
        # the replay's own figures count the same messages
        assert len(crash) == rows[name]["redelivered_after_crash"], (name, crash)
        assert len(unload) == rows[name]["redelivered_after_unload"], (name, unload)
        predicted[name] = {
            stop: {(p.ledger_id, p.entry_id, i) for p, i in found} for stop, found in ((True, crash), (False, unload))
        }
    return predicted, rows


@dataclass
class Stopped:
    """One run of the workload, stopped one way; what the client received again once collected."""

    crash: bool
    work: Workload
    record: Path
    live: dict[str, tuple[str, str]]
    again: dict[str, list[MessageKey]] = field(default_factory=dict)


@pytest.mark.parametrize("defaults", list(PULSAR_VERSIONS))
def test_the_client_receives_again_what_the_replay_predicts(
    tmp_path: Path, standalone_process: Callable[..., Standalone], defaults: str
) -> None:
    """One chain of brokers over one data directory per preset (a start is the slow part): the
    first runs the workload on one topic and is killed; the second collects what comes back on
    it, runs the workload on another topic and is stopped with SIGTERM; the third collects."""
    config = tmp_path / "broker.conf"
    config.write_text("".join(f"{key}={value}\n" for key, (_, value) in LIMITS.items()))
    options = ("--defaults", defaults, "--config", str(config))
    batch_index_acks = rules_for(defaults).defaults["deletion_at_batch_index_level_enabled"] == "true"
    runs: list[Stopped] = []
    for crash in (True, False):
        record = tmp_path / ("rec-sigkill" if crash else "rec-sigterm")
        broker = standalone_process(
            tmp_path / "data", *options, "--record", str(record), "--record-flush-interval", "0.02"
        )
        broker.warm_admin()
        if runs:
            runs[-1].again = received_again(broker.service_url, runs[-1].work)
        work = Workload(broker.service_url, seed=7, topic=f"{TOPIC}-{'sigkill' if crash else 'sigterm'}")
        work.produce()

        def recorded() -> bool:
            rows = recorded_acks(record, work.produced, work.topic)  # noqa: B023
            return all(work.applied(s, batch_index_acks) <= rows.get(s.name, set()) for s in work.subscriptions)  # noqa: B023

        def settle(settled: list[float] = []) -> None:  # noqa: B006 - when each group of this run settled
            wait_for(recorded, "the recording to hold every acknowledgement sent")
            settled.append(time.monotonic())
            if len(settled) == PAUSE_AFTER:  # the limiter grants the next command a persist, with more ranges
                time.sleep(max(0.0, settled[0] + 1.1 - settled[-1]))

        work.consume(settle=settle, per_settle=ACKS_PER_COMMAND)
        runs.append(Stopped(crash, work, record, live_cursors(broker, work.topic)))
        broker.stop(crash)
        work.close()
    last = standalone_process(tmp_path / "data", *options)
    runs[-1].again = received_again(last.service_url, runs[-1].work)

    for run in runs:
        kind = "sigkill" if run.crash else "sigterm"
        work, again = run.work, run.again
        acked = {n: a for n, a in recorded_acks(run.record, work.produced, work.topic).items() if n in run.live}
        predicted, rows = replay_prediction(run.record, tmp_path / f"out-{kind}", defaults, work.topic, acked)
        for name in run.live:
            row = rows[name]
            replayed = (
                f"{row['mark_delete_ledger_id']}:{row['mark_delete_entry_id']}",
                row["individually_deleted_messages"],
            )
            assert replayed == run.live[name], (kind, name)  # the replay's cursor is the live one at the stop
            unacked = set(work.produced) - acked[name]
            assert unacked <= set(again[name]), (kind, name)  # what was never acknowledged comes back
            assert len(again[name]) == len(set(again[name])), (kind, name)  # each message once
            redelivered = set(again[name]) & acked[name]
            expected = predicted[name][run.crash]
            assert redelivered == expected, (kind, name, sorted(redelivered), sorted(expected))
        # the seeded workload covers what the comparison is about
        assert any(ranges != "[]" for _, ranges in run.live.values()), (kind, "no hole")
        entries = {m[:2]: entry_of(m, work.produced) for m in work.produced if m[2] >= 0}
        sent = [work.acknowledged(sub) for sub in work.subscriptions]  # the client's, ignored ack sets too
        partial = [e for e, messages in entries.items() for a in sent if 0 < len(messages & a) < len(messages)]
        assert partial, (kind, "no partly acknowledged batch")
        assert any(predicted[n][run.crash] for n in run.live), (kind, "the stop lost nothing: nothing was compared")
        assert max(command_sizes(run.record, work.topic)) > 1, (kind, "no ACK command carried several ids")
        hits = ("persist_unacked_ranges_truncated", "persist_batch_deleted_indexes_truncated", "truncated_ranges")
        assert any(r[c] for r in rows.values() for c in hits), (kind, "no limit hit")
