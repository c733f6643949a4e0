"""Authorization: grants per topic, wildcard, partitions inherit, superusers, 401 / 403 messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mledger import ConfigError, InvalidRequestError, PermissionDeniedError, UnauthenticatedError
from mledger.admin import Authorization, NamespaceOperation, TopicOperation
from mledger.admin._auth import parse_operation
from mledger.broker import TopicName

ORDERS = "persistent://public/default/orders"


@pytest.fixture()
def auth() -> Authorization:
    return Authorization(
        {
            "ops": {ORDERS: {TopicOperation.SKIP, TopicOperation.CANCEL_DELAYED_MESSAGE}},
            "reader": {"*": ["get_stats", "GET_SUBSCRIPTIONS"]},
            "tenant-admin": {"acme/prod": [TopicOperation.RESET_CURSOR, NamespaceOperation.CREATE_TOPIC]},
            "short": {"payments": "skip"},
        },
        super_user_roles=["root"],
    )


def test_granted_operation_on_the_topic(auth: Authorization) -> None:
    assert auth.is_allowed("ops", TopicOperation.SKIP, ORDERS)
    assert auth.is_allowed("ops", "cancel_delayed_message", "orders")  # short name, name string
    auth.check("ops", TopicOperation.SKIP, ORDERS)


def test_other_operation_or_topic_is_denied(auth: Authorization) -> None:
    assert not auth.is_allowed("ops", TopicOperation.RESET_CURSOR, ORDERS)
    assert not auth.is_allowed("ops", TopicOperation.SKIP, "persistent://public/default/other")
    assert not auth.is_allowed("ops", TopicOperation.SKIP, "persistent://public/default/orders2")


def test_partition_inherits_parent_permissions(auth: Authorization) -> None:
    assert auth.is_allowed("ops", TopicOperation.SKIP, ORDERS + "-partition-0")
    assert auth.is_allowed("ops", TopicOperation.SKIP, TopicName.parse("orders-partition-11"))
    # but a partition's grant does not reach its siblings or its parent
    single = Authorization({"p": {ORDERS + "-partition-1": ["skip"]}})
    assert single.is_allowed("p", "skip", ORDERS + "-partition-1")
    assert not single.is_allowed("p", "skip", ORDERS + "-partition-0")
    assert not single.is_allowed("p", "skip", ORDERS)


def test_wildcard_and_namespace_grants(auth: Authorization) -> None:
    assert auth.is_allowed("reader", TopicOperation.GET_STATS, "persistent://any/where/t")
    assert not auth.is_allowed("reader", TopicOperation.SKIP, "persistent://any/where/t")
    assert auth.is_allowed("tenant-admin", TopicOperation.RESET_CURSOR, "acme/prod/t-partition-3")
    assert not auth.is_allowed("tenant-admin", TopicOperation.RESET_CURSOR, "acme/dev/t")
    assert auth.is_allowed("tenant-admin", NamespaceOperation.CREATE_TOPIC, "acme/prod")
    assert not auth.is_allowed("tenant-admin", NamespaceOperation.CREATE_TOPIC, "acme/dev")
    assert auth.is_allowed("tenant-admin", NamespaceOperation.CREATE_TOPIC, TopicName.parse("acme/prod/x"))


def test_grant_keys_are_normalised(auth: Authorization) -> None:
    assert auth.is_allowed("short", TopicOperation.SKIP, "persistent://public/default/payments")


def test_superuser_may_do_everything(auth: Authorization) -> None:
    for op in list(TopicOperation):
        assert auth.is_allowed("root", op, "persistent://x/y/z")
    assert auth.is_allowed("root", NamespaceOperation.GET_TOPICS, "x/y")
    assert auth.is_superuser("root") and not auth.is_superuser("ops") and not auth.is_superuser(None)


def test_unknown_role_and_no_role(auth: Authorization) -> None:
    assert not auth.is_allowed("stranger", TopicOperation.LOOKUP, ORDERS)
    assert not auth.is_allowed(None, TopicOperation.LOOKUP, ORDERS)


def test_check_raises_403_with_pulsars_message(auth: Authorization) -> None:
    with pytest.raises(PermissionDeniedError) as info:
        auth.check("ops", TopicOperation.RESET_CURSOR, "orders-partition-2")
    assert info.value.http_status == 403
    assert str(info.value) == (
        "Unauthorized to validateTopicOperation for operation [RESET_CURSOR] on topic "
        "[persistent://public/default/orders-partition-2]"
    )
    with pytest.raises(PermissionDeniedError) as info:
        auth.check("ops", NamespaceOperation.GET_TOPICS, "public/default")
    assert str(info.value) == (
        "Unauthorized to validateNamespaceOperation for operation [GET_TOPICS] on namespace [public/default]"
    )


@pytest.mark.parametrize("role", [None, ""])
def test_check_without_role_is_401(auth: Authorization, role: str | None) -> None:
    with pytest.raises(UnauthenticatedError) as info:
        auth.check(role, TopicOperation.SKIP, ORDERS)
    assert info.value.http_status == 401
    assert str(info.value) == "Need to authenticate to perform the request"


def test_invalid_topic_in_a_check_is_400(auth: Authorization) -> None:
    with pytest.raises(InvalidRequestError):
        auth.check("ops", TopicOperation.SKIP, "a/b")


@pytest.mark.parametrize(
    "permissions",
    [
        {"": {"*": ["skip"]}},
        {"r": ["skip"]},
        {"r": {"*": ["jump"]}},
        {"r": {"": ["skip"]}},
        {"r": {"a//b": ["skip"]}},
        {"r": {"nonpersistent://a/b/c": ["skip"]}},
        {"r": {"/x": ["skip"]}},
    ],
)
def test_invalid_permissions_are_config_errors(permissions: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as info:
        Authorization(permissions)  # type: ignore[arg-type]
    assert info.value.http_status == 400


def test_invalid_superusers() -> None:
    with pytest.raises(ConfigError):
        Authorization({}, super_user_roles=[""])
    assert Authorization({}, super_user_roles="root").super_user_roles == frozenset({"root"})


def test_parse_operation() -> None:
    assert parse_operation("cancel-delayed-message") is TopicOperation.CANCEL_DELAYED_MESSAGE
    assert parse_operation(" Skip ") is TopicOperation.SKIP
    assert parse_operation(NamespaceOperation.GET_TOPICS) is NamespaceOperation.GET_TOPICS
    with pytest.raises(ConfigError):
        parse_operation("fly")
    with pytest.raises(ConfigError):
        parse_operation(3)  # type: ignore[arg-type]


def test_file_form_round_trip(tmp_path: Path, auth: Authorization) -> None:
    path = tmp_path / "auth.json"
    path.write_text(json.dumps(auth.to_json()))
    assert Authorization.from_json(path) == auth
    assert Authorization.from_json(str(path)) == auth
    assert Authorization.from_json(json.dumps(auth.to_json())) == auth
    assert Authorization.from_json(auth.to_json()) == auth
    loaded = Authorization.from_json(
        '{"superUserRoles": ["admin"], "permissions": {"ops": {"orders": ["skip"]}}}'
    )
    assert loaded.is_allowed("ops", "skip", ORDERS) and loaded.is_superuser("admin")


@pytest.mark.parametrize(
    "text",
    ["{not json", "[1]", '{"roles": {}}', '{"permissions": {"r": {"*": ["nope"]}}}'],
)
def test_bad_file_forms(tmp_path: Path, text: str) -> None:
    path = tmp_path / "auth.json"
    path.write_text(text)
    with pytest.raises(ConfigError):
        Authorization.from_json(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="authorization file: cannot read"):
        Authorization.from_json(tmp_path / "nope.json")


def test_authorization_is_frozen(auth: Authorization) -> None:
    grants = auth._grants
    with pytest.raises(TypeError):
        grants["x"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        hash(auth)
