"""The HTTP contract shared by the REST server (:mod:`mledger.rest`) and the remote client
(:mod:`mledger.admin._remote`): header names and how names are written in paths.

Paths are Pulsar's: ``/admin/v2/persistent/{tenant}/{namespace}/{topic}/...``, the topic and
subscription segments URL-encoded as Pulsar's Java clients do (``URLEncoder``: a space is ``+``),
tenant and namespace percent-encoded.
"""

from __future__ import annotations

from urllib.parse import quote, quote_plus

from pydantic import BaseModel, ConfigDict

__all__ = ["CANCEL_RESULTS_HEADER", "ROLE_HEADER", "V2_PERSISTENT", "ErrorBody", "encode_name", "encode_segment"]

ROLE_HEADER = "X-Mledger-Role"
"""The header carrying a role when the server trusts it (``--trust-role-header``)."""

CANCEL_RESULTS_HEADER = "X-Mledger-Cancel-Results"
"""Response header of ``cancelDelayedMessage``: JSON ``{subscription: cancelled}``."""

V2_PERSISTENT = "/admin/v2/persistent"
"""The prefix of v2 persistent-topic paths."""


def encode_segment(text: str) -> str:
    """A tenant or namespace path segment (percent-encoding, nothing left unescaped)."""
    return quote(text, safe="")


def encode_name(text: str) -> str:
    """A topic or subscription path segment: Java's ``URLEncoder.encode(text, UTF-8)``, what
    Pulsar's clients put in the path (``quote_plus`` keeps ``~``, Java does not)."""
    return quote_plus(text, safe="*").replace("~", "%7E")


class ErrorBody(BaseModel):
    """Pulsar's error body: ``{"reason": "..."}``, with the status of the error."""

    model_config = ConfigDict(frozen=True)

    reason: str
