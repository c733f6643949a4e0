"""HTTP lookup and advertised listeners (issue 26 item 5): clients given the admin's ``http://``
URL find the broker through ``/lookup/v2/topic/...`` and ``.../partitions?checkAllowAutoCreation``;
a lookup naming a listener gets that listener's address, one naming an unknown listener fails as
Pulsar's (``ServiceNotReady`` / 500 ``the broker do not have <name> listener``)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pulsar
import pytest
from protocol_raw import RawClient

from mledger import ConfigError
from mledger.admin import Authorization
from mledger.broker import BrokerConfig
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.protocol import EmbeddedBroker, ListenerUrls, ProtocolConfig, parse_advertised_listeners

_T = api.BaseCommand
TOPIC_PATH = "persistent/public/default"


def _round_trip(client: pulsar.Client, topic: str) -> list[bytes]:
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(f"m{i}".encode())
    got = sorted(consumer.receive(timeout_millis=5000).data() for _ in range(3))
    consumer.close()
    producer.close()
    return got


@pytest.mark.parametrize("partitions", [0, 3])
def test_a_client_given_the_http_url_produces_and_consumes(pulsar_broker: EmbeddedBroker, partitions: int) -> None:
    admin = pulsar_broker.admin_url
    topic = f"http-lookup-{partitions}"
    if partitions:
        assert httpx.put(f"{admin}/admin/v2/{TOPIC_PATH}/{topic}/partitions", json=partitions).status_code == 204
    client = pulsar.Client(admin, operation_timeout_seconds=10)
    try:
        assert _round_trip(client, topic) == [b"m0", b"m1", b"m2"]
    finally:
        client.close()
    stored = httpx.get(f"{admin}/admin/v2/{TOPIC_PATH}/{topic}/partitions").json()
    assert stored == {"partitions": partitions}


def test_rest_lookup_answers_pulsars_lookup_data(pulsar_broker: EmbeddedBroker) -> None:
    admin = pulsar_broker.admin_url
    answer = httpx.get(f"{admin}/lookup/v2/topic/{TOPIC_PATH}/some-topic", params={"authoritative": "true"})
    assert answer.status_code == 200
    assert answer.json() == {
        "brokerUrl": pulsar_broker.service_url,
        "brokerUrlTls": None,
        "httpUrl": admin,
        "httpUrlTls": None,
        "nativeUrl": pulsar_broker.service_url,
    }
    missing_namespace = httpx.get(f"{admin}/lookup/v2/topic/persistent/public/nowhere/t")
    assert missing_namespace.status_code == 404
    assert "Namespace does not exist" in missing_namespace.json()["reason"]
    bad_name = httpx.get(f"{admin}/lookup/v2/topic/persistent/public/default/%20")
    assert bad_name.status_code == 400


def test_rest_lookup_of_a_topic_that_would_not_be_created_is_404(
    pulsar_broker_factory: Callable[..., EmbeddedBroker],
) -> None:
    broker = pulsar_broker_factory(broker_config=BrokerConfig(allow_auto_topic_creation=False))
    admin = broker.admin_url
    answer = httpx.get(f"{admin}/lookup/v2/topic/{TOPIC_PATH}/absent")
    assert (answer.status_code, answer.json()) == (
        404,
        {"reason": "Topic not found persistent://public/default/absent"},
    )
    assert httpx.put(f"{admin}/admin/v2/{TOPIC_PATH}/present").status_code == 204
    assert httpx.get(f"{admin}/lookup/v2/topic/{TOPIC_PATH}/present").status_code == 200
    # checkAllowAutoCreation does not make a topic that auto-creation would not make
    partitions = httpx.get(f"{admin}/admin/v2/{TOPIC_PATH}/absent/partitions?checkAllowAutoCreation=true")
    assert partitions.status_code == 404


def test_partitions_with_check_allow_auto_creation(pulsar_broker: EmbeddedBroker) -> None:
    base = f"{pulsar_broker.admin_url}/admin/v2/{TOPIC_PATH}"
    assert httpx.get(f"{base}/not-yet/partitions").status_code == 404  # Pulsar: the topic must exist
    answer = httpx.get(f"{base}/not-yet/partitions", params={"checkAllowAutoCreation": "true"})
    assert (answer.status_code, answer.json()) == (200, {"partitions": 0})
    assert httpx.put(f"{base}/parted/partitions", json=4).status_code == 204
    answer = httpx.get(f"{base}/parted/partitions", params={"checkAllowAutoCreation": "true"})
    assert answer.json() == {"partitions": 4}
    refused = httpx.get(
        f"{pulsar_broker.admin_url}/admin/v2/persistent/public/nowhere/t/partitions?checkAllowAutoCreation=true"
    )
    assert refused.status_code == 404


def test_rest_lookup_needs_the_lookup_permission(pulsar_broker_factory: Callable[..., EmbeddedBroker]) -> None:
    authorization = Authorization({"app": {"public/default": ["lookup"]}, "other": {"public/other": ["lookup"]}})
    broker = pulsar_broker_factory(tokens={"app-token": "app", "other-token": "other"}, authorization=authorization)
    url = f"{broker.admin_url}/lookup/v2/topic/{TOPIC_PATH}/guarded"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer other-token"}).status_code == 403
    assert httpx.get(url, headers={"Authorization": "Bearer app-token"}).status_code == 200


# -- advertised listeners ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


INTERNAL = "pulsar://broker.internal.invalid:6650"


@pytest.fixture
def listening_broker(pulsar_broker_factory: Callable[..., EmbeddedBroker]) -> EmbeddedBroker:
    """A broker whose internal listener is an address the tests cannot reach, and whose
    ``external`` listener is where it really listens."""
    port = _free_port()
    listeners = parse_advertised_listeners(
        f"internal:{INTERNAL},external:pulsar://127.0.0.1:{port},external:pulsar+ssl://127.0.0.1:{port + 1}"
    )
    config = ProtocolConfig(port=port, advertised_listeners=listeners, internal_listener_name="internal")
    return pulsar_broker_factory(protocol_config=config)


def _raw_lookup(broker: EmbeddedBroker, listener: str | None) -> api.CommandLookupTopicResponse:
    raw = RawClient(int(broker.service_url.rsplit(":", 1)[1]))
    try:
        lookup = api.CommandLookupTopic(topic="persistent://public/default/l", request_id=1)
        if listener is not None:
            lookup.advertised_listener_name = listener
        raw.send(_T(type=_T.LOOKUP, lookupTopic=lookup))
        return raw.next_command().lookupTopicResponse
    finally:
        raw.close()


def test_a_lookup_answers_the_listener_it_names(listening_broker: EmbeddedBroker) -> None:
    port = int(listening_broker.service_url.rsplit(":", 1)[1])
    internal = _raw_lookup(listening_broker, None)
    assert (internal.response, internal.brokerServiceUrl) == (api.CommandLookupTopicResponse.Connect, INTERNAL)
    assert not internal.HasField("brokerServiceUrlTls")
    external = _raw_lookup(listening_broker, "external")
    assert external.brokerServiceUrl == f"pulsar://127.0.0.1:{port}"
    assert external.brokerServiceUrlTls == f"pulsar+ssl://127.0.0.1:{port + 1}"
    client = pulsar.Client(listening_broker.service_url, listener_name="external", operation_timeout_seconds=10)
    try:
        assert _round_trip(client, "via-external") == [b"m0", b"m1", b"m2"]
    finally:
        client.close()


def test_a_lookup_naming_an_unknown_listener_fails_as_pulsars(listening_broker: EmbeddedBroker) -> None:
    refused = _raw_lookup(listening_broker, "nope")
    assert refused.response == api.CommandLookupTopicResponse.Failed
    assert (refused.error, refused.message) == (api.ServiceNotReady, "the broker do not have nope listener")
    # the client retries ServiceNotReady until its operation timeout, as it does against Pulsar
    client = pulsar.Client(listening_broker.service_url, listener_name="nope", operation_timeout_seconds=2)
    try:
        with pytest.raises(pulsar.Timeout):
            client.create_producer("never")
    finally:
        client.close()


def test_rest_lookup_names_a_listener_by_parameter_or_header(listening_broker: EmbeddedBroker) -> None:
    url = f"{listening_broker.admin_url}/lookup/v2/topic/{TOPIC_PATH}/l"
    port = int(listening_broker.service_url.rsplit(":", 1)[1])
    assert httpx.get(url).json()["brokerUrl"] == INTERNAL
    by_parameter = httpx.get(url, params={"listenerName": "external"}).json()
    assert (by_parameter["brokerUrl"], by_parameter["brokerUrlTls"]) == (
        f"pulsar://127.0.0.1:{port}",
        f"pulsar+ssl://127.0.0.1:{port + 1}",
    )
    assert by_parameter["nativeUrl"] == by_parameter["brokerUrl"]
    by_header = httpx.get(url, headers={"X-Pulsar-ListenerName": "external"}).json()
    assert by_header == by_parameter
    # the parameter wins over the header
    assert (
        httpx.get(url, params={"listenerName": "internal"}, headers={"X-Pulsar-ListenerName": "external"}).json()[
            "brokerUrl"
        ]
        == INTERNAL
    )
    refused = httpx.get(url, params={"listenerName": "nope"})
    assert (refused.status_code, refused.json()) == (500, {"reason": "the broker do not have nope listener"})


# -- settings -------------------------------------------------------------------------------------


def test_advertised_listeners_are_read_as_pulsar_reads_them() -> None:
    listeners = parse_advertised_listeners(
        " internal:pulsar://10.0.0.5:6650, internal:pulsar+ssl://10.0.0.5:6651,external:pulsar://ci:6650,"
        "external:http://ci:8080"
    )
    assert listeners == {
        "internal": ListenerUrls("pulsar://10.0.0.5:6650", "pulsar+ssl://10.0.0.5:6651"),
        "external": ListenerUrls("pulsar://ci:6650", broker_http_url="http://ci:8080"),
    }
    assert ProtocolConfig(advertised_listeners=listeners).internal_listener_name == "internal"  # the first
    assert ProtocolConfig(advertised_listeners=listeners, internal_listener_name="external").internal_listener_name == (
        "external"
    )
    with pytest.raises(ConfigError, match="do not contain `internalListenerName` entry"):
        ProtocolConfig(advertised_listeners=listeners, internal_listener_name="other")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (":pulsar://h:1", "do not contain listener name"),
        ("a:pulsar://h:1,a:pulsar://h:2", "redundant configure for listener `a`"),
        ("a:pulsar://h:1,b:pulsar+ssl://h:1", "must not specify `h:1` to different listener"),
        ("a:pulsar://h", "the value pulsar://h in the `advertisedListeners` configure is invalid"),
        ("a:kafka://h:9092", "is invalid"),
    ],
)
def test_bad_advertised_listeners_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_advertised_listeners(text)


def _standalone(tmp_path: Path, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mledger.cli", "standalone", "--memory", "--bind", "127.0.0.1:0", "--admin-bind",
         "127.0.0.1:0", *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.timeout(120)
def test_mledger_standalone_takes_the_listener_options(tmp_path: Path) -> None:
    listeners = "internal:pulsar://10.0.0.5:6650,external:pulsar://ci-host:6650"
    proc = _standalone(tmp_path, "--advertised-listeners", listeners, "--internal-listener-name", "external")
    assert proc.stdout is not None
    urls = json.loads(proc.stdout.readline())
    try:
        lookup = f"{urls['admin_url']}/lookup/v2/topic/{TOPIC_PATH}/t"
        assert httpx.get(lookup).json()["brokerUrl"] == "pulsar://ci-host:6650"
        assert httpx.get(lookup, params={"listenerName": "internal"}).json()["brokerUrl"] == "pulsar://10.0.0.5:6650"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    refused = _standalone(tmp_path, "--advertised-listeners", listeners, "--internal-listener-name", "other")
    out, err = refused.communicate(timeout=60)
    assert refused.returncode == 2 and out == ""
    assert "do not contain `internalListenerName` entry" in err
