"""``mledger standalone --config FILE``: Pulsar's ``broker.conf`` / ``standalone.conf`` keys, the
command line over them, ``--print-config``, keys mledger does not model, authorization mapping."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mledger import ConfigError
from mledger._standalone_config import (
    PULSAR_KEYS,
    ServerSettings,
    authorization_from_settings,
    effective_settings,
    read_pulsar_conf,
    render_settings,
)
from mledger.admin import Authorization
from mledger.cli._mledger import build_parser
from mledger.protocol import ListenerUrls
from mledger.standalone import standalone_settings

pytestmark = pytest.mark.timeout(120)

CONF = """\
# a broker.conf in Pulsar's format
zookeeperServers=
brokerServicePort=16650
webServicePort : 18080
bindAddress=0.0.0.0
advertisedAddress=broker.example
clusterName=ci
maxMessageSize=2097152
keepAliveIntervalSeconds=45
brokerDeduplicationEnabled=true
brokerDeduplicationEntriesInterval=500
delayedDeliveryTickTimeMillis=250
isDelayedDeliveryDeliverAtTimeStrict=false
defaultRetentionTimeInMinutes=-1
defaultRetentionSizeInMB=64
managedLedgerMaxEntriesPerLedger=1000
managedLedgerMinLedgerRolloverTimeMinutes=0
managedLedgerMaxLedgerRolloverTimeMinutes=60
managedLedgerCursorMaxEntriesPerLedger=200
managedLedgerCursorRolloverTimeInSeconds=600
managedLedgerMaxUnackedRangesToPersist=500
managedLedgerDefaultMarkDeleteRateLimit=0.5
managedCursorInfoCompressionType=ZSTD
superUserRoles=admin, ops
anonymousUserRole=anonymous
loadBalancerEnabled=false
backlogQuotaDefaultLimitGB=10
loadBalancerEnabled=true
long.continued.key=a,\\
    b
"""


def args(*argv: str) -> object:
    return build_parser(["standalone", *argv]).parse_args(["standalone", *argv])


def test_the_file_fills_every_modeled_setting_under_pulsars_names(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF)
    parsed = read_pulsar_conf(conf)
    # each key it does not model once, in file order; empty values set nothing (Pulsar's defaults)
    assert parsed.unmodeled == ("loadBalancerEnabled", "backlogQuotaDefaultLimitGB", "long.continued.key")
    settings = effective_settings(parsed)
    assert (settings.server.bind_address, settings.server.broker_service_port) == ("0.0.0.0", 16650)
    assert (settings.server.web_bind_address, settings.server.web_service_port) == ("0.0.0.0", 18080)
    assert settings.protocol.advertised_address == "broker.example"
    assert settings.protocol.max_message_size == settings.factory.max_message_size == 2 * 1024 * 1024
    assert settings.protocol.keep_alive_interval_seconds == 45
    assert settings.broker.cluster_name == "ci"
    assert settings.broker.deduplication_enabled and settings.broker.deduplication_entries_interval == 500
    assert settings.broker.delayed_delivery_tick_time_millis == 250
    assert settings.broker.delayed_delivery_deliver_at_time_strict is False
    ledger = settings.broker.ledger_config
    assert ledger is settings.ledger
    assert (ledger.retention_time_ms, ledger.retention_size_in_mb) == (-1, 64)
    assert (ledger.max_entries_per_ledger, ledger.minimum_rollover_time_ms) == (1000, 0)
    assert ledger.maximum_rollover_time_ms == 60 * 60_000
    assert (ledger.metadata_max_entries_per_ledger, ledger.ledger_rollover_timeout) == (200, 600)
    assert (ledger.max_unacked_ranges_to_persist, ledger.throttle_mark_delete) == (500, 0.5)
    assert settings.factory.managed_cursor_info_compression_type == "ZSTD"
    assert settings.server.super_user_roles == ("admin", "ops")
    # authenticationEnabled is not set: the providers' settings are read but stay off
    assert settings.authentication is None and settings.tls is None


def test_flags_override_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF)
    settings = standalone_settings(
        args("--config", str(conf), "--bind", "127.0.0.1:0", "--admin-bind", "0", "--deduplication")
    )
    assert (settings.server.bind_address, settings.server.broker_service_port) == ("127.0.0.1", 0)
    # a bare port keeps the file's host; the rest of the file stays
    assert (settings.server.web_bind_address, settings.server.web_service_port) == ("0.0.0.0", 0)
    assert settings.protocol.host == "127.0.0.1" and settings.protocol.port == 0
    assert settings.broker.cluster_name == "ci"
    token_file = tmp_path / "tokens.json"
    token_file.write_text('{"t": "admin"}')
    settings = standalone_settings(args("--config", str(conf), "--token-file", str(token_file)))
    assert settings.authentication is not None and settings.authentication.token_file == str(token_file)
    assert settings.authentication.anonymous_user_role == "anonymous"  # the file's, under the flag's provider
    # without a file the defaults are mledger's standalone ones
    default = standalone_settings(args())
    assert (default.server.bind_address, default.server.broker_service_port) == ("127.0.0.1", 6650)
    assert (default.server.web_bind_address, default.server.web_service_port) == ("127.0.0.1", 8080)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("brokerServicePort=sixty", "brokerServicePort='sixty'"),
        ("brokerDeduplicationEnabled=yes", "brokerDeduplicationEnabled='yes'"),
        ("managedLedgerMaxEntriesPerLedger=0", "max_entries_per_ledger must be >= 1"),
        ("brokerServicePortTls=6651", "tlsCertificateFilePath"),
        ("=orphan", "no key"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, line: str, message: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(line + "\n")
    with pytest.raises(ConfigError, match=message):
        effective_settings(read_pulsar_conf(conf))


def test_print_config_shows_the_effective_settings_and_reads_back(tmp_path: Path) -> None:
    conf = tmp_path / "standalone.conf"
    conf.write_text(CONF + "tokenSecretKey=data:;base64,c2VjcmV0\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mledger.cli",
            "standalone",
            "--config",
            str(conf),
            "--print-config",
            "--bind",
            "127.0.0.1:7000",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = dict(line.split("=", 1) for line in done.stdout.splitlines() if not line.startswith("#"))
    assert set(lines) == set(PULSAR_KEYS)
    assert lines["brokerServicePort"] == "7000" and lines["bindAddress"] == "127.0.0.1"  # the flag won
    assert lines["webServicePort"] == "18080" and lines["clusterName"] == "ci"
    assert lines["managedLedgerMaxLedgerRolloverTimeMinutes"] == "60"
    assert lines["tokenSecretKey"] == "<redacted>"
    assert "# not modeled by mledger (ignored): loadBalancerEnabled, backlogQuotaDefaultLimitGB" in done.stdout
    # the output is itself a config file giving the same settings
    again = tmp_path / "again.conf"
    again.write_text(done.stdout.replace("tokenSecretKey=<redacted>", "tokenSecretKey="))
    first = effective_settings(read_pulsar_conf(conf))
    second = effective_settings(read_pulsar_conf(again))
    assert second.broker == first.broker and second.ledger == first.ledger and second.factory == first.factory


def test_authorization_from_the_config(tmp_path: Path) -> None:
    assert authorization_from_settings(ServerSettings()) is None
    only_superusers = authorization_from_settings(ServerSettings(authorization_enabled=True, super_user_roles=("a",)))
    assert only_superusers == Authorization({}, ["a"])
    grants = tmp_path / "auth.json"
    grants.write_text('{"superUserRoles": ["root"], "permissions": {"app": {"public/default": ["produce"]}}}')
    merged = authorization_from_settings(ServerSettings(authorization_file=str(grants), super_user_roles=("a",)))
    assert merged is not None and merged.super_user_roles == {"root", "a"}
    assert merged.is_allowed("app", "produce", "persistent://public/default/t")
    assert render_settings(effective_settings()).startswith("# mledger standalone")


def test_advertised_listeners_from_the_file_and_the_flags(tmp_path: Path) -> None:
    """``advertisedListeners`` / ``internalListenerName`` fill the protocol server's listeners
    (what lookups answer, tests/test_lookup.py); ``--advertised-listeners`` overrides them, and
    ``--print-config`` writes them back."""
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "advertisedListeners=internal:pulsar://10.0.0.5:6650,external:pulsar://ci:6650,external:pulsar+ssl://ci:6651\n"
        "internalListenerName=external\n"
    )
    settings = standalone_settings(args("--config", str(conf)))
    assert settings.protocol.advertised_listeners == {
        "internal": ListenerUrls("pulsar://10.0.0.5:6650"),
        "external": ListenerUrls("pulsar://ci:6650", "pulsar+ssl://ci:6651"),
    }
    assert settings.protocol.internal_listener_name == "external"
    assert (
        "advertisedListeners=internal:pulsar://10.0.0.5:6650,external:pulsar://ci:6650,external:pulsar+ssl://ci:6651"
        in render_settings(settings)
    )
    flagged = standalone_settings(
        args("--config", str(conf), "--advertised-listeners", "a:pulsar://h:1", "--internal-listener-name", "a")
    )
    assert flagged.protocol.advertised_listeners == {"a": ListenerUrls("pulsar://h:1")}
