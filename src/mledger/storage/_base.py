"""The two storage protocols every backend implements.

The managed ledger and its cursors reach storage only through these protocols, so a backend
(memory, SQLite, a fault-injecting wrapper in tests) can be swapped without touching the core.

* :class:`LedgerStore` is BookKeeper's role: append-only ledgers of opaque entries with ids
  that are unique across the store, entry ids from 0, a maximum entry size.
* :class:`MetadataStore` is ZooKeeper's role: a versioned key-value tree with compare-and-set.

A backend object usually implements both (``MemoryStore``, ``SqliteStore``).
"""

from __future__ import annotations

from collections.abc import Sequence, Sized
from typing import NamedTuple, Protocol, runtime_checkable

from ..core import EntryTooLargeError

DEFAULT_MAX_ENTRY_SIZE = 5 * 1024 * 1024
"""BookKeeper's default frame limit (``nettyMaxFrameSizeBytes``), 5 MiB."""


def checked_size(entries: Sequence[Sized], limit: int) -> int:
    """The bytes of ``entries`` (``len`` of each: bytes, or a record sized on demand), once none
    is above ``limit`` (a backend's ``max_entry_size``); raises ``EntryTooLargeError`` naming
    the first oversized entry's size and the limit.

    One pass at C speed: the total a backend counts anyway decides; the entries are looked at
    one by one only when it exceeds the limit (a single entry above it needs that)."""
    total = sum(map(len, entries))
    if total > limit:
        for data in entries:
            if len(data) > limit:
                raise EntryTooLargeError(f"entry of {len(data)} bytes exceeds the maximum entry size {limit}")
    return total


NEW_NODE = -1
"""``expected_version`` for a put that must create the node (fails if it exists)."""


class Versioned(NamedTuple):
    """A metadata value with its version (0 after the first put, +1 on every put)."""

    data: bytes
    version: int


@runtime_checkable
class LedgerStore(Protocol):
    """Append-only ledgers of byte entries.

    Every call is atomic: an append either stores every entry it was given or none.
    Raises ``LedgerNotFoundError`` for unknown ledgers, ``EntryTooLargeError`` for entries
    above ``max_entry_size``, and ``ManagedLedgerClosedError`` after ``close()``.

    A backend may set ``blocking_writes = False`` when its writes never wait on the disk (the
    memory store; a SQLite store whose commits do not fsync): a managed ledger then writes on the
    adding thread instead of handing its queued adds to a writer thread. Absent means True.

    A backend may set ``lazy_entries = True`` (a replay's ``ReplayStore``): a cursor then
    appends its ``PositionInfo`` records as :class:`~mledger.codec.PositionInfoEntry` objects,
    neither encoded nor sized, and the backend checks each against ``max_entry_size`` with
    :meth:`~mledger.codec.PositionInfoEntry.fits` (a cheap upper bound, the exact size whenever
    the bound reaches the limit: ``EntryTooLargeError`` exactly when the record is too large)
    and may leave them out of ``ledger_length``. Absent means False: every entry comes as bytes
    and is checked by its exact size (``checked_size``), as the broker's stores do.
    """

    max_entry_size: int

    def create_ledger(self) -> int:
        """Create an empty ledger and return its id (unique within the store, increasing)."""
        ...

    def append(self, ledger_id: int, data: bytes) -> int:
        """Append one entry; return its entry id."""
        ...

    def append_many(self, ledger_id: int, entries: Sequence[bytes]) -> int:
        """Append entries in one transaction; return the entry id of the first one."""
        ...

    def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        """Read entries ``first_entry..last_entry`` (inclusive) that exist."""
        ...

    def last_entry_id(self, ledger_id: int) -> int:
        """The id of the last entry of the ledger, -1 when it is empty."""
        ...

    def ledger_exists(self, ledger_id: int) -> bool:
        """Whether the ledger exists (created and not deleted)."""
        ...

    def ledger_length(self, ledger_id: int) -> int:
        """The bytes of every entry of the ledger (BookKeeper's ``LedgerHandle.getLength``)."""
        ...

    def seal_ledger(self, ledger_id: int) -> None:
        """Close the ledger for writing (BookKeeper's ledger close); appends then fail."""
        ...

    def delete_ledger(self, ledger_id: int) -> None:
        """Delete the ledger and its entries; deleting a missing ledger is a no-op."""
        ...

    def close(self) -> None:
        """Release the store's resources."""
        ...


@runtime_checkable
class MetadataStore(Protocol):
    """A versioned key-value tree (paths like ``/managed-ledgers/<ml>/<cursor>``)."""

    def get(self, path: str) -> Versioned | None:
        """The value and version at ``path``, or None."""
        ...

    def put(self, path: str, data: bytes, expected_version: int | None = None) -> int:
        """Store ``data`` at ``path`` and return the new version.

        ``expected_version`` None writes unconditionally; ``NEW_NODE`` (-1) requires that the
        node does not exist; any other value must equal the current version. A mismatch
        raises ``BadVersionError`` and changes nothing.
        """
        ...

    def delete(self, path: str, expected_version: int | None = None) -> None:
        """Delete ``path``; a missing node is a no-op unless a version is expected."""
        ...

    def children(self, path: str) -> list[str]:
        """Names (last path component) of the direct children of ``path``, sorted."""
        ...


class Store(LedgerStore, MetadataStore, Protocol):
    """A backend that is both a ledger store and a metadata store."""
