"""The ``mledger`` command: ``generate``, ``replay`` and ``demo`` (``demo --library``: the library tour).

``mledger generate OUT`` writes synthetic event logs; ``mledger replay EVENTS OUT`` replays
them through mledger cursors on Spark (``--single-process`` without Spark); ``mledger demo``
does both on a small data set and prints the summary.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from typing import TYPE_CHECKING

from .config import ManagedLedgerConfig
from .ledger import InitialPosition, ManagedLedgerFactory
from .storage.sqlite import SqliteStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEMO_EVENTS = 400_000


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


# -- generate -------------------------------------------------------------------------------------
def _add_generate_options(p: argparse.ArgumentParser) -> None:
    from .replay.generate import GeneratorConfig

    defaults = GeneratorConfig()
    for f in dataclasses.fields(GeneratorConfig):
        value = getattr(defaults, f.name)
        flag = "--" + f.name.replace("_", "-")
        kind = type(value)
        if f.name == "format":
            p.add_argument(flag, choices=["parquet", "jsonl", "csv"], default=value, help="file format (parquet)")
        else:
            p.add_argument(flag, type=kind, default=value, metavar=kind.__name__.upper(), help=f"default {value}")


def _generate(args: argparse.Namespace) -> int:
    from .replay.generate import GeneratorConfig, generate
    from .replay.progress import Progress

    names = GeneratorConfig.option_names()
    cfg = GeneratorConfig(**{n: getattr(args, n) for n in names})
    started = time.perf_counter()
    with Progress(cfg.events, "generate", enabled=False if args.quiet else None) as bar:
        summary = generate(args.out, cfg, bar)
    took = time.perf_counter() - started
    rows = ", ".join(f"{k} {v:,}" for k, v in summary.rows.items())
    print(f"wrote {summary.events:,} events ({rows}) for {summary.topic_partitions} topic-partitions "
          f"to {args.out} in {took:.1f} s")
    return 0


# -- replay ---------------------------------------------------------------------------------------
def _replay(args: argparse.Namespace) -> int:
    from .replay.settings import ReplaySettings
    from .replay.summary import format_summary

    settings = ReplaySettings.from_pairs(args.settings).with_changes(
        emit_state=args.emit_state, partitions=args.partitions
    )
    progress = not args.quiet
    if args.single_process:
        from .replay.local import run_single_process

        summary = run_single_process(args.events, args.out, settings, progress=progress)
    else:
        from .replay.spark.job import run_replay
        from .replay.spark.session import build_session

        spark = build_session(args.master, quiet=not args.spark_logs, driver_memory=args.driver_memory,
                              write_class_archive=True)
        try:
            summary = run_replay(spark, args.events, args.out, settings, progress=progress)
            print(format_summary(summary))
        finally:
            _stop(spark, progress)
        return 0
    print(format_summary(summary))
    return 0


def _stop(spark: SparkSession, progress: bool) -> None:
    """End the command's session. The outputs are written and this process exits next: its
    JVM sees its stdin close and stops Spark in its shutdown hook, so the command does not
    wait for ``spark.stop()`` (0.7-1 s, mostly PySpark's accumulator server poll), unless
    the JVM writes the class archive, which needs the wait."""
    from .replay.spark.session import stop_session, writes_class_archive

    if not writes_class_archive():
        return
    if progress:
        sys.stdout.flush()
        print("saving the JVM's class archive for faster Spark starts (once per Spark installation)...",
              file=sys.stderr, flush=True)
    stop_session(spark)


def _demo(args: argparse.Namespace) -> int:
    if args.library:
        return _library_demo()
    from .replay.generate import GeneratorConfig, generate
    from .replay.spark.job import run_replay
    from .replay.progress import Progress
    from .replay.spark.session import build_session
    from .replay.settings import ReplaySettings
    from .replay.summary import format_summary

    enabled = False if args.quiet else None
    with tempfile.TemporaryDirectory(prefix="mledger-demo-") as tmp:
        base = args.keep or tmp
        events_dir, out_dir = os.path.join(base, "events"), os.path.join(base, "out")
        cfg = GeneratorConfig(topics=4, partitions=3, events=args.events, seed=args.seed, max_entries_per_ledger=2_000)
        print(f"1/2 generating about {cfg.events:,} events for {cfg.topics} topics x {cfg.partitions} partitions "
              f"in {events_dir}")
        with Progress(cfg.events, "generate", enabled=enabled) as bar:
            generated = generate(events_dir, cfg, bar)
        print(f"    {generated.events:,} events: " + ", ".join(f"{k} {v:,}" for k, v in generated.rows.items()))
        print(f"2/2 replaying them on Spark ({args.master}); starting the session...")
        spark = build_session(args.master, write_class_archive=True)
        try:
            summary = run_replay(spark, events_dir, out_dir, ReplaySettings(), progress=not args.quiet)
            print()
            print(format_summary(summary))
        finally:
            _stop(spark, not args.quiet)
        if not args.keep:
            print("(the demo's files were in a temporary directory; --keep DIR keeps them)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mledger", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="generate a small data set, replay it on Spark, print the summary")
    demo.add_argument("--library", action="store_true", help="the library tour instead (no Spark)")
    demo.add_argument("--events", type=int, default=DEMO_EVENTS, help=f"events to generate ({DEMO_EVENTS:,})")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--master", default="local[*]")
    demo.add_argument("--keep", metavar="DIR", help="keep the events and outputs in DIR")
    demo.add_argument("--quiet", action="store_true", help="no progress display")

    gen = sub.add_parser("generate", help="write synthetic produced/acked/cancelled/subscriptions logs")
    gen.add_argument("out", help="output directory (its log directories are replaced)")
    gen.add_argument("--quiet", action="store_true", help="no progress display")
    _add_generate_options(gen)

    rep = sub.add_parser("replay", help="replay event logs through mledger cursors")
    rep.add_argument("events", help="directory with produced/, acked/, cancelled/ [, subscriptions/]")
    rep.add_argument("out", help="output directory: cursors/, anomalies/, partitions/ (Parquet)")
    rep.add_argument("--master", default="local[*]", help="Spark master (local[*])")
    rep.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                     help="a persistence or replay setting, e.g. max_unacked_ranges_to_persist=1000")
    rep.add_argument("--emit-state", action="store_true", help="put the serialized cursor state in the output")
    rep.add_argument("--single-process", action="store_true", help="replay in this process, without Spark")
    rep.add_argument("--partitions", type=int, default=None, help="Spark shuffle partitions (8 x cores)")
    rep.add_argument("--driver-memory", default="2g", help="driver JVM memory for local masters (2g)")
    rep.add_argument("--spark-logs", action="store_true", help="show Spark's own log output")
    rep.add_argument("--quiet", action="store_true", help="no progress display")

    rpt = sub.add_parser("report", help="render a replay output as an HTML page with PNG charts")
    from .report import add_report_arguments

    add_report_arguments(rpt)

    args = parser.parse_args(argv)
    try:
        if args.command == "report":
            from .report import run_report

            return run_report(args)
        if args.command == "demo":
            return _demo(args)
        if args.command == "generate":
            return _generate(args)
        return _replay(args)
    except Exception as exc:  # one line for the user; the types below are the expected ones
        from .errors import MLedgerError

        if isinstance(exc, (MLedgerError, ValueError, OSError)) or type(exc).__name__ in (
            "PythonException", "AnalysisException", "Py4JJavaError"
        ):
            print(f"mledger {args.command}: error: {_short(exc)}", file=sys.stderr)
            return 2
        raise


def _short(exc: BaseException) -> str:
    """The useful line of an error (a Python worker's exception inside a Spark error)."""
    text = str(exc)
    for marker in ("EventOrderError: ", "InputSchemaError: ", "TopicKeyCollisionError: "):
        if marker in text:
            return marker + text.split(marker, 1)[1].split("\n", 1)[0]
    return text.split("\n", 1)[0] if len(text) > 2000 else text


if __name__ == "__main__":
    sys.exit(main())
