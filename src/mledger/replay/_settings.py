"""Replay settings: the persistence settings cursors run with, plus a few replay switches.

``mledger replay --set key=value`` takes any :class:`~mledger.ManagedLedgerConfig` or
:class:`~mledger.ManagedLedgerFactoryConfig` field (Pulsar's names in snake_case) and the
replay's own keys below. Settings are frozen and picklable: Spark ships them to the workers.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from ..core import (
    PULSAR_VERSIONS,
    ConfigError,
    ManagedLedgerConfig,
    ManagedLedgerFactoryConfig,
    did_you_mean,
    parse_setting,
    preset_values,
)
from ._fs import filesystem_for

REPLAY_DEFAULT_LEDGER_CONFIG = ManagedLedgerConfig(throttle_mark_delete=1.0)
"""Pulsar's broker default ``managedLedgerDefaultMarkDeleteRateLimit`` = 1.0: cursor state is
persisted at most once per second of event time, and once more at the end of the replay."""


PULSAR_DEFAULTS: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {name: version.defaults for name, version in PULSAR_VERSIONS.items()}
)
"""``--defaults NAME``: the preset's ``--set`` values, one per row of the rules table
(:data:`mledger.core.PULSAR_VERSIONS`, which says what each value follows and
which rules without a setting the preset brings: ``pulsar_rules`` names the row)."""


@dataclass(frozen=True)
class ReplaySettings:
    """Everything a replay worker needs besides the events.

    * ``ledger``: cursor and persistence settings. The data-ledger rollover settings
      (``max_entries_per_ledger``, sizes, times) are ignored: the log's positions say where
      ledgers roll over.
    * ``factory``: metadata compression of ``ManagedCursorInfo``.
    * ``emit_state``: put the serialized cursor state in the ``cursors`` output.
    * ``deduplication``: apply producer_name/sequence_id deduplication to produced rows.
    * ``tasks``: Spark tasks of a replay (None: one per core of the session); each replays a
      share of the topic-partitions, balanced by size.
    * ``segment_rows``: at most this many events are applied in one vectorised step. No
      output depends on it (nor on how input batches are cut): within a step each cursor's
      acks are applied in calls cut at its persists, each at its own event time, so every
      persist, figure and maximum is the one of steps of one event (``segment_rows=1``, the
      sequential reference). The default is the prepared log's row group (65,536 rows): one
      step per batch read, and per-step costs (vectorised calls) paid once per batch.
    * ``anomaly_batch_rows``: anomaly rows are handed back in batches of this size.
    * ``defaults``: the :data:`PULSAR_DEFAULTS` preset applied (``--defaults``), None for
      mledger's own defaults. Applying one sets its values first; other keys given with it
      are applied on top.
    """

    ledger: ManagedLedgerConfig = field(default_factory=lambda: REPLAY_DEFAULT_LEDGER_CONFIG)
    factory: ManagedLedgerFactoryConfig = field(default_factory=ManagedLedgerFactoryConfig)
    emit_state: bool = False
    deduplication: bool = True
    tasks: int | None = None
    segment_rows: int = 65_536
    anomaly_batch_rows: int = 10_000
    defaults: str | None = None

    def __post_init__(self) -> None:
        if self.tasks is not None and self.tasks < 1:
            raise ConfigError(f"tasks must be >= 1, got {self.tasks}")
        if self.segment_rows < 1:
            raise ConfigError(f"segment_rows must be >= 1, got {self.segment_rows}")
        if self.anomaly_batch_rows < 1:
            raise ConfigError(f"anomaly_batch_rows must be >= 1, got {self.anomaly_batch_rows}")

    def with_changes(self, **changes: Any) -> ReplaySettings:
        """A copy with some replay fields changed."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_pairs(cls, pairs: Iterable[str], base: ReplaySettings | None = None) -> ReplaySettings:
        """Apply ``key=value`` strings (``--set``) to ``base`` (default settings).

        Raises ``ConfigError`` for an unknown key or a value of the wrong type.
        """
        values: dict[str, str] = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--set expects key=value, got {pair!r}")
            values[key.strip()] = value.strip()
        return (base or cls()).with_values(values)

    def with_values(self, values: Mapping[str, str]) -> ReplaySettings:
        """Apply string values to whichever settings object owns each key."""
        ledger_fields = {f.name: f for f in fields(ManagedLedgerConfig)}
        factory_fields = {f.name: f for f in fields(ManagedLedgerFactoryConfig)}
        own_fields = {f.name: f for f in fields(ReplaySettings) if f.name not in ("ledger", "factory")}
        if "defaults" in values:
            name = values["defaults"]
            rest = {k: v for k, v in values.items() if k != "defaults"}
            if name.lower() in ("", "none", "null"):
                # mledger's own rules again (the values a preset set stay, as --set values would)
                plain = dataclasses.replace(self, defaults=None, ledger=self.ledger.with_changes(pulsar_rules=None))
                return plain.with_values(rest)
            preset = dataclasses.replace(self, defaults=name).with_values(preset_values(name))
            return preset.with_values(rest) if rest else preset
        ledger: dict[str, Any] = {}
        factory: dict[str, Any] = {}
        own: dict[str, Any] = {}
        for key, raw in values.items():
            if key in ledger_fields:
                ledger[key] = parse_setting(key, raw, getattr(self.ledger, key), ledger_fields[key].type)
            elif key in factory_fields:
                factory[key] = parse_setting(key, raw, getattr(self.factory, key), factory_fields[key].type)
            elif key in own_fields:
                own[key] = parse_setting(key, raw, getattr(self, key), own_fields[key].type)
            else:
                raise _unknown_setting(key)
        return dataclasses.replace(
            self,
            ledger=self.ledger.with_changes(**ledger) if ledger else self.ledger,
            factory=dataclasses.replace(self.factory, **factory) if factory else self.factory,
            **own,
        )

    @property
    def ack_format(self) -> str:
        """The individual-ack format these settings persist with (``auto`` resolved), for the
        summaries that say how each format applies the limit."""
        return self.ledger.effective_ack_format

    def value(self, key: str) -> Any:
        """The value of a ``--set`` key (raises ``ConfigError`` for an unknown key)."""
        if key in {f.name for f in fields(ManagedLedgerConfig)}:
            return getattr(self.ledger, key)
        if key in {f.name for f in fields(ManagedLedgerFactoryConfig)}:
            return getattr(self.factory, key)
        if key in {f.name for f in fields(ReplaySettings)} and key not in ("ledger", "factory"):
            return getattr(self, key)
        raise _unknown_setting(key)

    @classmethod
    def known_keys(cls) -> list[str]:
        """Every key ``--set`` accepts."""
        names = [f.name for f in fields(ManagedLedgerConfig)] + [f.name for f in fields(ManagedLedgerFactoryConfig)]
        names += [f.name for f in fields(cls) if f.name not in ("ledger", "factory")]
        return sorted(names)


def _unknown_setting(key: str) -> ConfigError:
    """The error for a key ``--set`` does not take: the closest one when it is a likely typo,
    else every key it takes."""
    known = ReplaySettings.known_keys()
    hint = did_you_mean(key, known)
    return ConfigError(f"unknown setting {key!r}" + (hint or f"; known settings: {', '.join(known)}"))


SETTINGS_FILE = "settings.json"
"""What a replay writes beside its outputs: the settings it ran with (``OUT_DIR/settings.json``)."""


def settings_record(
    settings: ReplaySettings, engine: str, sweep: Mapping[str, list[Any]] | None = None
) -> dict[str, Any]:
    """The JSON document of :data:`SETTINGS_FILE`: ``{"format": 1, "engine": ..., "ledger":
    {...}, "factory": {...}, <replay fields>, "sweep": {key: [values...]}}`` (every field,
    defaults included; ``sweep`` is ``{}`` without a sweep, and the swept keys' values in
    ``ledger`` / ``factory`` are then the base the sweep started from)."""
    return {"format": 1, "engine": engine, **dataclasses.asdict(settings), "sweep": dict(sweep or {})}


def write_settings(
    out_dir: str, settings: ReplaySettings, engine: str, sweep: Mapping[str, list[Any]] | None = None
) -> None:
    """Write :data:`SETTINGS_FILE` into ``out_dir`` (a local path or a pyarrow filesystem URI)."""
    fs, root = filesystem_for(out_dir)
    fs.create_dir(root, recursive=True)
    text = json.dumps(settings_record(settings, engine, sweep), indent=2) + "\n"  # sweep keys in their order
    with fs.open_output_stream(posixpath.join(root, SETTINGS_FILE)) as f:
        f.write(text.encode("utf-8"))
