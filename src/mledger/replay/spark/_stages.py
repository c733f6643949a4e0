"""A progress display of a running Spark job's tasks (rich, on stderr, terminals only)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .._progress import Progress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class StageProgress:
    """Polls Spark's status tracker five times a second and shows the running stages' tasks."""

    def __init__(self, spark: SparkSession, label: str, enabled: bool) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._bar = Progress(0, label, unit="tasks", enabled=None if enabled else False)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mledger-stage-progress", daemon=True)
        self.enabled = self._bar.enabled

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            active = self._tracker.getActiveStageIds()
            done = total = running = 0
            for sid in active:
                info = self._tracker.getStageInfo(sid)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
                    running += info.numActiveTasks
            if active:
                self._bar.set_total(total)
                self._bar.update(done, f"stage {max(active)}, {running} running")

    def __enter__(self) -> StageProgress:  # noqa: PYI034 - final class
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._stop.set()
            self._thread.join()
        self._bar.close()
