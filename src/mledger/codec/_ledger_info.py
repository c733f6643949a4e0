"""``ManagedLedgerInfo``: a managed ledger's ledger list and properties, as Pulsar stores them.

The record lives at ``/managed-ledgers/<name>`` in the metadata store, optionally inside
Pulsar's 0x4778 compression envelope (:mod:`mledger.codec._compression`). The current (open) ledger is written
without ``entries`` and ``size``, as Pulsar writes it: its last confirmed entry is the truth.
A terminated managed ledger carries ``terminatedPosition``, its last entry (Pulsar's state
``Terminated``, kept across restarts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from ..core import DEFAULT_MAX_STATE_SIZE_IN_BYTES, StateCorruptedError
from ._compression import compress_metadata, decompress_metadata
from .proto import MLDataFormats_pb2 as pb

__all__ = [
    "MAX_LEDGER_INFO_BYTES",
    "StoredLedger",
    "decode_managed_ledger_info",
    "decode_terminated_position",
    "encode_managed_ledger_info",
    "looks_like_managed_ledger_info",
]

MAX_LEDGER_INFO_BYTES = DEFAULT_MAX_STATE_SIZE_IN_BYTES
"""Default bound on a decompressed ``ManagedLedgerInfo`` (refuses decompression bombs);
``ManagedLedgerFactoryConfig.max_state_size_in_bytes`` sets it per factory."""


class StoredLedger(NamedTuple):
    """One ``LedgerInfo`` of the list; ``entries`` and ``size`` are None when not written."""

    ledger_id: int
    entries: int | None
    size: int | None
    timestamp: int


def encode_managed_ledger_info(
    ledgers: Iterable[StoredLedger],
    properties: Mapping[str, str],
    compression_type: str | None = None,
    threshold_bytes: int = 0,
    terminated_position: tuple[int, int] | None = None,
) -> bytes:
    """The stored bytes of a ledger list: ``ManagedLedgerInfo``, in the envelope when configured;
    ``terminated_position`` ``(ledger id, entry id)`` marks a terminated managed ledger."""
    info = pb.ManagedLedgerInfo()
    if terminated_position is not None:
        info.terminatedPosition.ledgerId, info.terminatedPosition.entryId = terminated_position
    for ledger in ledgers:
        entry = info.ledgerInfo.add(ledgerId=ledger.ledger_id, timestamp=ledger.timestamp)
        if ledger.entries is not None:
            entry.entries = ledger.entries
        if ledger.size is not None:
            entry.size = ledger.size
    for key, value in properties.items():
        info.properties.add(key=key, value=value)
    return compress_metadata(info.SerializeToString(), compression_type, threshold_bytes, "ledger")


def decode_managed_ledger_info(
    data: bytes, max_size: int = MAX_LEDGER_INFO_BYTES
) -> tuple[list[StoredLedger], dict[str, str]]:
    """The ledger list and properties of stored bytes (plain or enveloped).

    Raises :class:`~mledger.core.StateCorruptedError` when they do not parse, or when
    the envelope claims more than ``max_size`` bytes (refused before allocating).
    """
    info = _parse(data, max_size)
    ledgers = [
        StoredLedger(
            li.ledgerId,
            li.entries if li.HasField("entries") else None,
            li.size if li.HasField("size") else None,
            li.timestamp,
        )
        for li in info.ledgerInfo
    ]
    return ledgers, {kv.key: kv.value for kv in info.properties}


def decode_terminated_position(data: bytes, max_size: int = MAX_LEDGER_INFO_BYTES) -> tuple[int, int] | None:
    """``(ledger id, entry id)`` of a terminated managed ledger's last entry, None when it was
    not terminated. Raises :class:`~mledger.core.StateCorruptedError` as
    :func:`decode_managed_ledger_info`."""
    info = _parse(data, max_size)
    if not info.HasField("terminatedPosition"):
        return None
    return info.terminatedPosition.ledgerId, info.terminatedPosition.entryId


def _parse(data: bytes, max_size: int) -> pb.ManagedLedgerInfo:
    info = pb.ManagedLedgerInfo()
    raw = decompress_metadata(data, max_size)
    try:
        info.ParseFromString(bytes(raw))  # a ledger list is small; protobuf wants bytes
    except Exception as exc:  # protobuf raises DecodeError and friends
        raise StateCorruptedError(f"unreadable ManagedLedgerInfo: {exc}") from exc
    return info


def looks_like_managed_ledger_info(data: bytes, max_size: int = MAX_LEDGER_INFO_BYTES) -> bool:
    """Whether stored bytes parse as a ``ManagedLedgerInfo`` with at least one ledger.

    Tells a managed ledger's node from an intermediate path node when listing ledgers. A
    broken compression envelope still raises ``StateCorruptedError``.
    """
    info = pb.ManagedLedgerInfo()
    raw = decompress_metadata(data, max_size)
    try:
        info.ParseFromString(bytes(raw))  # a ledger list is small; protobuf wants bytes
    except Exception:  # protobuf raises DecodeError and friends
        return False
    return len(info.ledgerInfo) > 0
