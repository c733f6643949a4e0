"""Rows of the ``subscriptions`` log: declarations and timed subscription events.

A row without ``ts_ms`` (and with no event, or ``created``) *declares* a subscription of the
topic: its type and initial position, the subscription existing from the start (``earliest``)
or from the first ack naming it (``latest``). A row with ``ts_ms`` is a *timed event* of the
topic's partition ``partition`` (null: of every partition): ``created`` (the default event when
``ts_ms`` is given), ``reset`` (to ``ledger_id:entry_id``, the position the cursor reads from
next) or ``deleted``. The replay applies a timed event after every other event of its
timestamp and before the later ones (see :mod:`.engine`); ``seq`` keeps the input order.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ._model import SubscriptionSpec
from ._schema import (
    ANOMALY_SCHEMA,
    INITIAL_POSITIONS,
    INVALID_ROW,
    LOG_COLUMNS,
    SUBSCRIPTION_CREATED,
    SUBSCRIPTION_EVENTS,
    SUBSCRIPTION_RESET,
    SUBSCRIPTION_TYPES,
)

__all__ = ["SubscriptionRows"]


def _text_column(table: pa.Table, name: str) -> list[str | None]:
    if name not in table.column_names or pa.types.is_null(table[name].type):
        return [None] * len(table)
    return pc.cast(table[name], pa.string()).to_pylist()


def _int_value(text: str | None, name: str) -> tuple[int | None, str | None]:
    """``(value, problem)`` of an integer cell read as text (None when empty)."""
    if text is None or not text.strip():
        return None, None
    try:
        return int(text.strip()), None
    except ValueError:
        return None, f"{name} is not an integer: {text!r}"


class SubscriptionRows:
    """Validates and accumulates the rows of the subscriptions log's files, in input order:
    :meth:`add` each table, then :meth:`result` gives the specs per topic (declarations first,
    then timed events in input order) and the anomalies of the rows that cannot be used.

    A row with an unknown type, initial position or event, a missing name, a timed event
    without its time or a reset without its position is an ``invalid_row`` anomaly; a second
    declaration of the same topic and subscription too (the first one counts).
    """

    def __init__(self) -> None:
        self.declared: dict[str, dict[str, SubscriptionSpec]] = {}
        self.timed: dict[str, list[SubscriptionSpec]] = {}
        self.bad: list[dict[str, object]] = []
        self.seq = 0

    def result(self) -> tuple[dict[str, tuple[SubscriptionSpec, ...]], pa.Table]:
        topics = {*self.declared, *self.timed}
        out = {t: (*self.declared.get(t, {}).values(), *self.timed.get(t, ())) for t in topics}
        return out, pa.Table.from_pylist(self.bad, schema=ANOMALY_SCHEMA)

    def add(self, table: pa.Table, path: str) -> None:
        cols = {name: _text_column(table, name) for name in (c.name for c in LOG_COLUMNS["subscriptions"])}
        for i in range(len(table)):
            row = {name: values[i] for name, values in cols.items()}
            problem, spec = self._row(row)
            if problem is not None:
                self.bad.append(
                    {
                        "topic": row["topic"],
                        "subscription": row["subscription"],
                        "event": "subscriptions",
                        "reason": INVALID_ROW,
                        "detail": f"{problem} ({path})",
                    }
                )
                continue
            assert spec is not None
            topic = row["topic"]
            assert topic is not None
            if spec.timed:
                self.timed.setdefault(topic, []).append(spec)
            else:
                self.declared.setdefault(topic, {})[spec.name] = spec

    def _row(self, row: dict[str, str | None]) -> tuple[str | None, SubscriptionSpec | None]:
        topic, name, sub_type, initial = row["topic"], row["subscription"], row["type"], row["initial_position"]
        norm_type = (sub_type or "SHARED").strip().upper().replace("-", "_")
        norm_initial = (initial or "earliest").strip().lower()
        ints: dict[str, int | None] = {}
        for col in ("partition", "ts_ms", "ledger_id", "entry_id"):
            ints[col], problem = _int_value(row[col], col)
            if problem is not None:
                return problem, None
        raw_event = row["event"]
        event = raw_event.strip().lower() if raw_event is not None and raw_event.strip() else None
        ts = ints["ts_ms"]
        if event == SUBSCRIPTION_CREATED and ts is None:
            event = None  # a declaration
        elif event is None and ts is not None:
            event = SUBSCRIPTION_CREATED
        if not topic:
            return "topic is missing", None
        if not name:
            return "subscription is missing", None
        if event is not None and event not in SUBSCRIPTION_EVENTS:
            return f"unknown event {raw_event!r}; expected one of {', '.join(SUBSCRIPTION_EVENTS)}", None
        if event in (None, SUBSCRIPTION_CREATED):
            if norm_type not in SUBSCRIPTION_TYPES:
                return f"unknown subscription type {sub_type!r}; expected one of {', '.join(SUBSCRIPTION_TYPES)}", None
            if norm_initial not in INITIAL_POSITIONS:
                return f"unknown initial_position {initial!r}; expected earliest or latest", None
        if event is None:
            if name in self.declared.get(topic, {}):
                return "subscription declared again; the first declaration counts", None
            return None, SubscriptionSpec(name, norm_type, norm_initial)
        if ts is None:
            return f"ts_ms is missing (a {event} event needs its time)", None
        if ts < 0:
            return "ts_ms is negative", None
        partition = ints["partition"]
        if partition is not None and not -1 <= partition < (1 << 31):
            return f"partition {partition} is out of range", None
        ledger_id, entry_id = ints["ledger_id"], ints["entry_id"]
        if event == SUBSCRIPTION_RESET:
            if ledger_id is None or entry_id is None:
                return "a reset needs ledger_id and entry_id (the position it reads from next)", None
            if ledger_id < 0 or entry_id < 0:
                return f"reset position {ledger_id}:{entry_id} is negative", None
        self.seq += 1
        return None, SubscriptionSpec(
            name,
            norm_type,
            norm_initial,
            event=event,
            ts_ms=ts,
            partition=partition,
            ledger_id=ledger_id if ledger_id is not None else -1,
            entry_id=entry_id if entry_id is not None else -1,
            seq=self.seq,
        )
