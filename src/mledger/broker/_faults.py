"""The broker's fault registry: the one fault API a test, a scenario file and the REST API arm.

Theory of operation
-------------------
:class:`Faults` holds the armed faults (:mod:`mledger.broker._fault_specs`) in arming order and
decides, for each command, MESSAGE frame or store write that could trigger one, whether one
fires. It acts itself where the broker is enough (terminating a topic, deleting a
subscription, refusing or slowing the store's writes through the
:class:`~mledger.storage.FaultInjectingStore` the broker was opened over) and leaves what
concerns connections to the protocol server, which asks :meth:`Faults.take` per command (only
for the kinds in :attr:`Faults.command_kinds`, so with nothing armed no command pays more than
today) and hears, as a :class:`FaultListener`, what to do at once (close or half-open
connections, pause, resume, heal).

A fault fires for a match once ``after`` matches passed, then for ``count`` matches or every
match within ``duration_ms`` (real time, from arming); one command fires at most one fault, the
first armed that matches. Every firing is logged (a warning the first time a fault fires, then
at info), counted (:meth:`Faults.stats`, ``/metrics``), listed (:meth:`Faults.fired`) and told to
the broker's journal when it records (``recording.json``'s session, not a replay event).
Random draws (a delay's ``[low, high]``) come from one generator seeded with :attr:`Faults.seed`.

A :class:`Faults` outlives the broker it serves: the embedded broker keeps one across restarts
and binds each new broker to it (:meth:`Faults.bind`). Thread-safe: one lock guards the
registry; actions run outside it.
"""

from __future__ import annotations

import itertools
import logging
import random
import re
import sqlite3
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ..core import Clock, NotAllowedError, NotFoundError
from ..managed_ledger import ManagedLedgerFactory
from ..storage import DISK_FULL, FaultInjectingStore, WriteRecord
from ._fault_kinds import BROKER_ACTIONS, MESSAGE, RESTART, STORE_ACTIONS
from ._journal import BrokerJournal
from ._names import TopicName
from ._topic import Topic

if TYPE_CHECKING:  # the models import pydantic: only a broker that arms faults loads them
    from ._fault_specs import FaultScenario, FaultSpec

__all__ = [
    "ArmedFault",
    "FaultInjectionOffError",
    "FaultListener",
    "FaultStats",
    "FaultedBroker",
    "FaultTarget",
    "Faults",
    "FiredFault",
    "Firing",
    "selects",
    "topic_matches",
]

log = logging.getLogger(__name__)

_FIRED_KEPT = 10_000
"""Firings :meth:`Faults.fired` lists at most (the oldest go first; the counters keep all)."""


class FaultInjectionOffError(NotFoundError):
    """Faults were armed on a broker started without fault injection (404 over REST, where
    the path then answers as if it did not exist)."""


class FaultTarget(NamedTuple):
    """What a command or frame concerns, for matching: its topic, its subscription, the names
    that identify its client (producer or consumer name, role, ``host:port``) and, for a
    MESSAGE, the message's ``ledgerId:entryId``."""

    topic: str | None = None
    subscription: str | None = None
    names: tuple[str, ...] = ()
    message_id: str | None = None


class Firing(NamedTuple):
    """A fault that fired: its id, its spec, what it fired on and the delay it drew (seconds;
    ``delay`` and ``slow_writes`` only)."""

    fault_id: int
    spec: FaultSpec
    target: FaultTarget
    delay_s: float = 0.0


@dataclass(frozen=True, slots=True)
class FiredFault:
    """One firing, as :meth:`Faults.fired` lists it and the pytest report prints it."""

    fault_id: int
    action: str
    command: str | None
    topic: str | None
    subscription: str | None
    client: str | None
    detail: str
    at_ms: int
    """The broker's clock when it fired (the wall clock before a broker is bound)."""

    def __str__(self) -> str:
        where = " ".join(
            f"{k}={v}"
            for k, v in (("topic", self.topic), ("subscription", self.subscription), ("client", self.client))
            if v
        )
        on = f" on {self.command}" if self.command else ""
        return f"#{self.fault_id} {self.action}{on}{' ' + where if where else ''}: {self.detail}"

    def as_dict(self) -> dict[str, Any]:
        """The firing as JSON-ready data (REST, ``recording.json``)."""
        return {
            "faultId": self.fault_id,
            "action": self.action,
            "command": self.command,
            "topic": self.topic,
            "subscription": self.subscription,
            "client": self.client,
            "detail": self.detail,
            "atMs": self.at_ms,
        }


@dataclass(frozen=True, slots=True)
class ArmedFault:
    """An armed fault as :meth:`Faults.armed` lists it: its id, spec, and the matches it saw and
    fired on so far."""

    fault_id: int
    spec: FaultSpec
    matches: int
    fired: int

    def as_dict(self) -> dict[str, Any]:
        """The armed fault as JSON-ready data (REST)."""
        return {
            "faultId": self.fault_id,
            "fault": self.spec.model_dump(exclude_none=True),
            "matches": self.matches,
            "fired": self.fired,
        }


@dataclass(frozen=True, slots=True)
class FaultStats:
    """A snapshot of :class:`Faults`: the seed, the faults armed now, the firings by action."""

    seed: int
    armed: int
    fired: int
    fired_by_action: Mapping[str, int] = field(default_factory=dict)


class FaultedBroker(Protocol):
    """What the registry needs of the broker it serves (:class:`~mledger.broker.Broker`)."""

    factory: ManagedLedgerFactory
    clock: Clock
    journal: BrokerJournal | None
    seed: int

    def loaded_topics(self) -> list[Topic]:
        """The topics and partitions loaded now."""
        ...

    def unload_topic(self, topic: str) -> None:
        """Unload ``topic`` (clients disconnected; loaded again on their next lookup)."""
        ...


class FaultListener(Protocol):
    """What acts on connections for the registry (the protocol server). Called from any thread;
    an implementation hands the work to its own loop."""

    def faults_changed(self) -> None:
        """The command or MESSAGE faults armed changed (:attr:`Faults.command_kinds`)."""
        ...

    def act_now(self, firing: Firing) -> None:
        """A connection fault armed without a command: close or half-open every connection its
        filters match, or pause the broker."""
        ...

    def resume(self) -> None:
        """End a pause."""
        ...

    def heal(self) -> None:
        """Faults were cleared: half-open connections work again, a pause ends."""
        ...


def topic_matches(pattern: re.Pattern[str], topic: str) -> bool:
    """Whether ``pattern`` matches the whole topic name, its last part, or (a partition) its
    partitioned topic's name or last part."""
    if pattern.fullmatch(topic):
        return True
    try:
        name = TopicName.parse(topic, any_domain=True)
    except Exception:  # noqa: BLE001 - a name that does not parse matches as given only
        return False
    candidates = [name.local_name]
    if name.is_partition:
        parent = TopicName.parse(name.partitioned_topic, any_domain=True)
        candidates += [str(parent), parent.local_name]
    return any(pattern.fullmatch(c) for c in candidates)


def selects(spec: FaultSpec, targets: Iterable[FaultTarget]) -> bool:
    """Whether ``spec``'s filters (topic, client, subscription) match any of ``targets``: what a
    fault armed without a command acts on (a connection: one target per producer and
    consumer). O(targets)."""
    armed = _Armed(0, spec)
    return any(armed.matches_target(t) for t in targets)


class _Armed:
    """One armed fault and its counters (under the registry's lock)."""

    __slots__ = ("client", "deadline", "fault_id", "fired", "matches", "spec", "subscription", "topic")

    def __init__(self, fault_id: int, spec: FaultSpec) -> None:
        self.fault_id = fault_id
        self.spec = spec
        self.topic = re.compile(spec.topic) if spec.topic is not None else None
        self.client = re.compile(spec.client) if spec.client is not None else None
        self.subscription = re.compile(spec.subscription) if spec.subscription is not None else None
        self.deadline = time.monotonic() + spec.duration_ms / 1000 if spec.duration_ms is not None else None
        self.matches = 0
        self.fired = 0

    @property
    def limit(self) -> int | None:
        """Firings allowed (None: no limit but the window's)."""
        spec = self.spec
        if spec.count is not None:
            return spec.count
        if spec.duration_ms is not None or spec.action in STORE_ACTIONS:
            return None
        return 1

    def spent(self, now: float) -> bool:
        limit = self.limit
        return (limit is not None and self.fired >= limit) or (self.deadline is not None and now >= self.deadline)

    def matches_target(self, target: FaultTarget) -> bool:
        if self.topic is not None and (target.topic is None or not topic_matches(self.topic, target.topic)):
            return False
        if self.subscription is not None and (
            target.subscription is None or not self.subscription.fullmatch(target.subscription)
        ):
            return False
        if self.client is not None and not any(self.client.fullmatch(n) for n in target.names):
            return False
        message_id = getattr(self.spec, "message_id", None)
        return message_id is None or message_id == target.message_id

    def snapshot(self) -> ArmedFault:
        return ArmedFault(self.fault_id, self.spec, self.matches, self.fired)


class Faults:
    """The fault registry of a broker (see the module docstring).

    ``enabled`` False refuses every arming with :class:`FaultInjectionOffError` (a broker
    started without fault injection: ``mledger standalone`` without ``--fault-injection``);
    ``seed`` seeds the random draws (None: the seed of the first broker bound, so one seed,
    ``seed=`` on the fixture, repeats the broker's choices and the faults' draws alike; in
    :meth:`stats` and a failing test's report).
    Arming, listing and clearing are O(armed); :meth:`take` is O(faults armed for that kind).
    """

    def __init__(self, enabled: bool = True, seed: int | None = None) -> None:
        self.enabled = enabled
        self._lock = threading.RLock()
        self._seed = seed if seed is not None else random.SystemRandom().randrange(1 << 32)
        self._seeded = seed is not None
        self._random = random.Random(self._seed)
        self._ids = itertools.count(1)
        self._armed: list[_Armed] = []
        self._by_kind: dict[str, list[_Armed]] = {}
        self._store_faults: list[_Armed] = []
        self._fired: deque[FiredFault] = deque(maxlen=_FIRED_KEPT)
        self._counts: Counter[str] = Counter()
        self._listeners: list[FaultListener] = []
        self._broker: FaultedBroker | None = None
        self._store: FaultInjectingStore | None = None
        self.command_kinds: frozenset[str] = frozenset()
        """The client command kinds some armed fault matches (the protocol's one check)."""
        self.messages_armed = False
        """Whether a fault matches MESSAGE frames."""
        self.restarter: Callable[[bool], None] | None = None
        """What restarts the broker in place for a ``restart`` fault, given ``crash``, without
        waiting for it (:class:`~mledger.protocol.EmbeddedBroker` sets it; None: the broker
        cannot restart in place and ``restart`` faults are refused)."""

    # -- binding -------------------------------------------------------------------------------
    def bind(self, broker: FaultedBroker) -> None:
        """Serve ``broker``: its topics for the broker actions, its journal and clock for the
        firings, its store when it is a :class:`~mledger.storage.FaultInjectingStore` (the
        store faults). A later broker (a restart) replaces the earlier."""
        store = broker.factory.store
        if not self._seeded:  # the first broker's seed; a restart's broker goes on with the draws
            self.reseed(broker.seed)
        with self._lock:
            self._broker = broker
            self._store = store if isinstance(store, FaultInjectingStore) else None
            self._update_store()

    def attach(self, listener: FaultListener) -> None:
        """Tell ``listener`` what concerns connections (the protocol server, when it starts)."""
        with self._lock:
            self._listeners.append(listener)

    def detach(self, listener: FaultListener) -> None:
        """Stop telling ``listener`` (the server stopped)."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    # -- the seed ------------------------------------------------------------------------------
    @property
    def seed(self) -> int:
        """The seed of the random draws."""
        return self._seed

    def reseed(self, seed: int) -> None:
        """Restart the random draws from ``seed``."""
        with self._lock:
            self._seed = seed
            self._seeded = True
            self._random = random.Random(seed)

    # -- arming ----------------------------------------------------------------------------------
    def arm(self, fault: FaultSpec | Mapping[str, Any]) -> int:
        """Arm ``fault`` (a model of :mod:`~mledger.broker._fault_specs`, or its fields) and return
        its id. A fault without a command acts now (and is not kept armed). Raises
        ``FaultSpecError`` (400) for an invalid fault, :class:`FaultInjectionOffError` when
        fault injection is off, ``NotFoundError`` when a broker action finds no target."""
        if not self.enabled:
            raise FaultInjectionOffError(
                "fault injection is off on this broker: start it with fault injection enabled"
                " (mledger standalone --fault-injection or --faults FILE; the pytest fixture and"
                " EmbeddedBroker have it on)"
            )
        from ._fault_specs import parse_fault

        spec = parse_fault(fault)
        if spec.action == RESTART and self.restarter is None:
            raise NotAllowedError(
                "this broker cannot restart in place (mledger standalone: stop and start its process);"
                " restart faults act on the pytest fixture and EmbeddedBroker"
            )
        with self._lock:
            fault_id = next(self._ids)
        if spec.acts_at_once:
            self._act_now(Firing(fault_id, spec, FaultTarget(spec.topic, spec.subscription)))
            return fault_id
        armed = _Armed(fault_id, spec)
        with self._lock:
            self._armed.append(armed)
            self._reindex()
        log.info("fault #%d armed: %s", fault_id, _describe(spec))
        self._changed(spec)
        return fault_id

    def load(self, scenario: FaultScenario | Mapping[str, Any] | str | Path) -> list[int]:
        """Arm a scenario's faults, in order, after seeding the draws with its seed if it has
        one; a path is read as a scenario file (:func:`~mledger.broker.load_scenario`).
        Returns the faults' ids. Raises ``FaultSpecError``."""
        from ._fault_specs import FaultScenario, load_scenario, parse_scenario

        if isinstance(scenario, (str, Path)):
            scenario = load_scenario(scenario)
        elif not isinstance(scenario, FaultScenario):
            scenario = parse_scenario(scenario)
        if scenario.seed is not None:
            self.reseed(scenario.seed)
        return [self.arm(spec) for spec in scenario.faults]

    def fail_next(self, command: str, error: str = "ServiceNotReady", count: int = 1, **match: Any) -> int:
        """Answer the next ``count`` ``command``s (``match``: ``topic``, ``client``,
        ``subscription``, ``after``, ``duration_ms``) with Pulsar's ``error``, as Pulsar's broker
        answers that command with an error (SEND: SEND_ERROR; LOOKUP: a Failed lookup, ...).
        Returns the fault's id."""
        return self.arm({"action": "error", "command": command, "error": error, "count": count, **match})

    def delay(
        self, command: str, ms: int | tuple[int, int], count: int = 1, *, clock: str = "real", **match: Any
    ) -> int:
        """Hold the next ``count`` ``command``s ``ms`` milliseconds (``(low, high)``: drawn from
        the seeded generator) before handling them; the commands behind each on its connection
        wait too. ``clock="broker"`` waits for the broker's clock (a manual clock: until the
        test advances it). Returns the fault's id."""
        fault = {"action": "delay", "command": command, "delay_ms": ms, "count": count, "clock": clock, **match}
        return self.arm(fault)

    def close_connection(self, command: str | None = None, **match: Any) -> int:
        """Close the connection of the next matching ``command`` instead of handling it; without
        a command, close every connection ``match`` selects now (``topic``: connections with a
        producer or consumer on it; ``client``). Returns the fault's id."""
        return self.arm({"action": "close", "command": command, **_one_shot(command, match)})

    def half_open(self, command: str | None = None, direction: str = "both", **match: Any) -> int:
        """Make the connection a dead peer without closing it: stop ``"read"``-ing (from the
        matching command on), ``"write"``-ing (its answer on) or ``"both"``; without a command,
        every connection ``match`` selects now. Lasts until the connection closes or
        :meth:`clear`. Returns the fault's id."""
        fault = {"action": "half_open", "command": command, "direction": direction, **_one_shot(command, match)}
        return self.arm(fault)

    def pause(self, ms: int | None = None, command: str | None = None, **match: Any) -> int:
        """Stop serving every connection (nothing read or written, sockets open) for ``ms``
        milliseconds (None: until :meth:`resume`), now or at the next matching ``command``.
        Returns the fault's id."""
        return self.arm({"action": "pause", "command": command, "pause_ms": ms, **_one_shot(command, match)})

    def resume(self) -> None:
        """End a pause: every connection is served again."""
        for listener in self._listeners_now():
            listener.resume()

    def disk_full(self, count: int | None = None, duration_ms: int | None = None, after: int = 0) -> int:
        """Refuse the store's writes as a full disk does, after ``after`` writes, for ``count``
        writes or ``duration_ms`` (neither: until :meth:`clear`). Returns the fault's id."""
        return self.arm({"action": "disk_full", "count": count, "duration_ms": duration_ms, "after": after})

    def slow_writes(
        self, ms: int | tuple[int, int], count: int | None = None, duration_ms: int | None = None, after: int = 0
    ) -> int:
        """Delay each of the store's writes ``ms`` milliseconds (``(low, high)``: drawn), for
        ``count`` writes or ``duration_ms`` (neither: until :meth:`clear`). Returns the id."""
        fault = {"action": "slow_writes", "delay_ms": ms, "count": count, "duration_ms": duration_ms, "after": after}
        return self.arm(fault)

    def unload_topic(self, topic: str | None = None, command: str | None = None, **match: Any) -> int:
        """Unload ``topic`` (a pattern: every loaded topic it matches) now, or the topic of the
        next matching ``command`` before it is handled: its producers and consumers are
        disconnected, and the clients' lookup loads it again. Returns the fault's id."""
        return self.arm({"action": "unload_topic", "command": command, "topic": topic, **_one_shot(command, match)})

    def restart(self, crash: bool = False, command: str | None = None, **match: Any) -> int:
        """Restart the broker in place, on the same ports and data (``crash``: as a SIGKILL
        leaves it), now or at the next matching ``command``, which is then not handled: the
        broker stops serving at it. Returns at once (the restart runs on a thread of its own;
        ``pulsar_broker.restart(crash=...)`` is the call that waits for it); clients reconnect by
        themselves. ``NotAllowedError`` on a broker that cannot restart in place. Returns the
        fault's id."""
        return self.arm({"action": "restart", "command": command, "crash": crash, **_one_shot(command, match)})

    def terminate_topic(self, topic: str | None = None, command: str | None = None, **match: Any) -> int:
        """Terminate ``topic`` (a pattern: every loaded topic it matches) now, or the topic of
        the next matching ``command``. Returns the fault's id."""
        return self.arm({"action": "terminate_topic", "command": command, "topic": topic, **_one_shot(command, match)})

    def delete_subscription(
        self, topic: str | None = None, subscription: str | None = None, command: str | None = None, **match: Any
    ) -> int:
        """Delete a subscription under its consumers (disconnected, they reconnect): those
        ``subscription`` matches on the topics ``topic`` matches now, or the next matching
        ``command``'s. Returns the fault's id."""
        fault = {"action": "delete_subscription", "command": command, "topic": topic, "subscription": subscription}
        return self.arm({**fault, **_one_shot(command, match)})

    def duplicate(self, message_id: str | None = None, count: int = 1, **match: Any) -> int:
        """Send the next ``count`` matching MESSAGE frames twice (``message_id``:
        ``"ledgerId:entryId"``, only that message). Returns the fault's id."""
        return self.arm({"action": "duplicate", "message_id": message_id, "count": count, **match})

    def redeliver(self, message_id: str | None = None, count: int = 1, **match: Any) -> int:
        """Redeliver the next ``count`` matching messages right after sending them (redelivery
        count + 1). Returns the fault's id."""
        return self.arm({"action": "redeliver", "message_id": message_id, "count": count, **match})

    def remove(self, fault_id: int) -> None:
        """Disarm one fault; ``NotFoundError`` when none with that id is armed."""
        with self._lock:
            found = [a for a in self._armed if a.fault_id == fault_id]
            if not found:
                raise NotFoundError(f"no fault #{fault_id} is armed")
            self._armed.remove(found[0])
            self._reindex()
        self._changed(found[0].spec)

    def clear(self) -> None:
        """Disarm every fault, end a pause and let half-open connections work again (commands
        held by a delay are still answered when it ends)."""
        with self._lock:
            self._armed.clear()
            self._reindex()
        for listener in self._listeners_now():
            listener.faults_changed()
            listener.heal()

    # -- views -----------------------------------------------------------------------------------
    def armed(self) -> list[ArmedFault]:
        """The faults armed now, in arming order (a spent one is dropped when next matched)."""
        with self._lock:
            return [a.snapshot() for a in self._armed]

    def fired(self) -> list[FiredFault]:
        """The firings, oldest first (the last 10,000)."""
        with self._lock:
            return list(self._fired)

    def stats(self) -> FaultStats:
        """A frozen snapshot: the seed, faults armed now, firings in all and by action. O(actions)."""
        with self._lock:
            return FaultStats(self._seed, len(self._armed), sum(self._counts.values()), dict(self._counts))

    # -- the protocol's side ---------------------------------------------------------------------
    def take(self, kind: str, target: Callable[[], FaultTarget]) -> Firing | None:
        """The fault that fires on this ``kind`` of command or frame, or None (``target`` is
        called only when a fault for the kind is armed). A firing is recorded here; a broker
        action (terminate, delete a subscription) is performed before this returns, so the
        command then meets its effect. Any thread (the protocol's loop)."""
        faults = self._by_kind.get(kind)
        if not faults:
            return None
        what = target()
        firing, first, spent = self._fire(faults, what)
        if spent:  # what is armed changed: sessions may go back to their plain dispatch
            for listener in self._listeners_now():
                listener.faults_changed()
        if firing is None:
            return None
        if firing.spec.action in BROKER_ACTIONS:
            self._perform(firing, first)
        else:
            self._record(firing, kind, _effect(firing), first)
            if firing.spec.action == RESTART:
                self._restart(firing)
        return firing

    # -- the store's side ------------------------------------------------------------------------
    def before_write(self, record: WriteRecord) -> None:
        """The store's hook before each write (any thread): raise SQLite's full-disk error for a
        refused write, sleep for a slowed one. Nothing armed: the store does not call it."""
        firing, first, _ = self._fire(self._store_faults, FaultTarget())
        if firing is None:
            return
        target = "" if record.target is None else f" {record.target}"
        if firing.spec.action == "disk_full":
            self._record(firing, None, f"refused {record.kind}{target}: {DISK_FULL}", first)
            raise sqlite3.OperationalError(DISK_FULL)
        self._record(firing, None, f"slowed {record.kind}{target} by {firing.delay_s * 1000:.0f} ms", first)
        time.sleep(firing.delay_s)

    # -- internals -------------------------------------------------------------------------------
    def _fire(self, faults: list[_Armed], target: FaultTarget) -> tuple[Firing | None, bool, bool]:
        """Count ``target`` against ``faults`` (in arming order) and fire the first that matches
        past its ``after``: (the firing or None, whether it is that fault's first, whether some
        fault is spent now, which then leaves the registry)."""
        now = time.monotonic()
        firing = None
        first = spent = False
        with self._lock:
            for armed in faults:
                if armed.spent(now):
                    spent = True
                    continue
                if not armed.matches_target(target):
                    continue
                armed.matches += 1
                if armed.matches <= armed.spec.after:
                    continue
                armed.fired += 1
                first = armed.fired == 1
                spent = spent or armed.spent(now)
                firing = Firing(armed.fault_id, armed.spec, target, self._draw(armed.spec))
                break
            if spent:
                self._drop_spent(now)
        return firing, first, spent

    def _listeners_now(self) -> list[FaultListener]:
        with self._lock:
            return list(self._listeners)

    def _draw(self, spec: FaultSpec) -> float:
        """The delay of a firing in seconds (0 for actions without one); lock held."""
        delay = getattr(spec, "delay_ms", None)
        if delay is None:
            return 0.0
        if isinstance(delay, tuple):
            return self._random.randint(delay[0], delay[1]) / 1000
        return float(delay) / 1000

    def _reindex(self) -> None:
        """Rebuild the per-kind lists and the hot flags (lock held)."""
        by_kind: dict[str, list[_Armed]] = {}
        store: list[_Armed] = []
        for armed in self._armed:
            if armed.spec.action in STORE_ACTIONS:
                store.append(armed)
            elif armed.spec.command is not None:
                by_kind.setdefault(armed.spec.command, []).append(armed)
        self._by_kind = by_kind
        self._store_faults = store
        self.command_kinds = frozenset(k for k in by_kind if k != MESSAGE)
        self.messages_armed = MESSAGE in by_kind
        self._update_store()

    def _update_store(self) -> None:
        """Hook the store when store faults are armed, unhook it when none are (lock held)."""
        store = self._store
        if store is None:
            return
        store.on_write = self.before_write if self._store_faults else None
        store.writes_may_block = any(a.spec.action == "slow_writes" for a in self._store_faults)

    def _drop_spent(self, now: float) -> None:
        kept = [a for a in self._armed if not a.spent(now)]
        if len(kept) != len(self._armed):
            for armed in self._armed:
                if armed.spent(now):
                    log.info("fault #%d spent after %d firings", armed.fault_id, armed.fired)
            self._armed = kept
            self._reindex()

    def _changed(self, spec: FaultSpec) -> None:
        if spec.action in STORE_ACTIONS:
            return
        for listener in self._listeners_now():
            listener.faults_changed()

    def _act_now(self, firing: Firing) -> None:
        spec = firing.spec
        if spec.action in BROKER_ACTIONS:
            self._perform(firing, True)
            return
        if spec.action == RESTART:
            self._record(firing, None, _effect(firing), True)
            self._restart(firing)
            return
        listeners = self._listeners_now()
        self._record(
            firing, None, _effect(firing) + ("" if listeners else " (no protocol server serves the broker)"), True
        )
        for listener in listeners:
            listener.act_now(firing)

    def _restart(self, firing: Firing) -> None:
        restarter = self.restarter
        if restarter is not None:  # checked when armed; None only once its front end went away
            restarter(bool(getattr(firing.spec, "crash", False)))

    def _perform(self, firing: Firing, first: bool) -> None:
        """A broker action on its targets: the command's topic (and subscription), or every
        loaded topic ``topic`` matches."""
        broker = self._broker
        if broker is None:
            raise NotFoundError("no broker is bound to these faults")
        spec = firing.spec
        target = firing.target
        if spec.command is not None and target.topic is not None:
            topics = [t for t in broker.loaded_topics() if t.name == target.topic]
        elif spec.topic is not None:
            pattern = re.compile(spec.topic)
            topics = [t for t in broker.loaded_topics() if topic_matches(pattern, t.name)]
        else:  # a command that names no topic (CONNECT, GET_TOPICS_OF_NAMESPACE) and no pattern
            topics = []
        done: list[str] = []
        for topic in topics:
            if spec.action == "terminate_topic":
                last = topic.terminate()
                done.append(f"terminated {topic.name} at {last}")
                continue
            if spec.action == "unload_topic":
                broker.unload_topic(topic.name)
                done.append(f"unloaded {topic.name}")
                continue
            names = _subscriptions(topic.subscription_names(), spec.subscription, target.subscription)
            for name in names:
                topic.delete_subscription(name, force=True)
                done.append(f"deleted subscription {name} of {topic.name}")
        if not done:
            detail = f"nothing to {spec.action.replace('_', ' ')}: no loaded topic or subscription matches"
            self._record(firing, spec.command, detail, first)
            if spec.command is None:
                raise NotFoundError(f"fault #{firing.fault_id}: {detail}")
            return
        self._record(firing, spec.command, "; ".join(done), first)

    def _record(self, firing: Firing, kind: str | None, detail: str, first: bool) -> None:
        """Log, count and list a firing, and tell the journal (the first firing of a fault is
        logged as a warning, later ones at info)."""
        spec = firing.spec
        target = firing.target
        broker = self._broker
        now_ms = broker.clock.now_ms() if broker is not None else int(time.time() * 1000)
        fired = FiredFault(
            firing.fault_id,
            spec.action,
            kind or spec.command,
            target.topic,
            target.subscription,
            target.names[0] if target.names else None,
            detail,
            now_ms,
        )
        with self._lock:
            self._fired.append(fired)
            self._counts[spec.action] += 1
        log.log(logging.WARNING if first else logging.INFO, "fault fired: %s", fired)
        journal = broker.journal if broker is not None else None
        if journal is not None:
            journal.fault_fired(fired.as_dict(), now_ms)


def _one_shot(command: str | None, match: dict[str, Any]) -> dict[str, Any]:
    """A one-shot action's trigger: with a command, one firing unless ``match`` says otherwise."""
    if command is not None and "count" not in match and "duration_ms" not in match:
        return {**match, "count": 1}
    return match


def _subscriptions(names: Iterable[str], pattern: str | None, commanded: str | None) -> list[str]:
    """The subscriptions a delete acts on: those ``pattern`` matches, else the command's."""
    if pattern is not None:
        compiled = re.compile(pattern)
        return [n for n in names if compiled.fullmatch(n)]
    return [n for n in names if n == commanded]


def _effect(firing: Firing) -> str:
    """What a firing does, in words (the log and the fired list)."""
    spec: Any = firing.spec
    action = spec.action
    if action == "error":
        return f"answered {spec.error}"
    if action == "delay":
        return f"held {firing.delay_s * 1000:.0f} ms ({spec.clock} time)"
    if action == "close":
        return "closed the connection"
    if action == "half_open":
        stopped = {"read": "reading", "write": "writing", "both": "reading and writing"}[spec.direction]
        return f"half-open connection: stopped {stopped}"
    if action == "pause":
        return f"paused the broker {'until resumed' if spec.pause_ms is None else f'for {spec.pause_ms} ms'}"
    if action == RESTART:
        return "crash-restarted the broker" if spec.crash else "restarted the broker (a clean stop first)"
    if action == "duplicate":
        return f"sent message {firing.target.message_id} twice"
    if action == "redeliver":
        return f"redelivered message {firing.target.message_id}"
    return str(action)


def _describe(spec: FaultSpec) -> str:
    return ", ".join(f"{k}={v}" for k, v in spec.model_dump(exclude_none=True).items() if k != "after" or v)
