"""One acknowledgement request (a ``CommandAck``) is one persist attempt in the replay too.

The broker applies the message ids of one ``CommandAck`` in one cursor call
(``PersistentSubscription.acknowledgeMessage`` -> ``ManagedCursorImpl.asyncDelete(Iterable)``),
which asks the mark-delete rate limiter once (``markDeleteLimiter.tryAcquire()`` after the
ranges are updated). A recording numbers the rows of one request (the ``acked`` log's
``command`` column); the replay applies them as one request. Logs without the column keep one
request per row.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import assume, given, settings, strategies as st
from replay_logs import SMALL_LIMITS, comparable, random_log
from restart_logs import Log, settings_for

from mledger.managed_ledger import AckPlan
from mledger.replay import BrokerModel, ReplaySettings
from mledger.replay._events import replay_rows
from mledger.replay._tasks import quiet_library_warnings

TOPIC = "persistent://public/default/commands"
IDLE_MS = 10_000


def rows(command: bool) -> list[dict[str, Any]]:
    """Ten plain entries at 0 s, a batch of four at 0 s; after ten idle seconds one request
    acknowledging entries 1, 3 and 5 and two messages of the batch: five rows, which one row
    at a time would be five limiter attempts (under Guava's limiter after an idle second the
    first two are granted back to back, the rest refused)."""
    out: list[dict[str, Any]] = [
        {"log": "produced", "topic": TOPIC, "partition": -1, "ledger_id": 3, "entry_id": e, "publish_time_ms": 0}
        for e in range(10)
    ]
    out.append(
        {"log": "produced", "topic": TOPIC, "partition": -1, "ledger_id": 3, "entry_id": 10, "batch_size": 4}
        | {"publish_time_ms": 0}
    )
    acks = [(1, None), (3, None), (5, None), (10, 0), (10, 2)]
    for entry, index in acks:
        out.append(
            {"log": "acked", "topic": TOPIC, "partition": -1, "subscription": "s", "ledger_id": 3, "entry_id": entry}
            | {"batch_index": index, "ts_ms": IDLE_MS, "command": 7 if command else None}
        )
    return out


def replayed(command: bool, feed_rows: int = 10_000, **values: str) -> tuple[int, dict[str, Any]]:
    """The replay's persists of cursor ``s`` and its ``cursors`` row, under pulsar-4.1, fed
    ``feed_rows`` events at a time."""
    models: list[BrokerModel] = []

    def model(topic: str, partition: int, settings: ReplaySettings) -> BrokerModel:
        models.append(BrokerModel(topic, partition, settings))
        return models[-1]

    settings = ReplaySettings.from_pairs(["defaults=pulsar-4.1", *(f"{k}={v}" for k, v in values.items())])
    out = replay_rows(rows(command), settings, feed_rows=feed_rows, model_factory=model)
    cursor = models[0].cursor("s")
    assert cursor is not None
    (row,) = out["cursors"].to_pylist()
    return cursor.stats().persistence.persist_count, row


def broker_persists(one_request: bool) -> int:
    """The managed ledger given the acknowledgements as the broker gives them: the whole
    entries and the batch's indexes (an ack set) in one ``acknowledge`` call, or one call a row
    (the first persist also creates the cursor ledger, counted as one more)."""
    log = Log(settings_for("pulsar-4.1", throttle_mark_delete=1.0))
    p = log.produce([1] * 10 + [4])
    log.at(IDLE_MS / 1000)
    if one_request:
        plans = [AckPlan.of([p[1], p[3], p[5]], [(p[10], 0b1010, 4)])]
    else:
        plans = [AckPlan.of([p[1]]), AckPlan.of([p[3]]), AckPlan.of([p[5]])]
        plans += [AckPlan.of(None, [(p[10], 0b1110, 4)]), AckPlan.of(None, [(p[10], 0b1010, 4)])]
    for plan in plans:
        log.cursor.acknowledge(plan)
    return log.cursor.stats().persistence.persist_count


@pytest.mark.parametrize("segment_rows", ["1", "65536"])
def test_the_rows_of_one_command_are_one_persist_attempt(segment_rows: str) -> None:
    expected = broker_persists(one_request=True)
    assert expected < broker_persists(one_request=False)
    persists, row = replayed(True, segment_rows=segment_rows)
    assert persists == expected
    assert row["redelivered_after_crash"] == 0  # the one persist holds all five acks
    assert row["individually_deleted_messages"] == "[(3:0..3:1],(3:2..3:3],(3:4..3:5]]"


def test_a_command_cut_by_the_input_batches_is_still_one_request() -> None:
    persists, _ = replayed(True, feed_rows=1, segment_rows="1")
    assert persists == broker_persists(one_request=True)


def test_without_the_column_each_row_is_its_own_request() -> None:
    """An older recording or a capture: the limiter grants two back to back after the idle
    second and refuses the other three; a crash then loses the refused ones."""
    persists, row = replayed(False)
    assert persists == broker_persists(one_request=False)
    assert row["redelivered_after_crash"] == 3


def test_a_negative_command_is_an_invalid_row() -> None:
    log = rows(True)
    log[-1]["command"] = -1
    out = replay_rows(log, ReplaySettings.from_pairs(["defaults=pulsar-4.1"]))
    assert [(r["reason"], r["detail"]) for r in out["anomalies"].to_pylist()] == [("invalid_row", "command is negative")]


def with_commands(rows: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """``rows`` with a ``command`` on every acked row: consecutive individual acks of one
    subscription within 3 ms share one now and then (and the first one's time), as a client's
    grouped acks do."""
    rnd = random.Random(seed)
    out: list[dict[str, Any]] = []
    command = 0
    last: dict[str, Any] | None = None
    for row in rows:
        row = dict(row)
        if row["log"] == "acked":
            joins = (
                last is not None
                and row.get("ack_type") != "cumulative"
                and last.get("ack_type") != "cumulative"
                and last["subscription"] == row["subscription"]
                and row["ts_ms"] - last["ts_ms"] <= 3
                and rnd.random() < 0.8
            )
            if joins:
                assert last is not None
                row["ts_ms"] = last["ts_ms"]
            else:
                command += 1
            row["command"] = command
            last = row
        else:
            last = None
        out.append(row)
    return out


@settings(max_examples=8, derandomize=True, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    preset=st.sampled_from((None, "pulsar-3.0", "pulsar-4.1")),
    limits=st.sampled_from(SMALL_LIMITS),
    entries=st.integers(5, 30),
)
def test_a_log_with_commands_gives_the_same_outputs_however_the_steps_are_cut(
    seed: int, preset: str | None, limits: dict[str, str], entries: int
) -> None:
    """Random logs whose acks come several to a request: every output equal for steps of 1, 3,
    1,000 and 65,536 events (a step never ends inside a request)."""
    rows = with_commands(random_log(seed, entries=entries, acks=3 * entries, subscriptions=2), seed)
    assume(any(a.get("command", -1) == b.get("command") for a, b in zip(rows, rows[1:], strict=False)))
    values = {**limits, "emit_state": "true", **({"defaults": preset} if preset else {})}
    s = ReplaySettings().with_values(values)

    def outputs(segment_rows: int) -> dict[str, list[dict[str, Any]]]:
        with quiet_library_warnings():
            return comparable(replay_rows(rows, s.with_changes(segment_rows=segment_rows)))

    reference = outputs(1)
    for segment_rows in (3, 1_000, 65_536):
        assert outputs(segment_rows) == reference, segment_rows


@pytest.mark.spark
def test_spark_reads_the_command_column_as_the_single_process_does(spark: Any, tmp_path: Any) -> None:
    """The Spark job's native Parquet scan carries an acked row's ``command`` where
    :func:`~mledger.replay._schema.to_events` does (``sequence_id``), nulls for a log without it."""
    from mledger.replay._events import event_table, write_logs
    from mledger.replay._inputs import plan_inputs
    from mledger.replay.spark._prepare import _parquet_events, _parquet_files

    for command in (True, False):
        directory = tmp_path / str(command)
        write_logs(str(directory), rows(command))
        plan = plan_inputs(str(directory))
        frame = _parquet_events(spark, plan, "acked", _parquet_files(plan)["acked"])
        found = sorted((r["entry_id"], r["sequence_id"]) for r in frame.collect())
        acked = event_table(rows(command)).to_pylist()
        expected = sorted((r["entry_id"], r["sequence_id"]) for r in acked if r["kind"] == 2)
        assert found == expected
        assert {c for _, c in found} == ({7} if command else {None})
