"""The add methods of :class:`~mledger.managed_ledger.ManagedLedger` renamed in this release,
kept one release as aliases that warn (:func:`~mledger.core.renamed_call`).

``add_framed_entries``, ``add_framed_entries_async`` and ``async_add_framed_entries`` are the
three forms with ``framed=True``; ``add_repeated_entries`` moved to the replay, its only user
(:func:`mledger.replay.add_repeated_entries`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Protocol

from ..codec import EntryMetadata
from ..core import Position, renamed_call

_Callback = Callable[[list[Position] | None, BaseException | None], None]


class _Adds(Protocol):
    def add_entries(
        self, payloads: Sequence[bytes], metadatas: Sequence[EntryMetadata] | None = None, *, framed: bool = False
    ) -> list[Position]: ...

    def add_entries_async(
        self, payloads: Sequence[bytes], metadatas: Sequence[EntryMetadata] | None = None, *, framed: bool = False
    ) -> Future[list[Position]]: ...

    def add_entries_with_callback(
        self,
        payloads: Sequence[bytes],
        callback: _Callback,
        metadatas: Sequence[EntryMetadata] | None = None,
        *,
        framed: bool = False,
        start_writing: bool = True,
    ) -> None: ...

    def _sized(self, raw: Sequence[bytes]) -> Sequence[bytes]: ...


class DeprecatedAdds:
    """The renamed add methods (a base class of ``ManagedLedger``)."""

    def add_framed_entries(self: _Adds, raw: Sequence[bytes]) -> list[Position]:
        """Deprecated: ``add_entries(raw, framed=True)``."""
        renamed_call("mledger.ManagedLedger.add_framed_entries", "mledger.ManagedLedger.add_entries(raw, framed=True)")
        return self.add_entries(raw, framed=True)

    def add_framed_entries_async(self: _Adds, raw: Sequence[bytes]) -> Future[list[Position]]:
        """Deprecated: ``add_entries_async(raw, framed=True)``."""
        renamed_call(
            "mledger.ManagedLedger.add_framed_entries_async",
            "mledger.ManagedLedger.add_entries_async(raw, framed=True)",
        )
        return self.add_entries_async(raw, framed=True)

    def async_add_framed_entries(
        self: _Adds, raw: Sequence[bytes], callback: _Callback, *, start_writing: bool = True
    ) -> None:
        """Deprecated: ``add_entries_with_callback(raw, callback, framed=True)`` (which leaves
        sizes to the caller: this alias still refuses an oversized entry at once)."""
        renamed_call(
            "mledger.ManagedLedger.async_add_framed_entries",
            "mledger.ManagedLedger.add_entries_with_callback(raw, callback, framed=True)",
        )
        self.add_entries_with_callback(self._sized(raw), callback, framed=True, start_writing=start_writing)

    def add_repeated_entries(self: _Adds, raw: bytes, count: int) -> Position | None:
        """Deprecated: :func:`mledger.replay.add_repeated_entries`."""
        renamed_call("mledger.ManagedLedger.add_repeated_entries", "mledger.replay.add_repeated_entries")
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        return self.add_entries([raw] * count, framed=True)[-1] if count else None
