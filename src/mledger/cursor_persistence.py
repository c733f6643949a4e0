"""Cursor state persistence (placeholder until the durable-cursor issue lands).

Writes ``ManagedCursorInfo`` (``cursorsLedgerId = -1``) to the metadata store when a cursor is
created and closed, and recovers from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._proto import MLDataFormats_pb2 as pb
from .errors import StateCorruptedError
from .position import Position
from .ranges import AckRangeSet

if TYPE_CHECKING:
    from .cursor import ManagedCursor, RecoveredCursorState


class CursorPersistence:
    """Persists one durable cursor's state through the ML's store."""

    def __init__(self, cursor: ManagedCursor) -> None:
        self._cursor = cursor
        self._ml = cursor.ledger
        self._path = self._ml._cursor_path(cursor.name)
        self._version: int | None = None

    def recover(self) -> RecoveredCursorState | None:
        from .cursor import RecoveredCursorState

        stored = self._ml.store.get(self._path)
        if stored is None:
            return None
        self._version = stored.version
        info = pb.ManagedCursorInfo()
        try:
            info.ParseFromString(stored.data)
        except Exception as exc:
            raise StateCorruptedError(f"cursor {self._path}: unreadable ManagedCursorInfo: {exc}") from exc
        acked = AckRangeSet()
        for r in info.individualDeletedMessages:
            acked.add_open_closed(r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId,
                                  r.upperEndpoint.ledgerId, r.upperEndpoint.entryId)
        return RecoveredCursorState(
            mark_delete=Position(info.markDeleteLedgerId, info.markDeleteEntryId),
            acked=acked,
            batch={},
            properties={p.name: p.value for p in info.properties},
            cursor_properties={p.name: p.value for p in info.cursorProperties},
        )

    def initialize(self) -> None:
        self._write_info()

    def persist(self) -> None:
        pass

    def close(self) -> None:
        self._write_info()

    def delete(self) -> None:
        self._ml.store.delete(self._path)

    def stats(self) -> dict[str, Any]:
        return {}

    def _write_info(self) -> None:
        md, acked, _batch, props, cprops = self._cursor._snapshot_for_persistence()
        info = pb.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=md.ledger_id, markDeleteEntryId=md.entry_id)
        limit = self._ml.config.max_unacked_ranges_to_persist
        for lo, hi in list(acked)[:limit]:
            r = info.individualDeletedMessages.add()
            r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId = lo
            r.upperEndpoint.ledgerId, r.upperEndpoint.entryId = hi
        for k, v in props.items():
            info.properties.add(name=k, value=v)
        for k, v in cprops.items():
            info.cursorProperties.add(name=k, value=v)
        self._version = self._ml.store.put(self._path, info.SerializeToString())
