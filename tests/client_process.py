"""A ``pulsar-client`` workload in a child process, so that a crash of the official C++-based
client fails one test instead of killing the pytest run.

The C++ client can dereference a freed message when a consumer is closed while its connection
is busy (apache/pulsar-client-cpp#453: SIGSEGV in ``Consumer.close``/``unsubscribe``); in the
pytest process that ends the whole run. :func:`in_child` runs a module-level function in a
``spawn`` child (a fresh interpreter: no forked client threads) and returns its result, raising
:class:`ClientCrashed` when the child died of a signal; :func:`retry_client_segfault` runs an
attempt again, once, when the client segfaulted, with a warning naming the issue.
"""

from __future__ import annotations

import multiprocessing
import signal
import time
import traceback
import warnings
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar

T = TypeVar("T")

CLIENT_SEGFAULT_ISSUE = "apache/pulsar-client-cpp#453"


class ClientCrashed(Exception):
    """The child running the client workload died of ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"the pulsar-client workload's process died of {signal.Signals(signum).name}")
        self.signum = signum


def _child(conn: Connection, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        conn.send(("ok", function(*args)))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises it there
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def in_child(function: Callable[..., T], *args: Any, timeout: float = 240.0) -> T:
    """``function(*args)`` run in a spawned child process (``function`` must be importable by
    name, its arguments and result picklable). An exception in the child is raised here as an
    AssertionError carrying its traceback; a child killed by a signal raises
    :class:`ClientCrashed`; one still running after ``timeout`` seconds is killed and fails."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(child, function, args), name="pulsar-client-workload")
    process.start()
    child.close()
    try:
        deadline = time.monotonic() + timeout
        while not parent.poll(0.5):
            if not process.is_alive():
                break
            assert time.monotonic() < deadline, f"the client workload did not end within {timeout} s"
        try:
            outcome = parent.recv() if parent.poll() else None
        except EOFError:  # the child died before it sent anything
            outcome = None
        process.join(timeout=30)
    finally:
        if process.is_alive():
            process.kill()
            process.join()
        parent.close()
    if process.exitcode is not None and process.exitcode < 0:
        raise ClientCrashed(-process.exitcode)
    assert outcome is not None, f"the client workload's process ended without a result (exit code {process.exitcode})"
    status, value = outcome
    assert status == "ok", f"the client workload failed in its process:\n{value}"
    return value


def retry_client_segfault(attempt: Callable[[int], T]) -> T:
    """``attempt(0)``; if the client segfaulted in it (:class:`ClientCrashed` with SIGSEGV),
    a warning naming :data:`CLIENT_SEGFAULT_ISSUE` and ``attempt(1)``, whose crash fails. Each
    attempt must start from nothing (its own broker), for the crashed one left its work half
    done."""
    try:
        return attempt(0)
    except ClientCrashed as crash:
        if crash.signum != signal.SIGSEGV:
            raise
        warnings.warn(
            f"the pulsar-client workload segfaulted ({CLIENT_SEGFAULT_ISSUE}, the C++ client closing a "
            "consumer while its connection is busy); retried once on a fresh broker",
            stacklevel=2,
        )
        return attempt(1)
