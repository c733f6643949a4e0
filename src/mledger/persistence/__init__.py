"""Deprecated alias of :mod:`mledger.codec` for the cursor-state codecs (kept for one release).

``CursorState`` is now :class:`mledger.codec.cursor_state.PersistedCursorState` (the name no
longer clashes with the cursor's lifecycle enum).
"""

from ..codec.chunking import (
    FOOTER_MAX_BYTES as FOOTER_MAX_BYTES,
    ChunkFooter as ChunkFooter,
    pack_entries as pack_entries,
    parse_footer as parse_footer,
    part_entry_ids as part_entry_ids,
    reassemble as reassemble,
    split_chunks as split_chunks,
    unpack_payload as unpack_payload,
)
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
from ..codec.cursor_info import (
    decode_managed_cursor_info as decode_managed_cursor_info,
    decode_position_info as decode_position_info,
    encode_managed_cursor_info as encode_managed_cursor_info,
    encode_position_info as encode_position_info,
)
from ..codec.cursor_state import PersistedCursorState as PersistedCursorState, RangeArrays as RangeArrays

CursorState = PersistedCursorState
"""The old name of :class:`~mledger.codec.cursor_state.PersistedCursorState`."""
