"""Shared sweeps: settings that differ only in how cursor state is persisted share one replay
(one set of cursors persisting through one state store per setting), and every setting's
outputs equal a separate replay with that setting."""

from __future__ import annotations

import pathlib
from collections import defaultdict
from typing import Any

import pyarrow as pa
import pytest

import mledger
from mledger.replay import (
    BrokerModel,
    GeneratorConfig,
    PartitionReplayer,
    PreparedLog,
    ReplaySettings,
    generate,
    open_prepared,
)
from mledger.replay._mirror import PERSISTENCE_KEYS, behaviour, shared_groups
from mledger.replay._sweep import Variant
from mledger.replay._tasks import replay_partition_into

BASE = ReplaySettings(emit_state=True)
PERSISTENCE_ONLY = [
    BASE,
    BASE.with_values({"max_unacked_ranges_to_persist": "3"}),
    BASE.with_values({"individual_ack_format": "long_array", "max_unacked_ranges_to_persist": "40"}),
    BASE.with_values({"individual_ack_format": "auto"}),
    BASE.with_values({"persistent_unacked_ranges_with_multiple_entries_enabled": "true",
                      "persistent_unacked_ranges_max_entry_size": "64", "cursor_info_compression_type": "ZSTD",
                      "max_unacked_ranges_to_persist": "0"}),
    BASE.with_values({"metadata_max_entries_per_ledger": "2", "ledger_rollover_timeout": "5"}),
    BASE.with_values({"managed_cursor_info_compression_type": "LZ4", "max_unacked_ranges_to_persist_in_metadata_store": "1",
                      "max_batch_deleted_index_to_persist": "0"}),
]


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> PreparedLog:
    """A log small enough to replay each of the seven settings alone, big enough that six
    persist different states."""
    root = str(tmp_path_factory.mktemp("shared") / "prepared")
    generate(root, GeneratorConfig(topics=2, partitions=2, events=4_000, max_entries_per_ledger=150, rate_per_s=400,
                                   seed=11, chunk_entries=1_000))
    return open_prepared(root)


@pytest.fixture(scope="module")
def small_log(tmp_path_factory: pytest.TempPathFactory) -> PreparedLog:
    """A smaller log for settings that persist every ack (no rate limit: a persist per ack, each
    observed); 3 ranges still truncate in it."""
    root = str(tmp_path_factory.mktemp("shared-small") / "prepared")
    generate(root, GeneratorConfig(topics=2, partitions=2, events=2_000, max_entries_per_ledger=150, rate_per_s=400,
                                   seed=11, chunk_entries=1_000))
    return open_prepared(root)


def replay(log: PreparedLog, settings: list[ReplaySettings]) -> tuple[list[dict[str, list[dict[str, Any]]]], int]:
    """Every topic-partition under ``settings`` (one variant each); the rows per variant and
    output, and how many broker models were built."""
    models = 0

    def factory(topic: str, partition: int, s: ReplaySettings) -> BrokerModel:
        nonlocal models
        models += 1
        return BrokerModel(topic, partition, s)

    rows: list[dict[str, list[dict[str, Any]]]] = [defaultdict(list) for _ in settings]

    def sink(name: str, batch: pa.RecordBatch, i: int) -> None:
        rows[i][name].extend(batch.to_pylist())

    chosen = [Variant(s) for s in settings]
    for part in log.manifest.partitions:
        replay_partition_into(log, part, chosen, log.subscriptions(), sink, factory)
    return rows, models


def test_persistence_only_settings_share_one_replay_and_equal_separate_replays(log: PreparedLog) -> None:
    shared, models = replay(log, PERSISTENCE_ONLY)
    assert models == len(log.manifest.partitions)  # one replay per topic-partition for all seven
    persisted = set()
    for i, settings in enumerate(PERSISTENCE_ONLY):
        alone, _ = replay(log, [settings])
        assert dict(shared[i]) == dict(alone[0]), settings
        persisted.add(tuple((r["persisted_state_bytes"], r["state_chunks"], r["truncated_ranges"], r["state"])
                            for r in alone[0]["cursors"]))
    # the settings really persist different states (the cursor-ledger rollover writes the same ones)
    assert len(persisted) == len(PERSISTENCE_ONLY) - 1
    assert any(r["state_chunks"] > 1 for r in shared[4]["cursors"])  # PIP-381 chunks
    assert any(r["truncated_batch_indexes"] for r in shared[6]["cursors"])


def test_settings_that_change_behaviour_get_their_own_replay(small_log: PreparedLog) -> None:
    log = small_log
    mixed = [BASE, BASE.with_values({"throttle_mark_delete": "0"}),
             BASE.with_values({"max_unacked_ranges_to_persist": "3"}),
             BASE.with_values({"throttle_mark_delete": "0", "max_unacked_ranges_to_persist": "3"}),
             BASE.with_values({"deletion_at_batch_index_level_enabled": "false"})]
    assert shared_groups(mixed) == [[0, 2], [1, 3], [4]]
    shared, models = replay(log, mixed)
    assert models == 3 * len(log.manifest.partitions)
    for i, settings in enumerate(mixed):
        alone, _ = replay(log, [settings])
        assert dict(shared[i]) == dict(alone[0]), settings


def test_behaviour_ignores_exactly_the_persistence_keys() -> None:
    for key in sorted(PERSISTENCE_KEYS):
        current = BASE.value(key)
        other = {bool: "true" if not current else "false", int: "7", str: "LZ4"}.get(type(current), "range")
        if key == "individual_ack_format":
            other = "auto"
        if key == "restart_as":
            other = "pulsar-4.0"
        changed = BASE.with_values({key: other})
        assert changed.value(key) != current and behaviour(changed) == behaviour(BASE), key
    for key, value in (("throttle_mark_delete", "0"), ("deletion_at_batch_index_level_enabled", "false"),
                       ("deduplication", "false"), ("segment_rows", "3"), ("emit_state", "false")):
        assert behaviour(BASE.with_values({key: value})) != behaviour(BASE), key
    # pulsar_rules: rows with the same cursor behaviour share a replay, mledger's own rules do not
    rows = [BASE.with_values({"pulsar_rules": name}) for name in ("pulsar-3.0", "pulsar-newest")]
    assert behaviour(rows[0]) == behaviour(rows[1]) != behaviour(BASE)


def test_only_the_cursor_state_store_reads_the_persistence_keys() -> None:
    """The premise of sharing: no cursor, ledger or broker code reads a persistence-only key
    (frontends that display them and the store itself excepted)."""
    src = pathlib.Path(mledger.__file__).parent
    # replay/_watch.py forecasts when a state passes the persist limit, as the report shows it
    allowed = {"managed_ledger/_cursor_store.py", "core/_config.py", "replay/_mirror.py", "replay/_settings.py",
               "replay/_watch.py"}
    frontends = ("metrics/", "report/", "rest/", "admin/", "cli", "protocol/", "standalone", "_standalone",
                 "_pulsar_keys")  # the config readers too
    readers = {
        (str(path.relative_to(src)), key)
        for path in src.rglob("*.py")
        if str(path.relative_to(src)) not in allowed and not str(path.relative_to(src)).startswith(frontends)
        for key in PERSISTENCE_KEYS | {"effective_ack_format"}
        if f".{key}" in path.read_text()
    }
    assert readers == set()


def test_also_persist_refuses_settings_that_change_behaviour() -> None:
    with pytest.raises(ValueError, match="persistence-only"):
        PartitionReplayer("t", 0, BASE, also_persist=[BASE.with_values({"throttle_mark_delete": "0"})])


def test_a_state_mirror_stores_what_a_cursor_with_that_setting_stores() -> None:
    """``ManagedCursor.add_state_mirror``: a store of its own, another setting, the same calls."""
    from mledger import ManagedLedgerConfig, ManagedLedgerFactory, MemoryStore, Position
    from mledger.core import ManualClock
    from mledger.managed_ledger._cursor_store import CursorStateStore
    from mledger.replay._mirror import MirrorView

    own = ManagedLedgerConfig(max_entries_per_ledger=7, throttle_mark_delete=1.0)
    other = own.with_changes(max_unacked_ranges_to_persist=0, individual_ack_format="long_array",
                             persistent_unacked_ranges_with_multiple_entries_enabled=True,
                             persistent_unacked_ranges_max_entry_size=28, metadata_max_entries_per_ledger=3)

    def run(config: ManagedLedgerConfig, mirror_config: ManagedLedgerConfig | None) -> tuple[Any, ...]:
        clock = ManualClock(0)
        factory = ManagedLedgerFactory(MemoryStore(), clock=clock)
        ml = factory.open("t", config)
        cursor = ml.open_cursor("c")
        mirror_store = MemoryStore()
        mirror = None
        if mirror_config is not None:
            mirror = CursorStateStore(MirrorView(ml, mirror_config, factory.config, mirror_store), "c")
            cursor.add_state_mirror(mirror)
        positions = [ml.add_entry(b"x") for _ in range(60)]
        for step, p in enumerate(positions[1::3] + positions[2::3] + positions[0:30:3]):
            clock.advance(400)
            cursor.delete(p)
            if step % 7 == 0:
                cursor.delete_batch_indexes(positions[-1], [step % 5], 5)
        cursor.flush()
        assert cursor.mark_delete_position == Position(positions[29].ledger_id, positions[29].entry_id)
        store, stats = (ml.store, cursor.stats().persistence) if mirror is None else (mirror_store, mirror.stats())
        node = store.get("/managed-ledgers/t/c")
        assert node is not None
        ledger = stats.cursor_ledger_id
        tail = store.read(ledger, 0, store.last_entry_id(ledger)) if ledger >= 0 else []
        return (stats.persisted_state_bytes, stats.last_persist_chunks, stats.truncated_ranges, stats.persist_count,
                stats.persist_entries_written, len(tail), tail[-4:], ledger >= 0)

    mirrored = run(own, other)
    alone = run(other, None)
    assert mirrored[:-1] == alone[:-1] and mirrored[1] > 1  # chunked, in rolled-over cursor ledgers
