"""``--bind`` values: one parser (mledger.core._address) for every server and command."""

from __future__ import annotations

import pytest

from mledger import ConfigError
from mledger.core import format_address, parse_bind


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:6650", ("127.0.0.1", 6650)),
        ("36653", ("127.0.0.1", 36653)),  # a bare port: the default host (was host 0.0.143.45)
        (" 0 ", ("127.0.0.1", 0)),
        (":6651", ("127.0.0.1", 6651)),
        ("0.0.0.0", ("0.0.0.0", 6650)),  # a bare host: the default port
        ("localhost:7000", ("localhost", 7000)),
        ("[::1]:6650", ("::1", 6650)),
        ("[::]", ("::", 6650)),
    ],
)
def test_parse_bind_accepts_what_people_type(text: str, expected: tuple[str, int]) -> None:
    assert parse_bind(text, 6650) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("host:x", "port 'x' is not a number"),
        ("host:70000", "port 70000 is out of range"),
        ("70000", "port 70000 is out of range"),
        ("::1:6650", "an IPv6 address needs brackets"),
        ("[::1", "unclosed '['"),
        ("[::1]6650", "unexpected '6650' after the address"),
        ("[]:6650", "empty host"),
    ],
)
def test_parse_bind_refuses_bad_values_naming_option_and_value(text: str, why: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_bind(text, 8080, option="--admin-bind")
    assert f"invalid --admin-bind {text!r}: {why}" in str(info.value)


def test_format_address_brackets_ipv6_and_round_trips() -> None:
    assert format_address("::1", 6650) == "[::1]:6650"
    assert format_address("127.0.0.1", 80) == "127.0.0.1:80"
    for host, port in (("::1", 6650), ("10.0.0.1", 1)):
        assert parse_bind(format_address(host, port), 9) == (host, port)
