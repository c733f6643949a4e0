"""The mledger command: generate, prepare, replay, report, demo and capture.

mledger generate OUT          synthetic event logs (a prepared log; --raw for raw logs)
mledger prepare RAW OUT       raw event logs into a prepared log (Spark, or in this process)
mledger replay INPUT OUT      replay a prepared (or raw) log through mledger's broker and cursors
mledger report OUT            an HTML report of a replay's outputs
mledger demo                  generate a small data set, replay it on Spark, print the summary
mledger capture OUT ...       capture a live Pulsar cluster as raw logs (readers + stats polls)
mledger watch ...             every subscription's restart risk on a live cluster, continuously
mledger tokens COMMAND        JWT keys and tokens, as `pulsar tokens` (create-secret-key, create, ...)
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..replay import ReplaySettings

DEMO_EVENTS = 400_000


def _library_demo() -> int:
    """Append, ack out of order, crash-free restart: what a cursor keeps and persists."""
    from ..broker import open_broker
    from ..core import ManagedLedgerConfig
    from ..managed_ledger import InitialPosition

    with tempfile.TemporaryDirectory(prefix="mledger-demo-") as data_dir:
        config = ManagedLedgerConfig(max_entries_per_ledger=1_000)
        opened = open_broker(data_dir)
        ml = opened.factory.open("public/default/persistent/orders", config)
        cursor = ml.open_cursor("billing", InitialPosition.EARLIEST)
        started = time.perf_counter()
        positions = ml.add_entries([b"order-%d" % i for i in range(5_000)])
        print(
            f"appended {len(positions):,} entries over {len(ml.ledger_infos())} ledgers "
            f"in {time.perf_counter() - started:.2f} s"
        )
        entries = cursor.read_entries(2_000)
        print(f"read {len(entries):,} entries; read position {cursor.read_position}")
        cursor.delete(positions[10:1500:3])  # out-of-order acks leave holes
        cursor.mark_delete(positions[4], {"dedup-seq": 41})
        print(
            f"mark-delete {cursor.mark_delete_position}, "
            f"{cursor.total_non_contiguous_deleted_messages_range()} ack ranges, "
            f"backlog {cursor.number_of_entries_in_backlog():,}"
        )
        opened.close()

        opened = open_broker(data_dir)
        ml = opened.factory.open("public/default/persistent/orders", config)
        cursor = ml.get_cursor("billing")
        holes = cursor.individually_deleted_messages()
        print(
            f"after restart: mark-delete {cursor.mark_delete_position}, {len(holes)} ack ranges, "
            f"backlog {cursor.number_of_entries_in_backlog():,}, properties {cursor.properties}"
        )
        print(f"first ranges: {str(holes)[:80]}...")
        opened.close()
    return 0


# -- generate -------------------------------------------------------------------------------------
_GENERATE_HELP = {
    "topics": "topics",
    "partitions": "partitions per topic (0: non-partitioned topics)",
    "events": "about this many events in all",
    "seed": "random seed (the same seed writes the same logs)",
    "subscriptions": "declared subscriptions per topic",
    "format": "file format of raw logs (with --raw)",
}


def _add_generate_options(p: argparse.ArgumentParser) -> None:
    from ..replay import GeneratorConfig

    defaults = GeneratorConfig()
    for f in dataclasses.fields(GeneratorConfig):
        value = getattr(defaults, f.name)
        flag = "--" + f.name.replace("_", "-")
        what = _GENERATE_HELP.get(f.name, f.name.replace("_", " "))
        if f.name == "raw":
            p.add_argument(
                flag,
                action="store_true",
                help="write raw produced/acked/cancelled/subscriptions logs (for trying prepare) "
                "instead of a prepared log",
            )
        elif f.name == "format":
            p.add_argument(flag, choices=["parquet", "jsonl", "csv"], default=value, help=f"{what} (default {value})")
        else:
            kind = type(value)
            p.add_argument(
                flag, type=kind, default=value, metavar=kind.__name__.upper(), help=f"{what} (default {value})"
            )


def _generate(args: argparse.Namespace) -> int:
    from ..replay import GeneratorConfig, Progress, generate

    names = GeneratorConfig.option_names()
    cfg = GeneratorConfig(**{n: getattr(args, n) for n in names})
    started = time.perf_counter()
    with Progress(cfg.events, "generate", enabled=False if args.quiet else None) as bar:
        summary = generate(args.out, cfg, bar)
    took = time.perf_counter() - started
    rows = ", ".join(f"{k} {v:,}" for k, v in summary.rows.items())
    layout = "raw logs" if cfg.raw else "a prepared log"
    print(
        f"wrote {summary.events:,} events ({rows}) for {summary.topic_partitions} topic-partitions "
        f"to {args.out} as {layout} in {took:.1f} s"
    )
    return 0


# -- prepare --------------------------------------------------------------------------------------
def _estimated_rows(plan: object) -> int:
    """Rows of a raw input: Parquet footers' counts, text files at ~60 bytes per row."""
    from ..replay import InputPlan

    assert isinstance(plan, InputPlan)
    text = [t.path for t in plan.tasks if t.rows < 0]
    sizes = sum(info.size or 0 for info in plan.filesystem.get_file_info(text)) if text else 0
    return plan.known_rows + sizes // 60


def _prepare(args: argparse.Namespace) -> int:
    from ..replay import (
        IN_PROCESS_ROWS,
        Progress,
        check_input_dir,
        check_output_dir,
        is_prepared,
        plan_inputs,
        prepare_in_process,
    )

    check_input_dir(args.raw)
    if is_prepared(args.raw):
        raise ValueError(f"{args.raw}: already a prepared log; replay it directly")
    check_output_dir(args.out, args.raw, what="prepared log")
    started = time.perf_counter()
    plan = plan_inputs(args.raw)  # every file checked before any JVM starts
    rows = _estimated_rows(plan)
    in_process = args.single_process or (args.master is None and rows < IN_PROCESS_ROWS)
    if in_process:
        how = "in this process"
        with Progress(0, "prepare", enabled=False if args.quiet else None) as bar:
            manifest = prepare_in_process(plan, args.out, bar)
    else:
        from ..replay.spark import build_session, executor_path, prepare_on_spark

        master = args.master or "local[*]"
        how = f"on Spark ({master})"
        if not args.quiet:
            print(f"preparing about {rows:,} events {how}; starting the session...", file=sys.stderr, flush=True)
        spark = build_session(
            master, quiet=not args.spark_logs, driver_memory=args.driver_memory, write_class_archive=True
        )
        try:
            manifest = prepare_on_spark(spark, plan, executor_path(args.out), args.partitions, not args.quiet)
        finally:
            _stop(spark, not args.quiet)
    took = time.perf_counter() - started
    print(
        f"prepared {manifest.events:,} events of {len(manifest.partitions):,} topic-partitions {how} "
        f"in {took:.1f} s: {args.out}"
    )
    return 0


# -- replay ---------------------------------------------------------------------------------------
def _replay(args: argparse.Namespace) -> int:
    from ..replay import (
        ReplaySettings,
        SweepSummary,
        check_input_dir,
        check_output_dir,
        format_summary,
        format_sweep,
        is_prepared,
        open_prepared,
        variants,
    )

    # Everything that can be checked is checked before any JVM starts.
    if args.defaults:  # the preset first, --set on top of it
        args.settings = [f"defaults={args.defaults}", *args.settings]
    base = ReplaySettings.from_pairs(args.settings)
    settings = base.with_changes(emit_state=args.emit_state or base.emit_state, tasks=args.tasks or base.tasks)
    fixed = [p.partition("=")[0].strip() for p in args.settings]
    variants(settings, args.sweep, fixed)
    if args.explain and args.sweep:
        raise ValueError("--explain explains one setting: leave out --sweep (or --set the value to explain)")
    check_input_dir(args.input)
    check_output_dir(args.out, args.input)
    progress = not args.quiet
    if args.single_process:
        from ..replay import run_single_process

        summary = run_single_process(
            args.input, args.out, settings, progress=progress, sweep=args.sweep, fixed=fixed, prepared=args.prepared
        )
    else:
        from ..replay import plan_inputs

        source: object
        if is_prepared(args.input):
            if args.prepared:
                raise ValueError(f"--prepared {args.prepared}: {args.input} is already a prepared log")
            source = open_prepared(args.input)
        else:
            if args.prepared:
                check_output_dir(args.prepared, args.input, what="prepared log")
                check_output_dir(args.out, args.prepared)
            source = plan_inputs(args.input)
            if progress:
                print(f"{args.input} holds raw logs: preparing them first", file=sys.stderr, flush=True)
        from ..replay.spark import SCHEDULER_JVM_OPTIONS, SHORT_JOB_JIT_OPTIONS, build_session, run_replay

        # A replay of a prepared log leaves the JVM nothing but scheduling; a prepare sorts in it.
        options = SCHEDULER_JVM_OPTIONS if not args.prepared and is_prepared(args.input) else SHORT_JOB_JIT_OPTIONS
        spark = build_session(
            args.master,
            quiet=not args.spark_logs,
            driver_memory=args.driver_memory,
            write_class_archive=True,
            jvm_options=options,
        )
        try:
            summary = run_replay(
                spark,
                source,
                args.out,
                settings,
                progress=progress,
                sweep=args.sweep,
                fixed=fixed,
                prepared=args.prepared,
                prepare_partitions=args.partitions,
            )
            print(format_sweep(summary) if isinstance(summary, SweepSummary) else format_summary(summary))
        finally:
            _stop(spark, progress)
        _explain(args, settings, fixed)
        return 0
    print(format_sweep(summary) if isinstance(summary, SweepSummary) else format_summary(summary))
    _explain(args, settings, fixed)
    return 0


def _explain(args: argparse.Namespace, settings: ReplaySettings, fixed: list[str]) -> None:
    """``--explain SUBSCRIPTION``: the per-rule answers, from a replay of the same log in this process."""
    if not args.explain:
        return
    from ..replay import explain_replay, format_explanations

    source = args.prepared or args.input
    print(format_explanations(args.explain, explain_replay(source, args.explain, settings, fixed)))


def _stop(spark: SparkSession, progress: bool) -> None:
    """End the command's session. The outputs are written and this process exits next: its
    JVM sees its stdin close and stops Spark in its shutdown hook, so the command does not
    wait for spark.stop() (0.7-1 s, mostly PySpark's accumulator server poll), unless the JVM
    writes the class archive, which needs the wait."""
    from ..replay.spark import stop_session, writes_class_archive

    if not writes_class_archive():
        return
    if progress:
        sys.stdout.flush()
        print(
            "saving the JVM's class archive for faster Spark starts (once per Spark installation)...",
            file=sys.stderr,
            flush=True,
        )
    stop_session(spark)


def _demo(args: argparse.Namespace) -> int:
    if args.library:
        return _library_demo()
    from ..replay import (
        PLANTED_ANOMALIES,
        GeneratorConfig,
        Progress,
        ReplaySettings,
        ReplaySummary,
        format_summary,
        generate,
        plan_inputs,
    )
    from ..replay.spark import build_session, run_replay

    enabled = False if args.quiet else None
    with tempfile.TemporaryDirectory(prefix="mledger-demo-") as tmp:
        base = args.keep or tmp
        raw_dir, prepared_dir = os.path.join(base, "events"), os.path.join(base, "prepared")
        out_dir = os.path.join(base, "out")

        def where(path: str) -> str:  # a temporary directory is gone by the time one reads this
            return f" {path}" if args.keep else " a temporary directory"

        cfg = GeneratorConfig(
            topics=4, partitions=3, events=args.events, seed=args.seed, max_entries_per_ledger=2_000, raw=True
        )
        print(
            f"1/3 generating about {cfg.events:,} raw events for {cfg.topics} topics x {cfg.partitions} partitions "
            f"in{where(raw_dir)}"
        )
        with Progress(cfg.events, "generate", enabled=enabled) as bar:
            generated = generate(raw_dir, cfg, bar)
        print(f"    {generated.events:,} events: " + ", ".join(f"{k} {v:,}" for k, v in generated.rows.items()))
        print(
            f"2/3 preparing them on Spark ({args.master}) into{where(prepared_dir)}, 3/3 replaying; "
            "starting the session..."
        )
        plan = plan_inputs(raw_dir)
        spark = build_session(args.master, write_class_archive=True)
        try:
            summary = run_replay(spark, plan, out_dir, ReplaySettings(), progress=not args.quiet, prepared=prepared_dir)
            assert isinstance(summary, ReplaySummary)
            print()
            kept = summary if args.keep else dataclasses.replace(summary, out_dir="")
            print(format_summary(kept, planted=PLANTED_ANOMALIES))
        finally:
            _stop(spark, not args.quiet)
        if not args.keep:
            print("(the demo's files were in a temporary directory; --keep DIR keeps them)")
    return 0


class _CommandParser(argparse.ArgumentParser):
    """A subcommand's parser whose options are added by :meth:`configure`, which
    :func:`build_parser` calls for the command being run only: building ``mledger report``'s
    options must not import what ``mledger standalone`` does not need (each command works with
    only its own extra installed)."""

    def __init__(self, *args: Any, command: _Command | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._command = command
        self._configured = False

    def configure(self) -> None:
        """Add the command's options (once); exit 2 naming the extra when its modules are missing."""
        if self._command is None or self._configured:
            return
        self._configured = True
        try:
            _load(self._command.options)(self)
        except ModuleNotFoundError as exc:
            if _is_own_module(exc):
                raise
            self.exit(2, f"{self.prog}: error: {_missing_extra(exc, self._command.extra)}\n")


def _demo_options(demo: argparse.ArgumentParser) -> None:
    demo.add_argument("--library", action="store_true", help="the library tour instead (no Spark)")
    demo.add_argument("--events", type=int, default=DEMO_EVENTS, help=f"events to generate ({DEMO_EVENTS:,})")
    demo.add_argument("--seed", type=int, default=7, help="random seed (7)")
    demo.add_argument("--master", default="local[*]", help="Spark master (local[*])")
    demo.add_argument("--keep", metavar="DIR", help="keep the events, the prepared log and the outputs in DIR")
    demo.add_argument("--quiet", action="store_true", help="no progress display")


def _generate_options(gen: argparse.ArgumentParser) -> None:
    gen.add_argument("out", help="output directory (an earlier prepared log or raw logs there are replaced)")
    gen.add_argument("--quiet", action="store_true", help="no progress display")
    _add_generate_options(gen)


def _prepare_options(prep: argparse.ArgumentParser) -> None:
    prep.add_argument("raw", help="directory with produced/, acked/ [, cancelled/, subscriptions/]")
    prep.add_argument("out", help="the prepared log's directory (new, empty, or an earlier prepared log)")
    prep.add_argument("--master", default=None, help="Spark master (default: local[*] for large inputs)")
    prep.add_argument("--single-process", action="store_true", help="prepare in this process, without Spark")
    prep.add_argument("--partitions", type=int, default=None, help="Spark shuffle partitions (8 x cores)")
    prep.add_argument("--driver-memory", default="2g", help="driver JVM memory for local masters (2g)")
    prep.add_argument("--spark-logs", action="store_true", help="show Spark's own log output")
    prep.add_argument("--quiet", action="store_true", help="no progress display")


def _replay_options(rep: argparse.ArgumentParser) -> None:
    rep.add_argument(
        "input", help="a prepared log, or a directory with produced/, acked/ [, cancelled/, subscriptions/]"
    )
    rep.add_argument("out", help="output directory: cursors/, anomalies/, partitions/ (Parquet), settings.json")
    rep.add_argument("--master", default="local[*]", help="Spark master (local[*])")
    rep.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a persistence or replay setting, e.g. max_unacked_ranges_to_persist=1000 (repeatable)",
    )
    rep.add_argument(
        "--defaults",
        default=None,
        metavar="PRESET",
        help="Pulsar's defaults of a release: pulsar-3.0, pulsar-4.0, pulsar-4.1 or pulsar-newest "
        "(--set applies on top; --sweep defaults=pulsar-4.0,pulsar-newest compares them)",
    )
    rep.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="replay under each value (repeatable: every combination), reading the events once",
    )
    rep.add_argument(
        "--prepared", metavar="DIR", default=None, help="with raw input: keep the prepared log in DIR for later replays"
    )
    rep.add_argument("--emit-state", action="store_true", help="put the serialized cursor state in the output")
    rep.add_argument(
        "--explain",
        metavar="SUBSCRIPTION",
        default=None,
        help="after the replay, say per Pulsar rule what a crash and an unload at the end would redeliver for "
        "this subscription, with the ranges (replays once more in this process; no --sweep)",
    )
    rep.add_argument("--single-process", action="store_true", help="replay in this process, without Spark")
    rep.add_argument("--tasks", type=int, default=None, help="Spark tasks (one per core)")
    rep.add_argument(
        "--partitions", type=int, default=None, help="with raw input: the prepare's shuffle partitions (8 x cores)"
    )
    rep.add_argument("--driver-memory", default="2g", help="driver JVM memory for local masters (2g)")
    rep.add_argument("--spark-logs", action="store_true", help="show Spark's own log output")
    rep.add_argument("--quiet", action="store_true", help="no progress display")


@dataclasses.dataclass(frozen=True)
class _Command:
    """One ``mledger`` command: the extra it needs, its help, and what adds its options and runs
    it: a function, or ``"module:name"`` (relative to this package) imported only when the command
    is the one being run, so each command works with only its own extra installed."""

    extra: str
    help: str
    options: Callable[[argparse.ArgumentParser], None] | str
    run: Callable[[argparse.Namespace], int] | str
    description: str | None = None


def _load(target: Callable[[Any], Any] | str) -> Callable[[Any], Any]:
    if not isinstance(target, str):
        return target
    module, _, name = target.partition(":")
    loaded: Callable[[Any], Any] = getattr(importlib.import_module(module, __package__), name)
    return loaded


_COMMANDS = {
    "capture": _Command(
        extra="capture",
        options="._capture:add_capture_arguments",
        run="._capture:run_capture",
        help="capture a live Pulsar cluster as raw logs (readers and stats polls)",
        description="Capture the entries and subscriptions of topics (or a namespace) of any "
        "Pulsar cluster as the replay's raw logs, through a non-durable reader per "
        "topic-partition and polls of the subscriptions' internal stats.",
    ),
    "demo": _Command(
        extra="spark",
        options=_demo_options,
        run=_demo,
        help="generate a small data set, replay it on Spark, print the summary",
        description="Generate raw logs, prepare them on Spark and replay them (the main job "
        "on local defaults), then print the summary.",
    ),
    "generate": _Command(
        extra="replay",
        options=_generate_options,
        run=_generate,
        help="write synthetic event logs (a prepared log, or raw logs with --raw)",
        description="Write seeded synthetic event logs: a prepared log by default, ready to "
        "replay; --raw writes the produced/acked/cancelled/subscriptions logs instead.",
    ),
    "prepare": _Command(
        extra="replay",
        options=_prepare_options,
        run=_prepare,
        help="lay raw event logs out by topic-partition in replay order",
        description="Turn raw event logs (Parquet, JSON Lines, CSV, compressed text; local "
        "or remote) into a prepared log: one directory per topic-partition in "
        "replay order, with a manifest. On Spark with one shuffle; small inputs "
        f"(under {2_000_000:,} rows) in this process unless --master is given.",
    ),
    "replay": _Command(
        extra="replay",
        options=_replay_options,
        run=_replay,
        help="replay event logs through mledger's broker and cursors",
        description="Replay a prepared log (or raw logs, prepared first) through mledger's "
        "broker, subscriptions and cursors, one stream per topic-partition, on "
        "Spark (Spark only schedules; Python tasks read their own files) or in "
        "this process.",
    ),
    "report": _Command(
        extra="report",
        options="..report:add_report_arguments",
        run="..report:run_report",
        help="render a replay output as an HTML page with PNG charts",
    ),
    "standalone": _Command(
        extra="server",
        options="..standalone:add_standalone_arguments",
        run="..standalone:run_standalone",
        help="a Pulsar broker: binary protocol on :6650, REST admin on :8080",
    ),
    "tokens": _Command(  # the options are argparse only: PyJWT is imported when a command runs
        extra="server",
        options="._tokens:add_tokens_arguments",
        run="._tokens:run_tokens",
        help="JWT secret keys, key pairs and tokens, as `pulsar tokens`",
    ),
    "watch": _Command(
        extra="watch",
        options="._watch:add_watch_arguments",
        run="._watch:run_watch",
        help="every subscription's restart risk on a live Pulsar cluster, continuously (read-only)",
        description="Poll a live Pulsar cluster as mledger capture does and feed every subscription's "
        "cursor model as it goes: per subscription the persisted state size, when it passes the persist "
        "and frame limits at its growth, what a crash would redeliver now, and a status (LOSING_STATE, "
        "AT_RISK, OK). --once prints one round; otherwise Prometheus metrics on /metrics.",
    ),
}
"""Every ``mledger`` command. The extras are the ones docs/index.md names; prepare and replay need
``spark`` too unless they run in this process."""


def _is_own_module(exc: ModuleNotFoundError) -> bool:
    """A missing mledger module is a bug, not a missing extra."""
    return (exc.name or "").split(".")[0] == "mledger"


def _missing_extra(exc: ModuleNotFoundError, extra: str) -> str:
    return f"{exc.name or exc} is not installed; this command needs pip install 'mledger[{extra}]'"


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``mledger`` parser for the command line ``argv`` (default ``sys.argv[1:]``). Only the
    options of the command ``argv`` names are built, so parsing it imports only that command's
    modules: ``mledger standalone`` never imports the replay, pyarrow, pandas or matplotlib.
    ``mledger --help`` lists every command without building any."""
    parser = argparse.ArgumentParser(
        prog="mledger", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_CommandParser)
    for name, command in _COMMANDS.items():
        sub.add_parser(name, command=command, help=command.help, description=command.description)
    words = sys.argv[1:] if argv is None else argv
    named = next((word for word in words if not word.startswith("-")), None)  # mledger has no options
    chosen = sub.choices.get(named) if named is not None else None
    if isinstance(chosen, _CommandParser):
        chosen.configure()
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser(argv).parse_args(argv)
    try:
        return _load(_COMMANDS[args.command].run)(args)
    except ModuleNotFoundError as exc:
        if _is_own_module(exc):
            raise
        print(f"mledger {args.command}: error: {_missing_extra(exc, _COMMANDS[args.command].extra)}", file=sys.stderr)
        return 2
    except Exception as exc:  # one line for the user; the types below are the expected ones
        from ..core import MLedgerError

        if isinstance(exc, (MLedgerError, ValueError, OSError)) or type(exc).__name__ in (
            "PythonException",
            "AnalysisException",
            "Py4JJavaError",
        ):
            print(f"mledger {args.command}: error: {_short(exc)}", file=sys.stderr)
            return 2
        raise


def _short(exc: BaseException) -> str:
    """The useful line of an error (a Python worker's exception inside a Spark error)."""
    text = str(exc)
    for marker in (
        "EventOrderError: ",
        "InputSchemaError: ",
        "TopicKeyCollisionError: ",
        "ManifestMismatchError: ",
        "PreparedLayoutError: ",
    ):
        if marker in text:
            return marker + text.split(marker, 1)[1].split("\n", 1)[0]
    return text.split("\n", 1)[0] if len(text) > 2000 else text


if __name__ == "__main__":
    sys.exit(main())
