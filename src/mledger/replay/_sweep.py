"""Settings sweeps: one replay of each topic-partition under several settings at once.

``mledger replay --sweep KEY=V1,V2,...`` (repeatable; any ``--set`` key) replays every
topic-partition under every combination of the values (the cartesian product, in the order
given), reading its events once: each batch read is fed to one replayer per combination
(:class:`Variant`). The outputs carry each swept key as a column with the combination's value,
so one output directory holds every combination, and the summary compares them side by side.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..core import ConfigError
from ._schema import OUTPUTS
from ._settings import ReplaySettings

NOT_SWEEPABLE = frozenset({"tasks", "anomaly_batch_rows"})
"""Keys that do not change what a replay computes (only how it runs)."""


@dataclass(frozen=True)
class Variant:
    """One combination of a sweep: the settings it replays with, and the swept keys' values."""

    settings: ReplaySettings
    values: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        """``key=value, ...`` (empty without a sweep)."""
        return ", ".join(f"{k}={v}" for k, v in self.values)


def parse_sweep(specs: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``["k=a,b", "j=1,2"]`` -> ``[("k", ["a", "b"]), ("j", ["1", "2"])]``; raises
    ``ConfigError`` for a malformed spec, a key given twice or a value listed twice."""
    out: list[tuple[str, list[str]]] = []
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        items = [v.strip() for v in values.split(",")]
        if not sep or not key or not values.strip() or any(v == "" for v in items):
            raise ConfigError(f"--sweep expects KEY=V1,V2,..., got {spec!r}")
        if any(key == k for k, _ in out):
            raise ConfigError(f"--sweep {key}: the key is swept twice; list every value in one --sweep")
        if len(set(items)) != len(items):
            raise ConfigError(f"--sweep {key}: a value is listed twice in {values!r}")
        if key in NOT_SWEEPABLE:
            raise ConfigError(f"--sweep {key}: {key} does not change what a replay computes; set it with --set")
        if key in {f.name for schema in OUTPUTS.values() for f in schema}:
            raise ConfigError(f"--sweep {key}: the name of an output column")
        out.append((key, items))
    return out


def variants(base: ReplaySettings, sweep: Sequence[str] = (), fixed: Sequence[str] = ()) -> list[Variant]:
    """Every combination of ``sweep`` over ``base`` (one :class:`Variant` of ``base`` itself
    without a sweep). ``fixed``: the ``--set`` keys, which a sweep may not repeat.
    Raises ``ConfigError`` for an unknown key or a bad value, naming it."""
    parsed = parse_sweep(sweep)
    if not parsed:
        return [Variant(base)]
    for key, _ in parsed:
        if key in fixed:
            raise ConfigError(f"{key} is given with both --set and --sweep")
        base.value(key)  # unknown keys fail here, naming the known ones
    keys = [k for k, _ in parsed]
    out = []
    for combo in itertools.product(*(values for _, values in parsed)):
        settings = base.with_values(dict(zip(keys, combo, strict=False)))
        if "defaults" in keys:  # a preset sets many keys: the --set values win over it
            settings = settings.with_values({k: _as_text(base.value(k)) for k in fixed})
        out.append(Variant(settings, tuple((k, settings.value(k)) for k in keys)))
    return out


def _as_text(value: Any) -> str:
    """A setting's value as ``--set`` text (None as ``none``)."""
    return "none" if value is None else str(value)


def _arrow_type(values: Sequence[Any]) -> pa.DataType:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return pa.bool_()
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pa.int64()
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return pa.float64()
    return pa.string()


def sweep_fields(chosen: Sequence[Variant]) -> list[pa.Field]:
    """The output columns a sweep adds: one per swept key, typed by its values."""
    if not chosen or not chosen[0].values:
        return []
    keys = [k for k, _ in chosen[0].values]
    fields = []
    for i, key in enumerate(keys):
        values = [v.values[i][1] for v in chosen]
        t = _arrow_type(values)
        fields.append(pa.field(key, t))
    return fields


def column_value(field: pa.Field, value: Any) -> Any:
    """A swept value as its output column stores it."""
    if value is None or not pa.types.is_string(field.type):
        return value
    return str(value)
