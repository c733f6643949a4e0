"""What one acknowledgement costs in crossings (issue 32): per ack, the cursor mutations, the
position validations and the subscription's calls to its dispatcher.

Run: .venv/bin/python benchmarks/bench_ack_crossings.py
Before and after a change: .venv/bin/python benchmarks/compare_src.py --before OLD/src --after src \\
        --repeats 1 benchmarks/bench_ack_crossings.py

Each ack is the request the binary protocol builds for one ``CommandAck`` (an individual ack of a
whole entry, an ack set of a batch entry, one ack carrying all three forms, a cumulative ack, with
a batch index too), and the library's batch-index ack of one message id, on a Shared or Exclusive
subscription whose consumer holds the entries (received, so the dispatcher has them); the last
index of a batch its consumer holds, on a ledger that keeps no batch-index state (the client
batch-acker rule); a receipt (``flush_acks``) is counted apart. Counted by wrapping methods by
name, so it runs on any tree: cursor mutations are ``ManagedCursor``'s ack methods (one calling
another counts once); validations are the checks of a position against the ledger
(``Subscription._is_live`` and the subscription's own ``is_valid_position`` of a cumulative ack,
the cursor's ``_check_rows`` / ``_check_entry`` / ``_check_mark_delete_target``, its single-call
``delete``, which validates inline, and ``AckState._check_plan`` / ``ack_entry``), outermost calls
only; dispatcher crossings are calls of the dispatcher's public methods from outside it.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from mledger import ManagedLedger, ManagedLedgerConfig, ManagedLedgerFactory, MemoryStore
from mledger.broker import AckRequest, Broker, BrokerConfig, Dispatcher, ManualClock, MessageId, SubscriptionType
from mledger.managed_ledger import InitialPosition, ManagedCursor

MUTATIONS = ["acknowledge", "delete", "delete_many", "delete_batch_indexes", "delete_with_ack_set",
             "delete_with_ack_sets", "mark_delete"]  # fmt: skip
VALIDATIONS = [
    ("mledger.broker._subscription", "Subscription", "_is_live"),
    ("mledger.managed_ledger._cursor", "ManagedCursor", "_check_rows"),
    ("mledger.managed_ledger._cursor", "ManagedCursor", "_check_entry"),
    ("mledger.managed_ledger._cursor", "ManagedCursor", "_check_mark_delete_target"),
    ("mledger.managed_ledger._cursor", "ManagedCursor", "delete"),
    ("mledger.managed_ledger._ack_state", "AckState", "_check_plan"),
    ("mledger.managed_ledger._ack_state", "AckState", "ack_entry"),
]

_local = threading.local()


def _wrap(owner: type, name: str, group: str) -> None:
    real = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        counts: Counter[str] | None = getattr(_local, "counts", None)
        if counts is None:
            return real(*args, **kwargs)
        if not _local.depth[group]:
            counts[group] += 1
        _local.depth[group] += 1
        try:
            return real(*args, **kwargs)
        finally:
            _local.depth[group] -= 1

    setattr(owner, name, counted)


def _instrument() -> None:
    for name in MUTATIONS:
        _wrap(ManagedCursor, name, "cursor mutations")
    for module, cls, name in VALIDATIONS:
        owner = getattr(importlib.import_module(module), cls, None) if _exists(module) else None
        if owner is not None and name in vars(owner):
            _wrap(owner, name, "validations")
    for name in [n for n in vars(Dispatcher) if not n.startswith("_") and callable(getattr(Dispatcher, n))]:
        _wrap(Dispatcher, name, "dispatcher crossings")
    _wrap(ManagedCursor, "flush", "receipt flushes")
    is_valid = ManagedLedger.is_valid_position

    def counted_is_valid(ml: ManagedLedger, position: Any) -> bool:
        counts: Counter[str] | None = getattr(_local, "counts", None)
        if counts is not None and sys._getframe(1).f_code.co_name == "_acknowledge_cumulative":
            counts["validations"] += 1  # the old subscription's own check of a cumulative ack
        return is_valid(ml, position)

    ManagedLedger.is_valid_position = counted_is_valid  # type: ignore[method-assign]


def _exists(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def _count(act: Callable[[], None]) -> Counter[str]:
    _local.counts, _local.depth = Counter(), Counter()
    try:
        act()
    finally:
        counts, _local.counts = _local.counts, None
    return counts


def _broker(batch_level: bool = True) -> Broker:
    clock = ManualClock(0)
    config = BrokerConfig(managed_ledger_config=ManagedLedgerConfig(deletion_at_batch_index_level_enabled=batch_level))
    return Broker(ManagedLedgerFactory(MemoryStore(), clock=clock), config, clock=clock)


def main() -> None:
    _instrument()
    broker = _broker()
    shared = broker.subscribe("crossings", "shared", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    exclusive = broker.subscribe("crossings", "exclusive", SubscriptionType.EXCLUSIVE, InitialPosition.EARLIEST)
    producer = broker.create_producer("crossings")
    whole = [producer.send(b"m%d" % i) for i in range(5)]
    batch = producer.send_batch([b"a", b"b", b"c", b"d"])
    other = producer.send_batch([b"e", b"f", b"g"])
    last = producer.send_batch([b"h", b"i"])
    consumer, owner = shared.add_consumer("c"), exclusive.add_consumer("x")
    consumer.receive(100)
    owner.receive(100)
    no_batch_state = _broker(batch_level=False)
    plain = no_batch_state.subscribe("crossings", "shared", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    held = no_batch_state.create_producer("crossings").send_batch([b"a", b"b"])
    holder = plain.add_consumer("c")
    holder.receive(100)
    holder.acknowledge(MessageId(held.ledger_id, held.entry_id, -1, 0))
    mixed = AckRequest(
        entries=[whole[2].position, whole[3].position],
        ack_sets=[(other.position, 0b110, 3)],
        message_ids=[MessageId(last.ledger_id, last.entry_id, -1, 0), MessageId(last.ledger_id, last.entry_id, -1, 1)],
    )
    kinds = {
        "individual (one entry)": lambda: consumer.acknowledge_request(AckRequest(entries=[whole[0].position])),
        "batch index (an ack set)": lambda: consumer.acknowledge_request(
            AckRequest(ack_sets=[(batch.position, 0b1101, 4)])  # index 1 of 4
        ),
        "batch index (a message id)": lambda: consumer.acknowledge(MessageId(batch.ledger_id, batch.entry_id, -1, 2)),
        "one ack, three forms": lambda: consumer.acknowledge_request(mixed),
        "the last index a consumer holds": lambda: holder.acknowledge(MessageId(held.ledger_id, held.entry_id, -1, 1)),
        "cumulative": lambda: owner.acknowledge_cumulative(whole[1]),
        "cumulative (a batch index)": lambda: owner.acknowledge_cumulative(
            MessageId(batch.ledger_id, batch.entry_id, -1, 1)
        ),
        "receipt": shared.flush_acks,
    }
    for kind, act in kinds.items():
        counts = _count(act)
        for what in ("cursor mutations", "validations", "dispatcher crossings", "receipt flushes"):
            print(f"crossings, {kind}, {what}: {counts[what]}")


if __name__ == "__main__":
    main()
