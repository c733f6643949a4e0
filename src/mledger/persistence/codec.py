"""Deprecated alias of :mod:`mledger.codec.cursor_info` (kept for one release; import from there)."""

from ..codec.cursor_info import (
    decode_managed_cursor_info as decode_managed_cursor_info,
    decode_position_info as decode_position_info,
    encode_managed_cursor_info as encode_managed_cursor_info,
    encode_position_info as encode_position_info,
)
