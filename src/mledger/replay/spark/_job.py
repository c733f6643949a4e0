"""The Spark replay: Spark schedules Python tasks; each reads its own topic-partitions' files.

``run_replay(spark, input, out_dir, settings)`` on a prepared log (:mod:`..layout`):

1. the driver reads and checks the manifest (every listed file there, of its size, and
   nothing else) and places the topic-partitions on tasks balanced by size
   (:func:`~mledger.replay._tasks.plan_tasks`; one task per core unless ``settings.tasks``);
2. ``sparkContext.parallelize(tasks, len(tasks)).mapPartitions(run)`` runs one Python task per
   placement: it reads its topic-partitions' Parquet files with pyarrow, streams them through
   the replay engine in bounded batches (every sweep combination at once) and writes its own
   output part files (:func:`~mledger.replay._tasks.run_task`), returning only their names;
3. the driver keeps exactly the parts of the attempts whose results it collected
   (:func:`~mledger.replay._tasks.commit_outputs`; retries and speculation leave nothing
   behind), writes ``settings.json`` and reads the summary back from the outputs.

The JVM reads no event, sorts nothing, shuffles nothing and converts no row: it starts, ships
a few hundred bytes per task and schedules. Given raw logs, ``run_replay`` first prepares them
with one shuffle (:mod:`.prepare`) into ``prepared`` or a temporary directory beside the
outputs (removed afterwards).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from .._checks import OutputPathError, check_input_dir, check_output_dir
from .._engine import ModelFactory
from .._inputs import InputPlan, filesystem_for, plan_inputs
from .._layout import PreparedLog, is_prepared, open_prepared
from .._local import finish_summary, remove_tree, temporary_prepared_dir, unkeyed_events
from .._model import SubscriptionSpec
from .._settings import ReplaySettings
from .._summary import ReplaySummary, SweepSummary
from .._sweep import Variant, variants
from .._tasks import ReplayTask, TaskResult, commit_outputs, plan_tasks, run_task, start_outputs, write_extra_anomalies
from ._prepare import executor_path, prepare_on_spark
from ._stages import StageProgress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _run_tasks(
    root: str,
    chosen: Sequence[Variant],
    subscriptions: Mapping[str, Sequence[SubscriptionSpec]],
    out_dir: str,
    model_factory: ModelFactory | None,
    tasks: Iterator[ReplayTask],
) -> Iterator[TaskResult]:
    """The executors' side: every task of this Spark partition (there is one)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = f"a{context.taskAttemptId()}" if context is not None else "a0"
    for task in tasks:
        yield run_task(root, task, chosen, subscriptions, out_dir, attempt, model_factory)


def prepared_on_spark(
    spark: SparkSession,
    source: str | PreparedLog | InputPlan,
    out_dir: str,
    prepared: str | None,
    progress: bool,
    prepare_partitions: int | None = None,
) -> tuple[PreparedLog, bool]:
    """The prepared log to replay: ``source`` itself, or raw logs prepared on Spark into
    ``prepared`` or a temporary ``out_dir/_prepared``; (log, whether it is temporary)."""
    if isinstance(source, PreparedLog):
        return source, False
    if isinstance(source, str) and is_prepared(source):
        if prepared is not None:
            raise OutputPathError(f"--prepared {prepared}: {source} is already a prepared log")
        return open_prepared(source), False
    plan = source if isinstance(source, InputPlan) else plan_inputs(source)
    target = prepared or temporary_prepared_dir(out_dir)
    if prepared is None:
        fs, root = filesystem_for(out_dir)
        fs.create_dir(root, recursive=True)
    check_output_dir(target, plan.root, what="prepared log")
    if progress:
        print(
            f"preparing {plan.root} into {target} (one shuffle; --prepared DIR keeps it for later replays)",
            file=sys.stderr,
            flush=True,
        )
    prepare_on_spark(spark, plan, executor_path(target), prepare_partitions, progress)
    return open_prepared(target), prepared is None


def run_replay(
    spark: SparkSession,
    source: str | PreparedLog | InputPlan,
    out_dir: str,
    settings: ReplaySettings | None = None,
    progress: bool = False,
    model_factory: ModelFactory | None = None,
    sweep: Sequence[str] = (),
    fixed: Sequence[str] = (),
    prepared: str | None = None,
    prepare_partitions: int | None = None,
) -> ReplaySummary | SweepSummary:
    """Replay ``source`` on ``spark`` into ``out_dir/{cursors,anomalies,partitions}``.

    ``source``: a prepared log (path or opened), or raw logs (path or a checked
    :class:`~mledger.replay.InputPlan`), prepared first (see the module docstring).
    Paths and files are checked before any Spark job runs. ``sweep`` / ``fixed``: see
    :func:`~mledger.replay.variants`. Returns the summary (a
    :class:`~mledger.replay.SweepSummary` with a sweep).
    """
    settings = settings or ReplaySettings()
    started = time.perf_counter()
    chosen = variants(settings, sweep, fixed)
    if isinstance(source, str):
        check_input_dir(source)
    where = source if isinstance(source, str) else source.root
    check_output_dir(out_dir, where)
    log, temporary = prepared_on_spark(spark, source, out_dir, prepared, progress, prepare_partitions)
    tasks = plan_tasks(log.manifest.partitions, settings.tasks or spark.sparkContext.defaultParallelism)
    start_outputs(out_dir)
    results: list[TaskResult] = []
    if tasks:
        run = partial(
            _run_tasks, executor_path(log.root), chosen, log.subscriptions(), executor_path(out_dir), model_factory
        )
        rdd = spark.sparkContext.parallelize(tasks, len(tasks)).mapPartitions(run)
        with StageProgress(spark, "replay (spark)", progress):
            results = rdd.collect()
    extra = write_extra_anomalies(out_dir, log.anomalies(), chosen)
    commit_outputs(out_dir, results, extra)
    if temporary:
        remove_tree(log.root)
    return finish_summary(
        out_dir, chosen, settings, time.perf_counter() - started, "spark", unkeyed_events(log.manifest.partitions)
    )


def main_submit(argv: list[str] | None = None) -> int:
    """``spark-submit ... submit_job.py INPUT OUT [--set K=V ...] [--sweep K=V1,V2 ...]
    [--emit-state] [--tasks N] [--prepared DIR] [--prepare-only]``.

    Uses the session spark-submit configured (master, resources); prints the summary.
    """
    import argparse

    from pyspark.sql import SparkSession

    from .._summary import format_summary, format_sweep

    parser = argparse.ArgumentParser(prog="submit_job.py", description="mledger event-log replay (spark-submit)")
    parser.add_argument("input", help="a prepared log, or raw logs (prepared first)")
    parser.add_argument("out", help="the output directory (with --prepare-only: the prepared log)")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--sweep", action="append", default=[], metavar="KEY=V1,V2")
    parser.add_argument("--emit-state", action="store_true")
    parser.add_argument("--tasks", type=int, default=None)
    parser.add_argument("--prepared", default=None, metavar="DIR")
    parser.add_argument("--prepare-only", action="store_true")
    args = parser.parse_args(argv)
    base = ReplaySettings.from_pairs(args.settings)
    settings = base.with_changes(emit_state=args.emit_state or base.emit_state, tasks=args.tasks or base.tasks)
    fixed = [p.partition("=")[0].strip() for p in args.settings]
    spark = SparkSession.builder.appName("mledger-replay").getOrCreate()
    try:
        if args.prepare_only:
            check_input_dir(args.input)
            check_output_dir(args.out, args.input, what="prepared log")
            manifest = prepare_on_spark(spark, plan_inputs(args.input), executor_path(args.out))
            print(f"prepared {manifest.events:,} events of {len(manifest.partitions):,} topic-partitions in {args.out}")
            return 0
        summary = run_replay(
            spark, args.input, args.out, settings, sweep=args.sweep, fixed=fixed, prepared=args.prepared
        )
    finally:
        spark.stop()
    print(format_sweep(summary) if isinstance(summary, SweepSummary) else format_summary(summary))
    sys.stdout.flush()
    return 0
