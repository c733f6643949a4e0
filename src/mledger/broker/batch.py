"""Deprecated alias of :mod:`mledger.codec.batch` (kept for one release; import from there)."""

from ..codec.batch import (
    SingleMessage as SingleMessage,
    decode_batch as decode_batch,
    encode_batch as encode_batch,
)
