"""Small combinators over :class:`concurrent.futures.Future`: a value now, or the next step of
one that completes later, on whichever thread completes it.

Work that may run on a worker (a password check) hands its callers a future; the callers that
can answer at once (a token, a certificate) hand back one already settled, so an event loop
sees one shape either way and never waits.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

__all__ = ["InlineExecutor", "chain", "settled"]

T = TypeVar("T")
R = TypeVar("R")


def settled(fn: Callable[..., T], *args: object) -> Future[T]:
    """A future already holding ``fn(*args)``, or the exception it raised (any ``Exception``).
    Runs ``fn`` now, on the caller's thread."""
    future: Future[T] = Future()
    try:
        future.set_result(fn(*args))
    except Exception as exc:  # noqa: BLE001 - handed to whoever reads the future
        future.set_exception(exc)
    return future


class InlineExecutor(Executor):
    """An executor that runs each task at once on the submitting thread (:func:`settled`).

    Background work (a managed ledger's trimming passes) then happens at the same point of
    every run, not when a worker thread gets to it: a deterministic broker's factory uses it, and
    the crash tests, whose write ``n`` must be the same write in every run."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        return settled(lambda: fn(*args, **kwargs))


def chain(future: Future[T], step: Callable[[Future[T]], R]) -> Future[R]:
    """A future of ``step(future)`` once ``future`` is done (its result, or the exception
    ``step`` raises). ``step`` runs on the thread that completes ``future``, or now when it is
    done already: it must not block. The future returned cannot be cancelled (``cancel()``
    answers False): ``step`` always runs."""
    out: Future[R] = Future()
    out.set_running_or_notify_cancel()  # running: a reader's cancel() cannot strand ``done``

    def done(finished: Future[T]) -> None:
        try:
            out.set_result(step(finished))
        except Exception as exc:  # noqa: BLE001 - handed to whoever reads the future
            out.set_exception(exc)

    future.add_done_callback(done)
    return out
