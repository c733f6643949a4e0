"""The one way a front end opens a store, a managed-ledger factory and a broker, and closes them.

Every command, server and fixture (``mledger standalone``, ``python -m mledger.protocol``,
``mledger-admin``, ``mledger-admin serve``, :class:`~mledger.protocol.EmbeddedBroker`, the pytest
fixture) calls :func:`open_broker`, so they share one durability setting (:data:`SYNCHRONOUS`)
and one closing order: the broker (its topics persist their cursors, its journal is flushed),
then the factory, which closes the store it was given. The store is closed by the factory only,
exactly once.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from ..core import Clock, ConfigError, InlineExecutor, ManagedLedgerFactoryConfig, ManualClock
from ..managed_ledger import ManagedLedgerFactory
from ..storage import FaultInjectingStore, MemoryStore, SqliteStore, Store
from ._broker import Broker
from ._config import BrokerConfig
from ._faults import Faults
from ._journal import BrokerJournal

__all__ = ["SYNCHRONOUS", "OpenedBroker", "open_broker", "open_store", "preset_configs"]

SYNCHRONOUS = "NORMAL"
"""SQLite's ``synchronous`` mode of every front end's data directory. In WAL mode, ``NORMAL``
keeps every committed write through a crash of the process (the broker confirms a write only
once committed); a power loss may lose the last transactions, as a bookie whose journal does not
fsync each entry. ``FULL`` (the :class:`~mledger.storage.SqliteStore` default for programs that
open a store themselves) also fsyncs the WAL at each commit."""


def open_store(data_dir: str | os.PathLike[str] | None) -> Store:
    """A :class:`~mledger.storage.SqliteStore` over ``data_dir`` with :data:`SYNCHRONOUS`, or a
    :class:`~mledger.storage.MemoryStore` for None. ``StoreLockedError`` while another process
    holds the directory."""
    if data_dir is None:
        return MemoryStore()
    return SqliteStore(data_dir, synchronous=SYNCHRONOUS)


DETERMINISTIC_START_MS = 1_704_067_200_000
"""Where a deterministic broker's clock starts: 2024-01-01T00:00:00Z, a fixed time in the past,
so nothing a client stamps with its own wall clock (``deliver_after``, publish times) comes due
before the test advances the clock."""


@dataclass(eq=False)
class OpenedBroker:
    """A store, the factory over it and the broker over that, closed together by :meth:`close`
    (also on leaving a ``with`` block)."""

    store: Store
    factory: ManagedLedgerFactory
    broker: Broker
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        """Close the broker, then the factory and with it the store (each once). Idempotent and
        thread-safe; the factory and store are closed even when closing the broker raised."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self.broker.close()
        finally:
            self.factory.close()

    def crash(self) -> None:
        """Leave the broker as a killed process leaves its data: close the store alone, so it
        keeps exactly what it confirmed; the broker and the factory are never closed, so what
        their cursors held back (the mark-delete throttle) is lost and nothing of theirs is
        written any more (a write on another thread either completed before or fails). The
        journal is closed (it writes what it queued: the caller's process lives on). Call once
        nothing serves the broker any more (its servers stopped). Idempotent with :meth:`close`."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self.store.close()
        finally:
            if self.broker.journal is not None:
                self.broker.journal.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> OpenedBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_broker(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    store: Store | None = None,
    broker_config: BrokerConfig | None = None,
    factory_config: ManagedLedgerFactoryConfig | None = None,
    clock: Clock | None = None,
    journal: BrokerJournal | None = None,
    namespaces: Iterable[str] = (),
    default_namespace: bool = True,
    faults: Faults | None = None,
    seed: int | None = None,
    deterministic: bool = False,
    defaults: str | None = None,
) -> OpenedBroker:
    """Open ``data_dir`` (:func:`open_store`; None: memory), or serve ``store`` (a store made by
    the caller, e.g. wrapped to inject faults; then ``data_dir`` must be None), with a factory
    (``factory_config``, ``clock``) and a broker (``broker_config``, ``journal``,
    ``default_namespace``, ``seed``) that creates ``namespaces`` if missing.

    ``deterministic``: runs that repeat (docs/pulsar/deterministic.md): the clock is a
    :class:`~mledger.core.ManualClock`, by default at :data:`DETERMINISTIC_START_MS` (another
    clock raises ``ConfigError``), and the factory runs its background work (trimming,
    compaction) at once on the thread asking for it (:class:`~mledger.core.InlineExecutor`), not
    on worker threads; ``seed`` seeds :attr:`Broker.random`.

    ``faults`` turns fault injection on (a :class:`~mledger.broker.Faults`, kept by a front end
    across restarts): the store is wrapped in a :class:`~mledger.storage.FaultInjectingStore`
    (no log kept; its hook is set only while store faults are armed) and the broker serves it.

    ``defaults`` names a Pulsar version (a ``--defaults`` preset, e.g. ``"pulsar-4.0"``) whose
    settings and rules the cursors follow (:func:`preset_configs`): the configs not given are
    the preset's, and a ``broker_config`` given with its own ``managed_ledger_config`` must
    follow the same version (``ConfigError`` otherwise; build it with
    ``BrokerConfig.for_pulsar``).

    What was opened is closed again when a later step raises (the journal too: the broker would
    have closed it), so the caller owns something only once this returns.
    """
    if store is not None and data_dir is not None:
        raise ValueError("open_broker takes a data directory or a store, not both")
    executor = None
    if deterministic:
        if clock is not None and not isinstance(clock, ManualClock):
            raise ConfigError(f"a deterministic broker needs a manual clock, got {clock!r}")
        clock = clock if clock is not None else ManualClock(DETERMINISTIC_START_MS)
        executor = InlineExecutor()
    if defaults is not None:
        broker_config, factory_config = preset_configs(defaults, broker_config, factory_config)
    try:
        store = store if store is not None else open_store(data_dir)
    except BaseException:
        if journal is not None:
            journal.close()
        raise
    if faults is not None and not isinstance(store, FaultInjectingStore):
        store = FaultInjectingStore(store, keep_log=False)
    factory = ManagedLedgerFactory(store, factory_config, clock=clock, executor=executor)
    try:
        broker = Broker(
            factory,
            broker_config,
            clock=clock,
            journal=journal,
            default_namespace=default_namespace,
            seed=seed,
            faults=faults,
        )
    except BaseException:
        try:
            if journal is not None:
                journal.close()
        finally:
            factory.close()
        raise
    opened = OpenedBroker(store, factory, broker)
    try:
        for namespace in namespaces:
            broker.ensure_namespace(namespace)
    except BaseException:
        opened.close()
        raise
    return opened


def preset_configs(
    defaults: str,
    broker_config: BrokerConfig | None = None,
    factory_config: ManagedLedgerFactoryConfig | None = None,
) -> tuple[BrokerConfig, ManagedLedgerFactoryConfig]:
    """The broker and factory configs of Pulsar version ``defaults`` for what is not given:
    ``broker_config`` without a ``managed_ledger_config`` gets the version's
    (``BrokerConfig.for_pulsar``), None the version's whole broker config; ``factory_config`` None
    the version's (``ManagedLedgerFactoryConfig.for_pulsar``). ``ConfigError`` for an unknown
    version, or a ``broker_config`` whose managed-ledger config follows another one's rules."""
    preset = BrokerConfig.for_pulsar(defaults)
    if broker_config is None:
        broker_config = preset
    elif broker_config.managed_ledger_config is None:
        broker_config = replace(broker_config, managed_ledger_config=preset.managed_ledger_config)
    elif broker_config.ledger_config.pulsar_rules != defaults:
        raise ConfigError(
            f"defaults {defaults!r} with a managed_ledger_config following "
            f"{broker_config.ledger_config.pulsar_rules or 'mledger'}'s rules: build it with "
            f"ManagedLedgerConfig.for_pulsar({defaults!r})"
        )
    if factory_config is None:
        factory_config = ManagedLedgerFactoryConfig.for_pulsar(defaults)
    return broker_config, factory_config
