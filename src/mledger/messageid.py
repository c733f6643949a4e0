"""Deprecated alias of :mod:`mledger.codec.messageid` (kept for one release; import from there)."""

from .codec.messageid import (
    InvalidMessageIdError as InvalidMessageIdError,
    MessageId as MessageId,
    as_position as as_position,
)
