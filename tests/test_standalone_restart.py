"""Issue 33 item 6: what a restarted ``mledger standalone`` redelivers under its own default
rules, seen by the real client, after a SIGKILL and after a SIGTERM.

A seeded workload drives ``mledger standalone --record`` with ``pulsar-client``: plain and
batched messages, a Shared subscription acknowledging with holes and partial batches
(``batch_index_ack_enabled=True``: the Python client's default sends no batch-index acks) and an
Exclusive one acknowledging cumulatively then individually. Before the stop the test waits until
the recording holds every acknowledgement the client sent (the client groups acks for 100 ms and
asks no receipt; the broker records an ack after applying it). Under mledger's defaults (no
mark-delete throttle) an applied ack is persisted before the broker goes on (the store confirms a
write once committed), so after either stop the client receives again exactly the messages it
did not acknowledge: none of the acknowledged ones, every other one, a partly acknowledged
batch's remaining messages alone. (What a Pulsar version's rules redeliver, against the replay of the
recording: tests/test_restart_differential.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from rehearsal import Standalone, Workload, received_again, recorded_acks, wait_for

pytestmark = [pytest.mark.timeout(240)]


def stop_and_restart(
    tmp: Path, standalone_process: Callable[..., Standalone], crash: bool
) -> tuple[Workload, dict[str, list]]:
    """Run the workload, stop the broker once the recording holds every acknowledgement, start
    it again over the same data; returns the workload and what each subscription received again."""
    data, record = tmp / "data", tmp / "rec"
    first = standalone_process(data, "--record", str(record), "--record-flush-interval", "0.05")
    work = Workload(first.service_url, seed=7)
    work.produce()
    work.consume()
    wait_for(
        lambda: all(
            work.acknowledged(s) <= recorded_acks(record, work.produced).get(s.name, set()) for s in work.subscriptions
        ),
        "the recording to hold every acknowledgement",
    )
    first.stop(crash)
    work.close()
    second = standalone_process(data)
    return work, received_again(second.service_url, work)


@pytest.mark.parametrize("crash", [True, False], ids=["sigkill", "sigterm"])
def test_a_restart_redelivers_exactly_the_unacknowledged_messages(
    tmp_path: Path, standalone_process: Callable[..., Standalone], crash: bool
) -> None:
    work, again = stop_and_restart(tmp_path, standalone_process, crash)
    for sub in work.subscriptions:
        assert sub.acked, sub.name  # the seeded workload leaves holes: some acked, some not
        unacked = [m for m in work.produced if m not in work.acknowledged(sub)]
        assert 0 < len(unacked) < len(work.produced), sub.name
        assert sorted(again[sub.name]) == unacked, sub.name  # each once
