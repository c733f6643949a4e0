"""Request bodies of the admin API: ``SkipMessageIdsRequest`` (PIP-423),
``ResetCursorData`` (reset-cursor and create-subscription) and the partition count of a
create-partitioned-topic call. The REST server (:mod:`mledger.rest`) parses bodies with these
and the remote client (:mod:`mledger.admin._remote`) writes them.

Theory of operation
-------------------
``POST .../subscription/{sub}/skipByMessageIds`` takes one of two JSON bodies:

1. a top-level array of base64 strings, each a serialized ``MessageIdData`` as any Pulsar client
   writes it (``MessageId.toByteArray()`` in Java, ``serialize()`` in C++/Python);
2. an object ``{"type": ..., "messageIds": [...]}``: ``type`` missing, null, empty or
   ``"byteArray"`` (case-insensitive) means an array of base64 strings; ``"messageId"`` means an
   array of ``{"ledgerId", "entryId", "batchIndex"?}`` objects whose values are numbers or
   numeric strings.

:meth:`SkipMessageIdsRequest.parse_body` follows Pulsar's deserializer
(``SkipMessageIdsRequest.Deserializer``) branch for branch, with its
exact error messages, all raised as :class:`~mledger.core.InvalidRequestError` (HTTP 400):

========================================================  ========================================
input                                                     message (after ``Invalid skipByMessageIds
                                                          payload: ``)
========================================================  ========================================
empty body, whitespace only, or ``null``                  ``empty body``
a string, number or boolean at the top level              ``unsupported top-level JSON``
an object without ``messageIds``                          ``missing messageIds``
``messageIds`` is an object                               ``messageIds must be an array``
``messageIds`` is a string, number, boolean or null       ``unsupported messageIds type``
``type`` other than byteArray / messageId (with an array)  ``unsupported type for array``
base64 text Java's ``Base64.getDecoder()`` refuses        ``invalid base64 messageId``
base64 text decoding to zero bytes                        ``invalid base64 messageId (empty)``
bytes that are not a valid ``MessageIdData``              ``invalid base64 messageId``
a non-object element with type messageId                  ``messageIds elements must be objects``
``ledgerId`` / ``entryId`` missing or null                ``missing ledgerId`` / ``missing entryId``
a value that is not an integer of its range               ``invalid <field>``
========================================================  ========================================

Null array elements are skipped. Elements of a base64 array are taken as text the way Jackson's
``asText()`` renders them (a number as its digits, an object or array as ``""``), so ``[{}]``
is ``invalid base64 messageId (empty)`` exactly as in Pulsar. A ``batchIndex`` below zero means
"no batch index" (the whole entry); from base64 ids only ``batch_index >= 0`` counts, and the
partition, batch size, ack set and chunk fields are ignored.

Deliberate differences from Pulsar, all on input Pulsar silently misreads:

* a number that is not an integer (``12.5``) or does not fit the field (int64 for ids, int32
  for ``batchIndex``) is ``invalid <field>``; Jackson would truncate or wrap it and so name a
  different message. Integral floats (``12.0``, ``1e3``) are accepted, as Jackson does;
* bytes that base64-decode but are not a ``MessageIdData`` give ``invalid base64 messageId``
  (the cause is chained); Pulsar answers 400 with the protobuf exception's text;
* malformed JSON gives ``Invalid skipByMessageIds payload: malformed JSON (<detail>)``;
  Pulsar answers 400 with Jackson's message. ``NaN`` and ``Infinity`` are malformed, as in
  Jackson's default mode.
"""

from __future__ import annotations

import binascii
import json
import math
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..broker import SkipEntry
from ..codec import InvalidMessageIdError, MessageId
from ..core import InvalidRequestError, Position

__all__ = ["PAYLOAD_ERROR_PREFIX", "MessageIdItem", "ResetCursorData", "SkipMessageIdsRequest", "partitions_from_body"]

PAYLOAD_ERROR_PREFIX = "Invalid skipByMessageIds payload: "
"""Every parse error's message starts with this (Pulsar's text)."""

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_BASE64_TEXT = re.compile(r"[A-Za-z0-9+/]*(={1,2})?")


def _payload_error(reason: str) -> InvalidRequestError:
    return InvalidRequestError(PAYLOAD_ERROR_PREFIX + reason)


class MessageIdItem(BaseModel):
    """One message to skip: a whole entry (``batch_index`` None) or one message of a batch.

    Pulsar's ``SkipMessageIdsRequest.MessageIdItem``. JSON field names are Pulsar's
    (``ledgerId``, ``entryId``, ``batchIndex``); Python names are snake_case. Construction
    validates ranges (int64 ids, ``0 <= batch_index < 2**31``) and raises pydantic's
    ``ValidationError``; :meth:`SkipMessageIdsRequest.of` turns that into a 400.
    """

    model_config = ConfigDict(frozen=True, strict=True, populate_by_name=True)

    ledger_id: int = Field(alias="ledgerId", ge=_INT64_MIN, le=_INT64_MAX)
    entry_id: int = Field(alias="entryId", ge=_INT64_MIN, le=_INT64_MAX)
    batch_index: int | None = Field(default=None, alias="batchIndex", ge=0, le=_INT32_MAX)

    def __str__(self) -> str:
        text = f"{self.ledger_id}:{self.entry_id}"
        return text if self.batch_index is None else f"{text}:{self.batch_index}"


IdLike = MessageId | MessageIdItem | tuple[int, int] | tuple[int, int, int | None]


class SkipMessageIdsRequest(BaseModel):
    """The parsed body of ``skipByMessageIds``: the messages to skip, in request order.

    >>> r = SkipMessageIdsRequest.parse_body('["CLlgEAQwAA==", "CLlgEAYwAA=="]')
    >>> [str(i) for i in r.items]
    ['12345:4', '12345:6']
    >>> r = SkipMessageIdsRequest.parse_body(
    ...     '{"type": "messageId", "messageIds": [{"ledgerId": "7", "entryId": 2, "batchIndex": 5}]}')
    >>> [str(i) for i in r.items]
    ['7:2:5']
    """

    model_config = ConfigDict(frozen=True)

    items: tuple[MessageIdItem, ...] = ()

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def parse_body(cls, raw: bytes | bytearray | str) -> SkipMessageIdsRequest:
        """Parse an HTTP body (UTF-8/16/32 bytes or text) in either of Pulsar's formats.

        Raises :class:`InvalidRequestError` (400) with Pulsar's message; see the module
        docstring for the table. O(len(raw)).
        """
        if isinstance(raw, (bytes, bytearray)):
            try:
                raw = bytes(raw).decode(json.detect_encoding(bytes(raw)))
            except UnicodeDecodeError as e:
                raise _payload_error(f"malformed JSON ({e})") from None
        elif not isinstance(raw, str):
            raise _payload_error(f"malformed JSON (expected bytes or str, got {type(raw).__name__})")
        text = raw.lstrip("\ufeff")
        if not text.strip(" \t\r\n"):
            raise _payload_error("empty body")
        try:
            value = json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as e:
            raise _payload_error(f"malformed JSON ({e})") from None
        return cls.from_json(value)

    @classmethod
    def from_json(cls, value: Any) -> SkipMessageIdsRequest:
        """Like :meth:`parse_body`, for a body already decoded by ``json.loads``."""
        return cls(items=tuple(_items_from_json(value)))

    @classmethod
    def of(cls, ids: Iterable[IdLike]) -> SkipMessageIdsRequest:
        """A request for ``ids``: MessageIds, items, ``(ledger, entry)`` or ``(ledger, entry,
        batch_index)`` tuples. A MessageId's or tuple's negative batch index means the whole
        entry (as in the JSON forms). Raises :class:`InvalidRequestError` (400) for a bad id.
        """
        items: list[MessageIdItem] = []
        for value in ids:
            ledger_id: object
            entry_id: object
            batch: object
            if isinstance(value, MessageIdItem):
                items.append(value)
                continue
            if isinstance(value, MessageId):
                ledger_id, entry_id, batch = value.ledger_id, value.entry_id, value.batch_index
            elif isinstance(value, tuple) and len(value) in (2, 3):
                ledger_id, entry_id = value[0], value[1]
                batch = value[2] if len(value) == 3 else None
            else:
                raise InvalidRequestError(
                    f"{PAYLOAD_ERROR_PREFIX}invalid message id {value!r}: expected a MessageId,"
                    " a MessageIdItem or a (ledgerId, entryId[, batchIndex]) tuple"
                )
            if isinstance(batch, int) and not isinstance(batch, bool) and batch < 0:
                batch = None
            try:
                fields = {"ledgerId": ledger_id, "entryId": entry_id, "batchIndex": batch}
                items.append(MessageIdItem.model_validate(fields))
            except ValidationError as e:
                field = str(e.errors()[0]["loc"][0]) if e.errors() else "messageId"
                raise _payload_error(f"invalid {_JSON_NAMES.get(field, field)}") from e
        return cls(items=tuple(items))

    @classmethod
    def from_base64(cls, texts: Iterable[str]) -> SkipMessageIdsRequest:
        """A request for base64 ids (``--messageId-base64``), with the parser's rules and errors."""
        return cls(items=tuple(_item_from_base64(t) for t in texts))

    def merged(self, other: SkipMessageIdsRequest) -> SkipMessageIdsRequest:
        """A request with this request's items followed by ``other``'s."""
        return SkipMessageIdsRequest(items=self.items + other.items)

    # -- output ------------------------------------------------------------------------------

    def to_body(self, kind: Literal["messageId", "byteArray"] = "messageId") -> str:
        """The JSON body in Pulsar's structured (``messageId``) or base64 (``byteArray``) form.

        ``parse_body(r.to_body(kind)) == r`` for either kind.
        """
        if kind == "messageId":
            ids: list[Any] = [item.model_dump(by_alias=True, exclude_none=True) for item in self.items]
        elif kind == "byteArray":
            ids = [
                MessageId(
                    i.ledger_id, i.entry_id, batch_index=-1 if i.batch_index is None else i.batch_index
                ).to_base64()
                for i in self.items
            ]
        else:
            raise ValueError(f"unknown body kind {kind!r}: expected 'messageId' or 'byteArray'")
        return json.dumps({"type": kind, "messageIds": ids})

    def to_skip_entries(self) -> list[SkipEntry]:
        """The items grouped per entry, as the subscription's ``skip_messages`` takes them.

        One :class:`~mledger.broker.SkipEntry` per ``(ledgerId, entryId)``, in order of first
        appearance. An entry named anywhere without a batch index is skipped whole (its batch
        indexes are dropped: the whole entry covers them); otherwise its distinct batch indexes
        are listed in ascending order. O(n log n).
        """
        grouped: dict[tuple[int, int], set[int] | None] = {}
        for item in self.items:
            key = (item.ledger_id, item.entry_id)
            if item.batch_index is None:
                grouped[key] = None
            elif key not in grouped:
                grouped[key] = {item.batch_index}
            else:
                indexes = grouped[key]
                if indexes is not None:
                    indexes.add(item.batch_index)
        return [
            SkipEntry(ledger_id, entry_id, batch_indexes=None if indexes is None else tuple(sorted(indexes)))
            for (ledger_id, entry_id), indexes in grouped.items()
        ]

    def __len__(self) -> int:
        return len(self.items)


_JSON_NAMES = {"ledger_id": "ledgerId", "entry_id": "entryId", "batch_index": "batchIndex"}


# -- the deserializer --------------------------------------------------------------------------


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def _items_from_json(node: Any) -> list[MessageIdItem]:
    """Pulsar's ``SkipMessageIdsRequest.Deserializer.deserialize``, on a decoded JSON value."""
    if node is None:
        raise _payload_error("empty body")
    if isinstance(node, list):
        return [_item_from_base64(_as_text(element)) for element in node if element is not None]
    if isinstance(node, dict):
        type_node = node.get("type")
        kind = None if type_node is None else _as_text(type_node)
        if "messageIds" not in node:
            raise _payload_error("missing messageIds")
        ids = node["messageIds"]
        if isinstance(ids, dict):
            raise _payload_error("messageIds must be an array")
        if not isinstance(ids, list):
            raise _payload_error("unsupported messageIds type")
        if kind is None or kind == "" or _java_equals_ignore_case(kind, "byteArray"):
            return [_item_from_base64(_as_text(element)) for element in ids if element is not None]
        if _java_equals_ignore_case(kind, "messageId"):
            return [_item_from_object(element) for element in ids if element is not None]
        raise _payload_error("unsupported type for array")
    raise _payload_error("unsupported top-level JSON")


def _item_from_object(node: Any) -> MessageIdItem:
    if not isinstance(node, dict):
        raise _payload_error("messageIds elements must be objects")
    ledger_id = _required_long(node.get("ledgerId"), "ledgerId")
    entry_id = _required_long(node.get("entryId"), "entryId")
    batch_index = _optional_int(node.get("batchIndex"), "batchIndex")
    return MessageIdItem(
        ledger_id=ledger_id,
        entry_id=entry_id,
        batch_index=batch_index if batch_index is not None and batch_index >= 0 else None,
    )


def _required_long(node: Any, field: str) -> int:
    if node is None:
        raise _payload_error(f"missing {field}")
    return _integer(node, field, _INT64_MIN, _INT64_MAX)


def _optional_int(node: Any, field: str) -> int | None:
    if node is None:
        return None
    return _integer(node, field, _INT32_MIN, _INT32_MAX)


def _integer(node: Any, field: str, low: int, high: int) -> int:
    """A JSON number or numeric string as an integer in ``[low, high]``, else ``invalid <field>``.

    Strings follow Java's ``Long.parseLong`` / ``Integer.parseInt``: an optional sign and
    decimal digits, nothing else (no spaces, no underscores, no fraction).
    """
    value: int | None = None
    if isinstance(node, bool):
        value = None
    elif isinstance(node, int):
        value = node
    elif isinstance(node, float):
        if node.is_integer():
            value = int(node)
    elif isinstance(node, str):
        digits = node[1:] if node[:1] in ("+", "-") else node
        if digits and digits.isdecimal():
            value = int(node)
    if value is None or not low <= value <= high:
        raise _payload_error(f"invalid {field}")
    return value


def _item_from_base64(text: str) -> MessageIdItem:
    """One base64 ``MessageIdData`` as Pulsar's ``appendFromBase64`` reads it."""
    data = _java_base64_decode(text)
    if not data:
        raise _payload_error("invalid base64 messageId (empty)")
    try:
        message_id = MessageId.from_bytes(data)
    except InvalidMessageIdError as e:
        raise _payload_error("invalid base64 messageId") from e
    batch_index = message_id.batch_index if message_id.batch_index >= 0 else None
    return MessageIdItem(ledger_id=message_id.ledger_id, entry_id=message_id.entry_id, batch_index=batch_index)


def _java_base64_decode(text: str) -> bytes:
    """Java's ``Base64.getDecoder().decode``: standard alphabet, padding optional but exact.

    No whitespace, no URL-safe characters, nothing after the padding, and a final unit of one
    character is refused. Raises ``invalid base64 messageId``.
    """
    if not isinstance(text, str) or not _BASE64_TEXT.fullmatch(text):
        raise _payload_error("invalid base64 messageId")
    if "=" in text:
        if len(text) % 4:
            raise _payload_error("invalid base64 messageId")
    else:
        if len(text) % 4 == 1:
            raise _payload_error("invalid base64 messageId")
        text += "=" * (-len(text) % 4)
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except binascii.Error:
        raise _payload_error("invalid base64 messageId") from None


def _as_text(node: Any) -> str:
    """Jackson's ``JsonNode.asText()`` for a decoded JSON value."""
    if isinstance(node, str):
        return node
    if node is None:
        return "null"
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, int):
        return str(node)
    if isinstance(node, float):
        return _java_double_text(node)
    return ""  # objects and arrays (Jackson's ContainerNode.asText())


def _java_double_text(value: float) -> str:
    """Java's ``Double.toString``: always a decimal point, ``E`` notation outside [1e-3, 1e7).

    Only its shape matters here (it is never valid base64 nor a known type name).
    """
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0 or 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    shown = "".join(map(str, digits))
    power = len(shown) + int(exponent) - 1
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{power}"


def _java_equals_ignore_case(a: str, b: str) -> bool:
    """Java's ``String.equalsIgnoreCase``: char by char, upper then lower case compared."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        ux, uy = _upper_char(x), _upper_char(y)
        if ux == uy or _lower_char(ux) == _lower_char(uy):
            continue
        return False
    return True


def _upper_char(c: str) -> str:
    u = c.upper()
    return u if len(u) == 1 else c


def _lower_char(c: str) -> str:
    lower = c.lower()
    return lower if len(lower) == 1 else c


# -- ResetCursorData and the partition count ----------------------------------------------------


class ResetCursorData(BaseModel):
    """Pulsar's ``ResetCursorData`` body (and the older ``MessageIdImpl`` one): a message id.

    ``POST .../resetcursor`` takes it, and ``PUT .../subscription/{sub}`` optionally, as the
    position to start from. ``(-1, -1)`` is ``MessageId.EARLIEST`` and ``(2**63-1, 2**63-1)``
    ``MessageId.LATEST``, as Pulsar's clients send them. ``isExcluded: true`` is refused (400):
    mledger resets to a position, not past it. ``properties`` are accepted and ignored.
    JSON names are Pulsar's camelCase; Python names snake_case.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    ledger_id: int = Field(alias="ledgerId", ge=_INT64_MIN, le=_INT64_MAX)
    entry_id: int = Field(alias="entryId", ge=_INT64_MIN, le=_INT64_MAX)
    partition_index: int = Field(default=-1, alias="partitionIndex", ge=_INT32_MIN, le=_INT32_MAX)
    batch_index: int = Field(default=-1, alias="batchIndex", ge=_INT32_MIN, le=_INT32_MAX)
    is_excluded: bool = Field(default=False, alias="isExcluded")
    properties: dict[str, Any] | None = None

    @classmethod
    def parse_body(
        cls, raw: bytes | str, what: str = "reset cursor", allow_excluded: bool = False
    ) -> ResetCursorData | None:
        """The body of a ``what`` request, None when it is empty (whitespace only).

        Numbers may be JSON numbers or Java ``long`` text (``"12"``). Raises
        :class:`InvalidRequestError` (400) naming the problem: malformed JSON, not an object, a
        missing or invalid ``ledgerId`` / ``entryId``, ``isExcluded: true`` unless ``allow_excluded``
        (``expireMessages`` honours it).
        """
        text = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else raw
        if not text.strip():
            return None
        try:
            node = json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as e:
            raise InvalidRequestError(f"Invalid {what} body: malformed JSON ({e})") from None
        if not isinstance(node, dict):
            raise InvalidRequestError(f"Invalid {what} body: expected a JSON object with ledgerId and entryId")
        excluded = node.get("isExcluded", node.get("excluded", False))
        if excluded not in (None, False, True):
            raise InvalidRequestError(f"Invalid {what} body: invalid isExcluded {excluded!r}")
        if excluded and not allow_excluded:
            raise InvalidRequestError(f"Invalid {what} body: isExcluded=true is not supported by mledger")
        fields: dict[str, int] = {}
        for field, default, low, high in (
            ("ledgerId", None, _INT64_MIN, _INT64_MAX),
            ("entryId", None, _INT64_MIN, _INT64_MAX),
            ("partitionIndex", -1, _INT32_MIN, _INT32_MAX),
            ("batchIndex", -1, _INT32_MIN, _INT32_MAX),
        ):
            value = node.get(field)
            if value is None:
                if default is None:
                    raise InvalidRequestError(f"Invalid {what} body: missing {field}")
                fields[field] = default
            elif not _is_java_long(value, low, high):
                raise InvalidRequestError(f"Invalid {what} body: invalid {field} {value!r}")
            else:
                fields[field] = int(value)
        properties = node.get("properties")
        return cls.model_validate(
            {**fields, "isExcluded": bool(excluded), "properties": properties if isinstance(properties, dict) else None}
        )

    @classmethod
    def of(cls, position: Position | MessageId) -> ResetCursorData:
        """The body naming ``position`` (a MessageId keeps its partition and batch index)."""
        if isinstance(position, MessageId):
            return cls(
                ledger_id=position.ledger_id,
                entry_id=position.entry_id,
                partition_index=position.partition,
                batch_index=position.batch_index,
            )
        if isinstance(position, Position):
            return cls(ledger_id=position.ledger_id, entry_id=position.entry_id)
        raise InvalidRequestError(f"invalid position {position!r}: expected a Position or a MessageId")

    def to_message_id(self) -> MessageId:
        """The message id this body names."""
        return MessageId(self.ledger_id, self.entry_id, partition=self.partition_index, batch_index=self.batch_index)

    def to_body(self) -> str:
        """The JSON body, Pulsar's field names."""
        return self.model_dump_json(by_alias=True, exclude_none=True)


def _is_java_long(value: Any, low: int, high: int) -> bool:
    """A JSON integer, or ``Long.parseLong`` text (sign and decimal digits), within [low, high]."""
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        digits = value.strip()
        digits = digits[1:] if digits[:1] in ("+", "-") else digits
        if not (digits and digits.isascii() and digits.isdecimal()):
            return False
        value = int(value)
    return isinstance(value, int) and low <= value <= high


def partitions_from_body(raw: bytes | str) -> int:
    """The partition count of a create-partitioned-topic body: a JSON integer (or integer text)
    of at least 1. Raises :class:`InvalidRequestError` (400) otherwise."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else raw
    try:
        node = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as e:
        raise InvalidRequestError(f"Invalid partitions body: malformed JSON ({e})") from None
    if not _is_java_long(node, _INT32_MIN, _INT32_MAX):
        raise InvalidRequestError(f"Invalid partitions body: expected an integer, got {node!r}")
    partitions = int(node)
    if partitions < 1:
        raise InvalidRequestError(f"Number of partitions should be more than 0, got {partitions}")
    return partitions
