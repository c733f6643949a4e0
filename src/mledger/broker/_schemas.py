"""A per-topic schema registry: versions, and Pulsar's compatibility strategies applied to them.

Pulsar keeps one schema history per topic (a partitioned topic's partitions share their
parent's). A schema is ``(type, definition, properties)`` with Pulsar's ``Schema.Type`` numbers
(``Json`` = 2, ``Avro`` = 4, ``String`` = 1, ...); versions count from 0.

:meth:`SchemaRegistry.get_or_create` is Pulsar's ``putSchemaIfAbsent``: it returns the version
of an equal schema (same type; for JSON, Protobuf and Avro the definitions are equal Avro
schemas, otherwise equal bytes; properties do not count), and otherwise registers the schema
when auto-update is allowed and it passes the topic's compatibility strategy
(:mod:`mledger.broker._schema_compat`), refusing it with :class:`IncompatibleSchemaError`.
:meth:`SchemaRegistry.check_consumer` is Pulsar's ``checkConsumerCompatibility``. The strategy
and the auto-update flag in force for a topic are the broker's to resolve (topic policy, then
namespace policy, then broker setting).

History lives in the metadata store at ``/schemas/<managed-ledger name of the topic>`` as JSON,
written with compare-and-set, so it survives restarts. Thread-safe (one lock).
"""

from __future__ import annotations

import base64
import json
import threading

from ..core import BadVersionError, StateCorruptedError
from ..storage import NEW_NODE, Store
from ._names import TopicName
from ._schema_compat import (
    IncompatibleSchemaError,
    SchemaCompatibilityStrategy,
    SchemaInfo,
    check_compatible,
    check_consumer_compatible,
)

__all__ = ["IncompatibleSchemaError", "SchemaCompatibilityStrategy", "SchemaInfo", "SchemaRegistry"]

SCHEMAS_ROOT = "/schemas"
_FULL = SchemaCompatibilityStrategy.FULL


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

    def get_or_create(
        self,
        topic: str,
        schema: SchemaInfo,
        strategy: SchemaCompatibilityStrategy = _FULL,
        allow_auto_update: bool = True,
    ) -> int:
        """The version of ``schema`` on ``topic``, registering it when it is new, auto-update
        is allowed (Pulsar's ``isAllowAutoUpdateSchema``) and it passes ``strategy`` against the
        history (the latest version, or every version for a transitive strategy).

        Raises :class:`IncompatibleSchemaError` naming the conflict.
        """
        path = _path(topic)
        with self._lock:
            for _ in range(3):
                history, version = self._load(path)
                for i, known in enumerate(history):
                    if known.same_definition(schema):
                        return i
                if not allow_auto_update:
                    raise IncompatibleSchemaError("Schema not found and schema auto updating is disabled.")
                check_compatible(history, schema, strategy)
                history.append(schema)
                try:
                    self._store.put(path, _encode(history), NEW_NODE if version is None else version)
                except BadVersionError:
                    continue
                return len(history) - 1
        raise IncompatibleSchemaError(f"schema of {topic} changed concurrently; retry")

    def check_consumer(self, topic: str, schema: SchemaInfo, strategy: SchemaCompatibilityStrategy = _FULL) -> None:
        """Pulsar's ``checkConsumerCompatibility``: raise :class:`IncompatibleSchemaError` unless a
        consumer with ``schema`` can read the topic's data under ``strategy`` (nothing is
        registered; a topic without schemas refuses)."""
        check_consumer_compatible(self.versions(topic), schema, strategy)

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
