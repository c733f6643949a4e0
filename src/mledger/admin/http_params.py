"""HTTP text to typed admin arguments: path segments, query parameters and small JSON bodies.

Every function here is pure and raises :class:`~mledger.errors.InvalidRequestError` (400) naming
the bad value, except where a caller passes another error class (the PIP-423 cancel endpoint
answers 412 for invalid parameters, seeds/000). Names follow Pulsar's REST resources:

* tenant and namespace segments are percent-decoded (JAX-RS ``@PathParam``); topic and
  subscription segments with Java's ``URLDecoder`` rules (``+`` is a space), as Pulsar's
  ``Codec.decode`` does with its ``@Encoded`` topic and subscription parameters;
* ``long`` / ``int`` values are Java's ``Long.parseLong`` / ``Integer.parseInt`` text (an
  optional sign and decimal digits) within the type's range;
* ``boolean`` query parameters are true only for ``true`` in any case (JAX-RS ``Boolean.valueOf``);
* ``ResetCursorData`` bodies (reset-cursor and create-subscription) are
  ``{"ledgerId", "entryId", "partitionIndex"?, "batchIndex"?, "isExcluded"?, "properties"?}``;
  Pulsar's older ``MessageIdImpl`` body is the same without the last three.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote, unquote_plus

from ..errors import InvalidRequestError, MLedgerError
from ..messageid import MessageId

__all__ = [
    "INT32",
    "INT64",
    "decode_name",
    "decode_segment",
    "java_integer",
    "message_id_body",
    "partitions_body",
    "query_bool",
    "query_list",
    "query_value",
]

INT64 = (-(1 << 63), (1 << 63) - 1)
INT32 = (-(1 << 31), (1 << 31) - 1)
_JAVA_INTEGER = re.compile(r"^[+-]?[0-9]+$")

Query = Mapping[str, Sequence[str]]


def decode_segment(text: str, what: str) -> str:
    """A percent-decoded path segment (tenant, namespace, cluster); 400 if not UTF-8 or empty."""
    return _decode(text, what, plus_is_space=False)


def decode_name(text: str, what: str) -> str:
    """A topic or subscription segment decoded like Java's ``URLDecoder`` (``+`` is a space)."""
    return _decode(text, what, plus_is_space=True)


def _decode(text: str, what: str, plus_is_space: bool) -> str:
    try:
        value = (unquote_plus if plus_is_space else unquote)(text, errors="strict")
    except UnicodeDecodeError:
        raise InvalidRequestError(f"Invalid {what} {text!r}: not valid percent-encoded UTF-8") from None
    if not value:
        raise InvalidRequestError(f"Invalid {what}: empty")
    return value


def java_integer(
    text: str, what: str, bounds: tuple[int, int] = INT64, error: type[MLedgerError] = InvalidRequestError
) -> int:
    """``Long.parseLong`` (or ``Integer.parseInt`` with :data:`INT32`) of ``text``; ``error`` if not."""
    if not isinstance(text, str) or not _JAVA_INTEGER.match(text):
        raise error(f"Invalid {what} {text!r}: expected an integer")
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise error(f"Invalid {what} {text!r}: out of range")
    return value


def query_value(query: Query, name: str) -> str | None:
    """The first value of query parameter ``name``, None when absent."""
    values = query.get(name)
    return values[0] if values else None


def query_bool(query: Query, name: str) -> bool:
    """JAX-RS ``@QueryParam boolean``: true only for ``true`` (any case); absent is false."""
    value = query_value(query, name)
    return value is not None and value.strip().lower() == "true"


def query_list(query: Query, name: str) -> list[str]:
    """A list parameter given repeated (``?s=a&s=b``) and/or comma-separated (``?s=a,b``);
    blanks dropped, order kept, duplicates removed."""
    out: list[str] = []
    for value in query.get(name, ()):
        for part in value.split(","):
            part = part.strip()
            if part and part not in out:
                out.append(part)
    return out


def _json_body(body: bytes, what: str) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise InvalidRequestError(f"Invalid {what} body: malformed JSON ({e})") from None


def _long_field(node: Mapping[str, Any], field: str, what: str, default: int | None, bounds: tuple[int, int]) -> int:
    value = node.get(field)
    if value is None:
        if default is None:
            raise InvalidRequestError(f"Invalid {what} body: missing {field}")
        return default
    if isinstance(value, bool):
        raise InvalidRequestError(f"Invalid {what} body: invalid {field} {value!r}")
    if isinstance(value, str):
        return java_integer(value.strip(), f"{what} {field}", bounds)
    if isinstance(value, int) and bounds[0] <= value <= bounds[1]:
        return value
    raise InvalidRequestError(f"Invalid {what} body: invalid {field} {value!r}")


def message_id_body(body: bytes, what: str, default: MessageId | None = None) -> MessageId:
    """The message id of a ``ResetCursorData`` / ``MessageIdImpl`` JSON body.

    An empty body gives ``default`` (400 when None). ``(-1, -1)`` is ``MessageId.EARLIEST`` and
    ``(2**63-1, 2**63-1)`` ``MessageId.LATEST``, as Pulsar's clients send them.
    ``isExcluded: true`` is refused (400): mledger resets to a position, not past it.
    ``properties`` are accepted and ignored.
    """
    if not body.strip():
        if default is None:
            raise InvalidRequestError(f"Invalid {what} body: empty (expected {{\"ledgerId\": L, \"entryId\": E}})")
        return default
    node = _json_body(body, what)
    if not isinstance(node, dict):
        raise InvalidRequestError(f"Invalid {what} body: expected a JSON object with ledgerId and entryId")
    excluded = node.get("isExcluded", node.get("excluded", False))
    if excluded not in (None, False, True):
        raise InvalidRequestError(f"Invalid {what} body: invalid isExcluded {excluded!r}")
    if excluded:
        raise InvalidRequestError(f"Invalid {what} body: isExcluded=true is not supported by mledger")
    ledger_id = _long_field(node, "ledgerId", what, None, INT64)
    entry_id = _long_field(node, "entryId", what, None, INT64)
    partition = _long_field(node, "partitionIndex", what, -1, INT32)
    batch_index = _long_field(node, "batchIndex", what, -1, INT32)
    return MessageId(ledger_id, entry_id, partition=partition, batch_index=batch_index)


def partitions_body(body: bytes) -> int:
    """The partition count of a create-partitioned-topic body (a JSON integer)."""
    node = _json_body(body, "partitions")
    if isinstance(node, str):
        return java_integer(node.strip(), "number of partitions", INT32)
    if isinstance(node, bool) or not isinstance(node, int) or not INT32[0] <= node <= INT32[1]:
        raise InvalidRequestError(f"Invalid partitions body: expected an integer, got {node!r}")
    return node
