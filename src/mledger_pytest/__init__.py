"""pytest plugin (entry point ``pytest11``): an in-process Pulsar broker per test.

Fixtures:

* ``pulsar_broker``: a :class:`~mledger.standalone.EmbeddedStandalone` (the protocol server
  and the admin REST API over one broker) started on free ports with a memory store and a
  manual clock, stopped after the test. Use ``pulsar_broker.service_url`` with
  ``pulsar.Client``, ``pulsar_broker.admin_url`` for the REST admin API,
  ``pulsar_broker.clock.advance(ms)`` to make delayed messages due without sleeping,
  ``pulsar_broker.restart(crash=True)`` (a SIGKILL) or ``restart()`` (a clean stop) to see what
  a consumer receives again after the broker restarts (same port and URLs: clients reconnect), and
  ``pulsar_broker.faults`` to make the broker misbehave on purpose
  (``pulsar_broker.faults.fail_next("PRODUCER", error="TopicNotFound")``; docs/faults.md).
* ``pulsar_broker_factory``: ``pulsar_broker_factory(**options)`` starts one with options
  (``data_dir``, ``broker_config``, ``defaults`` (a Pulsar version, ``"pulsar-4.0"``: its cursor
  settings, rules and persist pace, as ``mledger standalone --defaults``), ``tokens``,
  ``authentication`` (an
  :class:`~mledger.admin.AuthenticationSettings`: JWT, basic, anonymous role),
  ``authorization``, ``manual_clock``, ``record`` and ``record_settings``: record what the
  broker does as the replay's raw logs; ``faults`` and ``fault_seed``: faults armed once it
  started); all are stopped after the test (a recording is complete once its broker stopped).
* ``async_pulsar_broker``: ``pulsar_broker`` for ``async def`` tests (pytest-asyncio, anyio):
  the same broker, whose calls that wait for the broker's loop are awaited
  (``await async_pulsar_broker.clock.advance(ms)``) instead of blocking the test's loop.

The marker ``@pytest.mark.pulsar_broker(**options)`` gives the ``pulsar_broker`` fixture of a
test the same options (``@pytest.mark.pulsar_broker(defaults="pulsar-4.0")``).
The marker ``@pytest.mark.pulsar_faults(*faults, seed=None)`` arms faults declaratively on the
brokers the test starts (each fault a mapping of its fields or a model of
:mod:`mledger.broker`; a string is a scenario file). Each test gets its own broker,
so faults never outlive a test; before a broker stops its faults are cleared (a pause ends,
half-open connections heal), so stopping is quick. When a test using a broker fails, its report
has a section ``mledger faults`` with each broker's seed and the faults that fired.

This module is loaded in every pytest run of an environment where mledger is installed, so it
imports nothing but pytest at load time; the fixtures import :mod:`mledger.protocol` when a test
asks for them and fail with a clear message when the ``server`` extra is missing.

``pulsar_broker_factory(deterministic=True, seed=N)`` starts a broker whose runs repeat exactly
(the same seed and client commands give the same frames and recorded rows; docs/pulsar/deterministic.md).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from mledger.protocol import AsyncBroker, EmbeddedBroker

__all__ = ["async_pulsar_broker", "pulsar_broker", "pulsar_broker_factory"]

MARKER = "pulsar_faults"
_STARTED = pytest.StashKey[list["EmbeddedBroker"]]()
"""The brokers a test started (its report names their faults)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*faults, seed=None): arm these faults (mappings, fault models, or a scenario file's path)"
        " on the brokers the test starts with pulsar_broker or pulsar_broker_factory",
    )
    config.addinivalue_line(
        "markers",
        "pulsar_broker(**options): the pulsar_broker fixture's options, as pulsar_broker_factory takes them "
        "(e.g. defaults='pulsar-4.0')",
    )


def _embedded_broker_class() -> type[EmbeddedBroker]:
    try:
        from mledger.standalone import EmbeddedStandalone
    except ImportError as exc:  # the [server] extra (FastAPI, uvicorn) is not installed
        pytest.fail(
            f"the pulsar_broker fixture needs mledger's server extra: pip install 'mledger[server]' ({exc})",
            pytrace=False,
        )
    return EmbeddedStandalone


def _marked_faults(node: pytest.Item | pytest.Collector) -> dict[str, Any]:
    """The options the test's ``pulsar_faults`` markers give a broker (``faults``, ``fault_seed``)."""
    faults: list[Any] = []
    seed = None
    for marker in node.iter_markers(MARKER):
        for fault in marker.args:
            faults.extend([fault] if not isinstance(fault, (list, tuple)) else fault)
        seed = marker.kwargs.get("seed", seed)
    options: dict[str, Any] = {}
    if faults:
        scenarios = [f for f in faults if isinstance(f, str)]
        if scenarios and len(faults) > 1:
            pytest.fail(f"{MARKER}: a scenario file ({scenarios[0]}) stands alone in the marker", pytrace=False)
        options["faults"] = faults[0] if scenarios else faults
    if seed is not None:
        options["fault_seed"] = seed
    return options


@pytest.fixture
def pulsar_broker_factory(request: pytest.FixtureRequest) -> Iterator[Callable[..., EmbeddedBroker]]:
    """Start in-process brokers with options; every one is stopped after the test."""
    started: list[EmbeddedBroker] = []
    request.node.stash[_STARTED] = started
    cls = _embedded_broker_class()
    marked = _marked_faults(request.node)

    def start(**options: Any) -> EmbeddedBroker:
        broker = cls(**{**marked, **options}).start()
        started.append(broker)
        return broker

    yield start
    for broker in reversed(started):
        broker.faults.clear()  # a pause ends and half-open connections heal: a quick stop
        broker.stop()


@pytest.fixture
def pulsar_broker(
    request: pytest.FixtureRequest, pulsar_broker_factory: Callable[..., EmbeddedBroker]
) -> EmbeddedBroker:
    """An in-process broker (memory store, manual clock, free port) for one test, with the
    options of the test's ``pulsar_broker`` marker."""
    marker = request.node.get_closest_marker("pulsar_broker")
    return pulsar_broker_factory(**(marker.kwargs if marker is not None else {}))


@pytest.fixture
def async_pulsar_broker(pulsar_broker: EmbeddedBroker) -> AsyncBroker:
    """``pulsar_broker`` for ``async def`` tests: what waits for the broker is awaited."""
    from mledger.protocol import AsyncBroker

    return AsyncBroker(pulsar_broker)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test that started brokers gets a report section with their seeds and fired faults."""
    report = yield
    brokers = item.stash.get(_STARTED, None)
    if report.failed and brokers:
        section = _faults_section(brokers)
        if section:
            report.sections.append(("mledger faults", section))
    return report


def _faults_section(brokers: list[EmbeddedBroker]) -> str:
    """Each broker's seed and the faults that fired (and those still armed); empty when no
    broker had a fault armed."""
    lines = []
    for index, broker in enumerate(brokers):
        faults = broker.faults
        fired = faults.fired()
        armed = faults.armed()
        if not fired and not armed:
            continue
        name = f"broker {index + 1}: " if len(brokers) > 1 else ""
        lines.append(f"{name}seed {faults.seed} (the same draws again: pulsar_faults(..., seed={faults.seed}))")
        lines += [f"  fired {f}" for f in fired] or ["  no fault fired"]
        lines += [f"  still armed #{a.fault_id} {a.spec.action} ({a.matches} matches)" for a in armed]
    return "\n".join(lines)
