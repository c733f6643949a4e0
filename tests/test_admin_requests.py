"""SkipMessageIdsRequest: both JSON bodies of PIP-423 and every error of Pulsar's deserializer."""

from __future__ import annotations

import base64
import json

import pulsar  # pulsar-client, the [test] extra, writes the base64 ids
import pytest
from hypothesis import given, strategies as st
from pydantic import ValidationError

from mledger import InvalidRequestError, MessageId
from mledger.admin import PAYLOAD_ERROR_PREFIX, MessageIdItem, SkipMessageIdsRequest

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)


def items(request: SkipMessageIdsRequest) -> list[tuple[int, int, int | None]]:
    return [(i.ledger_id, i.entry_id, i.batch_index) for i in request.items]


def parse_error(body: bytes | str) -> str:
    with pytest.raises(InvalidRequestError) as info:
        SkipMessageIdsRequest.parse_body(body)
    assert info.value.http_status == 400
    message = str(info.value)
    assert message.startswith(PAYLOAD_ERROR_PREFIX)
    return message[len(PAYLOAD_ERROR_PREFIX) :]


def real_b64(partition: int, ledger: int, entry: int, batch: int = -1) -> str:
    return base64.b64encode(pulsar.MessageId(partition, ledger, entry, batch).serialize()).decode()


# -- format 2: a top-level array of base64 ids --------------------------------------------------


def test_seed_example_java_form() -> None:
    r = SkipMessageIdsRequest.parse_body('["CLlgEAQwAA==", "CLlgEAYwAA=="]')
    assert items(r) == [(12345, 4, None), (12345, 6, None)]


def test_ids_written_by_the_real_python_client() -> None:
    body = json.dumps(
        [real_b64(-1, 12345, 4), real_b64(3, 7, 9), real_b64(0, 7, 10, 2), real_b64(-1, 8, 1, 0)]
    )
    r = SkipMessageIdsRequest.parse_body(body.encode())
    # the partition is ignored; only batch_index >= 0 counts
    assert items(r) == [(12345, 4, None), (7, 9, None), (7, 10, 2), (8, 1, 0)]


def test_unpadded_base64_is_accepted_like_java() -> None:
    assert items(SkipMessageIdsRequest.parse_body('["CLlgEAQ", "CLlgEAQwAA"]')) == [
        (12345, 4, None),
        (12345, 4, None),
    ]


def test_null_elements_are_skipped() -> None:
    assert items(SkipMessageIdsRequest.parse_body('[null, "CLlgEAQ=", null]')) == [(12345, 4, None)]
    assert items(SkipMessageIdsRequest.parse_body("[]")) == []
    assert items(SkipMessageIdsRequest.parse_body("[null]")) == []


@given(INT64, INT64, st.integers(-1, (1 << 31) - 1), INT32)
def test_any_id_the_real_client_writes_parses_to_its_fields(
    ledger: int, entry: int, batch: int, partition: int
) -> None:
    r = SkipMessageIdsRequest.parse_body(json.dumps([real_b64(partition, ledger, entry, batch)]))
    assert items(r) == [(ledger, entry, batch if batch >= 0 else None)]


def test_negative_batch_index_in_bytes_means_whole_entry() -> None:
    assert items(SkipMessageIdsRequest.parse_body(json.dumps([real_b64(-1, 5, 6, -7)]))) == [(5, 6, None)]


# -- format 1: {"type": ..., "messageIds": [...]} -----------------------------------------------


def test_seed_example_structured() -> None:
    body = """{"type": "messageId", "messageIds": [
        { "ledgerId": 12345, "entryId": 100 },
        { "ledgerId": 12346, "entryId": 200, "batchIndex": 5 }]}"""
    assert items(SkipMessageIdsRequest.parse_body(body)) == [(12345, 100, None), (12346, 200, 5)]


def test_structured_numeric_strings_and_signs() -> None:
    body = {
        "type": "messageId",
        "messageIds": [
            {"ledgerId": "12345", "entryId": "+100", "batchIndex": "3"},
            {"ledgerId": -1, "entryId": "-2"},
            {"ledgerId": 1.0, "entryId": 1e3, "batchIndex": 2.0},
            None,
            {"ledgerId": str((1 << 63) - 1), "entryId": -(1 << 63), "batchIndex": (1 << 31) - 1},
        ],
    }
    assert items(SkipMessageIdsRequest.parse_body(json.dumps(body))) == [
        (12345, 100, 3),
        (-1, -2, None),
        (1, 1000, 2),
        ((1 << 63) - 1, -(1 << 63), (1 << 31) - 1),
    ]


@pytest.mark.parametrize("batch", [-1, "-1", -5, "-2147483648", None])
def test_negative_or_null_batch_index_is_absent(batch: object) -> None:
    body = {"type": "messageId", "messageIds": [{"ledgerId": 1, "entryId": 2, "batchIndex": batch}]}
    assert items(SkipMessageIdsRequest.parse_body(json.dumps(body))) == [(1, 2, None)]


@pytest.mark.parametrize("kind", ["messageId", "MESSAGEID", "messageid", "MessageId"])
def test_message_id_type_is_case_insensitive(kind: str) -> None:
    body = {"type": kind, "messageIds": [{"ledgerId": 1, "entryId": 2}]}
    assert items(SkipMessageIdsRequest.parse_body(json.dumps(body))) == [(1, 2, None)]


@pytest.mark.parametrize("kind", [None, "", "byteArray", "BYTEARRAY", "bytearray", {}, []])
def test_byte_array_type_missing_empty_or_named(kind: object) -> None:
    body: dict[str, object] = {"messageIds": ["CLlgEAQwAA==", None, real_b64(2, 1, 2, 3)]}
    if kind is not None:
        body["type"] = kind
    assert items(SkipMessageIdsRequest.parse_body(json.dumps(body))) == [(12345, 4, None), (1, 2, 3)]


def test_java_equals_ignore_case_quirks() -> None:
    # Java's equalsIgnoreCase matches U+0131 (dotless i) with 'I' (both upper-case to 'I').
    body = {"type": "message\u0131d", "messageIds": [{"ledgerId": 1, "entryId": 2}]}
    assert items(SkipMessageIdsRequest.parse_body(json.dumps(body))) == [(1, 2, None)]


def test_duplicate_keys_last_wins_like_jackson() -> None:
    body = '{"type": "messageId", "messageIds": [{"ledgerId": 1, "ledgerId": 9, "entryId": 2}]}'
    assert items(SkipMessageIdsRequest.parse_body(body)) == [(9, 2, None)]


def test_utf16_and_bom_bodies() -> None:
    text = '["CLlgEAQ="]'
    for raw in (text.encode("utf-16"), text.encode("utf-8-sig"), text.encode("utf-32"), "\ufeff" + text):
        assert items(SkipMessageIdsRequest.parse_body(raw)) == [(12345, 4, None)]


# -- every error, with its exact message --------------------------------------------------------


@pytest.mark.parametrize("body", ["", b"", "   \n\t", "null", b"\xef\xbb\xbf"])
def test_empty_body(body: str | bytes) -> None:
    assert parse_error(body) == "empty body"


@pytest.mark.parametrize("body", ['"CLlgEAQ="', "42", "true", "false", "1.5"])
def test_unsupported_top_level_json(body: str) -> None:
    assert parse_error(body) == "unsupported top-level JSON"


@pytest.mark.parametrize("body", ["{}", '{"type": "messageId"}', '{"type": "nope"}', '{"messageids": []}'])
def test_missing_message_ids(body: str) -> None:
    assert parse_error(body) == "missing messageIds"


@pytest.mark.parametrize("ids", [{}, {"12345:1": "x"}])
def test_message_ids_must_be_an_array(ids: object) -> None:
    for kind in (None, "messageId", "bogus"):
        body: dict[str, object] = {"messageIds": ids}
        if kind:
            body["type"] = kind
        assert parse_error(json.dumps(body)) == "messageIds must be an array"


@pytest.mark.parametrize("ids", [None, "CLlgEAQ=", 1, True])
def test_unsupported_message_ids_type(ids: object) -> None:
    assert parse_error(json.dumps({"type": "messageId", "messageIds": ids})) == "unsupported messageIds type"


@pytest.mark.parametrize("kind", ["bogus", "message_id", 5, True, "byte-array"])
def test_unsupported_type_for_array(kind: object) -> None:
    assert parse_error(json.dumps({"type": kind, "messageIds": []})) == "unsupported type for array"


@pytest.mark.parametrize(
    "element",
    ["CLlg EAQ=", "CLlg-AQ=", "CLlg_AQ=", "C", "CLlgE", "=", "CLlgEAQ=x", "CLlgEAQ==", "CL=lgEAQ", "Q===", 1.5, "é"],
)
def test_invalid_base64(element: object) -> None:
    assert parse_error(json.dumps([element])) == "invalid base64 messageId"
    assert parse_error(json.dumps({"messageIds": [element]})) == "invalid base64 messageId"


@pytest.mark.parametrize("element", ["", {}, [], {"ledgerId": 1, "entryId": 2}])
def test_invalid_base64_empty(element: object) -> None:
    # Jackson's asText() renders objects and arrays as "", which decodes to no bytes.
    assert parse_error(json.dumps([element])) == "invalid base64 messageId (empty)"
    assert parse_error(json.dumps({"type": "byteArray", "messageIds": [element]})) == (
        "invalid base64 messageId (empty)"
    )


@pytest.mark.parametrize(
    "element",
    [
        base64.b64encode(b"\x08\x01").decode(),  # entryId missing
        base64.b64encode(b"\x10\x01").decode(),  # ledgerId missing
        base64.b64encode(b"\x08").decode(),  # truncated
        "1234",  # a number's digits: valid base64, not a MessageIdData
        1234,
        True,
    ],
)
def test_base64_of_bytes_that_are_not_a_message_id(element: object) -> None:
    with pytest.raises(InvalidRequestError) as info:
        SkipMessageIdsRequest.parse_body(json.dumps([element]))
    assert str(info.value) == PAYLOAD_ERROR_PREFIX + "invalid base64 messageId"
    assert info.value.__cause__ is not None  # the MessageId parser's reason is chained


@pytest.mark.parametrize("element", ["CLlgEAQ=", 5, True, ["x"], 1.5])
def test_message_ids_elements_must_be_objects(element: object) -> None:
    body = {"type": "messageId", "messageIds": [{"ledgerId": 1, "entryId": 2}, element]}
    assert parse_error(json.dumps(body)) == "messageIds elements must be objects"


@pytest.mark.parametrize(
    ("element", "message"),
    [
        ({"entryId": 2}, "missing ledgerId"),
        ({"ledgerId": None, "entryId": 2}, "missing ledgerId"),
        ({"ledgerId": 1}, "missing entryId"),
        ({"ledgerId": 1, "entryId": None}, "missing entryId"),
        ({}, "missing ledgerId"),
        ({"ledgerId": "x", "entryId": 2}, "invalid ledgerId"),
        ({"ledgerId": "", "entryId": 2}, "invalid ledgerId"),
        ({"ledgerId": " 1", "entryId": 2}, "invalid ledgerId"),
        ({"ledgerId": "1_000", "entryId": 2}, "invalid ledgerId"),
        ({"ledgerId": "1.0", "entryId": 2}, "invalid ledgerId"),
        ({"ledgerId": "+", "entryId": 2}, "invalid ledgerId"),
        ({"ledgerId": True, "entryId": 2}, "invalid ledgerId"),
        ({"ledgerId": [1], "entryId": 2}, "invalid ledgerId"),
        ({"ledgerId": {"v": 1}, "entryId": 2}, "invalid ledgerId"),
        ({"ledgerId": 1.5, "entryId": 2}, "invalid ledgerId"),
        ({"ledgerId": 1 << 63, "entryId": 2}, "invalid ledgerId"),
        ({"ledgerId": str(1 << 63), "entryId": 2}, "invalid ledgerId"),
        ({"ledgerId": 1, "entryId": "two"}, "invalid entryId"),
        ({"ledgerId": 1, "entryId": False}, "invalid entryId"),
        ({"ledgerId": 1, "entryId": -(1 << 63) - 1}, "invalid entryId"),
        ({"ledgerId": 1, "entryId": 2, "batchIndex": "x"}, "invalid batchIndex"),
        ({"ledgerId": 1, "entryId": 2, "batchIndex": True}, "invalid batchIndex"),
        ({"ledgerId": 1, "entryId": 2, "batchIndex": [0]}, "invalid batchIndex"),
        ({"ledgerId": 1, "entryId": 2, "batchIndex": {}}, "invalid batchIndex"),
        ({"ledgerId": 1, "entryId": 2, "batchIndex": 0.5}, "invalid batchIndex"),
        ({"ledgerId": 1, "entryId": 2, "batchIndex": 1 << 31}, "invalid batchIndex"),
        ({"ledgerId": 1, "entryId": 2, "batchIndex": str(1 << 31)}, "invalid batchIndex"),
        ({"ledgerId": 1, "entryId": 2, "batchIndex": -(1 << 31) - 1}, "invalid batchIndex"),
        # ledgerId is checked before entryId, entryId before batchIndex (Pulsar's order)
        ({"ledgerId": "x", "entryId": "y", "batchIndex": "z"}, "invalid ledgerId"),
        ({"ledgerId": 1, "batchIndex": "z"}, "missing entryId"),
    ],
)
def test_structured_field_errors(element: dict[str, object], message: str) -> None:
    assert parse_error(json.dumps({"type": "messageId", "messageIds": [element]})) == message


@pytest.mark.parametrize("body", ["[", "{'a': 1}", '["CLlgEAQ="] x', "NaN", "[Infinity]", b"\xff\xfe\x00"])
def test_malformed_json(body: str | bytes) -> None:
    assert parse_error(body).startswith("malformed JSON (")


def test_nothing_is_kept_from_a_failing_body() -> None:
    # the error is raised for the whole body: no partial request escapes
    with pytest.raises(InvalidRequestError):
        SkipMessageIdsRequest.parse_body('["CLlgEAQ=", "%%%"]')


def test_parse_body_refuses_other_types() -> None:
    with pytest.raises(InvalidRequestError) as info:
        SkipMessageIdsRequest.parse_body(42)  # type: ignore[arg-type]
    assert info.value.http_status == 400


# -- construction helpers and output ------------------------------------------------------------


def test_of_accepts_ids_items_and_tuples() -> None:
    r = SkipMessageIdsRequest.of(
        [MessageId(1, 2), MessageId(1, 3, partition=4, batch_index=1), (5, 6), (5, 7, 2), (5, 8, -1),
         MessageIdItem(ledger_id=9, entry_id=9)]
    )
    assert items(r) == [(1, 2, None), (1, 3, 1), (5, 6, None), (5, 7, 2), (5, 8, None), (9, 9, None)]
    assert [str(i) for i in r.items] == ["1:2", "1:3:1", "5:6", "5:7:2", "5:8", "9:9"]
    assert len(r) == 6


@pytest.mark.parametrize(
    ("value", "message"),
    [((1 << 63, 1), "invalid ledgerId"), ((1, "2"), "invalid entryId"), ((1, 2, 1 << 31), "invalid batchIndex")],
)
def test_of_refuses_bad_values(value: tuple[object, ...], message: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        SkipMessageIdsRequest.of([value])  # type: ignore[list-item]
    assert str(info.value) == PAYLOAD_ERROR_PREFIX + message


def test_of_refuses_other_objects() -> None:
    with pytest.raises(InvalidRequestError):
        SkipMessageIdsRequest.of(["1:2"])  # type: ignore[list-item]


def test_from_base64_uses_the_parser_rules() -> None:
    assert items(SkipMessageIdsRequest.from_base64(["CLlgEAQwAA==", real_b64(1, 2, 3, 4)])) == [
        (12345, 4, None),
        (2, 3, 4),
    ]
    with pytest.raises(InvalidRequestError) as info:
        SkipMessageIdsRequest.from_base64([""])
    assert str(info.value) == PAYLOAD_ERROR_PREFIX + "invalid base64 messageId (empty)"


@given(st.lists(st.tuples(INT64, INT64, st.one_of(st.none(), st.integers(0, (1 << 31) - 1))), max_size=20))
def test_to_body_round_trips_in_both_forms(values: list[tuple[int, int, int | None]]) -> None:
    r = SkipMessageIdsRequest.of(values)
    for kind in ("messageId", "byteArray"):
        assert SkipMessageIdsRequest.parse_body(r.to_body(kind)) == r


def test_to_body_refuses_unknown_kind() -> None:
    with pytest.raises(ValueError):
        SkipMessageIdsRequest.of([(1, 2)]).to_body("json")  # type: ignore[arg-type]


def test_byte_array_body_is_what_the_real_client_writes() -> None:
    body = json.loads(SkipMessageIdsRequest.of([(12345, 4), (7, 8, 2)]).to_body("byteArray"))
    assert body["messageIds"] == [real_b64(-1, 12345, 4), real_b64(-1, 7, 8, 2)]


def test_request_is_frozen() -> None:
    r = SkipMessageIdsRequest.of([(1, 2)])
    with pytest.raises(ValidationError):
        r.items = ()  # type: ignore[misc]
    with pytest.raises(ValidationError):
        r.items[0].ledger_id = 3  # type: ignore[misc]
