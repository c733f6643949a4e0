"""``mledger standalone --config FILE``: Pulsar's ``broker.conf`` / ``standalone.conf`` keys, the
command line over them, ``--print-config``, keys mledger does not model, authorization mapping."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mledger import ConfigError
from mledger._standalone_config import (
    PULSAR_KEYS,
    ServerSettings,
    authorization_from_settings,
    effective_settings,
    is_pulsar_key,
    pulsar_fields,
    read_pulsar_conf,
    render_settings,
)
from mledger.admin import Authorization
from mledger.admin._authentication import AuthenticationSettings, build_authenticator, load_token_file, read_key
from mledger.admin._files import MAX_SETTING_FILE_BYTES
from mledger.cli._mledger import build_parser
from mledger.core._ints import INT32_MAX, INT64_MAX
from mledger.protocol import ListenerUrls, ProtocolConfig
from mledger.standalone import standalone_settings


def authenticator(settings: AuthenticationSettings) -> object:
    return build_authenticator(None, settings)

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
    # each Pulsar key it does not model once, in file order; empty values set nothing (Pulsar's
    # defaults); a key Pulsar does not have is told apart
    assert parsed.unmodeled == ("loadBalancerEnabled", "backlogQuotaDefaultLimitGB")
    assert parsed.unknown == ("long.continued.key",) and parsed.valueless == ()
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
        # every number against the Java type Pulsar gives its key, and Pulsar's bounds
        # accepted before, then every client connection failed (CONNECTED's max_message_size is an int32)
        ("maxMessageSize=2147483648", r"maxMessageSize='2147483648': out of range: .* int from .* to 2147473407"),
        # the frame, maxMessageSize + 10 KB, is a Java int too (Pulsar's @FieldContext maxValue)
        ("maxMessageSize=2147473408", r"to 2147473407 \(maxValue Integer.MAX_VALUE - Commands.MESSAGE_SIZE_FRAME"),
        ("managedLedgerMaxEntriesPerLedger=2147483648", r"managedLedgerMaxEntriesPerLedger.* Java int from"),
        ("managedLedgerMinLedgerRolloverTimeMinutes=2147483648", r"RolloverTimeMinutes.* Java int from"),
        ("brokerServiceCompactionThresholdInBytes=9223372036854775808", r"Java long from .* to 9223372036854775807"),
        ("statsUpdateFrequencyInSecs=0", r"statsUpdateFrequencyInSecs='0': out of range: .* from 1 to 2147483647"),
        ("keepAliveIntervalSeconds=1_000", r"keepAliveIntervalSeconds='1_000': not a whole number"),
        ("managedLedgerDefaultMarkDeleteRateLimit=nan", r"not a number .*Java double"),
        # a traceback before (brokerServicePort had a clean error); now one line naming the key and range
        ("webServicePort=70000", r"webServicePort=70000: out of range: a port is 0 to 65535"),
        ("webServicePortTls=-1", r"webServicePortTls=-1: out of range: a port is 0 to 65535"),
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


# -- numbers against Pulsar's Java types; files read with a cap; typos told apart -----------------------


def test_the_largest_values_pulsar_takes_are_taken(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("maxMessageSize=2147473407\nwebServicePort=65535\nbrokerServiceCompactionThresholdInBytes="
                    "9223372036854775807\nmanagedLedgerMaxEntriesPerLedger=+2147483647\n")
    settings = effective_settings(read_pulsar_conf(conf))
    assert settings.protocol.max_message_size == INT32_MAX - 10 * 1024 == pulsar_fields()["maxMessageSize"].maximum
    assert settings.server.web_service_port == 65535 and settings.ledger.max_entries_per_ledger == INT32_MAX
    assert settings.broker.broker_service_compaction_threshold_in_bytes == INT64_MAX
    with pytest.raises(ConfigError, match="max_message_size must be an integer in"):  # a library caller too
        ProtocolConfig(max_message_size=INT32_MAX - 10 * 1024 + 1)


def test_out_of_range_numbers_exit_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mledger.cli import main

    conf = tmp_path / "broker.conf"
    conf.write_text("webServicePort=70000\n")
    assert main(["standalone", "--memory", "--config", str(conf)]) == 2
    assert "webServicePort=70000: out of range: a port is 0 to 65535" in capsys.readouterr().err
    assert main(["standalone", "--memory", "--admin-tls-port", "70000"]) == 2  # a traceback before
    assert "webServicePortTls=70000: out of range" in capsys.readouterr().err


def test_a_range_error_says_whose_key_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Pulsar's keys are named as Pulsar's; mledger's own keys (typed like Pulsar's) as mledger's."""
    from mledger.cli import main

    conf = tmp_path / "broker.conf"
    conf.write_text("maxConcurrentPasswordChecks=99999999999\n")
    assert main(["standalone", "--memory", "--config", str(conf)]) == 2
    assert "mledger's maxConcurrentPasswordChecks is a Java int" in capsys.readouterr().err
    conf.write_text("brokerMaxConnections=99999999999\n")
    assert main(["standalone", "--memory", "--config", str(conf)]) == 2
    assert "Pulsar's brokerMaxConnections is a Java int" in capsys.readouterr().err


def test_every_modeled_key_has_pulsars_java_type() -> None:
    """A key added to PULSAR_KEYS is one of Pulsar's (pulsar_broker_keys.txt, its type inferred
    from there) or says its Java type; so its numbers are bounded like Pulsar's."""
    fields = pulsar_fields()
    untyped = [k.name for k in PULSAR_KEYS.values() if k.java_type is None and k.name not in fields]
    assert not untyped
    assert len(fields) > 500 and fields["brokerServicePort"].java_type == "Optional<Integer>"
    assert is_pulsar_key("bookkeeper_opportunisticStriping") and is_pulsar_key("zookeeperServers")
    assert not is_pulsar_key("brokerServicePortt")


@pytest.mark.parametrize(
    "read",
    [
        lambda: read_key("file:///dev/zero", "tokenSecretKey"),
        lambda: read_pulsar_conf("/dev/zero"),
        lambda: load_token_file("/dev/zero"),
        lambda: Authorization.from_json(Path("/dev/zero")),
        lambda: authenticator(AuthenticationSettings(authentication_providers=("basic",), basic_auth_conf="/dev/zero")),
    ],
    ids=["tokenSecretKey", "config-file", "token-file", "authorization-file", "basicAuthConf"],
)
def test_files_a_setting_names_are_read_with_a_size_cap(read: Callable[[], object]) -> None:
    """``tokenSecretKey=file:///dev/zero`` read until MemoryError."""
    with pytest.raises(ConfigError, match=f"'/dev/zero' holds more than {MAX_SETTING_FILE_BYTES:,} bytes"):
        read()


TYPOS = "brokerServicePortt=36650\njustakey\nloadBalancerEnabled=false\nzookeeperServers=\nclusterName\n"


def test_a_misspelt_key_is_told_apart_from_pulsar_keys_mledger_ignores(tmp_path: Path) -> None:
    """``brokerServicePortt`` appeared only in a trailing "not modeled" comment among the
    ZooKeeper keys, and ``justakey`` was dropped without a word."""
    conf = tmp_path / "broker.conf"
    conf.write_text(TYPOS)
    parsed = read_pulsar_conf(conf)
    assert parsed.unmodeled == ("loadBalancerEnabled",)
    assert parsed.unknown == ("brokerServicePortt", "justakey")
    assert parsed.valueless == ("justakey", "clusterName")
    comments = [line for line in render_settings(effective_settings(parsed)).splitlines() if line.startswith("# ")]
    assert comments[1:] == [
        "# not modeled by mledger (ignored): loadBalancerEnabled",
        "# not Pulsar keys (ignored; a typo?): brokerServicePortt (did you mean 'brokerServicePort'?), justakey",
        "# no value (no '=' or ':'; the default stays): justakey, clusterName",
    ]
    with pytest.raises(ConfigError, match=r"not Pulsar keys \(--strict-config\): brokerServicePortt \(did you mean"):
        read_pulsar_conf(conf, strict=True)
    conf.write_text("brokerServicePort=36650\nloadBalancerEnabled=false\n")
    assert read_pulsar_conf(conf, strict=True).unmodeled == ("loadBalancerEnabled",)  # Pulsar's keys pass


def test_strict_config_refuses_a_typo_at_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mledger.cli import main

    conf = tmp_path / "broker.conf"
    conf.write_text(TYPOS)
    assert main(["standalone", "--config", str(conf), "--strict-config", "--print-config"]) == 2
    assert "brokerServicePortt (did you mean 'brokerServicePort'?)" in capsys.readouterr().err
    assert main(["standalone", "--config", str(conf), "--print-config"]) == 0
    assert "# not Pulsar keys (ignored; a typo?): brokerServicePortt (did you mean" in capsys.readouterr().out


def test_start_up_warns_of_a_typo_and_advertises_the_admin_urls(tmp_path: Path) -> None:
    """At start the typo gets its "did you mean" on stderr; the ready line's admin URL carries
    ``advertisedAddress``, as the service URL does (Pulsar's ``webServiceAddress``)."""
    conf = tmp_path / "broker.conf"
    conf.write_text(TYPOS + "advertisedAddress=localhost\nbindAddress=127.0.0.1\nbrokerServicePort=0\nwebServicePort=0\n")
    proc = subprocess.Popen([sys.executable, "-m", "mledger.cli", "standalone", "--memory", "--config", str(conf)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        urls = json.loads(proc.stdout.readline() or "{}")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert urls["service_url"].startswith("pulsar://localhost:") and urls["admin_url"].startswith("http://localhost:")
    assert "not Pulsar keys (ignored; a typo?): brokerServicePortt (did you mean 'brokerServicePort'?)" in err
    assert "no value (no '=' or ':'; the default stays): justakey, clusterName" in err


def test_defaults_start_from_a_pulsar_version_and_the_file_applies_on_top(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("managedLedgerMaxUnackedRangesToPersist=5\nmanagedLedgerCursorPositionFlushSeconds=30\n")
    settings = standalone_settings(args("--defaults", "pulsar-4.1", "--config", str(conf)))
    ledger = settings.broker.ledger_config
    assert (ledger.pulsar_rules, ledger.throttle_mark_delete, ledger.persist_individual_ack_as_long_array) == (
        "pulsar-4.1",
        1.0,
        True,
    )
    assert ledger.max_unacked_ranges_to_persist == 5  # the file's, over the preset's 10000
    assert ledger.minimum_rollover_time_ms == 10 * 60_000  # the broker's own default stays
    assert settings.factory.cursor_position_flush_seconds == 30
    assert settings.factory.managed_cursor_info_compression_threshold_in_bytes == 16384  # the preset's
    assert standalone_settings(args()).broker.ledger_config.pulsar_rules is None
    rendered = render_settings(settings)
    assert "# cursors under pulsar-4.1's rules (--defaults pulsar-4.1)" in rendered
    assert "managedLedgerCursorPositionFlushSeconds=30" in rendered.splitlines()
    with pytest.raises(SystemExit):
        args("--defaults", "pulsar-9")
    assert "invalid choice: 'pulsar-9'" in capsys.readouterr().err
