"""A store for replay: data ledgers with the log's ids, entries counted rather than kept.

:class:`ReplayStore` implements the ``Store`` protocol (ledgers + metadata) so that the
unmodified ``ManagedLedger`` and ``ManagedCursor`` run on it:

* **Ledger ids from the log.** Before the managed ledger creates a data ledger, the replay
  calls :meth:`ReplayStore.expect_ledger` with the id the log uses; the next
  ``create_ledger`` returns it. Every other ``create_ledger`` (cursor ledgers, which never
  appear in positions) draws from a separate range starting at :data:`CURSOR_LEDGER_BASE`.
* **Bounded memory.** A replay never reads data entries back (it tells the broker the batch
  sizes it knows with each acknowledgement), so data ledgers keep only their entry count:
  memory does not grow with the size of a topic-partition. Reads of data entries return
  empty entries. Cursor ledgers keep the entries of their last append (one persisted state,
  all of its PIP-381 chunks), which is what recovery and ``--emit-state`` read.
* **Records built when read.** The store declares ``lazy_entries``: a cursor's state store
  then appends its ``PositionInfo`` records neither encoded nor sized
  (:class:`~mledger.codec.PositionInfoEntry`), and only a record that is read (the last of a
  cursor ledger) is ever encoded: a replay persists a cursor every second of its log. Such a
  record is checked against ``max_entry_size`` by a cheap upper bound of its size, sized
  exactly only when the bound reaches the limit (so ``EntryTooLargeError`` is raised exactly
  when its size is above the limit), and is left out of ``ledger_length``. Such a
  record holds its ranges as the range set's frozen per-ledger copies
  (:class:`~mledger.core.RangeRuns`), shared with the records before it for every ledger that
  did not change, so that keeping it costs the ledgers changed since the last persist.

Metadata (``ManagedLedgerInfo``, ``ManagedCursorInfo``) lives in an inner
:class:`~mledger.storage.MemoryStore`. Single-threaded use; the lock of the inner store
covers metadata.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..codec import EntryMetadata, PositionInfoEntry, encode_entry
from ..core import LedgerNotFoundError, ManagedLedgerClosedError, Position
from ..managed_ledger import ManagedLedger
from ..storage import DEFAULT_MAX_ENTRY_SIZE, MemoryStore, Versioned, checked_size

CURSOR_LEDGER_BASE = 1 << 62
"""First id of cursor ledgers; data ledger ids from the log must stay below it (the replay
reports rows with larger ids as invalid). Cursor ledger ids never appear in positions or in a
``PositionInfo``."""

EMPTY_ENTRY = encode_entry(b"", EntryMetadata())

_REPEAT_CHUNK = 1 << 16
"""The most copies :func:`add_repeated_entries` hands the managed ledger in one add."""


def add_repeated_entries(ml: ManagedLedger, raw: bytes, count: int) -> Position | None:
    """Append ``count`` copies of the framed entry ``raw`` to ``ml`` (as
    ``ml.add_entries([raw] * count, framed=True)``, the same rollover rules); return the last
    position, None when ``count`` is 0.

    The bulk path of a replay, whose entries carry no payload: O(ledgers touched) in the
    managed ledger, no object per entry (the store still receives every entry, in store
    calls of at most ``_REPEAT_CHUNK`` entries, so memory stays bounded whatever ``count``).
    Raises ``ValueError`` for a negative ``count`` and ``EntryTooLargeError`` (nothing
    written) for an oversized entry.
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    last: Position | None = None
    while count:
        n = min(count, _REPEAT_CHUNK)
        last = ml.append_repeated(raw, n)
        count -= n
    return last


class ReplayStore:
    """``Store`` for replays. See the module docstring. O(1) per call."""

    def __init__(self, max_entry_size: int = DEFAULT_MAX_ENTRY_SIZE) -> None:
        self.max_entry_size = max_entry_size
        self.blocking_writes = False  # counts only: a managed ledger writes on the adding thread
        self.lazy_entries = True  # cursor records may come sized, to be encoded when read
        self._meta = MemoryStore(max_entry_size)
        self._counts: dict[int, int] = {}
        self._lengths: dict[int, int] = {}  # bytes appended per ledger (ledger_length)
        # cursor ledger -> (first id, entries): bytes, or records encoded when read
        self._tails: dict[int, tuple[int, list[bytes | PositionInfoEntry]]] = {}
        self._sealed: set[int] = set()
        self._expected: int | None = None
        self._next_cursor_ledger = CURSOR_LEDGER_BASE
        self._highest_data_ledger = -1
        self._closed = False

    # -- ledger ids -------------------------------------------------------------------------
    def expect_ledger(self, ledger_id: int) -> None:
        """The next ``create_ledger`` returns ``ledger_id`` (a data ledger of the log).

        Raises ``ValueError`` if the id is not above every data ledger so far or collides
        with the cursor-ledger range.
        """
        if not 0 <= ledger_id < CURSOR_LEDGER_BASE:
            raise ValueError(f"ledger id {ledger_id} outside the replayable range [0, {CURSOR_LEDGER_BASE})")
        if ledger_id <= self._highest_data_ledger:
            raise ValueError(f"ledger id {ledger_id} is not above the last data ledger {self._highest_data_ledger}")
        self._expected = ledger_id

    # -- LedgerStore ------------------------------------------------------------------------
    def create_ledger(self) -> int:
        self._check_open()
        if self._expected is not None:
            ledger_id, self._expected = self._expected, None
            self._highest_data_ledger = ledger_id
        else:
            ledger_id = self._next_cursor_ledger
            self._next_cursor_ledger += 1
        self._counts[ledger_id] = 0
        return ledger_id

    def append(self, ledger_id: int, data: bytes) -> int:
        return self.append_many(ledger_id, (data,))

    def append_many(self, ledger_id: int, entries: Sequence[bytes]) -> int:
        """Append ``entries``; a :class:`~mledger.codec.PositionInfoEntry` among them is
        checked against ``max_entry_size`` by its bound, sized only when the bound reaches the
        limit (:meth:`~mledger.codec.PositionInfoEntry.fits`), and not counted in
        :meth:`ledger_length`. Raises like ``LedgerStore.append_many``."""
        self._check_open()
        cursor_ledger = ledger_id >= CURSOR_LEDGER_BASE
        size = self._checked_records(entries) if cursor_ledger else checked_size(entries, self.max_entry_size)
        first = self._count(ledger_id)
        if ledger_id in self._sealed:
            raise LedgerNotFoundError(f"ledger {ledger_id} is sealed and accepts no appends")
        self._counts[ledger_id] = first + len(entries)
        self._lengths[ledger_id] = self._lengths.get(ledger_id, 0) + size
        if cursor_ledger:
            self._tails[ledger_id] = (first, [e if isinstance(e, PositionInfoEntry) else bytes(e) for e in entries])
        return first

    def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        self._check_open()
        count = self._count(ledger_id)
        first, last = max(first_entry, 0), min(last_entry, count - 1)
        if last < first:
            return []
        if ledger_id < CURSOR_LEDGER_BASE:
            return [EMPTY_ENTRY] * (last - first + 1)
        tail_first, tail = self._tails.get(ledger_id, (count, []))
        return [bytes(tail[i - tail_first]) for i in range(max(first, tail_first), last + 1)]

    def last_entry_id(self, ledger_id: int) -> int:
        self._check_open()
        return self._count(ledger_id) - 1

    def ledger_length(self, ledger_id: int) -> int:
        """The bytes appended to ``ledger_id`` as bytes: records appended as
        :class:`~mledger.codec.PositionInfoEntry` (a cursor ledger's) are not counted, as they
        are not sized (mledger reads the lengths of data ledgers only). Raises like
        ``LedgerStore.ledger_length``."""
        self._check_open()
        self._count(ledger_id)
        return self._lengths.get(ledger_id, 0)

    def ledger_exists(self, ledger_id: int) -> bool:
        self._check_open()
        return ledger_id in self._counts

    def seal_ledger(self, ledger_id: int) -> None:
        self._check_open()
        self._count(ledger_id)
        self._sealed.add(ledger_id)

    def delete_ledger(self, ledger_id: int) -> None:
        self._check_open()
        self._counts.pop(ledger_id, None)
        self._lengths.pop(ledger_id, None)
        self._tails.pop(ledger_id, None)
        self._sealed.discard(ledger_id)

    def last_append(self, ledger_id: int) -> list[bytes]:
        """The entries of the last append to a cursor ledger (one persisted state)."""
        return [bytes(e) for e in self._tails.get(ledger_id, (0, []))[1]]

    # -- MetadataStore ----------------------------------------------------------------------
    def get(self, path: str) -> Versioned | None:
        return self._meta.get(path)

    def put(self, path: str, data: bytes, expected_version: int | None = None) -> int:
        return self._meta.put(path, data, expected_version)

    def delete(self, path: str, expected_version: int | None = None) -> None:
        self._meta.delete(path, expected_version)

    def children(self, path: str) -> list[str]:
        return self._meta.children(path)

    def close(self) -> None:
        self._closed = True
        self._meta.close()

    # -- internals --------------------------------------------------------------------------
    def _checked_records(self, entries: Sequence[bytes | PositionInfoEntry]) -> int:
        """``checked_size`` of a cursor ledger's entries, its ``PositionInfoEntry`` records
        checked by :meth:`~mledger.codec.PositionInfoEntry.fits` and not counted. O(entries)."""
        limit = self.max_entry_size
        size = 0
        for entry in entries:
            if not isinstance(entry, PositionInfoEntry):
                size += checked_size((entry,), limit)
            elif not entry.fits(limit):
                checked_size((entry,), limit)  # raises, sized exactly: the one oversized-entry error
        return size

    def _count(self, ledger_id: int) -> int:
        try:
            return self._counts[ledger_id]
        except KeyError:
            raise LedgerNotFoundError(f"ledger {ledger_id} does not exist") from None

    def _check_open(self) -> None:
        if self._closed:
            raise ManagedLedgerClosedError("the store is closed")
