"""Deprecated alias of :mod:`mledger.codec.entry` (kept for one release; import from there)."""

from .codec.entry import (
    Entry as Entry,
    EntryMetadata as EntryMetadata,
    Properties as Properties,
    crc32c as crc32c,
    decode_entry as decode_entry,
    encode_entry as encode_entry,
)
