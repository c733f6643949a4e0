"""A per-topic schema registry: versions and Pulsar's default compatibility check.

Pulsar keeps one schema history per topic (a partitioned topic's partitions share their
parent's). A schema is ``(type, definition, properties)`` with Pulsar's ``Schema.Type`` numbers
(``Json`` = 2, ``Avro`` = 4, ``String`` = 1, ...); versions count from 0.
:meth:`SchemaRegistry.get_or_create` returns the version of an identical schema, registers a
new one when it is compatible with the latest, and refuses it otherwise with
:class:`IncompatibleSchemaError`. Compatibility is Pulsar's broker default, ``FULL``: the types
must be equal; for record schemas (Avro, JSON, Protobuf: an Avro record definition in JSON) a
field present in only one of the two must have a default, and a field in both must have the
same type. A definition that is not an Avro record is compatible only when identical.

History lives in the metadata store at ``/schemas/<managed-ledger name of the topic>`` as JSON,
written with compare-and-set, so it survives restarts. Thread-safe (one lock).
"""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass
from typing import Any

from ..core.errors import BadVersionError, MLedgerError, StateCorruptedError
from ..storage import NEW_NODE, Store
from .names import TopicName

__all__ = ["IncompatibleSchemaError", "SchemaInfo", "SchemaRegistry"]

SCHEMAS_ROOT = "/schemas"
_RECORD_TYPES = {2, 3, 4}  # Json, Protobuf, Avro: Avro record definitions


class IncompatibleSchemaError(MLedgerError):
    """A schema is not compatible with the topic's latest schema (Pulsar's IncompatibleSchema)."""

    http_status = 409


@dataclass(frozen=True)
class SchemaInfo:
    """One schema: Pulsar's ``Schema`` message (type number, name, definition, properties)."""

    type: int
    data: bytes
    name: str = ""
    properties: tuple[tuple[str, str], ...] = ()

    def same_definition(self, other: SchemaInfo) -> bool:
        """Equal type, definition and properties (the name does not count, as in Pulsar)."""
        return (self.type, self.data, dict(self.properties)) == (other.type, other.data, dict(other.properties))


class SchemaRegistry:
    """Schema histories of the topics in one metadata store."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()

    def versions(self, topic: str) -> list[SchemaInfo]:
        """The topic's schemas, version 0 first (empty when it has none)."""
        return self._load(_path(topic))[0]

    def get(self, topic: str, version: int | None = None) -> tuple[int, SchemaInfo] | None:
        """``(version, schema)``: the latest, or the given version; None when there is none."""
        history = self.versions(topic)
        if not history:
            return None
        if version is None:
            return len(history) - 1, history[-1]
        if 0 <= version < len(history):
            return version, history[version]
        return None

    def get_or_create(self, topic: str, schema: SchemaInfo) -> int:
        """The version of ``schema`` on ``topic``, registering it when it is new and compatible.

        Raises :class:`IncompatibleSchemaError` naming the conflict.
        """
        path = _path(topic)
        with self._lock:
            for _ in range(3):
                history, version = self._load(path)
                for i, known in enumerate(history):
                    if known.same_definition(schema):
                        return i
                if history:
                    check_full_compatibility(history[-1], schema)
                history.append(schema)
                try:
                    self._store.put(path, _encode(history), NEW_NODE if version is None else version)
                except BadVersionError:
                    continue
                return len(history) - 1
        raise IncompatibleSchemaError(f"schema of {topic} changed concurrently; retry")

    def check(self, topic: str, schema: SchemaInfo) -> None:
        """Raise :class:`IncompatibleSchemaError` unless ``schema`` is registered on the topic or
        compatible with its latest schema (a consumer's check; nothing is registered)."""
        history = self.versions(topic)
        if not history or any(known.same_definition(schema) for known in history):
            return
        check_full_compatibility(history[-1], schema)

    def delete(self, topic: str) -> None:
        """Forget the topic's schemas (its topic was deleted)."""
        path = _path(topic)
        if self._store.get(path) is not None:
            self._store.delete(path)

    def _load(self, path: str) -> tuple[list[SchemaInfo], int | None]:
        stored = self._store.get(path)
        if stored is None:
            return [], None
        try:
            items = json.loads(stored.data)
            history = [
                SchemaInfo(
                    int(item["type"]),
                    base64.b64decode(item["data"]),
                    str(item.get("name", "")),
                    tuple((str(k), str(v)) for k, v in item.get("properties", [])),
                )
                for item in items
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise StateCorruptedError(f"schema history at {path} is unreadable: {exc}") from None
        return history, stored.version


def check_full_compatibility(existing: SchemaInfo, new: SchemaInfo) -> None:
    """Pulsar's ``FULL`` check of ``new`` against ``existing``; raises
    :class:`IncompatibleSchemaError` naming the first conflict."""
    if existing.type != new.type:
        raise IncompatibleSchemaError(
            f"Incompatible schema: type {_type_name(new.type)} does not match the topic's {_type_name(existing.type)}"
        )
    if existing.data == new.data or new.type not in _RECORD_TYPES:
        return
    old_fields = _record_fields(existing.data)
    new_fields = _record_fields(new.data)
    if old_fields is None or new_fields is None:
        raise IncompatibleSchemaError("Incompatible schema: the definitions differ and are not Avro records")
    for name in old_fields.keys() - new_fields.keys():
        if "default" not in old_fields[name]:
            raise IncompatibleSchemaError(f"Incompatible schema: field {name!r} was removed and has no default")
    for name in new_fields.keys() - old_fields.keys():
        if "default" not in new_fields[name]:
            raise IncompatibleSchemaError(f"Incompatible schema: field {name!r} was added without a default")
    for name in old_fields.keys() & new_fields.keys():
        if _canonical(old_fields[name].get("type")) != _canonical(new_fields[name].get("type")):
            raise IncompatibleSchemaError(f"Incompatible schema: field {name!r} changed its type")


def _record_fields(data: bytes) -> dict[str, dict[str, Any]] | None:
    try:
        definition = json.loads(data)
    except ValueError:
        return None
    if not isinstance(definition, dict) or definition.get("type") != "record":
        return None
    fields = definition.get("fields")
    if not isinstance(fields, list):
        return None
    return {f["name"]: f for f in fields if isinstance(f, dict) and isinstance(f.get("name"), str)}


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True)


_TYPE_NAMES = {0: "NONE", 1: "STRING", 2: "JSON", 3: "PROTOBUF", 4: "AVRO", 5: "BOOLEAN", 15: "KEY_VALUE"}


def _type_name(type_: int) -> str:
    return _TYPE_NAMES.get(type_, str(type_))


def _path(topic: str) -> str:
    name = TopicName.parse(topic)
    return f"{SCHEMAS_ROOT}/{name.partitioned_topic.managed_ledger_name}"


def _encode(history: list[SchemaInfo]) -> bytes:
    return json.dumps(
        [
            {
                "type": s.type,
                "name": s.name,
                "data": base64.b64encode(s.data).decode(),
                "properties": list(s.properties),
            }
            for s in history
        ]
    ).encode()
