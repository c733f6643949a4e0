"""Deprecated alias of :mod:`mledger.codec.varint` (kept for one release; import from there)."""

from .codec.varint import (
    EGROUP as EGROUP,
    I32 as I32,
    I64 as I64,
    LEN as LEN,
    SGROUP as SGROUP,
    VARINT as VARINT,
    as_int64 as as_int64,
    check_int64 as check_int64,
    decode_utf8 as decode_utf8,
    get_len as get_len,
    get_varint as get_varint,
    parse_flat as parse_flat,
    put_bytes_field as put_bytes_field,
    put_tag as put_tag,
    put_varint as put_varint,
    read_tag as read_tag,
    skip_field as skip_field,
)
from .core.ints import INT64_MAX as INT64_MAX, INT64_MIN as INT64_MIN
