"""Schema compatibility strategies and checks, as Pulsar's broker applies them.

:class:`SchemaCompatibilityStrategy` is Pulsar's enum (policy field ``schema_compatibility_strategy``,
broker setting ``schemaCompatibilityStrategy``, default ``FULL``), with the mapping from the
older namespace policy ``schema_auto_update_compatibility_strategy``
(:meth:`SchemaCompatibilityStrategy.from_auto_update_policy`).

:func:`check_compatible` is ``SchemaRegistryServiceImpl``'s check of a new schema against a
topic's history (oldest first):

* ``ALWAYS_COMPATIBLE`` accepts anything;
* the plain strategies compare with the latest version only, the ``_TRANSITIVE`` ones with every
  version; a version of another type is refused ("exists schema type X, new schema type Y");
* the latest version with the very same bytes is compatible (non-transitive only, as Pulsar);
* Avro (type 4) and JSON (type 2) definitions are Avro schemas: ``BACKWARD`` needs the new schema
  to read data written with the old one, ``FORWARD`` the old one to read data written with the
  new one, ``FULL`` both (Avro's ``SchemaValidatorBuilder`` strategies ``canRead``,
  ``canBeRead``, ``mutualRead``), decided by Avro's schema-resolution rules as the Apache Avro
  library implements them (``avro.compatibility.ReaderWriterCompatibilityChecker``, the port of
  Java's ``SchemaCompatibility``), except that two records' names are not compared, as the
  resolving grammar behind Pulsar's validator does not; ``ALWAYS_INCOMPATIBLE`` refuses every
  different schema;
* a JSON definition that is not an Avro schema (Pulsar's older JSON-schema format), and every
  other type (primitives, Protobuf, KeyValue, ...), gets Pulsar's default check: refused only
  under ``ALWAYS_INCOMPATIBLE``.

Names are parsed permissively and defaults are not validated (Pulsar's parser settings,
``COMPATIBLE_NAME_VALIDATOR`` and ``setValidateDefaults(false)``); a definition Avro cannot
parse is refused as incompatible, as Pulsar wraps ``SchemaParseException``.

The ``avro`` package comes with the ``server`` extra; it is imported on the first Avro check.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core import MissingExtraError, MLedgerError, ServerError
from ._types import enum_member

__all__ = [
    "AVRO_BASED_TYPES",
    "IncompatibleSchemaError",
    "SchemaCompatibilityStrategy",
    "SchemaInfo",
    "check_compatible",
    "check_consumer_compatible",
    "parse_avro",
]

AVRO_TYPE, JSON_TYPE = 4, 2
AVRO_BASED_TYPES = frozenset({2, 3, 4})
"""Types whose definitions Pulsar parses as Avro schemas to tell equal ones (JSON, Protobuf, Avro)."""


class IncompatibleSchemaError(MLedgerError):
    """A schema is not compatible with the topic's schemas (Pulsar's IncompatibleSchema)."""

    http_status = 409
    server_error = ServerError.IncompatibleSchema


@dataclass(frozen=True)
class SchemaInfo:
    """One schema: Pulsar's ``Schema`` message (type number, name, definition, properties)."""

    type: int
    data: bytes
    name: str = ""
    properties: tuple[tuple[str, str], ...] = ()

    def same_definition(self, other: SchemaInfo) -> bool:
        """Pulsar's ``getSchemaVersionBySchemaData`` test: equal types and, for JSON, Protobuf
        and Avro, definitions that parse to equal Avro schemas, else equal bytes (the name and
        the properties do not count)."""
        if self.type != other.type:
            return False
        if self.data == other.data:
            return True
        if self.type not in AVRO_BASED_TYPES:
            return False
        try:
            return bool(parse_avro(self.data) == parse_avro(other.data))
        except ValueError:
            return False


class SchemaCompatibilityStrategy(enum.StrEnum):
    """Pulsar's ``SchemaCompatibilityStrategy``; ``UNDEFINED`` means "not set here"."""

    UNDEFINED = "UNDEFINED"
    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def is_transitive(self) -> bool:
        """Whether the new schema is checked against every version (not only the latest)."""
        return self.name.endswith("_TRANSITIVE")

    @classmethod
    def parse(cls, value: object) -> SchemaCompatibilityStrategy:
        """The strategy named ``value`` (exact, as Jackson reads Pulsar's enum);
        ``InvalidRequestError`` naming a bad one."""
        return enum_member(cls, value, "Invalid schema compatibility strategy")

    @classmethod
    def from_auto_update_policy(cls, policy: str | None) -> SchemaCompatibilityStrategy:
        """Pulsar's mapping of ``SchemaAutoUpdateCompatibilityStrategy`` (``Full``, ``Backward``,
        ..., ``AutoUpdateDisabled``); unknown, None and ``AutoUpdateDisabled`` are
        ``ALWAYS_INCOMPATIBLE``."""
        return _AUTO_UPDATE.get(policy or "", cls.ALWAYS_INCOMPATIBLE)


_S = SchemaCompatibilityStrategy
_AUTO_UPDATE = {
    "Backward": _S.BACKWARD,
    "Forward": _S.FORWARD,
    "Full": _S.FULL,
    "AlwaysCompatible": _S.ALWAYS_COMPATIBLE,
    "BackwardTransitive": _S.BACKWARD_TRANSITIVE,
    "ForwardTransitive": _S.FORWARD_TRANSITIVE,
    "FullTransitive": _S.FULL_TRANSITIVE,
}
AUTO_UPDATE_POLICIES = frozenset({*_AUTO_UPDATE, "AutoUpdateDisabled"})
"""The names of Pulsar's ``SchemaAutoUpdateCompatibilityStrategy``."""


def check_compatible(history: Sequence[SchemaInfo], new: SchemaInfo, strategy: SchemaCompatibilityStrategy) -> None:
    """Pulsar's check of ``new`` against a topic's ``history`` (oldest first) under ``strategy``
    (see the module doc). Raises :class:`IncompatibleSchemaError` naming the conflict; an empty
    history accepts anything."""
    strategy = SchemaCompatibilityStrategy.parse(strategy)
    if not history or strategy is _S.ALWAYS_COMPATIBLE:
        return
    if strategy.is_transitive:
        _check_against(list(enumerate(history)), new, strategy)
        return
    latest = len(history) - 1
    if history[latest].type == new.type and history[latest].data == new.data:
        return
    _check_against([(latest, history[latest])], new, strategy)


def check_consumer_compatible(
    history: Sequence[SchemaInfo], schema: SchemaInfo, strategy: SchemaCompatibilityStrategy
) -> None:
    """Pulsar's ``checkConsumerCompatibility``: a consumer's schema must be able to read the
    topic's data. ``BACKWARD``, ``FORWARD``, ``FORWARD_TRANSITIVE`` and ``FULL``: it can read the
    latest version (a ``BACKWARD`` check against it); the other strategies check it against every
    version under themselves, with no shortcut for an equal version (so ``ALWAYS_INCOMPATIBLE``
    refuses every consumer schema, as Pulsar's ``NeverSchemaValidator``). Raises
    :class:`IncompatibleSchemaError`, also when the topic has no schema to check against."""
    strategy = SchemaCompatibilityStrategy.parse(strategy)
    if strategy is _S.ALWAYS_COMPATIBLE:
        return
    if not history:
        raise IncompatibleSchemaError("Topic does not have schema to check")
    if strategy in (_S.BACKWARD, _S.FORWARD, _S.FORWARD_TRANSITIVE, _S.FULL):
        check_compatible(history, schema, _S.BACKWARD)
    else:
        _check_against(list(enumerate(history)), schema, strategy)


def _check_against(
    compared: list[tuple[int, SchemaInfo]], new: SchemaInfo, strategy: SchemaCompatibilityStrategy
) -> None:
    """The type check, then the check of the type's compatibility checker, against ``compared``
    (``(version, schema)`` pairs)."""
    for _, existing in compared:
        if existing.type != new.type:
            raise IncompatibleSchemaError(
                f"Incompatible schema: exists schema type {type_name(existing.type)}, "
                f"new schema type {type_name(new.type)}"
            )
    if new.type in (AVRO_TYPE, JSON_TYPE):
        _check_avro_based(compared, new, strategy)
    else:
        _default_check(strategy)


def _check_avro_based(
    compared: list[tuple[int, SchemaInfo]], new: SchemaInfo, strategy: SchemaCompatibilityStrategy
) -> None:
    """Pulsar's ``AvroSchemaBasedCompatibilityCheck`` (and ``JsonSchemaCompatibilityCheck``,
    which applies it when both definitions are Avro schemas)."""
    is_json = new.type == JSON_TYPE
    new_schema = _parse_or_none(new.data) if is_json else _parse_or_refuse(new.data, "new")
    if new_schema is None:  # an older JSON-schema definition: no Avro check
        _default_check(strategy)
        return
    parsed: list[tuple[int, Any]] = []
    for version, existing in compared:
        old = _parse_or_none(existing.data) if is_json else _parse_or_refuse(existing.data, f"version {version}")
        if old is None:
            continue  # Pulsar lets a new Avro-format JSON schema replace an old-format one
        parsed.append((version, old))
    if not parsed:
        return
    _default_check(strategy)
    backward = strategy in (_S.BACKWARD, _S.BACKWARD_TRANSITIVE, _S.FULL, _S.FULL_TRANSITIVE)
    forward = strategy in (_S.FORWARD, _S.FORWARD_TRANSITIVE, _S.FULL, _S.FULL_TRANSITIVE)
    checker = _checker()
    for version, old in reversed(parsed):  # newest first, as Avro's validator walks them
        if backward:
            _require_readable(
                checker, new_schema, old, strategy, f"the new schema cannot read data written with version {version}"
            )
        if forward:
            _require_readable(
                checker, old, new_schema, strategy, f"version {version} cannot read data written with the new schema"
            )


def _require_readable(
    checker: Any, reader: Any, writer: Any, strategy: SchemaCompatibilityStrategy, failure: str
) -> None:
    """Raise ``IncompatibleSchemaError`` saying ``failure`` and why when the Avro schema
    ``reader`` cannot read data written with ``writer``."""
    problem = _incompatibility(checker, reader=reader, writer=writer)
    if problem:
        raise IncompatibleSchemaError(f"Incompatible schema with strategy {strategy.value}: {failure}: {problem}")


def _default_check(strategy: SchemaCompatibilityStrategy) -> None:
    if strategy is _S.ALWAYS_INCOMPATIBLE:
        raise IncompatibleSchemaError("Schema compatibility strategy is ALWAYS_INCOMPATIBLE")


def _avro() -> Any:
    try:
        import avro.compatibility
        import avro.schema
    except ImportError as exc:  # pragma: no cover - the server extra installs it
        raise MissingExtraError(
            f"checking Avro and JSON schemas needs the 'avro' package: pip install 'mledger[server]' ({exc})"
        ) from None
    return avro


def parse_avro(data: bytes) -> Any:
    """``data`` parsed as an Avro schema with Pulsar's parser settings (permissive names,
    defaults unchecked); raises ``ValueError`` (or a subclass) when it is not one."""
    avro = _avro()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8: {exc}") from None
    try:
        return avro.schema.parse(text, validate_names=False)
    except (avro.errors.AvroException, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None


def _parse_or_none(data: bytes) -> Any:
    try:
        return parse_avro(data)
    except ValueError:
        return None


def _parse_or_refuse(data: bytes, what: str) -> Any:
    try:
        return parse_avro(data)
    except ValueError as exc:
        raise IncompatibleSchemaError(
            f"Incompatible schema: the {what} schema is not a valid Avro schema: {exc}"
        ) from None


_CHECKER_CLASS: Any = None


def _checker() -> Any:
    """A checker of Avro's resolution rules that, like the resolving grammar behind Pulsar's
    validator (Java's ``ResolvingGrammarGenerator``), does not compare the names of two records
    (``avro.compatibility`` ports ``SchemaCompatibility``, which does): a record class renamed
    between versions, as Python clients name schemas after their classes, stays readable."""
    global _CHECKER_CLASS
    if _CHECKER_CLASS is None:
        compatibility = _avro().compatibility

        class _RecordNamesIgnored(compatibility.ReaderWriterCompatibilityChecker):  # type: ignore[name-defined]
            def calculate_compatibility(self, reader: Any, writer: Any, location: list[str]) -> Any:
                record = compatibility.SchemaType.RECORD
                if reader.type == record and writer.type == record:
                    return self.check_reader_writer_record_fields(reader, writer, location)
                return super().calculate_compatibility(reader, writer, location)

        _CHECKER_CLASS = _RecordNamesIgnored
    return _CHECKER_CLASS()


def _incompatibility(checker: Any, reader: Any, writer: Any) -> str:
    """'' when ``reader`` can read what ``writer`` wrote, else what stops it."""
    avro = _avro()
    result = checker.get_compatibility(reader, writer)
    if result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible:
        return ""
    kinds = ", ".join(sorted(str(getattr(k, "value", k)) for k in result.incompatibilities))
    where = ", ".join(sorted(result.locations))
    what = ", ".join(sorted(str(m) for m in result.messages))
    return f"{kinds} ({what}) at {where}"


_TYPE_NAMES = {
    0: "NONE",
    1: "STRING",
    2: "JSON",
    3: "PROTOBUF",
    4: "AVRO",
    5: "BOOLEAN",
    6: "INT8",
    7: "INT16",
    8: "INT32",
    9: "INT64",
    10: "FLOAT",
    11: "DOUBLE",
    12: "DATE",
    13: "TIME",
    14: "TIMESTAMP",
    15: "KEY_VALUE",
    16: "INSTANT",
    17: "LOCAL_DATE",
    18: "LOCAL_TIME",
    19: "LOCAL_DATE_TIME",
    20: "PROTOBUF_NATIVE",
}


def type_name(type_: int) -> str:
    """Pulsar's ``SchemaType`` name of a type number."""
    return _TYPE_NAMES.get(type_, str(type_))
