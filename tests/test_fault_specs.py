"""Issue 34 item 1: the fault models and scenario files refuse what cannot fire, with messages
that name the field, the fault's place in the file and the fix; the registry's matching and
bookkeeping without a server."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import yaml

from mledger import ManagedLedgerFactory
from mledger.broker import (
    COMMAND_KINDS,
    ERROR_ANSWERS,
    Broker,
    FaultInjectionOffError,
    Faults,
    FaultSpecError,
    FaultTarget,
    load_scenario,
    open_broker,
    parse_fault,
)
from mledger.broker._fault_specs import parse_scenario
from mledger.core._errors import ConfigError, InvalidRequestError, NotFoundError
from mledger.protocol._session import Session

YAML = """\
seed: 7
faults:
  - action: error
    command: producer          # any case
    error: TopicNotFound
  - action: delay
    command: SEND
    delay_ms: [100, 400]
    topic: "orders.*"
  - action: disk_full
    count: 3
"""


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ({"action": "error", "command": "FLOW"}, "FLOW has no answer to carry an error"),
        ({"action": "error", "command": "PRODUCR"}, "did you mean 'PRODUCER'?"),
        ({"action": "error", "command": "SEND", "error": "TopicNotFoud"}, "did you mean 'TopicNotFound'?"),
        ({"action": "erorr", "command": "SEND"}, "does not match any of the expected tags"),
        ({"action": "error"}, "error needs a command to act on (one of CONNECT, PRODUCER"),
        ({"action": "delay", "command": "SEND", "delay_ms": [5, 1]}, "needs 0 <= low <= high"),
        ({"action": "delay", "command": "SEND"}, "delay_ms: Field required"),
        ({"action": "disk_full", "topic": "orders"}, "acts on the store's writes, not on topic"),
        ({"action": "duplicate", "command": "SEND"}, "duplicate cannot act on SEND: it acts on MESSAGE"),
        ({"action": "duplicate", "message_id": "3"}, "message_id '3' is not ledgerId:entryId"),
        ({"action": "terminate_topic"}, "needs topic"),
        ({"action": "delete_subscription", "topic": "orders"}, "needs topic and subscription"),
        ({"action": "unload_topic"}, "unload_topic without a command needs topic"),
        ({"action": "restart", "topic": "orders"}, "restart without a command restarts the whole broker: topic"),
        ({"action": "restart", "crash": "maybe"}, "crash: Input should be a valid boolean"),
        ({"action": "close", "count": 2}, "without a command acts once, at once"),
        ({"action": "error", "command": "SEND", "topic": "orders("}, "topic 'orders(' is not a regular expression"),
        ({"action": "error", "command": "SEND", "eror": "x"}, "eror: Extra inputs are not permitted"),
        ({"action": "pause", "pause_ms": 0}, "pause_ms: Input should be greater than or equal to 1"),
    ],
)
def test_a_fault_that_cannot_fire_is_refused_clearly(fault: dict[str, object], message: str) -> None:
    with pytest.raises(FaultSpecError) as refused:
        parse_fault(fault)
    assert message in str(refused.value)
    assert isinstance(refused.value, InvalidRequestError) and isinstance(refused.value, ConfigError)


def test_every_answered_command_may_carry_an_error_and_only_those() -> None:
    for command in COMMAND_KINDS:
        if command in ERROR_ANSWERS:
            assert parse_fault({"action": "error", "command": command}).command == command
        else:
            with pytest.raises(FaultSpecError, match="has no answer"):
                parse_fault({"action": "error", "command": command})


def test_the_kinds_are_the_commands_the_session_handles() -> None:
    from mledger.protocol._commands import COMMANDS, Support

    handled = {
        spec.name
        for spec in COMMANDS.values()
        if spec.support is Support.HANDLED and hasattr(Session, spec.handler_name)
    }
    # PING and PONG never reach a fault: the connection answers them itself
    assert set(COMMAND_KINDS) == handled - {"PING", "PONG"}


def test_a_yaml_scenario_file(tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(YAML)
    scenario = load_scenario(path)
    assert scenario.seed == 7
    assert [f.action for f in scenario.faults] == ["error", "delay", "disk_full"]
    assert scenario.faults[0].command == "PRODUCER"
    assert scenario.faults[1].delay_ms == (100, 400)  # type: ignore[union-attr]


def test_a_scenario_files_errors_name_the_file_and_the_faults_place(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "faults:\n  - action: close\n  - action: error\n    command: FLOW\n  - action: pause\n    pause_ms: -1\n"
    )
    with pytest.raises(FaultSpecError) as refused:
        load_scenario(path)
    text = str(refused.value)
    assert text.startswith(f"{path}: faults[1]: FLOW has no answer")
    assert "faults[2].pause_ms: Input should be greater than or equal to 1" in text
    path.write_text("faults: [unclosed")
    with pytest.raises(FaultSpecError, match="not YAML"):
        load_scenario(path)
    json_path = tmp_path / "bad.json"
    json_path.write_text("{")
    with pytest.raises(FaultSpecError, match="not JSON"):
        load_scenario(json_path)
    with pytest.raises(FaultSpecError, match="cannot read"):
        load_scenario(tmp_path / "missing.yaml")
    path.write_text("- action: close\n")
    with pytest.raises(FaultSpecError, match="a scenario is a mapping with 'faults'"):
        load_scenario(path)


def test_a_broker_without_fault_injection_refuses_faults() -> None:
    broker = Broker(ManagedLedgerFactory())
    with pytest.raises(FaultInjectionOffError, match="fault injection is off on this broker"):
        broker.faults.fail_next("PRODUCER")
    assert isinstance(FaultInjectionOffError("x"), NotFoundError)  # 404 over REST
    broker.close()


def test_matching_rules_and_counting_without_a_server(caplog: pytest.LogCaptureFixture) -> None:
    faults = Faults(seed=1)
    faults.fail_next("SEND", topic="orders", client="billing-.*", after=1, count=2)
    orders = FaultTarget("persistent://public/default/orders-partition-3", None, ("billing-7", "127.0.0.1:4000"))
    other = FaultTarget("persistent://public/default/orders-archive", None, ("billing-7",))
    stranger = FaultTarget("persistent://public/default/orders", None, ("audit",))
    with caplog.at_level(logging.INFO, logger="mledger.broker._faults"):
        taken = [faults.take("SEND", lambda t=t: t) for t in (orders, other, stranger, orders, orders, orders)]
    # a partition matches its partitioned topic's name; after=1 lets the first match pass
    assert [t is not None for t in taken] == [False, False, False, True, True, False]
    assert faults.armed() == []  # spent after two
    assert faults.stats().fired_by_action == {"error": 2}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "fault fired: #1 error on SEND" in warnings[0].getMessage()
    assert faults.take("PRODUCER", lambda: orders) is None  # nothing armed for it: the target is not even built


def test_a_broker_action_without_a_target_is_refused() -> None:
    opened = open_broker(faults=Faults())
    try:
        with pytest.raises(NotFoundError, match="no loaded topic or subscription matches"):
            opened.broker.faults.terminate_topic("nothing-here")
        opened.broker.create_producer("orders").send(b"x")
        opened.broker.faults.terminate_topic("orders")
        assert opened.broker.get_topic("orders").is_terminated
    finally:
        opened.close()


def test_store_faults_hook_the_store_only_while_armed() -> None:
    opened = open_broker(faults=Faults())
    store = opened.store
    try:
        assert store.on_write is None and store.blocking_writes is False  # the memory store's, unchanged
        fault = opened.broker.faults.slow_writes(1, count=5)
        assert store.on_write is not None and store.blocking_writes is True  # writes move off the caller
        opened.broker.faults.remove(fault)
        assert store.on_write is None and store.blocking_writes is False
        with pytest.raises(NotFoundError, match="no fault #99"):
            opened.broker.faults.remove(99)
    finally:
        opened.close()


def test_random_delays_repeat_with_the_seed() -> None:
    def draws(seed: int) -> list[float]:
        faults = Faults(seed=seed)
        faults.delay("LOOKUP", (0, 10_000), count=5)
        target = FaultTarget("persistent://public/default/orders")
        return [firing.delay_s for firing in (faults.take("LOOKUP", lambda: target) for _ in range(5)) if firing]

    first = draws(42)
    assert len(first) == 5 and first == draws(42)
    assert first != draws(43)


def test_the_faults_take_the_brokers_seed_unless_given_their_own() -> None:
    adopted, own = Faults(), Faults(seed=7)
    brokers = [Broker(ManagedLedgerFactory(), seed=42, faults=f) for f in (adopted, own)]
    assert (adopted.seed, own.seed) == (42, 7)
    adopted.delay("LOOKUP", (0, 10_000), count=2)
    target = FaultTarget("persistent://public/default/orders")
    first = adopted.take("LOOKUP", lambda: target)
    brokers.append(Broker(ManagedLedgerFactory(), seed=42, faults=adopted))  # a restart's broker
    second = adopted.take("LOOKUP", lambda: target)
    assert first is not None and second is not None
    reference = Faults(seed=42)
    reference.delay("LOOKUP", (0, 10_000), count=2)
    expected = [reference.take("LOOKUP", lambda: target) for _ in range(2)]
    assert [first.delay_s, second.delay_s] == [f.delay_s for f in expected if f]  # the draws went on
    for broker in brokers:
        broker.close()


def test_the_docs_scenario_is_a_valid_scenario() -> None:
    """docs/faults.md's YAML scenario (a block the example runner does not run) arms as shown."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "faults.md").read_text()
    (block,) = re.findall(r"```yaml\n(.*?)```", page, re.DOTALL)
    scenario = parse_scenario(yaml.safe_load(block), "docs/faults.md")
    assert scenario.seed == 42
    assert [f.action for f in scenario.faults] == ["error", "delay", "close", "disk_full"]
