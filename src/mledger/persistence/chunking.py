"""Deprecated alias of :mod:`mledger.codec.chunking` (kept for one release; import from there)."""

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
