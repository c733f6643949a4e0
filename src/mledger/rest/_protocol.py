"""uvicorn's httptools HTTP/1.1 protocol with Pulsar-style JSON answers to requests it refuses.

uvicorn answers a request its parser refuses with a plain-text 400 and closes the connection,
before the app ever sees it. :class:`AdminHttpProtocol` keeps uvicorn's protocol and changes
only those answers, so every error a client gets is Pulsar's JSON ``{"reason": ...}``:

* a request line (URL) longer than ``max_url_bytes``: 414, at once, while it is still arriving;
* request headers longer than ``max_header_bytes`` in all: 431, likewise;
* ``Content-Length`` too large for any integer (``Content-Length overflow``, e.g. 5,000 digits):
  413, like any other declared size over the body limit;
* anything else the parser refuses (a bad ``Content-Length``, chunk size or URL character):
  400 naming the parser's reason.

Over TLS, a verified client certificate's subject goes into each request's scope as the ASGI TLS
extension's ``client_cert_name`` (RFC 4514), where the ``tls`` authentication provider reads it.

Each of these closes the connection (the request cannot be read to its end).

A connection that sends nothing within ``first_byte_timeout`` seconds of being made is closed:
uvicorn arms its keep-alive timer (``timeout_keep_alive``) only once a response is complete,
so a connection that never sends a request would stay open for ever, holding a descriptor.
:meth:`AdminHttpProtocol.connection_made` arms that same timer, with this timeout; uvicorn's
``data_received`` cancels it on the first byte, as it does for an idle keep-alive connection.
Everything else is uvicorn's own behaviour: HTTP/1.1 keep-alive, pipelining, flow control,
graceful shutdown.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..core import subject_name

__all__ = ["AdminHttpProtocol", "error_body"]

DEFAULT_MAX_URL_BYTES = 8 << 10
"""Jetty's (Pulsar's web server) default request header buffer: 8 KiB."""

DEFAULT_MAX_HEADER_BYTES = 64 << 10

DEFAULT_FIRST_BYTE_TIMEOUT = 10.0
"""Seconds a new connection has to send its first byte (``firstByteTimeoutSeconds``)."""

_STATUS_TEXT = {
    400: "Bad Request",
    413: "Content Too Large",
    414: "URI Too Long",
    431: "Request Header Fields Too Large",
}


def error_body(reason: str) -> bytes:
    """Pulsar's error body ``{"reason": ...}``."""
    return json.dumps({"reason": reason}).encode("utf-8")


class _Refused(Exception):
    """Raised from a parser callback to stop parsing; ``status`` and ``reason`` are the answer."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class AdminHttpProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` whose refusals are JSON (see the module docstring).

    The limits come from class attributes, set by :func:`protocol_class`.
    """

    max_url_bytes = DEFAULT_MAX_URL_BYTES
    max_header_bytes = DEFAULT_MAX_HEADER_BYTES
    first_byte_timeout = DEFAULT_FIRST_BYTE_TIMEOUT
    _refusal: _Refused | None = None
    _header_bytes = 0
    _tls: dict[object, object] | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        # uvicorn's keep-alive timer, armed before the first request too (see the module docstring)
        self.timeout_keep_alive_task = self.loop.call_later(self.first_byte_timeout, self.timeout_keep_alive_handler)
        if self.scheme == "https":
            certificate = transport.get_extra_info("peercert")
            self._tls = {"client_cert_name": subject_name(certificate.get("subject")) if certificate else None}

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = 0
        if self._tls is not None:  # the ASGI TLS extension, the part the app reads
            self.scope["extensions"] = {"tls": dict(self._tls)}

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > self.max_url_bytes:
            self._refusal = _Refused(414, f"URI Too Long: the request target exceeds {self.max_url_bytes} bytes")
            raise self._refusal

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value) + 4
        if self._header_bytes > self.max_header_bytes:
            self._refusal = _Refused(
                431, f"Request Header Fields Too Large: the headers exceed {self.max_header_bytes} bytes"
            )
            raise self._refusal
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        """Called by uvicorn inside its ``except HttpParserError`` block: the parser's error (or
        our own refusal raised from a callback) is the exception being handled."""
        status, reason = self._answer_for(sys.exc_info()[1])
        self._refusal = None
        body = error_body(reason)
        head = [f"HTTP/1.1 {status} {_STATUS_TEXT[status]}\r\n".encode("ascii")]
        for name, value in self.server_state.default_headers:
            head.extend([name, b": ", value, b"\r\n"])
        head.extend(
            [
                b"content-type: application/json\r\n",
                b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                b"connection: close\r\n\r\n",
            ]
        )
        self.logger.warning("refused a request from %s: %d %s", self._client_text(), status, reason)
        self.transport.write(b"".join(head) + body)
        self.transport.close()

    def _answer_for(self, error: BaseException | None) -> tuple[int, str]:
        if self._refusal is not None:
            return self._refusal.status, self._refusal.reason
        detail = str(error) if error is not None and str(error) else "malformed request"
        if "Content-Length overflow" in detail:
            return 413, "Request body too large: the declared Content-Length does not fit any limit"
        return 400, f"Invalid HTTP request: {detail}"

    def _client_text(self) -> str:
        client: Any = getattr(self, "client", None)
        return f"{client[0]}:{client[1]}" if client else "?"


def protocol_class(
    max_url_bytes: int, max_header_bytes: int, first_byte_timeout: float = DEFAULT_FIRST_BYTE_TIMEOUT
) -> type[AdminHttpProtocol]:
    """An :class:`AdminHttpProtocol` subclass with these limits (uvicorn takes a class)."""
    return type(
        "AdminHttpProtocol",
        (AdminHttpProtocol,),
        {
            "max_url_bytes": max_url_bytes,
            "max_header_bytes": max_header_bytes,
            "first_byte_timeout": first_byte_timeout,
        },
    )
