"""Deprecated alias of :mod:`mledger.core.ranges` (kept for one release; import from there)."""

from .core.ranges import (
    MAX_ENTRY_ID as MAX_ENTRY_ID,
    AckRangeSet as AckRangeSet,
    OpenClosedRange as OpenClosedRange,
    ack_set_to_words as ack_set_to_words,
    bitmap_to_words as bitmap_to_words,
    words_to_ack_set as words_to_ack_set,
    words_to_entries as words_to_entries,
)
