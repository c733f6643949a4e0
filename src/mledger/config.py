"""Deprecated alias of :mod:`mledger.core.config` (kept for one release; import from there)."""

from .core.config import (
    COMPRESSION_TYPES as COMPRESSION_TYPES,
    INDIVIDUAL_ACK_FORMATS as INDIVIDUAL_ACK_FORMATS,
    ManagedLedgerConfig as ManagedLedgerConfig,
    ManagedLedgerFactoryConfig as ManagedLedgerFactoryConfig,
)
