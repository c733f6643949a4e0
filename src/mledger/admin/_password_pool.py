"""Password hashes verified off the event loop: a bounded pool of workers, threads or processes
by scheme.

Theory of operation
-------------------
An ``.htpasswd`` hash is made to be slow: bcrypt at cost 12 takes a quarter of a second of
CPU, SHA-512-crypt at its default rounds half a second. Verified on an event loop, one client
retrying a wrong password stalls every other client of that loop. :class:`PasswordPool` runs
each verification on one of at most ``workers`` threads, first come first served, so a CONNECT
or a request waits only behind other password checks, never the other way round.

A thread is enough only for a scheme that releases the GIL while it works. Measured (Python
3.11, libpass 1.9.4, bcrypt 5.0; a thread verifying in a loop, another sleeping 1 ms, how late
the sleeper wakes, p50): bcrypt 0.1 ms late (pyca/bcrypt's Rust code releases the GIL); APR1-MD5,
crypt (DES) and SHA-256/512-crypt 5.3 ms late, for they are passlib's pure Python and hold the
GIL, which a waiting thread gets back only at the interpreter's 5 ms switch interval: a loop
would still lose 5 ms at each wake-up. Those schemes run in a process pool of the same size
(``spawn``: forking a process that runs threads is unsafe), which the pool's thread waits on
without holding the GIL; their workers start on the first such check and live until
:meth:`PasswordPool.close`. ``{SHA}`` and plaintext hashes (one C digest or a comparison:
microseconds) stay on the threads. A process that dies is replaced once per check.

:class:`StoredHash` is one hash of the file with its scheme and an estimate of what verifying
it costs (:data:`MICROSECONDS_PER_UNIT`), which ranks the file's hashes: an unknown user is
checked against the costliest one (:func:`costliest`), so that the answer takes as long as a
wrong password and does not tell which user names exist.

Thread-safe. :meth:`PasswordPool.verify` never blocks; a worker runs the hash.
:meth:`PasswordPool.close` returns once the worker processes have exited (bounded).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "MICROSECONDS_PER_UNIT",
    "PasswordCheckStats",
    "PasswordPool",
    "StoredHash",
    "costliest",
    "default_password_check_workers",
]

MICROSECONDS_PER_UNIT: Mapping[str, float] = MappingProxyType(
    {
        "bcrypt": 60.0,  # per 2**cost: 246 ms at cost 12
        "sha512_crypt": 0.75,  # per round: 490 ms at passlib's 656,000
        "sha256_crypt": 0.7,  # per round: 370 ms at passlib's 535,000
        "apr_md5_crypt": 1000.0,  # fixed: 1,000 MD5 rounds in Python
        "des_crypt": 700.0,  # fixed: 25 DES rounds in Python
        "ldap_sha1": 1.0,
        "plaintext": 1.0,
    }
)
"""Estimated microseconds of one verification per unit of the scheme's cost (the units: 2**cost
for bcrypt, rounds for SHA-crypt, one otherwise), measured on one core with the versions named
in the module docstring. Only the order matters: it picks the costliest hash of a file."""

log = logging.getLogger("mledger.admin")

_CLOSE_TIMEOUT_S = 10.0
"""How long :meth:`PasswordPool.close` waits for the worker processes to exit: a check running
in one finishes first (a hash: under a second), a worker still starting up reads its stop
signal once started."""

_ON_THREADS = frozenset({"ldap_sha1", "plaintext"})
"""Schemes a thread verifies whatever the backend (microseconds); bcrypt too with pyca/bcrypt."""


def default_password_check_workers() -> int:
    """Half the CPU cores this process may run on, at least one: password checks never take
    every core from the event loops."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2
    return max(1, cores // 2)


def _handler(scheme: str) -> Any:
    import passlib.hash

    return getattr(passlib.hash, scheme)


def _rounds(scheme: str, text: str) -> int | None:
    try:
        rounds = getattr(_handler(scheme).from_string(text), "rounds", None)
    except (AttributeError, ValueError, TypeError):  # a malformed hash: verified as refused
        return None
    return rounds if isinstance(rounds, int) else None


@dataclass(frozen=True)
class StoredHash:
    """One hash of an ``.htpasswd`` file: its ``text``, the passlib ``scheme`` that reads it
    (``bcrypt``, ``apr_md5_crypt``, ``des_crypt``, ...), the estimated ``cost`` of verifying
    it in microseconds (ranking only) and whether a process must verify it
    (``in_process``: the scheme holds the GIL, see the module docstring)."""

    text: str
    scheme: str
    cost: float
    in_process: bool

    @classmethod
    def parse(cls, text: str) -> StoredHash:
        """The scheme and cost of ``text`` (passlib's ``htpasswd_context`` names the scheme; a
        hash it cannot read is plaintext there, as in Apache)."""
        from passlib.apache import htpasswd_context

        handler = htpasswd_context.identify(text, resolve=True, required=False)
        scheme = handler.name if handler is not None else "plaintext"
        rounds = _rounds(scheme, text)
        if scheme == "bcrypt":
            units = 2.0 ** (rounds or 0) if rounds is not None else 0.0
        elif scheme.startswith("sha") and scheme.endswith("_crypt"):
            units = float(rounds or 0)
        else:
            units = 1.0
        per_unit = MICROSECONDS_PER_UNIT.get(scheme, 0.0)
        return cls(text, scheme, per_unit * units, not _verified_on_threads(scheme))


def _verified_on_threads(scheme: str) -> bool:
    if scheme in _ON_THREADS:
        return True
    if scheme == "bcrypt":
        try:
            return bool(_handler("bcrypt").get_backend() == "bcrypt")  # pyca/bcrypt releases the GIL
        except Exception:  # noqa: BLE001 - no backend: verification fails, wherever it runs
            return False
    return False


def costliest(hashes: Iterable[StoredHash]) -> StoredHash | None:
    """The hash whose verification costs most (the first of equals); None for none."""
    best: StoredHash | None = None
    for stored in hashes:
        if best is None or stored.cost > best.cost:
            best = stored
    return best


@dataclass(frozen=True)
class PasswordCheckStats:
    """A snapshot of the password checks: ``workers`` (the bound), ``pending`` (submitted, not
    finished: waiting or running), ``verified`` (verifications done, by scheme) and
    ``refused`` (attempts the failure limiter refused without verifying)."""

    workers: int
    pending: int = 0
    verified: Mapping[str, int] = field(default_factory=dict)
    refused: int = 0


class PasswordPool:
    """Verifies password hashes on at most ``workers`` workers at once (see the module
    docstring). The workers start with the first check; :meth:`close` stops them (a later
    check starts new ones)."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workers = workers
        self._lock = threading.Lock()
        self._threads: ThreadPoolExecutor | None = None
        self._processes: ProcessPoolExecutor | None = None
        self._verified: Counter[str] = Counter()
        self._pending = 0

    def verify(self, stored: StoredHash, password: str) -> Future[bool]:
        """A future of whether ``password`` matches ``stored`` (False for a hash or password
        the scheme refuses); completed on a worker thread. Never blocks."""
        with self._lock:
            if self._threads is None:
                self._threads = ThreadPoolExecutor(self.workers, thread_name_prefix="mledger-password")
            try:
                future = self._threads.submit(self._run, stored, password)
            except RuntimeError as exc:  # shut down by a close() in another thread just now
                future = Future()
                future.set_exception(exc)
                return future
            self._pending += 1
        future.add_done_callback(self._ended)  # run, failed or cancelled by close()
        return future

    def _ended(self, future: Future[bool]) -> None:
        with self._lock:
            self._pending -= 1

    def _run(self, stored: StoredHash, password: str) -> bool:
        verify = _handler(stored.scheme).verify
        try:
            if stored.in_process:
                return self._in_process(verify, password, stored.text)
            return bool(verify(password, stored.text))
        except (ValueError, TypeError):  # a malformed hash, a password the scheme refuses
            return False
        finally:
            with self._lock:
                self._verified[stored.scheme] += 1

    def _in_process(self, verify: Callable[[str, str], bool], password: str, text: str) -> bool:
        for attempt in range(2):
            pool = self._process_pool()
            try:
                return bool(pool.submit(verify, password, text).result())
            except BrokenProcessPool:  # a worker died (killed): start new ones, once
                with self._lock:
                    if self._processes is pool:
                        self._processes = None
                pool.shutdown(wait=False)
                if attempt:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _process_pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._threads is None:  # closed while this check waited: start no processes
                raise RuntimeError("the password pool was closed")
            if self._processes is None:
                self._processes = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
            return self._processes

    def stats(self) -> PasswordCheckStats:
        """A snapshot of the counters (``refused`` is the limiter's: 0 here)."""
        with self._lock:
            return PasswordCheckStats(self.workers, self._pending, MappingProxyType(dict(self._verified)))

    def close(self, timeout: float = _CLOSE_TIMEOUT_S) -> None:
        """Stop the workers: checks not started are cancelled (their futures say so), running
        ones finish. Blocks until the worker processes have exited, at most ``timeout`` seconds
        (a check running in one finishes first); past it, logs a warning and returns while they
        finish. Idempotent; a later :meth:`verify` starts new workers."""
        with self._lock:
            threads, self._threads = self._threads, None
            processes, self._processes = self._processes, None
        if threads is not None:
            threads.shutdown(wait=False, cancel_futures=True)
        if processes is not None:
            _stop_processes(processes, timeout)


def _stop_processes(pool: ProcessPoolExecutor, timeout: float) -> None:
    """Shut ``pool`` down and wait, at most ``timeout`` seconds, until its workers have exited.

    ``shutdown(wait=False)`` alone returns at once and leaves the workers to the executor's
    manager thread, which sends each its stop signal and reaps it later: the caller could see
    them alive after close(), and whoever joined one meanwhile raced that thread for the same
    ``waitpid`` (the loser reads "still running" from a process already gone). ``wait=True``
    joins the manager thread, which has joined every worker; it runs on a daemon thread so that
    a caller on an event loop waits ``timeout`` at most."""
    stopper = threading.Thread(
        target=pool.shutdown, kwargs={"wait": True, "cancel_futures": True}, name="mledger-password-close", daemon=True
    )
    stopper.start()
    stopper.join(timeout)
    if stopper.is_alive():
        log.warning("password check workers still running %.0f s after close; they exit when their check ends", timeout)
