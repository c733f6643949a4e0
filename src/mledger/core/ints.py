"""Fixed-width integer bounds: Java's ``long`` and ``int``, which every Pulsar id and count is.

Defined once here; the codecs, positions and message ids all check against these.
"""

from __future__ import annotations

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
UINT64_MASK = (1 << 64) - 1
UINT32_MASK = (1 << 32) - 1
INT64_SIGN = 1 << 63
INT32_SIGN = 1 << 31

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT32_SIGN",
    "INT64_MAX",
    "INT64_MIN",
    "INT64_SIGN",
    "UINT32_MASK",
    "UINT64_MASK",
    "check_int",
]


def check_int(name: str, value: object, low: int, high: int, error: type[Exception]) -> None:
    """Raise ``error`` naming ``name`` unless ``value`` is an int (not a bool) in ``[low, high]``.

    The one check behind every id and count that goes on Pulsar's wire.
    """
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise error(f"invalid {name} {value!r}: not an integer")
    if not low <= value <= high:
        bits = "int64" if high == INT64_MAX else "int32"
        raise error(f"invalid {name} {value}: outside the {bits} range")
