"""The ``mledger`` command: ``demo`` (and, with the Spark job, ``generate`` / ``replay``)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

from .config import ManagedLedgerConfig
from .ledger import InitialPosition, ManagedLedgerFactory
from .storage.sqlite import SqliteStore


def _library_demo() -> int:
    """Append, ack out of order, crash-free restart: what a cursor keeps and persists."""
    with tempfile.TemporaryDirectory(prefix="mledger-demo-") as data_dir:
        config = ManagedLedgerConfig(max_entries_per_ledger=1_000)
        factory = ManagedLedgerFactory(SqliteStore(data_dir))
        ml = factory.open("public/default/persistent/orders", config)
        cursor = ml.open_cursor("billing", InitialPosition.EARLIEST)
        started = time.perf_counter()
        positions = ml.add_entries([b"order-%d" % i for i in range(5_000)])
        print(f"appended {len(positions):,} entries over {len(ml.ledger_infos())} ledgers "
              f"in {time.perf_counter() - started:.2f} s")
        entries = cursor.read_entries(2_000)
        print(f"read {len(entries):,} entries; read position {cursor.read_position}")
        cursor.delete(positions[10:1500:3])  # out-of-order acks leave holes
        cursor.mark_delete(positions[4], {"dedup-seq": 41})
        print(f"mark-delete {cursor.mark_delete_position}, "
              f"{cursor.total_non_contiguous_deleted_messages_range()} ack ranges, "
              f"backlog {cursor.number_of_entries_in_backlog():,}")
        factory.close()

        factory = ManagedLedgerFactory(SqliteStore(data_dir))
        ml = factory.open("public/default/persistent/orders", config)
        cursor = ml.get_cursor("billing")
        holes = cursor.individually_deleted_messages()
        print(f"after restart: mark-delete {cursor.mark_delete_position}, {len(holes)} ack ranges, "
              f"backlog {cursor.number_of_entries_in_backlog():,}, properties {cursor.properties}")
        print(f"first ranges: {str(holes)[:80]}...")
        factory.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mledger", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run a short demonstration")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _library_demo()
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
