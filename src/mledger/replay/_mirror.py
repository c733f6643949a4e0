"""Shared sweeps: one replay whose cursors persist their state under several settings.

Settings that only change how a cursor's state is *persisted* (:data:`PERSISTENCE_KEYS`: the
range and batch-index limits, the individual-ack format, PIP-381 chunking and its entry size,
compression of ``PositionInfo`` and ``ManagedCursorInfo``, the cursor-ledger rollover) never
change what the cursors *do*: acks, mark-delete movement, backlog, deliveries and the moments
of each persist are the same under every value (throttling depends on event time only). So a
sweep over such keys replays the events once and hands every persisted snapshot to one
:class:`~mledger.managed_ledger.CursorStateStore` per setting
(:meth:`ManagedCursor.add_state_mirror <mledger.managed_ledger.ManagedCursor.add_state_mirror>`),
each on a store of its own (:class:`~.store.ReplayStore`) and seeing the managed ledger
through :class:`MirrorView`, which swaps in that setting's configuration and store. Each
mirror gets the calls a separate replay's store would get, with the same snapshots at the same
event times, so its persisted bytes, chunks and truncation figures are exactly a separate
replay's (tested against separate replays).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor

import numpy as np

from ..codec import Entry
from ..core import PULSAR_VERSIONS, Clock, EntryMessages, ManagedLedgerConfig, ManagedLedgerFactoryConfig, Position
from ..managed_ledger import LedgerInfo, LedgerView, PositionBound
from ..storage import Store
from ._settings import ReplaySettings

PERSISTENCE_KEYS = frozenset(
    {
        "max_unacked_ranges_to_persist",
        "max_unacked_ranges_to_persist_in_metadata_store",
        "max_batch_deleted_index_to_persist",
        "persist_individual_ack_as_long_array",
        "individual_ack_format",
        "persistent_unacked_ranges_with_multiple_entries_enabled",
        "persistent_unacked_ranges_max_entry_size",
        "cursor_info_compression_type",
        "metadata_max_entries_per_ledger",
        "ledger_rollover_timeout",
        "managed_cursor_info_compression_type",
        "managed_cursor_info_compression_threshold_in_bytes",
        "unacked_ranges_limit_off_by_one",
        "pip381",
        "restart_as",
        "max_message_size",
        "netty_max_frame_size_bytes",
        "jute_maxbuffer",
    }
)
"""Settings read only by the cursor state store (how a state is written), never by the cursor,
the managed ledger or the broker. ``deletion_at_batch_index_level_enabled``,
``throttle_mark_delete`` and ``cursor_position_flush_seconds`` change behaviour (what is
acknowledged, when state is persisted) and are not among them; ``pulsar_rules`` is both (its
row's :class:`~mledger.core.CursorBehaviour` is behaviour, the rest
persistence), see :func:`behaviour`."""

_LEDGER_KEYS = frozenset(f.name for f in dataclasses.fields(ManagedLedgerConfig))


def behaviour(settings: ReplaySettings) -> ReplaySettings:
    """``settings`` with every persistence-only value set to its default: two settings with the
    same behaviour replay identically up to what their cursor state stores write."""
    ledger_defaults, factory_defaults = ManagedLedgerConfig(), ManagedLedgerFactoryConfig()
    ledger = {k: getattr(ledger_defaults, k) for k in PERSISTENCE_KEYS if k in _LEDGER_KEYS}
    ledger["pulsar_rules"] = _same_behaviour(settings.ledger.pulsar_rules)
    factory = {k: getattr(factory_defaults, k) for k in PERSISTENCE_KEYS if k not in _LEDGER_KEYS}
    return dataclasses.replace(
        settings,
        defaults=None,  # a preset's name says nothing its values do not
        ledger=dataclasses.replace(settings.ledger, **ledger),
        factory=dataclasses.replace(settings.factory, **factory),
    )


def _same_behaviour(rules: str | None) -> str | None:
    """The first row of the rules table whose cursor behaviour is that of ``rules`` (None for
    mledger's own): rows that differ only in what a persist writes share one replay."""
    if rules is None:
        return None
    wanted = PULSAR_VERSIONS[rules].behaviour
    return next(name for name, row in PULSAR_VERSIONS.items() if row.behaviour == wanted)


def shared_groups(settings: Iterable[ReplaySettings]) -> list[list[int]]:
    """Indexes of ``settings`` grouped by behaviour, each group in the given order, groups in
    the order of their first member: one replay per group serves all of its members."""
    groups: dict[ReplaySettings, list[int]] = {}
    for i, s in enumerate(settings):
        groups.setdefault(behaviour(s), []).append(i)
    return list(groups.values())


class MirrorView:
    """A managed ledger as a mirrored cursor state store sees it: the ledger itself, but with
    another configuration (persistence settings) and another store (metadata, cursor ledgers).
    Every other member delegates to ``ledger``."""

    def __init__(
        self,
        ledger: LedgerView,
        config: ManagedLedgerConfig,
        factory_config: ManagedLedgerFactoryConfig,
        store: Store,
    ) -> None:
        self._ledger = ledger
        self._config = config
        self._factory_config = factory_config
        self._store = store

    @property
    def name(self) -> str:
        return self._ledger.name

    @property
    def config(self) -> ManagedLedgerConfig:
        return self._config

    @property
    def factory_config(self) -> ManagedLedgerFactoryConfig:
        return self._factory_config

    @property
    def clock(self) -> Clock:
        return self._ledger.clock

    @property
    def store(self) -> Store:
        return self._store

    @property
    def executor(self) -> Executor:
        return self._ledger.executor

    @property
    def is_terminated(self) -> bool:
        return self._ledger.is_terminated

    @property
    def last_confirmed_entry(self) -> Position:
        return self._ledger.last_confirmed_entry

    @property
    def entries_added_counter(self) -> int:
        return self._ledger.entries_added_counter

    def first_position(self) -> Position:
        return self._ledger.first_position()

    def is_valid_position(self, position: Position) -> bool:
        return self._ledger.is_valid_position(position)

    def next_valid_position(self, position: Position) -> Position:
        return self._ledger.next_valid_position(position)

    def previous_position(self, position: Position) -> Position:
        return self._ledger.previous_position(position)

    def number_of_entries(
        self,
        lower: Position | None = None,
        upper: Position | None = None,
        lower_inclusive: bool = True,
        upper_inclusive: bool = True,
    ) -> int:
        return self._ledger.number_of_entries(lower, upper, lower_inclusive, upper_inclusive)

    def position_after_n(
        self, start: Position, n: int, bound: PositionBound = PositionBound.START_EXCLUDED
    ) -> Position:
        return self._ledger.position_after_n(start, n, bound)

    def ledger_entries(self, ledger_id: int) -> int | None:
        return self._ledger.ledger_entries(ledger_id)

    @property
    def ledger_list(self) -> Mapping[int, LedgerInfo]:
        return self._ledger.ledger_list

    def next_ledger_id(self, ledger_id: int) -> int | None:
        return self._ledger.next_ledger_id(ledger_id)

    def ledger_infos(self) -> list[LedgerInfo]:
        return self._ledger.ledger_infos()

    @property
    def entry_messages(self) -> EntryMessages:
        return self._ledger.entry_messages

    def record_entry_messages(self, first: Position, counts: Sequence[int] | np.ndarray) -> None:
        self._ledger.record_entry_messages(first, counts)

    def read_entry(self, position: Position) -> Entry:
        return self._ledger.read_entry(position)

    def read_range(self, ledger_id: int, first_entry: int, last_entry: int) -> list[Entry]:
        return self._ledger.read_range(ledger_id, first_entry, last_entry)

    def read_positions(self, positions: Iterable[Position]) -> list[Entry]:
        return self._ledger.read_positions(positions)

    def request_trim(self, cursor: object, mark_delete: Position) -> None:
        """A mirror's persists trim nothing: the cursor's own store already asked."""

    def forget_non_durable_cursor(self, cursor: object) -> None:
        """Mirrors serve durable cursors only."""
