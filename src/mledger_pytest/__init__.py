"""pytest plugin (entry point ``pytest11``): an in-process Pulsar broker per test.

Fixtures:

* ``pulsar_broker``: a :class:`~mledger.standalone.EmbeddedStandalone` (the protocol server
  and the admin REST API over one broker) started on free ports with a memory store and a
  manual clock, stopped after the test. Use ``pulsar_broker.service_url`` with
  ``pulsar.Client``, ``pulsar_broker.admin_url`` for the REST admin API, and
  ``pulsar_broker.clock.advance(ms)`` to make delayed messages due without sleeping, and
  ``pulsar_broker.restart(crash=True)`` (a SIGKILL) or ``restart()`` (a clean stop) to see what
  a consumer receives again after the broker restarts (same port and URLs: clients reconnect).
* ``pulsar_broker_factory``: ``pulsar_broker_factory(**options)`` starts one with options
  (``data_dir``, ``broker_config``, ``tokens``, ``authentication`` (an
  :class:`~mledger.admin.AuthenticationSettings`: JWT, basic, anonymous role),
  ``authorization``, ``manual_clock``, ``record`` and ``record_settings``: record what the
  broker does as the replay's raw logs); all are stopped after the test (a recording is
  complete once its broker stopped).

This module is loaded in every pytest run of an environment where mledger is installed, so it
imports nothing but pytest at load time; the fixtures import :mod:`mledger.protocol` when a test
asks for them and fail with a clear message when the ``server`` extra is missing.

``pulsar_broker_factory(deterministic=True, seed=N)`` starts a broker whose runs repeat exactly
(the same seed and client commands give the same frames and recorded rows; docs/pulsar/deterministic.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from mledger.protocol import EmbeddedBroker

__all__ = ["pulsar_broker", "pulsar_broker_factory"]


def _embedded_broker_class() -> type[EmbeddedBroker]:
    try:
        from mledger.standalone import EmbeddedStandalone
    except ImportError as exc:  # the [server] extra (FastAPI, uvicorn) is not installed
        pytest.fail(
            f"the pulsar_broker fixture needs mledger's server extra: pip install 'mledger[server]' ({exc})",
            pytrace=False,
        )
    return EmbeddedStandalone


@pytest.fixture
def pulsar_broker_factory() -> Iterator[Callable[..., EmbeddedBroker]]:
    """Start in-process brokers with options; every one is stopped after the test."""
    started: list[EmbeddedBroker] = []
    cls = _embedded_broker_class()

    def start(**options: Any) -> EmbeddedBroker:
        broker = cls(**options).start()
        started.append(broker)
        return broker

    yield start
    for broker in reversed(started):
        broker.stop()


@pytest.fixture
def pulsar_broker(pulsar_broker_factory: Callable[..., EmbeddedBroker]) -> EmbeddedBroker:
    """An in-process broker (memory store, manual clock, free port) for one test."""
    return pulsar_broker_factory()
