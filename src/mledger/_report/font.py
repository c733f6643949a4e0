"""A 5x9 bitmap font for ASCII 32..126, drawn for the report's charts (no font files needed).

Each glyph is 9 rows of 5 pixels: rows 0-6 hold capitals and digits (the baseline is under row
6), lowercase letters use rows 2-6, descenders rows 7-8. ``_DATA`` stores 9 base-32 digits per
glyph, in code-point order; digit ``r`` is row ``r`` and its bits 4..0 are the pixels left to
right. Characters outside the range draw as ``?``.
"""

from __future__ import annotations

from functools import cache

__all__ = ["ADVANCE", "GLYPH_HEIGHT", "GLYPH_WIDTH", "glyph"]

GLYPH_WIDTH = 5
GLYPH_HEIGHT = 9
ADVANCE = 6
"""Horizontal pixels per character (glyph plus one column of spacing)."""

_DIGITS = "0123456789abcdefghijklmnopqrstuv"
_FIRST = 32
_DATA = (
    "000000000444440400aa0000000aavavaa004fke5u400op248j300cik8lid00440000000"  #  !"#$%&'
    "24888420084222480004lel4000044v4400000000c480000v0000000000cc0001248g000"  # ()*+,-./
    "ehjlphe004c4444e00eh1248v00v2421he0026aiv2200vgu11he0068guhhe00v12488800"  # 01234567
    "ehhehhe00ehhf12c000cc0cc0000cc0c4800248g8420000v0v0000842124800eh1240400"  # 89:;<=>?
    "eh1dlle00ehhvhhh00uhhuhhu00ehggghe00sihhhis00vgguggv00vgguggg00ehgnhhf00"  # @ABCDEFG
    "hhhvhhh00e44444e0072222ic00hikokih00ggggggv00hrllhhh00hhpljhh00ehhhhhe00"  # HIJKLMNO
    "uhhuggg00ehhhlid00uhhukih00fgge11u00v44444400hhhhhhe00hhhhha400hhhllla00"  # PQRSTUVW
    "hha4ahh00hhha44400v1248gv00e88888e000g8421000e22222e004ah0000000000000v0"  # XYZ[\\]^_
    "84000000000e1fhf00ggmphhu0000egghe0011djhhf0000ehvge00698s8880000fhhhf1e"  # `abcdefg
    "ggmphhh0040c444e002062222icggikoki00c44444e0000qllll0000mphhh0000ehhhe00"  # hijklmno
    "00uhhhugg00fhhhf1100mpggg0000fge1u0088s88960000hhhjd0000hhha40000hhlla00"  # pqrstuvw
    "00ha4ah0000hhhhf1e00v248v00344844300444444400o44244o00008l20000"  # xyz{|}~
)


@cache
def glyph(char: str) -> tuple[tuple[int, ...], ...]:
    """The pixel columns set in each row of ``char``: ``rows[r]`` lists the x of every set pixel."""
    code = ord(char) if len(char) == 1 else 0
    if not _FIRST <= code < _FIRST + len(_DATA) // GLYPH_HEIGHT:
        code = ord("?")
    start = (code - _FIRST) * GLYPH_HEIGHT
    rows = []
    for digit in _DATA[start:start + GLYPH_HEIGHT]:
        bits = _DIGITS.index(digit)
        rows.append(tuple(x for x in range(GLYPH_WIDTH) if bits & (1 << (GLYPH_WIDTH - 1 - x))))
    return tuple(rows)
