"""Value types of the broker API: subscription and ack types, PIP-423's ``SkipEntry``, ``ClientInfo``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from ..core import InvalidRequestError

__all__ = ["AckType", "ClientInfo", "SkipEntry", "SubscriptionType", "enum_member"]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1

Named = TypeVar("Named", bound=Enum)


def enum_member(kind: type[Named], value: object, invalid: str) -> Named:
    """The member of ``kind`` whose value is ``value`` exactly (as Jackson reads Pulsar's enums),
    or ``value`` itself when it is one; ``InvalidRequestError`` (400) reading ``{invalid}
    {value!r}: expected one of`` the values otherwise. O(len(kind)) on failure."""
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        names = ", ".join(str(member.value) for member in kind)
        raise InvalidRequestError(f"{invalid} {value!r}: expected one of {names}") from None


class SubscriptionType(Enum):
    """Pulsar's subscription types; the value is Pulsar's name (stored in the cursor)."""

    EXCLUSIVE = "Exclusive"
    SHARED = "Shared"
    FAILOVER = "Failover"
    KEY_SHARED = "Key_Shared"

    @property
    def is_cumulative_ack_mode(self) -> bool:
        """Pulsar's ``Subscription.isCumulativeAckMode``: Exclusive and Failover."""
        return self in (SubscriptionType.EXCLUSIVE, SubscriptionType.FAILOVER)

    @property
    def is_individual_ack_mode(self) -> bool:
        """Pulsar's ``Subscription.isIndividualAckMode``: Shared and Key_Shared."""
        return not self.is_cumulative_ack_mode

    @classmethod
    def parse(cls, value: str | SubscriptionType) -> SubscriptionType:
        """A type from itself, its Pulsar name or its enum name (case-insensitive).

        Raises :class:`~mledger.core.InvalidRequestError` naming the value.
        """
        if isinstance(value, SubscriptionType):
            return value
        if isinstance(value, str):
            wanted = value.strip().lower().replace("-", "_")
            for member in cls:
                if wanted in (member.value.lower(), member.name.lower()):
                    return member
        raise InvalidRequestError(
            f"invalid subscription type {value!r}: expected one of {', '.join(m.value for m in cls)}"
        )


class AckType(Enum):
    """Pulsar's ``CommandAck.AckType``."""

    INDIVIDUAL = "Individual"
    CUMULATIVE = "Cumulative"


@dataclass(frozen=True, slots=True)
class SkipEntry:
    """One entry to skip (PIP-423's internal model): the whole entry, or some batch indexes.

    ``batch_indexes`` None or empty means the whole entry; otherwise it is copied into a tuple
    (a defensive copy, as Pulsar's ``List.copyOf``). Construction raises
    :class:`~mledger.core.InvalidRequestError` naming a value that is not an int64 id or an
    int32 index; whether an index fits the entry's batch is checked when the entry is read.

    >>> SkipEntry(3, 5, [2, 0]).batch_indexes
    (2, 0)
    >>> SkipEntry(3, 5, []).batch_indexes is None
    True
    """

    ledger_id: int
    entry_id: int
    batch_indexes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("ledger_id", "entry_id"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not _INT64_MIN <= value <= _INT64_MAX:
                raise InvalidRequestError(f"invalid {name} {value!r} in SkipEntry: not an int64")
        indexes = self.batch_indexes
        if indexes is None:
            return
        if isinstance(indexes, (str, bytes)) or not isinstance(indexes, Iterable):
            raise InvalidRequestError(f"invalid batch_indexes {indexes!r} in SkipEntry: not a list of ints")
        copied = tuple(indexes)
        for i in copied:
            if isinstance(i, bool) or not isinstance(i, int) or not _INT32_MIN <= i <= _INT32_MAX:
                raise InvalidRequestError(f"invalid batch index {i!r} in SkipEntry: not an int32")
        object.__setattr__(self, "batch_indexes", copied or None)

    @property
    def is_whole_entry(self) -> bool:
        """True when the whole entry is skipped."""
        return self.batch_indexes is None


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """What a remote client told about its producer or consumer: its connection's address
    (``host:port``), its library version (CONNECT's ``client_version``), the id it gave the
    producer or consumer on its connection and, for a producer, its access mode (Pulsar's
    ``ProducerAccessMode`` name). Reported in the stats; None where unknown."""

    address: str | None = None
    client_version: str | None = None
    client_id: int | None = None
    access_mode: str = "Shared"
