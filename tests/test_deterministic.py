"""Runs that repeat exactly (issue 34 item 3): a real client session captured once, replayed into
fresh deterministic brokers, gives the same broker frames and the same recorded rows; with
deterministic mode off the rows differ (the broker's clock starts at the wall clock)."""

from __future__ import annotations

import argparse
import os
import random
from pathlib import Path

import pytest
from determinism import capture_session, delivered, replay_in_a_process, replay_run

from mledger import ConfigError, ManagedLedgerFactory
from mledger.broker import DETERMINISTIC_START_MS, Broker, Subscription, Topic, open_broker
from mledger.core import SystemClock
from mledger.protocol import ClientRead, EmbeddedBroker
from mledger.standalone import Standalone, add_standalone_arguments

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def captured() -> list[ClientRead]:
    return capture_session()


def test_the_same_seed_and_commands_give_the_same_frames_and_rows(captured: list[ClientRead], tmp_path: Path) -> None:
    frames_a, rows_a = replay_run(captured, tmp_path / "a", seed=7)
    frames_b, rows_b = replay_run(captured, tmp_path / "b", seed=7)
    messages = delivered(frames_a)
    # not trivially equal: both Key_Shared consumers, the Shared one (one message twice) and the
    # Exclusive one on the second connection got messages
    assert len(messages) == 3 * 24 + 1, messages
    assert len({(connection, consumer) for connection, consumer, _, _ in messages}) == 4
    assert len({connection for connection, _, _, _ in messages}) == 2
    assert frames_a == frames_b
    assert rows_a == rows_b
    assert len(rows_a["produced"]) == 24 and len(rows_a["acked"]) >= 3 * 24
    # stamped by the broker's clock, which starts at a fixed time and moved only by subscription events
    assert all(
        DETERMINISTIC_START_MS <= row["publish_time_ms"] < DETERMINISTIC_START_MS + 10 for row in rows_a["produced"]
    )


def test_a_process_hashing_strings_otherwise_gives_the_same_frames_and_rows(
    captured: list[ClientRead], tmp_path: Path
) -> None:
    """Across processes too: a set of names iterated in the broker would come out in another
    order under another ``PYTHONHASHSEED``."""
    here = replay_run(captured, tmp_path / "here", seed=7)
    hash_seed = int(os.environ.get("PYTHONHASHSEED", "0") or 0) + 1  # another than this process's, if fixed
    there = replay_in_a_process(captured, tmp_path / "there", seed=7, hash_seed=hash_seed)
    assert here == there


def test_without_deterministic_mode_the_rows_differ(captured: list[ClientRead], tmp_path: Path) -> None:
    _, rows_a = replay_run(captured, tmp_path / "a", seed=7, deterministic=False)
    _, rows_b = replay_run(captured, tmp_path / "b", seed=7, deterministic=False)
    assert rows_a != rows_b  # stamped from a clock that started at the wall clock's time


def test_a_broker_choosing_by_chance_fails_the_comparison(
    captured: list[ClientRead], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison catches a broker whose choices depend on something else than the seed and
    the commands: here a topic listing its subscriptions in a random order (as a set in hash
    order would), which changes the order the server dispatches them in after each SEND."""
    listed = Topic.subscriptions

    def shuffled(chance: random.Random) -> property:
        def subscriptions(topic: Topic) -> dict[str, Subscription]:
            items = list(listed.fget(topic).items())  # type: ignore[misc]
            chance.shuffle(items)
            return dict(items)

        return property(subscriptions)

    runs = []
    for n in (1, 2):
        monkeypatch.setattr(Topic, "subscriptions", shuffled(random.Random(n)))
        runs.append(replay_run(captured, tmp_path / str(n), seed=7))
    assert runs[0][0] != runs[1][0]


def test_the_seed_decides_the_brokers_random_draws() -> None:
    def draws(seed: int | None) -> list[float]:
        broker = Broker(ManagedLedgerFactory(), seed=seed)
        return [broker.random.random() for _ in range(5)]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)
    assert Broker(ManagedLedgerFactory(), seed=None).seed >= 0  # drawn, readable, to be given again


def test_deterministic_mode_needs_the_manual_clock() -> None:
    with pytest.raises(ConfigError, match="manual clock"):
        EmbeddedBroker(deterministic=True, manual_clock=False)
    with pytest.raises(ConfigError, match="manual clock"):
        open_broker(clock=SystemClock(), deterministic=True)


def test_a_deterministic_clock_moves_by_what_the_test_advances() -> None:
    with EmbeddedBroker(deterministic=True, seed=3) as broker:
        assert broker.clock.now_ms() == DETERMINISTIC_START_MS
        assert broker.clock.advance(1_000) == DETERMINISTIC_START_MS + 1_000  # not the wall clock's time
        assert broker.broker.seed == 3
        broker.restart(crash=True)  # the same clock, where it was, and the same seed
        assert (broker.clock.now_ms(), broker.broker.seed) == (DETERMINISTIC_START_MS + 1_000, 3)


def test_mledger_standalone_takes_deterministic_and_seed() -> None:
    parser = argparse.ArgumentParser()
    add_standalone_arguments(parser)
    args = parser.parse_args(["--memory", "--deterministic", "--seed", "7"])
    assert (args.deterministic, args.seed) == (True, 7)
    standalone = Standalone(None, ("127.0.0.1", 0), ("127.0.0.1", 0), deterministic=args.deterministic, seed=args.seed)
    try:
        assert standalone.broker.seed == 7
        assert standalone.broker.clock.now_ms() == DETERMINISTIC_START_MS
    finally:
        standalone.opened.close()
        standalone.admin.shutdown(0)
