"""What the cluster poller reads from Pulsar's admin answers, checked (``mledger capture``).

Every admin answer is read through these functions, so an answer of the wrong shape (a list
where an object is expected, a position that is not ``L:E`` or has an id below -1, a missing
field) is a :class:`BadAnswer` naming what was wrong, never an ``AttributeError`` and never
read as a deletion. The admin paths are built here too, encoded as Pulsar's clients encode
them.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from ..core import EARLIEST, InvalidPositionError, Position

__all__ = [
    "BadAnswer",
    "admin_path",
    "full_name",
    "entries_added",
    "last_entry",
    "ledger_entries",
    "ledger_ids",
    "names_of",
    "namespace_path",
    "object_of",
    "parse_deleted_ranges",
    "position_of",
]

PARTITION = re.compile(r"^(.*)-partition-(\d+)$")
"""A partition's topic name: the partitioned topic's name and the partition index."""
_RANGE = re.compile(r"\((-?\d+):(-?\d+)\.\.(-?\d+):(-?\d+)\]")


class BadAnswer(Exception):
    """An admin answer of the wrong shape: ``kind`` is ``invalid_answer`` or ``missing_field``."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


def parse_deleted_ranges(text: str) -> list[tuple[Position, Position]]:
    """Internal stats' ``individuallyDeletedMessages`` (``[(3:5..3:7],(3:9..3:10]]``) as
    ``(lower, upper]`` position pairs. Raises ``ValueError`` naming the text if it is not that
    form or names an id below -1. O(len(text))."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ValueError(f"not an individuallyDeletedMessages string: {text!r}")
    ranges = []
    for m in _RANGE.finditer(body):
        a, b, c, d = (int(x) for x in m.groups())
        if min(a, b, c, d) < -1:
            raise ValueError(f"an id below -1 in individuallyDeletedMessages: {m.group(0)!r}")
        ranges.append((Position(a, b), Position(c, d)))
    if _RANGE.sub("", body[1:-1]).replace(",", "").strip():
        raise ValueError(f"not an individuallyDeletedMessages string: {text!r}")
    return ranges


def position_of(value: Any, what: str) -> Position:
    """A position of an admin answer (``"L:E"``, both ids -1 or more: -1 is Pulsar's "before the
    first entry", every new subscription's mark-delete is ``L:-1``); :class:`BadAnswer` otherwise."""
    if value is None:
        raise BadAnswer("missing_field", f"{what} is missing")
    if not isinstance(value, str):
        raise BadAnswer("invalid_answer", f"{what} is {value!r}, not a position")
    try:
        position = Position.parse(value)
    except InvalidPositionError as exc:
        raise BadAnswer("invalid_answer", f"{what}: {exc}") from None
    if position.ledger_id < -1 or position.entry_id < -1:
        raise BadAnswer("invalid_answer", f"{what} {value!r} has an id below -1")
    return position


def object_of(value: Any, what: str) -> dict[str, Any]:
    """``value`` if it is a JSON object; :class:`BadAnswer` otherwise."""
    if value is None:
        raise BadAnswer("missing_field", f"{what} is missing")
    if not isinstance(value, dict):
        raise BadAnswer("invalid_answer", f"{what} is a {type(value).__name__}, not an object")
    return value


def names_of(value: Any, what: str) -> list[str]:
    """``value`` if it is a JSON list of strings; :class:`BadAnswer` otherwise."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadAnswer("invalid_answer", f"{what} is {type(value).__name__}, not a list of names")
    return value


def ledger_ids(internal: dict[str, Any]) -> frozenset[int]:
    """The ledger ids internal stats list (nothing when the field has another shape)."""
    ledgers = internal.get("ledgers")
    if not isinstance(ledgers, list):
        return frozenset()
    return frozenset(
        item["ledgerId"] for item in ledgers if isinstance(item, dict) and isinstance(item.get("ledgerId"), int)
    )


def ledger_entries(internal: dict[str, Any]) -> dict[int, int]:
    """How many entries each ledger the internal stats name holds, as far as they say: a listed
    ledger below the one of ``lastConfirmedEntry`` its ``entries`` (a closed ledger's count is
    final), the ledger of ``lastConfirmedEntry`` up to that entry, listed or not (after a
    rollover to an empty ledger it names the last entry of the previous one, which a trim may
    have deleted since: Pulsar keeps it there), a listed ledger above it none. A ledger whose
    count the answer does not give is left out; nothing without a valid ``lastConfirmedEntry``
    (:func:`last_entry` reports it). O(ledgers)."""
    try:
        lce = position_of(internal.get("lastConfirmedEntry"), "lastConfirmedEntry")
    except BadAnswer:
        return {}
    counts = {lce.ledger_id: lce.entry_id + 1} if lce.ledger_id >= 0 else {}
    ledgers = internal.get("ledgers")
    for item in ledgers if isinstance(ledgers, list) else ():
        ledger_id = item.get("ledgerId") if isinstance(item, dict) else None
        if not isinstance(ledger_id, int) or ledger_id == lce.ledger_id:
            continue
        entries = item.get("entries") if ledger_id < lce.ledger_id else 0
        if isinstance(entries, int) and entries >= 0:
            counts[ledger_id] = entries
    return counts


def entries_added(internal: dict[str, Any]) -> int | None:
    """Internal stats' ``entriesAddedCounter``, the entries added since the managed ledger was
    loaded (None when it is missing or not a count)."""
    added = internal.get("entriesAddedCounter")
    return added if isinstance(added, int) and not isinstance(added, bool) and added >= 0 else None


def last_entry(internal: dict[str, Any]) -> Position | None:
    """The topic's last entry when its internal stats were taken: :data:`EARLIEST` when it has
    none, None when the answer does not say. ``lastConfirmedEntry`` names it, unless it is
    ``L:-1`` (ledger ``L`` was just opened, empty): then it is the last entry of the last
    earlier ledger holding entries (a closed ledger's ``entries`` count is final).
    :class:`BadAnswer` for a ``lastConfirmedEntry`` of the wrong shape."""
    raw = internal.get("lastConfirmedEntry")
    if raw is None:
        return None
    last = position_of(raw, "lastConfirmedEntry")
    if last.entry_id >= 0:
        return last
    ledgers = internal.get("ledgers")
    if not isinstance(ledgers, list):
        return None
    top = EARLIEST
    for item in ledgers:
        if not isinstance(item, dict) or not isinstance(item.get("ledgerId"), int):
            return None
        if item["ledgerId"] >= last.ledger_id:
            continue
        entries = item.get("entries")
        if not isinstance(entries, int):
            return None
        if entries > 0:
            top = max(top, Position(item["ledgerId"], entries - 1))
    return top


def full_name(topic: str) -> str:
    """A topic's full name (``persistent://public/default/`` before a short one)."""
    if "://" in topic:
        return topic
    return f"persistent://{topic}" if topic.count("/") == 2 else f"persistent://public/default/{topic}"


def admin_path(full: str, *rest: str) -> str:
    """The admin path of a topic (``/admin/v2/persistent/t/ns/topic/...``)."""
    domain, name = full.split("://", 1)
    tenant, ns, local = name.split("/", 2)
    return "/".join([f"/admin/v2/{domain}", quote(tenant, safe=""), quote(ns, safe=""), quote(local, safe=""), *rest])


def namespace_path(domain: str, namespace: str) -> str:
    """The admin path of a namespace's topic list (``/admin/v2/persistent/t/ns``)."""
    tenant, ns = (p for p in namespace.split("/") if p)
    return f"/admin/v2/{domain}/{quote(tenant, safe='')}/{quote(ns, safe='')}"
