"""An acknowledgement as the broker takes it, and its resolution into one cursor plan.

Theory of operation
-------------------
Whatever acknowledges on a subscription crosses into the managed ledger the same way (the
trip is drawn in docs/architecture.md): the subscription resolves it here into one
:class:`~mledger.managed_ledger.AckPlan`, hands the plan to its cursor
(``ManagedCursor.acknowledge``: one mutation, which validates the positions once and returns one
:class:`~mledger.managed_ledger.AckOutcome`), tells the dispatcher the plan and the outcome in
one notification, reports the outcome to the journal once, and follows a mark-delete that moved.

==================  ==========================================================================
what                resolved into
==================  ==========================================================================
``AckRequest``,     whole entries (``entries``; ``message_ids`` without a batch index) and
individual          batch entries by ack set (``ack_sets``; the ``message_ids`` of one batch
                    entry merged into one ack set)
``AckRequest``,     a mark-delete at the message's entry, with the ack set of the indexes after
cumulative          its batch index; None (ignored) at or behind the mark-delete
PIP-423 skip        whole entries and ack sets, every item checked against the topic first
PIP-423 cancel      one whole entry
==================  ==========================================================================

Resolving checks what only the broker knows: a message id's partition, a batch index against
its entry's batch size. An entry's batch size comes from the dispatcher (an entry in a
consumer's hands: the size it read), else from the request (an ack set's own size, then
``AckRequest.batch_sizes``: a caller that knows them, such as the replay), else from the entry
itself, read only then, once for all the entries of the request still unknown. The dispatcher
is asked once per request, for the sizes and the indexes each entry's consumer still holds
together; with those the client batch-acker rule applies: an entry whose held indexes the
request all acknowledges is acknowledged whole (a client acknowledges a batch once every
message of it that it received is acknowledged), even where the ledger keeps no batch-index
state. Positions are not checked here: the cursor checks them, once, when it applies the plan;
a PIP-423 skip is the exception, checking every item against the topic before any partition of
a partitioned topic applies anything.

A new kind of acknowledgement is a field of :class:`AckRequest` (or a method beside
:meth:`AckResolver.skip`), its resolution here, and, if the cursor must do something new with
it, a field of the plan that :class:`~mledger.managed_ledger.AckState` applies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from ..codec import Entry, MessageId
from ..core import CursorModifyingError, InvalidPositionError, InvalidRequestError, Position
from ..managed_ledger import AckPlan, ManagedCursor
from ._types import SkipEntry

__all__ = ["AckRequest", "AckResolver", "HeldBatches", "check_partition", "message_position"]

HeldBatches = Callable[[Sequence[Position]], Mapping[Position, tuple[int, Set[int] | None]]]
"""The dispatcher's one query (``Dispatcher.held_batches``): for the entries of a request that
are in a consumer's hands, their batch size and the indexes the consumer still holds (None for
an entry that is not a batch)."""

_READ_ATTEMPTS = 3

_NO_SIZES: Mapping[Position, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class AckRequest:
    """One acknowledgement from a consumer, whatever its form (what a Pulsar ``CommandAck``
    carries): the one thing :meth:`Consumer.acknowledge_request
    <mledger.broker.Consumer.acknowledge_request>` and the subscription's ack path take. The
    individual parts may be combined; a cumulative ack stands alone.

    Everything is validated before anything is acknowledged; already acknowledged entries are
    ignored.
    """

    entries: Sequence[Position] | np.ndarray = ()
    """Whole entries: positions or an ``(n, 2)`` int64 array of ``(ledger_id, entry_id)`` rows."""
    ack_sets: Sequence[tuple[Position, int, int | None]] = ()
    """Batch entries as Pulsar ack sets: ``(entry, bits still unacknowledged, batch size or None)``."""
    message_ids: Sequence[MessageId] = ()
    """Message ids acknowledged one by one (their partition checked; with a batch index, that
    message of the batch)."""
    cumulative: MessageId | None = None
    """Acknowledge everything up to and including this id (Exclusive and Failover only)."""
    batch_sizes: Mapping[Position, int] = field(default_factory=lambda: _NO_SIZES)
    """Batch sizes the caller knows (a replay has them from its log), used for an entry no
    consumer holds instead of reading the entry. A message id's own ``batch_size`` is not
    trusted: a client may send anything there."""

    def __post_init__(self) -> None:
        if self.cumulative is not None and (len(self.entries) or self.ack_sets or self.message_ids):
            raise InvalidRequestError("a cumulative acknowledgement carries one message id and nothing else")


class AckResolver:
    """Resolves acknowledgements of one subscription into cursor plans (see the module
    docstring). Reads the cursor's state, and entries only for a batch size nobody knows;
    changes nothing. The caller holds the subscription's lock."""

    __slots__ = ("_cursor", "_partition", "_topic")

    def __init__(self, cursor: ManagedCursor, topic: str, partition_index: int) -> None:
        self._cursor = cursor
        self._topic = topic
        self._partition = partition_index

    def individual(self, request: AckRequest, held_batches: HeldBatches) -> AckPlan:
        """The plan of an individual acknowledgement. Raises ``InvalidRequestError`` for a
        message id of another partition or a batch index outside its batch, and what reading
        an entry raises (``InvalidPositionError`` for one that is not in the topic)."""
        if not request.message_ids and not request.ack_sets:
            return AckPlan.of(entries=request.entries)  # whole entries only: nothing to resolve
        whole: list[Position] = []
        indexes: dict[Position, set[int]] = {}  # batch entry -> the message ids' indexes
        for mid in request.message_ids:
            self._check_partition(mid)
            if mid.batch_index < 0:
                whole.append(mid.position)
            else:
                indexes.setdefault(mid.position, set()).add(mid.batch_index)
        ack_sets: list[tuple[Position, int, int]] = []
        if indexes or request.ack_sets:
            wanted = [*indexes, *(p for p, _, _ in request.ack_sets)]
            held = held_batches(wanted)
            known = {**request.batch_sizes, **{p: size for p, _, size in request.ack_sets if size}}
            sizes = self._batch_sizes(wanted, held, known)
            acked: dict[Position, int] = {}  # bits acknowledged per entry: the batch-acker rule
            for position, wanted_indexes in indexes.items():
                size = sizes.get(position)
                if size is None:
                    continue  # acknowledged already (the read found nothing): nothing to check
                bits = _checked_bits(position, wanted_indexes, size)
                ack_sets.append((position, _full(size) & ~bits, size))
                acked[position] = bits
            for position, ack_set, _ in request.ack_sets:
                size = sizes.get(position)
                if size is None:
                    continue
                cut = ack_set & _full(size)
                ack_sets.append((position, cut, size))
                acked[position] = acked.get(position, 0) | (_full(size) & ~cut)
            done = _held_all_acked(held, acked)
            if done:
                whole.extend(done)
                ack_sets = [item for item in ack_sets if item[0] not in done]
        return AckPlan.of(entries=_with(request.entries, whole), ack_sets=ack_sets)

    def cumulative(
        self, mid: MessageId, batch_sizes: Mapping[Position, int], held_batches: HeldBatches
    ) -> AckPlan | None:
        """The plan of a cumulative acknowledgement up to ``mid``; None at or behind the
        mark-delete (Pulsar ignores those). Raises like :meth:`individual`."""
        self._check_partition(mid)
        position = mid.position
        if position <= self._cursor.mark_delete_position:
            return None
        ack_set = None
        if mid.batch_index >= 0:
            size = self._batch_sizes([position], held_batches([position]), batch_sizes).get(position)
            if size is not None:
                _check_batch_index(position, mid.batch_index, size)
                if mid.batch_index < size - 1:
                    ack_set = _full(size) & ~_full(mid.batch_index + 1)
        return AckPlan.cumulative(position, ack_set=ack_set, names_entry=True)

    def skip(
        self,
        items: Iterable[SkipEntry],
        batch_sizes: Mapping[Position, int],
        held_batches: HeldBatches,
    ) -> tuple[AckPlan, bool]:
        """The plan of a PIP-423 skip of checked ``items`` (whole entries, or some indexes of
        batch entries), and whether it names batch indexes the ledger does not track (without
        ``deletion_at_batch_index_level_enabled``: left out, as Pulsar ignores them).

        Checks every item against the topic first: ``InvalidPositionError`` for an entry not
        in it, ``InvalidRequestError`` for a batch index outside its batch; entries already
        acknowledged are left out."""
        whole: set[Position] = set()
        partial: dict[Position, set[int]] = {}
        for item in items:
            position = message_position(item.ledger_id, item.entry_id)
            if item.batch_indexes is None:
                whole.add(position)
                partial.pop(position, None)
            elif position not in whole:
                partial.setdefault(position, set()).update(item.batch_indexes)
        entries = [p for p in sorted(whole) if self._is_live(p)]
        batches = [p for p in sorted(partial) if self._is_live(p)]
        held = held_batches(batches) if batches else {}
        sizes = self._batch_sizes(batches, held, batch_sizes) if batches else {}
        by_index = self._cursor.ledger.config.deletion_at_batch_index_level_enabled
        ack_sets: list[tuple[Position, int, int]] = []
        ignored = False
        for position in batches:
            size = sizes.get(position)
            if size is None:
                continue  # acknowledged meanwhile
            bits = _checked_bits(position, partial[position], size)
            ack_set = _full(size) & ~bits
            if not ack_set or (by_index and _held_all_acked(held, {position: bits})):
                entries.append(position)
            elif by_index:
                ack_sets.append((position, ack_set, size))
            else:
                ignored = True
        return AckPlan.of(entries=entries, ack_sets=ack_sets), ignored

    def cancel(self, position: Position) -> AckPlan:
        """The plan of a PIP-423 cancel of the entry at ``position``: its individual ack."""
        return AckPlan.of(entries=(position,))

    # -- helpers ----------------------------------------------------------------------------------
    def _batch_sizes(
        self,
        positions: Sequence[Position],
        held: Mapping[Position, tuple[int, Set[int] | None]],
        known: Mapping[Position, int],
    ) -> dict[Position, int]:
        """The batch size of each entry of ``positions``: the dispatcher's, the caller's, else
        read (one read for all those; an entry already acknowledged reads as nothing and is
        left out)."""
        sizes: dict[Position, int] = {}
        unknown: list[Position] = []
        for position in positions:
            if position in sizes:
                continue
            in_hands = held.get(position)
            size = in_hands[0] if in_hands is not None else known.get(position)
            if size is not None:
                sizes[position] = size
            elif position not in unknown:
                unknown.append(position)
        for entry in self._read_entries(unknown):
            sizes[entry.position] = max(entry.metadata.num_messages, 1)
        return sizes

    def _read_entries(self, positions: list[Position]) -> list[Entry]:
        if not positions:
            return []
        for _ in range(_READ_ATTEMPTS - 1):
            try:
                return self._cursor.replay_entries(positions)
            except CursorModifyingError:
                continue
        return self._cursor.replay_entries(positions)

    def _is_live(self, position: Position) -> bool:
        """True for an entry to acknowledge, False if already acknowledged; raises if not in the topic."""
        if self._cursor.is_message_deleted(position):
            return False
        if not self._cursor.ledger.is_valid_position(position):
            raise InvalidPositionError(f"message {position} does not exist in topic {self._topic}", position=position)
        return True

    def _check_partition(self, mid: MessageId) -> None:
        check_partition(mid, self._partition, self._topic)


def check_partition(mid: MessageId, partition_index: int, topic: str) -> None:
    """``InvalidRequestError`` unless ``mid`` is a message id of ``topic`` (partition
    ``partition_index``; a message id without a partition is anyone's)."""
    if not isinstance(mid, MessageId):
        raise InvalidRequestError(f"invalid message id {mid!r}")
    if mid.partition not in (-1, partition_index):
        raise InvalidRequestError(f"message id {mid} is of partition {mid.partition}, not of {topic}")


def message_position(ledger_id: int, entry_id: int) -> Position:
    """The position a message id names; ``InvalidRequestError`` for an id that is not an
    integer, ``InvalidPositionError`` for a negative one (PIP-423's checks)."""
    for name, value in (("ledgerId", ledger_id), ("entryId", entry_id)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidRequestError(f"invalid {name} {value!r}: not an integer")
    if ledger_id < 0 or entry_id < 0:
        raise InvalidPositionError(
            f"invalid message id {ledger_id}:{entry_id}: ledgerId, entryId must be non-negative."
        )
    return Position.of(ledger_id, entry_id)


def _check_batch_index(position: Position, index: int, size: int) -> None:
    """``InvalidRequestError`` unless ``index`` is a batch index of a ``size``-message entry."""
    if not 0 <= index < size:
        raise InvalidRequestError(
            f"Invalid batch index {index} for message {position}: the entry holds {size}"
            f" message{'s' if size != 1 else ''} (valid indexes 0..{size - 1})"
        )


def _checked_bits(position: Position, indexes: Iterable[int], size: int) -> int:
    """The bits of batch ``indexes`` of a ``size``-message entry, each checked first (lowest
    first: the error names the lowest bad one)."""
    bits = 0
    for i in sorted(indexes):
        _check_batch_index(position, i, size)
        bits |= 1 << i
    return bits


def _full(size: int) -> int:
    return (1 << size) - 1


def _held_all_acked(
    held: Mapping[Position, tuple[int, Set[int] | None]], acked: Mapping[Position, int]
) -> set[Position]:
    """The client batch-acker rule: the batch entries whose consumer holds indexes that the
    acknowledged bits (per entry) all cover."""
    done: set[Position] = set()
    for position, bits in acked.items():
        in_hands = held.get(position)
        if in_hands is not None and in_hands[1] is not None and all((bits >> i) & 1 for i in in_hands[1]):
            done.add(position)
    return done


def _with(entries: Sequence[Position] | np.ndarray, more: list[Position]) -> Sequence[Position] | np.ndarray:
    """``entries`` and ``more`` together (an array stays an array)."""
    if not more:
        return entries
    if not len(entries):
        return more
    rows = entries if isinstance(entries, np.ndarray) else np.array(entries, np.int64)
    return np.concatenate((rows.reshape(-1, 2), np.array(more, np.int64)))
