"""``redelivered_messages``: which acknowledged messages a cursor recovered from its stored
record delivers again, message by message (the differential test's prediction), on a state
stored by a real cursor and read back by ``CursorStateStore.recover``."""

from __future__ import annotations

from mledger import EntryMetadata, ManagedLedgerConfig, ManagedLedgerFactory, MemoryStore
from mledger.core import Position
from mledger.managed_ledger import CursorStateStore, InitialPosition, redelivered_messages


def test_what_the_stored_record_lacks_comes_back_message_by_message() -> None:
    """Entries 0-5 of one message, entry 6 a batch of 4. Stored: entry 0 (the mark-delete),
    entries 2-3 and indexes 0-1 of the batch; then, held back by a rate limit of one persist a
    minute, entry 5 and index 2. A recovery delivers again entry 5 and index 2 of the batch,
    not what the record holds, nor what was never acknowledged (that comes back anyway)."""
    factory = ManagedLedgerFactory(MemoryStore())
    ml = factory.open("orders", ManagedLedgerConfig(throttle_mark_delete=1 / 60))
    p = [ml.add_entry(b"m") for _ in range(6)] + [ml.add_entry(b"b", EntryMetadata(num_messages=4))]
    cursor = ml.open_cursor("billing", InitialPosition.EARLIEST)
    cursor.delete([p[0], p[2], p[3]])  # the first change is persisted
    cursor.delete_batch_indexes(p[6], [0, 1], batch_size=4)
    cursor.flush()
    cursor.delete(p[5])  # held back by the rate limit
    cursor.delete_batch_indexes(p[6], [2], batch_size=4)
    recovered = CursorStateStore(ml, "billing").recover()
    assert recovered is not None
    acked = [(p[i], -1) for i in (0, 2, 3, 5)] + [(p[6], i) for i in (0, 1, 2)]
    assert redelivered_messages(recovered, acked) == [(p[5], -1), (p[6], 2)]
    assert redelivered_messages(recovered, [(Position(p[0].ledger_id, -1), -1)]) == []  # below the mark-delete
    factory.close()
