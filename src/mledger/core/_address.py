"""Listening addresses as the commands take them: ``--bind`` values, one parser for every server.

:func:`parse_bind` reads ``host:port``, a bare ``port``, a bare ``host``, ``:port`` and IPv6 in
brackets (``[::1]:6650``); :func:`format_address` writes one back the same way (for messages and
URLs). Pure functions: nothing here opens a socket.
"""

from __future__ import annotations

from collections.abc import Callable

from ._errors import ConfigError

__all__ = ["DEFAULT_HOST", "MAX_PORT", "advertised_host", "format_address", "parse_bind"]

DEFAULT_HOST = "127.0.0.1"
"""The host a server listens on when ``--bind`` names only a port: loopback, as ``pulsar standalone``
binds nothing wider without being told."""

MAX_PORT = 65535
"""The largest TCP port (0 asks for a free one): Java's ``InetSocketAddress`` refuses others."""


def parse_bind(
    text: str, default_port: int, *, default_host: str = DEFAULT_HOST, option: str = "--bind"
) -> tuple[str, int]:
    """``text`` -> ``(host, port)``.

    Accepted: ``host:port``; ``[v6]:port`` and ``[v6]`` (IPv6 in brackets, as in URLs); a bare
    port (``36653``: ``default_host`` on that port, as people type it); ``:port``; a bare host
    (``default_port`` on it). Port 0 asks for a free one. Anything else (an empty value, a port
    that is not a number or outside 0-65535, IPv6 without brackets, an unclosed bracket) raises
    :class:`~mledger.core.ConfigError` naming ``option`` and the value.
    """
    value = text.strip()

    def bad(why: str) -> ConfigError:
        return ConfigError(f"invalid {option} {text!r}: {why} (expected host:port, port or [ipv6]:port)")

    if not value:
        raise bad("empty")
    if value.isdigit():
        return default_host, _port(value, bad)
    if value.startswith("["):
        close = value.find("]")
        if close < 0:
            raise bad("unclosed '['")
        host, rest = value[1:close], value[close + 1 :]
        if not host:
            raise bad("empty host")
        if not rest:
            return host, default_port
        if not rest.startswith(":"):
            raise bad(f"unexpected {rest!r} after the address")
        return host, _port(rest[1:], bad)
    host, sep, port = value.rpartition(":")
    if not sep:
        return value, default_port
    if ":" in host:
        raise bad("an IPv6 address needs brackets, e.g. [::1]:6650")
    return host or default_host, _port(port, bad)


def _port(text: str, bad: Callable[[str], ConfigError]) -> int:
    try:
        number = int(text)
    except ValueError:
        raise bad(f"port {text!r} is not a number") from None
    if not 0 <= number <= MAX_PORT:
        raise bad(f"port {number} is out of range (0-{MAX_PORT})")
    return number


def format_address(host: str, port: int) -> str:
    """``host:port``, with IPv6 hosts in brackets (``[::1]:6650``): what :func:`parse_bind` reads."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def advertised_host(advertised_address: str | None, bound_host: str) -> str:
    """The host clients are told to use: ``advertised_address`` (Pulsar's ``advertisedAddress``)
    or else the host a server is bound to, loopback for a wildcard bind (``0.0.0.0``, ``::``)."""
    host = advertised_address or bound_host
    return DEFAULT_HOST if host in ("0.0.0.0", "::", "") else host
