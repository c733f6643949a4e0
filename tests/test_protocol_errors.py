"""Issue 24 item 4: every error carries its Pulsar ``ServerError`` as data beside ``http_status``.

The protocol session, the REST app and the remote admin client map errors by those two class
attributes (one lookup), never by matching the message text; the session, split by job, reaches
nothing below the broker. Protocol behaviour is checked with the real ``pulsar-client``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator

import pulsar
import pytest
from protocol_raw import RawClient

from mledger import (
    EntryTooLargeError,
    InvalidRequestError,
    MLedgerError,
    NotAllowedError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
    StateCorruptedError,
    UnauthenticatedError,
)
from mledger.admin._remote import RemoteAdminError, error_for
from mledger.broker import (
    Broker,
    ConsumerBusyError,
    IncompatibleSchemaError,
    MessageDupUnknownError,
    PersistenceError,
    ProducerBusyError,
    SubscriptionBusyError,
    TopicFencedError,
    TopicName,
    TopicTerminatedError,
)
from mledger.broker._tenants import TenantNotFoundError
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.core._errors import InvalidTopicNameError, ServerError, error_class_for_status, server_error_of
from mledger.managed_ledger import ManagedLedgerFactory
from mledger.protocol import EmbeddedBroker, UnknownListenerError
from mledger.protocol._access import ProducerFencedError

_T = api.BaseCommand


def _error_classes() -> list[type[MLedgerError]]:
    for package in ("core", "codec", "storage", "managed_ledger", "broker", "admin", "protocol", "rest"):
        module = importlib.import_module(f"mledger.{package}")
        for info in pkgutil.walk_packages(module.__path__, f"mledger.{package}."):
            if not info.name.endswith("__main__"):
                importlib.import_module(info.name)
    found: list[type[MLedgerError]] = []
    todo: list[type[MLedgerError]] = [MLedgerError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


def test_server_error_is_pulsar_api_protos_enum() -> None:
    assert {e.name: e.value for e in ServerError} == dict(api.ServerError.items())


def test_every_error_class_carries_a_server_error_and_an_http_status() -> None:
    classes = _error_classes()
    assert len(classes) > 50
    for cls in classes:
        assert isinstance(cls.server_error, ServerError), cls
        assert 400 <= cls.http_status < 600, cls


@pytest.mark.parametrize(
    ("cls", "server_error", "http_status"),
    [
        (ConsumerBusyError, ServerError.ConsumerBusy, 409),
        (SubscriptionBusyError, ServerError.ConsumerBusy, 412),
        (ProducerBusyError, ServerError.ProducerBusy, 409),
        (ProducerFencedError, ServerError.ProducerFenced, 409),
        (PermissionDeniedError, ServerError.AuthorizationError, 403),
        (IncompatibleSchemaError, ServerError.IncompatibleSchema, 409),
        (TopicTerminatedError, ServerError.TopicTerminatedError, 412),
        (NotFoundError, ServerError.TopicNotFound, 404),
        (TenantNotFoundError, ServerError.TopicNotFound, 404),
        (InvalidTopicNameError, ServerError.InvalidTopicName, 400),
        (InvalidRequestError, ServerError.NotAllowedError, 400),
        (NotAllowedError, ServerError.NotAllowedError, 405),
        (EntryTooLargeError, ServerError.NotAllowedError, 413),
        (MessageDupUnknownError, ServerError.PersistenceError, 409),
        (PersistenceError, ServerError.PersistenceError, 500),
        (StateCorruptedError, ServerError.PersistenceError, 500),
        (TopicFencedError, ServerError.ServiceNotReady, 412),
        (UnauthenticatedError, ServerError.ServiceNotReady, 401),
        (UnknownListenerError, ServerError.ServiceNotReady, 500),
    ],
)
def test_each_condition_gets_pulsars_codes(
    cls: type[MLedgerError], server_error: ServerError, http_status: int
) -> None:
    exc = cls("x")
    assert server_error_of(exc) is server_error and exc.http_status == http_status


def test_the_message_text_never_picks_the_server_error() -> None:
    assert (
        server_error_of(InvalidRequestError("invalid subscription name 'a/topic name'")) is ServerError.NotAllowedError
    )
    assert server_error_of(ValueError("topic name")) is ServerError.UnknownError


def test_a_bad_topic_name_raises_invalid_topic_name_error() -> None:
    for bad in ("a/b", "persistent://public/default", "x://public/default/t"):
        with pytest.raises(InvalidTopicNameError, match="topic name"):
            TopicName.parse(bad)
    broker = Broker(ManagedLedgerFactory())
    try:
        with pytest.raises(InvalidTopicNameError):
            broker.create_topic("t-partition-1", 2)
        with pytest.raises(InvalidTopicNameError):
            broker.open_partition("t-partition-1", 0)
    finally:
        broker.close()


def test_remote_admin_maps_a_status_back_by_the_classes_own_http_status() -> None:
    for cls in (
        InvalidRequestError,
        UnauthenticatedError,
        PermissionDeniedError,
        NotFoundError,
        NotAllowedError,
        PreconditionFailedError,
        EntryTooLargeError,
    ):
        assert error_class_for_status(cls.http_status) is cls
        error = error_for(cls.http_status, "why")
        assert type(error) is cls and str(error) == "why"
    conflict = error_for(409, "busy")
    assert type(conflict) is RemoteAdminError and conflict.http_status == 409
    assert error_class_for_status(409) is None


# -- with the real client -----------------------------------------------------------------------


@pytest.fixture
def client(pulsar_broker: EmbeddedBroker) -> Iterator[pulsar.Client]:
    c = pulsar.Client(
        pulsar_broker.service_url,
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    yield c
    c.close()


def test_a_refused_subscription_name_that_mentions_a_topic_name_is_not_invalid_topic_name(
    client: pulsar.Client,
) -> None:
    """The session used to answer InvalidTopicName for any InvalidRequestError whose text held
    "topic name": a subscription name is the client's text, so it could pick the code."""
    client.create_producer("words").close()
    with pytest.raises(pulsar.NotAllowedError):
        client.subscribe("words", "a/topic name")


def test_a_bad_topic_name_is_answered_invalid_topic_name(pulsar_broker: EmbeddedBroker) -> None:
    raw = RawClient(pulsar_broker.port)
    try:
        raw.send(_T(type=_T.LOOKUP, lookupTopic=api.CommandLookupTopic(topic="persistent://only/two", request_id=1)))
        reply = raw.next_command().lookupTopicResponse
        assert reply.response == api.CommandLookupTopicResponse.Failed
        assert reply.error == api.InvalidTopicName and "topic name" in reply.message
        producer = api.CommandProducer(topic="persistent://public/default/t/x", producer_id=1, request_id=2)
        raw.send(_T(type=_T.PRODUCER, producer=producer))
        error = raw.next_command().error
        assert error.request_id == 2 and error.error == api.InvalidTopicName
    finally:
        raw.close()


def test_a_known_condition_keeps_its_code_through_the_client(client: pulsar.Client) -> None:
    client.subscribe("busy", "only", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe("busy", "only", consumer_type=pulsar.ConsumerType.Exclusive)
    client.create_producer("named", producer_name="p1")
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer("named", producer_name="p1")
