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
    "as_int64",
    "check_int",
]


def as_int64(u: int) -> int:
    """Reinterpret an unsigned 64-bit value as Java's ``long`` (two's complement): what a
    ``uint64`` protobuf field holds when Java wrote a negative ``long`` into it (-1 arrives as
    ``2**64 - 1``). The one place mledger does this. O(1).

    >>> as_int64((1 << 64) - 1), as_int64(5)
    (-1, 5)
    """
    return u - (1 << 64) if u > INT64_MAX else u


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
