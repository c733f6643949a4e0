"""The publish path off the event loop: one ordered worker per server, group commit per topic.

A :class:`Publisher` takes the SEND frames a connection parsed, grouped per topic, and calls
:meth:`Topic.publish_framed <mledger.broker.topic.Topic.publish_framed>` for each group; the
results go back to a callback on the event loop. The command handling never waits on a store
write and never knows which publisher it has:

* :class:`InlinePublisher` publishes at once on the calling thread. It is used for stores whose
  writes never block (:class:`~mledger.storage.MemoryStore`): nothing to wait for, so no thread
  hop.
* :class:`ThreadedPublisher` hands the groups to one worker thread that drains everything
  queued, in order, and publishes each topic's share with one ``publish_framed`` call, i.e. one
  store transaction (group commit: the sends that arrive while a commit runs share the next
  one). Appends of a topic keep their arrival order, so receipts do too.

Switching to the pipelined publish of the broker (``Producer.send_async``) replaces this module
only.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from typing import Protocol

from ..broker import FramedPublish, Topic
from ..core.position import Position

__all__ = ["InlinePublisher", "PublishCallback", "PublishResult", "Publisher", "ThreadedPublisher"]

log = logging.getLogger(__name__)

PublishResult = Position | None | BaseException
"""A position, None (a duplicate), or why the entry was refused."""
PublishCallback = Callable[[list[PublishResult]], None]
Post = Callable[[Callable[[], None]], None]


class Publisher(Protocol):
    """Publishes framed entries of one topic, in order, and reports back."""

    def submit(self, topic: Topic, items: Sequence[FramedPublish], done: PublishCallback) -> None:
        """Publish ``items`` after everything submitted before; call ``done(results)`` on the
        event loop (one result per item, in order)."""
        ...

    def close(self) -> None:
        """Finish what was submitted, then stop."""
        ...


def _publish(topic: Topic, items: Sequence[FramedPublish]) -> list[PublishResult]:
    try:
        return topic.publish_framed(items)
    except Exception as exc:  # the topic closed, the store failed: every item fails alike
        return [exc] * len(items)


class InlinePublisher:
    """Publishes on the calling thread (stores that never block)."""

    def submit(self, topic: Topic, items: Sequence[FramedPublish], done: PublishCallback) -> None:
        done(_publish(topic, items))

    def close(self) -> None:
        pass


class ThreadedPublisher:
    """One worker thread; ``post`` runs a callable on the event loop (thread-safe)."""

    def __init__(self, post: Post) -> None:
        self._post = post
        self._queue: deque[tuple[Topic, Sequence[FramedPublish], PublishCallback]] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="mledger-publisher", daemon=True)
        self._thread.start()

    def submit(self, topic: Topic, items: Sequence[FramedPublish], done: PublishCallback) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError("the publisher is closed")
            self._queue.append((topic, items, done))
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                work = list(self._queue)
                self._queue.clear()
            # Group by topic, keeping each topic's order: one publish_framed call per topic.
            groups: dict[int, tuple[Topic, list[FramedPublish], list[tuple[PublishCallback, int]]]] = {}
            for topic, items, done in work:
                group = groups.setdefault(id(topic), (topic, [], []))
                group[1].extend(items)
                group[2].append((done, len(items)))
            completions: list[tuple[PublishCallback, list[PublishResult]]] = []
            for topic, items, callbacks in groups.values():
                results = _publish(topic, items)
                start = 0
                for done, n in callbacks:
                    completions.append((done, results[start : start + n]))
                    start += n
            try:
                self._post(partial(_complete, completions))
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                log.debug("publisher: event loop closed, %d completions dropped", len(completions))


def _complete(completions: list[tuple[PublishCallback, list[PublishResult]]]) -> None:
    for done, results in completions:
        try:
            done(results)
        except Exception:  # pragma: no cover - a session bug must not stop the others
            log.exception("publish completion failed")
