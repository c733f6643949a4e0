"""Schema compatibility strategies (Pulsar's ``SchemaCompatibilityStrategy``) on Avro and JSON
schemas, the registry's use of them, and where a topic's strategy comes from.

The record evolutions are the ones Pulsar's documentation tabulates: a field added with a
default, a field added without one, a field removed (it had no default) and a field whose type
changed.
"""

from __future__ import annotations

import json

import pytest

from mledger import ConfigError, InvalidRequestError, ManagedLedgerFactory
from mledger.broker import Broker, BrokerConfig, IncompatibleSchemaError, SchemaCompatibilityStrategy
from mledger.broker._schema_compat import check_compatible, check_consumer_compatible
from mledger.broker._schemas import SchemaInfo

S = SchemaCompatibilityStrategy
AVRO, JSON_TYPE, STRING = 4, 2, 1


def record(*fields: dict[str, object], name: str = "User") -> bytes:
    return json.dumps({"type": "record", "name": name, "fields": list(fields)}).encode()


NAME = {"name": "name", "type": "string"}
EMAIL = {"name": "email", "type": "string"}
BASE = record(NAME, EMAIL)
EVOLUTIONS = {
    "added_with_default": record(NAME, EMAIL, {"name": "age", "type": "int", "default": 0}),
    "added_without_default": record(NAME, EMAIL, {"name": "age", "type": "int"}),
    "removed": record(NAME),
    "type_change": record(NAME, {"name": "email", "type": "int"}),
}
# strategy -> the evolutions it accepts (Avro's resolution rules; BACKWARD: the new schema reads
# old data, FORWARD: the old schema reads new data, FULL: both)
ACCEPTED = {
    S.ALWAYS_COMPATIBLE: set(EVOLUTIONS),
    S.ALWAYS_INCOMPATIBLE: set(),
    S.BACKWARD: {"added_with_default", "removed"},
    S.FORWARD: {"added_with_default", "added_without_default"},
    S.FULL: {"added_with_default"},
    S.BACKWARD_TRANSITIVE: {"added_with_default", "removed"},
    S.FORWARD_TRANSITIVE: {"added_with_default", "added_without_default"},
    S.FULL_TRANSITIVE: {"added_with_default"},
}


@pytest.mark.parametrize("schema_type", [AVRO, JSON_TYPE], ids=["avro", "json"])
@pytest.mark.parametrize("strategy", list(ACCEPTED), ids=lambda s: s.value)
def test_each_strategy_accepts_and_refuses_the_right_evolutions(schema_type: int, strategy: S) -> None:
    history = [SchemaInfo(schema_type, BASE)]
    for evolution, definition in EVOLUTIONS.items():
        new = SchemaInfo(schema_type, definition)
        if evolution in ACCEPTED[strategy]:
            check_compatible(history, new, strategy)
        else:
            with pytest.raises(IncompatibleSchemaError):
                check_compatible(history, new, strategy)


# v0 -> v1 removes a field that has a default; v2 adds it back with another type. v2 is
# compatible with v1 (the latest) under each plain strategy, but not with v0.
TRANSITIVE_HISTORY = [
    SchemaInfo(AVRO, record(NAME, {"name": "email", "type": "string", "default": ""})),
    SchemaInfo(AVRO, record(NAME)),
]
TRANSITIVE_NEW = SchemaInfo(AVRO, record(NAME, {"name": "email", "type": "int", "default": 0}))


@pytest.mark.parametrize(
    ("plain", "transitive"),
    [(S.BACKWARD, S.BACKWARD_TRANSITIVE), (S.FORWARD, S.FORWARD_TRANSITIVE), (S.FULL, S.FULL_TRANSITIVE)],
)
def test_transitive_strategies_check_every_version(plain: S, transitive: S) -> None:
    check_compatible(TRANSITIVE_HISTORY, TRANSITIVE_NEW, plain)
    with pytest.raises(IncompatibleSchemaError, match="version 0"):
        check_compatible(TRANSITIVE_HISTORY, TRANSITIVE_NEW, transitive)


def test_type_changes_and_unparseable_definitions_are_refused() -> None:
    history = [SchemaInfo(AVRO, BASE)]
    with pytest.raises(IncompatibleSchemaError, match="exists schema type AVRO, new schema type JSON"):
        check_compatible(history, SchemaInfo(JSON_TYPE, BASE), S.FULL)
    check_compatible(history, SchemaInfo(JSON_TYPE, BASE), S.ALWAYS_COMPATIBLE)
    with pytest.raises(IncompatibleSchemaError, match="not a valid Avro schema"):
        check_compatible(history, SchemaInfo(AVRO, b"{not avro"), S.FULL)
    # the same bytes as the latest version are compatible under any strategy
    check_compatible(history, SchemaInfo(AVRO, BASE), S.ALWAYS_INCOMPATIBLE)


def test_record_names_do_not_count_as_pulsars_resolving_grammar() -> None:
    history = [SchemaInfo(AVRO, record(NAME, name="UserV1"))]
    check_compatible(history, SchemaInfo(AVRO, record(NAME, name="UserV2")), S.FULL)


def test_other_types_are_refused_only_when_always_incompatible() -> None:
    history = [SchemaInfo(STRING, b"")]
    check_compatible(history, SchemaInfo(STRING, b"x"), S.FULL)
    with pytest.raises(IncompatibleSchemaError, match="ALWAYS_INCOMPATIBLE"):
        check_compatible(history, SchemaInfo(STRING, b"x"), S.ALWAYS_INCOMPATIBLE)


def test_consumer_check_is_backward_against_the_latest_for_the_plain_strategies() -> None:
    v1 = SchemaInfo(AVRO, BASE)
    v2 = SchemaInfo(AVRO, EVOLUTIONS["removed"])
    # a consumer with v1 cannot read v2's data (email is missing and has no default)
    for strategy in (S.BACKWARD, S.FORWARD, S.FULL, S.FORWARD_TRANSITIVE):
        with pytest.raises(IncompatibleSchemaError):
            check_consumer_compatible([v1, v2], v1, strategy)
    check_consumer_compatible([v1, SchemaInfo(AVRO, EVOLUTIONS["added_with_default"])], v1, S.FULL)
    check_consumer_compatible([v1, v2], v1, S.ALWAYS_COMPATIBLE)
    # the transitive strategies and ALWAYS_INCOMPATIBLE check every version, with no shortcut
    # for an equal one: ALWAYS_INCOMPATIBLE refuses even the latest schema (NeverSchemaValidator)
    check_consumer_compatible([v1, v2], v2, S.BACKWARD_TRANSITIVE)
    with pytest.raises(IncompatibleSchemaError, match="ALWAYS_INCOMPATIBLE"):
        check_consumer_compatible([v1, v2], v2, S.ALWAYS_INCOMPATIBLE)
    with pytest.raises(IncompatibleSchemaError, match="version 1"):
        check_consumer_compatible([v1, v2], v1, S.FULL)  # the latest is version 1
    with pytest.raises(IncompatibleSchemaError, match="does not have schema"):
        check_consumer_compatible([], v1, S.FULL)


def test_strategy_names_and_the_auto_update_mapping() -> None:
    assert S.parse("BACKWARD_TRANSITIVE") is S.BACKWARD_TRANSITIVE
    with pytest.raises(InvalidRequestError, match="'backward'"):
        S.parse("backward")
    assert S.from_auto_update_policy("Full") is S.FULL
    assert S.from_auto_update_policy("BackwardTransitive") is S.BACKWARD_TRANSITIVE
    assert S.from_auto_update_policy("AutoUpdateDisabled") is S.ALWAYS_INCOMPATIBLE
    assert S.from_auto_update_policy(None) is S.ALWAYS_INCOMPATIBLE
    with pytest.raises(ConfigError):
        BrokerConfig(schema_compatibility_strategy="SOMETIMES")


# -- the registry and the broker's policies ------------------------------------------------------


@pytest.fixture
def broker() -> Broker:
    return Broker(ManagedLedgerFactory())


def test_strategy_in_force_topic_then_namespace_then_broker(broker: Broker) -> None:
    topic = "persistent://public/default/users"
    broker.create_topic(topic, partitions=2)
    assert broker.schema_compatibility_strategy(topic) is S.FULL  # broker.conf's default
    broker.namespaces.set_schema_auto_update_compatibility_strategy("public/default", "Backward")
    assert broker.schema_compatibility_strategy(topic) is S.BACKWARD
    broker.namespaces.set_schema_compatibility_strategy("public/default", S.FORWARD)
    assert broker.schema_compatibility_strategy(topic) is S.FORWARD
    broker.set_topic_schema_compatibility_strategy(topic, S.ALWAYS_COMPATIBLE)
    assert broker.schema_compatibility_strategy(topic) is S.ALWAYS_COMPATIBLE
    assert broker.schema_compatibility_strategy(topic + "-partition-1") is S.ALWAYS_COMPATIBLE
    broker.set_topic_schema_compatibility_strategy(topic, None)
    broker.namespaces.set_schema_compatibility_strategy("public/default", S.UNDEFINED)
    assert broker.schema_compatibility_strategy(topic) is S.BACKWARD  # UNDEFINED: the older policy
    other = Broker(ManagedLedgerFactory(), BrokerConfig(schema_compatibility_strategy="BACKWARD_TRANSITIVE"))
    assert other.schema_compatibility_strategy(topic) is S.BACKWARD_TRANSITIVE


def test_registry_registers_under_the_topics_strategy(broker: Broker) -> None:
    topic = "persistent://public/default/users"
    broker.create_topic(topic)
    assert broker.add_schema(topic, SchemaInfo(AVRO, BASE)) == 0
    # an equal definition (other key order and whitespace) is the same version
    same = json.dumps({"name": "User", "fields": [NAME, EMAIL], "type": "record"}, indent=2).encode()
    assert broker.add_schema(topic, SchemaInfo(AVRO, same, properties=(("k", "v"),))) == 0
    with pytest.raises(IncompatibleSchemaError):
        broker.add_schema(topic, SchemaInfo(AVRO, EVOLUTIONS["removed"]))  # FULL
    broker.set_topic_schema_compatibility_strategy(topic, S.BACKWARD)
    assert broker.add_schema(topic, SchemaInfo(AVRO, EVOLUTIONS["removed"])) == 1
    broker.namespaces.set_is_allow_auto_update_schema("public/default", False)
    with pytest.raises(IncompatibleSchemaError, match="auto updating is disabled"):
        broker.add_schema(topic, SchemaInfo(AVRO, EVOLUTIONS["added_with_default"]))
    assert broker.add_schema(topic, SchemaInfo(AVRO, BASE)) == 0  # a known version still is
