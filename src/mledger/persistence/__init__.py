"""Pure codecs for cursor state: protobuf records, metadata compression, PIP-381 chunks.

Nothing here does I/O: the cursor turns its state into a :class:`CursorState`, these
functions turn that into bytes (and back), and the stores keep the bytes.
"""

from .codec import (
    decode_managed_cursor_info as decode_managed_cursor_info,
    decode_position_info as decode_position_info,
    encode_managed_cursor_info as encode_managed_cursor_info,
    encode_position_info as encode_position_info,
)
from .chunking import (
    FOOTER_MAX_BYTES as FOOTER_MAX_BYTES,
    ChunkFooter as ChunkFooter,
    pack_entries as pack_entries,
    parse_footer as parse_footer,
    part_entry_ids as part_entry_ids,
    reassemble as reassemble,
    split_chunks as split_chunks,
    unpack_payload as unpack_payload,
)
from .compression import (
    MAGIC as MAGIC,
    CompressionType as CompressionType,
    compress_metadata as compress_metadata,
    compress_payload as compress_payload,
    decompress_metadata as decompress_metadata,
    decompress_payload as decompress_payload,
    is_compressed as is_compressed,
    parse_compression_type as parse_compression_type,
)
from .state import CursorState as CursorState, RangeArrays as RangeArrays

__all__ = [
    "FOOTER_MAX_BYTES",
    "MAGIC",
    "ChunkFooter",
    "CompressionType",
    "CursorState",
    "RangeArrays",
    "compress_metadata",
    "compress_payload",
    "decompress_metadata",
    "decompress_payload",
    "is_compressed",
    "pack_entries",
    "parse_compression_type",
    "parse_footer",
    "part_entry_ids",
    "reassemble",
    "split_chunks",
    "unpack_payload",
    "decode_managed_cursor_info",
    "decode_position_info",
    "encode_managed_cursor_info",
    "encode_position_info",
]
