"""Helpers for the hand-made restart logs (tests/test_restart_rules.py, test_restart_figures.py):
a managed ledger under a preset on a manual clock, and what a real recovery redelivers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mledger import EntryMetadata, ManagedCursor, ManagedLedger, ManagedLedgerFactory, MemoryStore, Position
from mledger.core import ManualClock
from mledger.replay import ReplaySettings

NAME = "persistent://public/default/restarts"


def settings_for(preset: str | None, **values: object) -> ReplaySettings:
    """A preset's settings (Pulsar's defaults of that version) with ``values`` on top; every
    change persists (``throttle_mark_delete`` 0) unless ``values`` says otherwise, and no ledger
    is trimmed (trimming runs in the background: its moment is not the log's)."""
    pairs = {
        "throttle_mark_delete": "0",
        "max_entries_per_ledger": "1000000",
        "retention_time_ms": "-1",
        "retention_size_in_mb": "-1",
    }
    pairs.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in values.items()})
    if preset is not None:
        pairs = {"defaults": preset, **pairs}
    return ReplaySettings().with_values(pairs)


@dataclass
class Log:
    """One topic's managed ledger and a cursor ``s`` on a manual clock, over a memory store."""

    settings: ReplaySettings
    store: MemoryStore = field(default_factory=MemoryStore)
    clock: ManualClock = field(default_factory=lambda: ManualClock(0))
    sizes: dict[Position, int] = field(default_factory=dict)
    indexes: dict[Position, set[int]] = field(default_factory=dict)
    """Batch indexes the consumer acknowledged through :meth:`ack_indexes` (a broker without
    batch-index acks ignores them, the consumer does not)."""

    def __post_init__(self) -> None:
        self.factory = ManagedLedgerFactory(self.store, self.settings.factory, clock=self.clock)
        self.ml: ManagedLedger = self.factory.open(NAME, self.settings.ledger)
        self.cursor: ManagedCursor = self.ml.open_cursor("s")

    def produce(self, sizes: list[int]) -> list[Position]:
        """Entries of these batch sizes (messages per entry); their positions."""
        positions = [self.ml.add_entry(b"m", metadata=EntryMetadata(num_messages=n)) for n in sizes]
        self.sizes.update(zip(positions, sizes, strict=True))
        return positions

    def ack_indexes(self, position: Position, indexes: list[int], size: int) -> None:
        """The consumer acknowledges ``indexes`` of the batch entry at ``position``."""
        self.cursor.delete_batch_indexes(position, indexes, size)
        self.indexes.setdefault(position, set()).update(indexes)

    def reset(self, position: Position) -> None:
        """Reset the cursor to ``position``: the acknowledgements above it are forgotten."""
        self.cursor.reset_cursor(position)
        self.indexes.clear()

    def roll(self) -> None:
        """Close the current ledger: the next entry starts a new one."""
        self.ml.roll_over()

    def at(self, seconds: float) -> None:
        """Move the clock to ``seconds`` (event time)."""
        self.clock.set(round(seconds * 1000))

    def acked(self) -> dict[Position, set[int]]:
        """The acknowledged messages: position -> indexes (the cursor's, and the batch indexes the
        consumer acknowledged, which a broker without batch-index acks ignores)."""
        out: dict[Position, set[int]] = {}
        for position, size in self.sizes.items():
            if self.cursor.is_message_deleted(position):
                out[position] = set(range(size))
            else:
                indexes = acked_indexes(self.cursor, position, size) | self.indexes.get(position, set())
                if indexes:
                    out[position] = indexes
        return out

    def crash_recovery(self, reader: str | None = None, **values: object) -> ManagedCursor:
        """The cursor a broker restarted after a crash now recovers (from a copy of the store),
        under ``reader``'s rules (default: this log's)."""
        return recover(self.store.crash_image(), self._reader(reader, values), self.clock.now_ms())

    def unload_recovery(self, reader: str | None = None, **values: object) -> ManagedCursor:
        """Close the managed ledger (the close path of every cursor), then recover."""
        self.ml.close()
        return recover(self.store.crash_image(), self._reader(reader, values), self.clock.now_ms())

    def _reader(self, reader: str | None, values: Mapping[str, object]) -> ReplaySettings:
        return self.settings if reader is None else settings_for(reader, **values)


def three_ledgers(preset: str) -> Log:
    """Ledgers of 10 entries each; acks x:1 and x:3 in each (two ranges, two entries a ledger),
    ``max_unacked_ranges_to_persist`` 3."""
    log = Log(settings_for(preset, max_unacked_ranges_to_persist=3))
    for ledger in range(3):
        if ledger:
            log.roll()
        positions = log.produce([1] * 10)
        log.cursor.delete(positions[1])
        log.cursor.delete(positions[3])
    return log


def recover(image: MemoryStore, settings: ReplaySettings, now_ms: int) -> ManagedCursor:
    """Open the log's managed ledger on ``image`` (a broker starting on that store) and return
    its recovered cursor ``s``."""
    factory = ManagedLedgerFactory(image, settings.factory, clock=ManualClock(now_ms))
    return factory.open(NAME, settings.ledger).get_cursor("s")


def acked_indexes(cursor: ManagedCursor, position: Position, size: int) -> set[int]:
    """The indexes of a batch entry of ``size`` messages the cursor holds acknowledged (its ack
    set's clear bits: what the dispatcher sends with the entry and the client skips)."""
    remaining = cursor.batch_ack_set(position)
    if remaining is None:
        return set()
    return {i for i in range(size) if not (remaining >> i) & 1}


def redelivered(acked: Mapping[Position, set[int]], recovered: ManagedCursor) -> tuple[int, int]:
    """Acknowledged messages (and the entries carrying them) that the recovered cursor delivers
    again: an entry it does not hold comes back whole, less the batch indexes it holds."""
    messages = entries = 0
    for position, indexes in acked.items():
        if recovered.is_message_deleted(position):
            continue
        lost = len(indexes - acked_indexes(recovered, position, max(indexes) + 1))
        messages += lost
        entries += lost > 0
    return messages, entries
