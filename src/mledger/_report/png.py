"""A tiny RGB raster canvas and PNG encoder (``zlib`` + ``struct``): rectangles, lines, text.

Enough for bar charts: axis-aligned shapes need no anti-aliasing, and text uses the bitmap font
of :mod:`mledger._report.font` scaled by an integer factor. Coordinates are device pixels,
(0, 0) top left; everything drawn is clipped to the canvas. Fill cost is O(area) with one slice
assignment per row; encoding is O(width x height).
"""

from __future__ import annotations

import struct
import zlib

from .font import ADVANCE, GLYPH_HEIGHT, glyph

__all__ = ["Canvas", "Color", "hex_color"]

Color = tuple[int, int, int]


def hex_color(text: str) -> Color:
    """``"#rrggbb"`` as an RGB tuple."""
    value = text.lstrip("#")
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


class Canvas:
    """A ``width`` x ``height`` RGB image filled with ``background``."""

    def __init__(self, width: int, height: int, background: Color = (255, 255, 255)) -> None:
        if width < 1 or height < 1:
            raise ValueError(f"canvas size must be positive, got {width}x{height}")
        self.width = width
        self.height = height
        self._rows = [bytearray(bytes(background) * width) for _ in range(height)]

    def fill_rect(self, x: int, y: int, w: int, h: int, color: Color) -> None:
        """Fill the rectangle with top left (x, y) and size w x h (clipped)."""
        x0, y0 = max(0, int(x)), max(0, int(y))
        x1, y1 = min(self.width, int(x + w)), min(self.height, int(y + h))
        if x1 <= x0 or y1 <= y0:
            return
        run = bytes(color) * (x1 - x0)
        for row in self._rows[y0:y1]:
            row[3 * x0:3 * x1] = run

    def hline(self, x0: int, x1: int, y: int, color: Color, thickness: int = 1, dash: int = 0) -> None:
        """A horizontal line from x0 to x1 (dashed with ``dash``-pixel dashes when > 0)."""
        if dash <= 0:
            self.fill_rect(x0, y, x1 - x0, thickness, color)
            return
        for start in range(int(x0), int(x1), 2 * dash):
            self.fill_rect(start, y, min(dash, x1 - start), thickness, color)

    def vline(self, x: int, y0: int, y1: int, color: Color, thickness: int = 1, dash: int = 0) -> None:
        """A vertical line from y0 to y1 (dashed with ``dash``-pixel dashes when > 0)."""
        if dash <= 0:
            self.fill_rect(x, y0, thickness, y1 - y0, color)
            return
        for start in range(int(y0), int(y1), 2 * dash):
            self.fill_rect(x, start, thickness, min(dash, y1 - start), color)

    @staticmethod
    def text_width(text: str, scale: int) -> int:
        """Width in pixels of ``text`` at ``scale`` (without the trailing spacing column)."""
        return max(0, (len(text) * ADVANCE - 1) * scale)

    @staticmethod
    def text_height(scale: int) -> int:
        """Height of a line of text including descenders."""
        return GLYPH_HEIGHT * scale

    def text(self, x: int, y: int, text: str, color: Color, scale: int = 2, bold: bool = False) -> int:
        """Draw ``text`` with its top left at (x, y); returns the width drawn. ``bold`` doubles
        every pixel one step to the right (a cheap, even-looking bold)."""
        cursor = int(x)
        for char in text:
            for r, columns in enumerate(glyph(char)):
                for c in columns:
                    self.fill_rect(cursor + c * scale, int(y) + r * scale, scale + (1 if bold else 0), scale, color)
            cursor += ADVANCE * scale
        return self.text_width(text, scale)

    def to_png(self) -> bytes:
        """The image as PNG bytes (8-bit RGB, no filter, zlib level 6)."""
        raw = b"".join(b"\x00" + bytes(row) for row in self._rows)
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return b"".join((
            b"\x89PNG\r\n\x1a\n",
            _chunk(b"IHDR", header),
            _chunk(b"IDAT", zlib.compress(raw, 6)),
            _chunk(b"IEND", b""),
        ))

    def pixel(self, x: int, y: int) -> Color:
        """The color at (x, y) (for tests)."""
        row = self._rows[y]
        return row[3 * x], row[3 * x + 1], row[3 * x + 2]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
