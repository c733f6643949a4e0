"""Deprecated alias of :mod:`mledger.codec.compression` (kept for one release; import from there)."""

from ..codec.compression import (
    MAGIC as MAGIC,
    CompressionType as CompressionType,
    compress_metadata as compress_metadata,
    compress_payload as compress_payload,
    decompress_metadata as decompress_metadata,
    decompress_payload as decompress_payload,
    is_compressed as is_compressed,
    parse_compression_type as parse_compression_type,
)
