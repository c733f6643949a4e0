"""The hash functions Pulsar routes with.

* :func:`murmur3_32` - MurmurHash3 x86 32-bit (Guava's ``murmur3_32``), used by Key_Shared:
  Pulsar's ``Murmur3_32Hash.makeHash`` is ``murmur3_32(bytes, seed 0) & Integer.MAX_VALUE``.
* :func:`java_string_hash` - Java's ``String.hashCode`` masked non-negative, the Java client's
  default ``HashingScheme.JavaStringHash`` for choosing a partition by key.
"""

from __future__ import annotations

__all__ = ["NONE_KEY", "java_string_hash", "murmur3_32", "sticky_key_hash"]

_MASK32 = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593

NONE_KEY = "NONE_KEY"
"""The sticky key of a message without a key (Pulsar's ``Commands.NONE_KEY``)."""


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86_32 of ``data`` as an unsigned 32-bit int. O(len(data)).

    >>> hex(murmur3_32(b"hello"))
    '0x248bfa47'
    """
    h = seed & _MASK32
    n = len(data)
    full = n - n % 4
    for i in range(0, full, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * _C1) & _MASK32
        k = ((k << 15) | (k >> 17)) & _MASK32
        k = (k * _C2) & _MASK32
        h ^= k
        h = ((h << 13) | (h >> 19)) & _MASK32
        h = (h * 5 + 0xE6546B64) & _MASK32
    k = 0
    rest = n & 3
    if rest == 3:
        k ^= data[full + 2] << 16
    if rest >= 2:
        k ^= data[full + 1] << 8
    if rest >= 1:
        k ^= data[full]
        k = (k * _C1) & _MASK32
        k = ((k << 15) | (k >> 17)) & _MASK32
        k = (k * _C2) & _MASK32
        h ^= k
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h


def sticky_key_hash(key: str | bytes | None) -> int:
    """Pulsar's Key_Shared hash of a message key (``NONE_KEY`` when it has none), in [0, 2**31)."""
    if key is None:
        key = NONE_KEY
    raw = key.encode() if isinstance(key, str) else key
    return murmur3_32(raw) & 0x7FFFFFFF


def java_string_hash(text: str) -> int:
    """``text.hashCode() & Integer.MAX_VALUE`` as the JVM computes it (UTF-16 code units).

    >>> java_string_hash("hello")
    99162322
    """
    h = 0
    raw = text.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + (raw[i] << 8 | raw[i + 1])) & _MASK32
    return h & 0x7FFFFFFF
