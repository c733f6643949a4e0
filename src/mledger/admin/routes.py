"""The admin REST API: Pulsar's ``PersistentTopics`` paths mapped onto :class:`~mledger.admin.Admin`.

Theory of operation
-------------------
:class:`Router` turns one :class:`HttpRequest` into one :class:`HttpResponse` with no I/O of its
own (the transport is :mod:`mledger.admin.server`). It

1. splits the raw path (before percent-decoding, so ``%2F`` stays inside a segment) and finds
   the route: ``/admin/v2/persistent/{tenant}/{namespace}/...`` (v2) or
   ``/admin/persistent/{property}/{cluster}/{namespace}/...`` (v1; ``/admin/v1/...`` is accepted
   too, the seeds' spelling). A v1 ``{cluster}`` must be the server's cluster (else 412
   ``Cluster <c> does not exist``) and the v1 topic is then the v2 topic
   ``persistent://{property}/{namespace}/{topic}``: mledger has v2 names only;
2. authenticates: with authorization on, a request without a valid role is 401 before any admin
   code runs (:mod:`mledger.admin.http_auth`);
3. decodes the parameters (:mod:`mledger.admin.http_params`) and calls **one** admin method as
   the caller's role; all admin logic (authorization, fan-out to partitions, errors) is there;
4. maps the result to JSON or 204, and any :class:`~mledger.errors.MLedgerError` to its
   ``http_status`` with Pulsar's error body ``{"reason": "..."}``. Anything else is 500.

Routes (after the namespace; ``{topic}`` and ``{sub}`` are URL-encoded as Pulsar's clients do):

=======  ==============================================  =========================  ======
method   path                                            admin call                 ok
=======  ==============================================  =========================  ======
GET      (none)                                          list_topics                200
GET      ``partitioned``                                 list_partitioned_topics    200
PUT      ``{topic}``                                     create_topic               204
DELETE   ``{topic}`` (``?force``)                        delete_topic               204
GET      ``{topic}/partitions``                          partitioned_topic_metadata 200
PUT      ``{topic}/partitions`` (body: N)                create_topic(partitions=N) 204
DELETE   ``{topic}/partitions`` (``?force``)             delete_topic               204
GET      ``{topic}/subscriptions``                       list_subscriptions         200
GET      ``{topic}/internalStats``                       internal_stats             200
GET      ``{topic}/partitioned-internalStats``           partitioned_internal_stats 200
POST     ``{topic}/cancelDelayedMessage``                cancel_delayed_message     204
PUT      ``{topic}/subscription/{sub}`` (body: id)       create_subscription        204
DELETE   ``{topic}/subscription/{sub}``                  delete_subscription        204
POST     ``{topic}/subscription/{sub}/skipByMessageIds`` skip_messages              204
POST     ``{topic}/subscription/{sub}/skip_all``         clear_backlog              204
POST     ``{topic}/subscription/{sub}/skip/{n}``         skip                       204
POST     ``{topic}/subscription/{sub}/resetcursor/{ts}`` reset by publish time      204
POST     ``{topic}/subscription/{sub}/resetcursor``      reset_cursor (body: id)    204
=======  ==============================================  =========================  ======

plus ``GET /metrics`` (Prometheus text, no authentication, like Pulsar's default).

``cancelDelayedMessage`` follows seeds/000 exactly: the topic name is checked, then
``ledgerId``/``entryId`` (missing, not a Java ``long`` or negative: 412; the v2 text is
"ledgerId, entryId must be positive.", the v1 text "... non-negative."), then the admin call.
A subscription that refuses (a cumulative-ack type) makes it 412 "Failed to cancel delayed
message ..."; the others are cancelled all the same. Both the 204 and that 412 carry the
per-subscription outcome in the header ``X-Mledger-Cancel-Results`` (``{"sub": true, ...}``),
which the ``--admin-url`` CLI prints. ``authoritative`` is accepted and ignored everywhere.

mledger extensions and limits: ``PUT .../subscription/{sub}?subscriptionType=Shared`` stores
the subscription's type (Pulsar has no such parameter; default Exclusive); a reset body with
``isExcluded: true`` is refused (400); ``force`` on subscription deletion is ignored (412 while
consumers are connected); a partitioned topic's ``internalStats`` is 405 (use
``partitioned-internalStats``).

Thread-safe: the router is immutable and each call builds its own ``Admin`` view; concurrency
is the broker's (see :mod:`mledger.admin.server`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..broker.names import TopicName
from ..errors import InvalidRequestError, MLedgerError, PreconditionFailedError, UnauthenticatedError
from ..messageid import MessageId
from .api import Admin
from .auth import TopicOperation
from .http_auth import AUTHENTICATION_REQUIRED, RoleResolver
from .http_params import (
    INT32,
    decode_name,
    decode_segment,
    java_integer,
    message_id_body,
    partitions_body,
    query_bool,
    query_list,
    query_value,
)

__all__ = ["CANCEL_RESULTS_HEADER", "HttpRequest", "HttpResponse", "Router"]

log = logging.getLogger(__name__)

CANCEL_RESULTS_HEADER = "X-Mledger-Cancel-Results"
"""Response header of ``cancelDelayedMessage``: JSON ``{subscription: cancelled}``."""

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
JSON_CONTENT_TYPE = "application/json"

_NEGATIVE_IDS = {
    "v1": "ledgerId, entryId must be non-negative.",
    "v2": "ledgerId, entryId must be positive.",
}


@dataclass(frozen=True)
class HttpRequest:
    """One request as the transport read it. ``path`` is raw (still percent-encoded), without
    the query; ``query`` is ``parse_qs`` output; header names are case-insensitive in
    ``headers`` (an ``email.message.Message`` or any mapping the caller normalised)."""

    method: str
    path: str
    query: Mapping[str, Sequence[str]] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass(frozen=True)
class HttpResponse:
    """What to send back. A 204 has no body and no content type."""

    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def json(cls, value: Any, status: int = 200) -> HttpResponse:
        """``value`` as compact JSON (pydantic models in Pulsar's camelCase form)."""
        if hasattr(value, "model_dump_json"):
            text = value.model_dump_json(by_alias=True)
        else:
            text = json.dumps(value, separators=(",", ":"))
        return cls(status, text.encode("utf-8"), JSON_CONTENT_TYPE)

    @classmethod
    def error(cls, status: int, reason: str, headers: tuple[tuple[str, str], ...] = ()) -> HttpResponse:
        """Pulsar's error body ``{"reason": ...}``."""
        body = json.dumps({"reason": reason}).encode("utf-8")
        return cls(status, body, JSON_CONTENT_TYPE, headers)

    @classmethod
    def no_content(cls, headers: tuple[tuple[str, str], ...] = ()) -> HttpResponse:
        return cls(204, headers=headers)


@dataclass(frozen=True)
class Call:
    """A matched admin request: the caller's admin view and the decoded path parameters."""

    admin: Admin
    version: str
    tenant: str
    namespace: str
    params: Mapping[str, str]
    request: HttpRequest

    @property
    def namespace_name(self) -> str:
        return f"{self.tenant}/{self.namespace}"

    @property
    def topic(self) -> str:
        """The full topic name, ``persistent://tenant/namespace/<decoded local name>``."""
        return f"persistent://{self.tenant}/{self.namespace}/{decode_name(self.params['topic'], 'topic name')}"

    @property
    def subscription(self) -> str:
        return decode_name(self.params["sub"], "subscription name")

    @property
    def query(self) -> Mapping[str, Sequence[str]]:
        return self.request.query


Handler = Callable[[Call], HttpResponse]


# -- handlers: each one decodes, calls one admin method, encodes ------------------------------


def _list_topics(call: Call) -> HttpResponse:
    return HttpResponse.json(call.admin.topics.list_topics(call.namespace_name))


def _list_partitioned(call: Call) -> HttpResponse:
    return HttpResponse.json(call.admin.topics.list_partitioned_topics(call.namespace_name))


def _create_topic(call: Call) -> HttpResponse:
    call.admin.topics.create_topic(call.topic)
    return HttpResponse.no_content()


def _delete_topic(call: Call) -> HttpResponse:
    call.admin.topics.delete_topic(call.topic, force=query_bool(call.query, "force"))
    return HttpResponse.no_content()


def _partitioned_metadata(call: Call) -> HttpResponse:
    return HttpResponse.json(call.admin.topics.partitioned_topic_metadata(call.topic))


def _create_partitioned(call: Call) -> HttpResponse:
    partitions = partitions_body(call.request.body)
    if partitions < 1:
        raise InvalidRequestError(f"Number of partitions should be more than 0, got {partitions}")
    call.admin.topics.create_topic(call.topic, partitions=partitions)
    return HttpResponse.no_content()


def _subscriptions(call: Call) -> HttpResponse:
    return HttpResponse.json(call.admin.topics.list_subscriptions(call.topic))


def _internal_stats(call: Call) -> HttpResponse:
    return HttpResponse.json(call.admin.topics.internal_stats(call.topic))


def _partitioned_internal_stats(call: Call) -> HttpResponse:
    return HttpResponse.json(call.admin.topics.partitioned_internal_stats(call.topic))


def _cancel_delayed_message(call: Call) -> HttpResponse:
    topic = str(TopicName.parse(call.topic))  # validateTopicName comes first (seeds/000)
    ids = []
    for name in ("ledgerId", "entryId"):
        text = query_value(call.query, name)
        if text is None:
            raise PreconditionFailedError(f"Failed to cancel delayed message: missing {name}")
        ids.append(java_integer(text.strip(), name, error=PreconditionFailedError))
    ledger_id, entry_id = ids
    if ledger_id < 0 or entry_id < 0:
        raise PreconditionFailedError(_NEGATIVE_IDS[call.version])
    names = query_list(call.query, "subscriptionNames") or None
    result = call.admin.topics.cancel_delayed_message(topic, ledger_id, entry_id, subscription_names=names)
    header = ((CANCEL_RESULTS_HEADER, json.dumps(result.results, separators=(",", ":"))),)
    if result.refused:
        return HttpResponse.error(
            412,
            "Failed to cancel delayed message on subscription(s) "
            + ", ".join(result.refused)
            + ": their type uses cumulative acknowledgement",
            header,
        )
    return HttpResponse.no_content(header)


def _create_subscription(call: Call) -> HttpResponse:
    position = message_id_body(call.request.body, "create subscription", default=MessageId.LATEST)
    call.admin.topics.create_subscription(
        call.topic, call.subscription, position=position,
        subscription_type=query_value(call.query, "subscriptionType") or None,
    )
    return HttpResponse.no_content()


def _delete_subscription(call: Call) -> HttpResponse:
    call.admin.topics.delete_subscription(call.topic, call.subscription)
    return HttpResponse.no_content()


def _skip_by_message_ids(call: Call) -> HttpResponse:
    call.admin.topics.skip_messages(call.topic, call.subscription, call.request.body)
    return HttpResponse.no_content()


def _skip_all(call: Call) -> HttpResponse:
    call.admin.topics.clear_backlog(call.topic, call.subscription)
    return HttpResponse.no_content()


def _skip(call: Call) -> HttpResponse:
    count = java_integer(call.params["n"], "numMessages", INT32)
    call.admin.topics.skip(call.topic, call.subscription, count)
    return HttpResponse.no_content()


def _reset_cursor_to_time(call: Call) -> HttpResponse:
    timestamp = java_integer(call.params["ts"], "timestamp")
    reset_cursor_by_time(call.admin, call.topic, call.subscription, timestamp)
    return HttpResponse.no_content()


def _reset_cursor(call: Call) -> HttpResponse:
    position = message_id_body(call.request.body, "reset cursor")
    call.admin.topics.reset_cursor(call.topic, call.subscription, position)
    return HttpResponse.no_content()


def reset_cursor_by_time(admin: Admin, topic: str, subscription: str, timestamp_ms: int) -> None:
    """Reset ``subscription`` to the first entry published at or after ``timestamp_ms`` (every
    partition of a partitioned topic). RESET_CURSOR; 404 for an unknown topic or subscription.

    ``Admin.topics`` has no such method yet: this is the one admin step the server performs
    itself, with the same checks as ``Topics.reset_cursor`` (it belongs there).
    """
    name = admin.check_topic(TopicOperation.RESET_CURSOR, topic)
    admin.broker.get_subscription(str(name), subscription).reset_cursor_by_time(timestamp_ms)


# -- the table ---------------------------------------------------------------------------------

_ROUTES: tuple[tuple[tuple[str, ...], Mapping[str, Handler]], ...] = (
    ((), {"GET": _list_topics}),
    (("partitioned",), {"GET": _list_partitioned}),
    (("{topic}",), {"PUT": _create_topic, "DELETE": _delete_topic}),
    (("{topic}", "partitions"), {"GET": _partitioned_metadata, "PUT": _create_partitioned, "DELETE": _delete_topic}),
    (("{topic}", "subscriptions"), {"GET": _subscriptions}),
    (("{topic}", "internalStats"), {"GET": _internal_stats}),
    (("{topic}", "partitioned-internalStats"), {"GET": _partitioned_internal_stats}),
    (("{topic}", "cancelDelayedMessage"), {"POST": _cancel_delayed_message}),
    (("{topic}", "subscription", "{sub}"), {"PUT": _create_subscription, "DELETE": _delete_subscription}),
    (("{topic}", "subscription", "{sub}", "skipByMessageIds"), {"POST": _skip_by_message_ids}),
    (("{topic}", "subscription", "{sub}", "skip_all"), {"POST": _skip_all}),
    (("{topic}", "subscription", "{sub}", "skip", "{n}"), {"POST": _skip}),
    (("{topic}", "subscription", "{sub}", "resetcursor"), {"POST": _reset_cursor}),
    (("{topic}", "subscription", "{sub}", "resetcursor", "{ts}"), {"POST": _reset_cursor_to_time}),
)


def _match(rest: Sequence[str]) -> tuple[Mapping[str, Handler], dict[str, str]] | None:
    """The first route whose pattern matches ``rest`` (literals before parameters)."""
    candidates = []
    for pattern, methods in _ROUTES:
        if len(pattern) != len(rest):
            continue
        params: dict[str, str] = {}
        literals = 0
        for want, got in zip(pattern, rest, strict=True):
            if want.startswith("{"):
                if not got:
                    break
                params[want[1:-1]] = got
            elif want == got:
                literals += 1
            else:
                break
        else:
            candidates.append((literals, methods, params))
    if not candidates:
        return None
    _, methods, params = max(candidates, key=lambda c: c[0])
    return methods, params


class Router:
    """Maps requests to ``admin`` calls (see the module docstring).

    ``roles`` resolves the caller (default: no tokens, no trusted header); ``cluster`` is the
    cluster v1 paths must name; ``metrics`` renders ``GET /metrics`` (None: 404).
    """

    def __init__(
        self,
        admin: Admin,
        roles: RoleResolver | None = None,
        cluster: str = "standalone",
        metrics: Callable[[], str] | None = None,
    ) -> None:
        self._admin = admin
        self._roles = roles if roles is not None else RoleResolver()
        self._cluster = cluster
        self._metrics = metrics

    def handle(self, request: HttpRequest) -> HttpResponse:
        """Answer ``request``; never raises."""
        try:
            return self._dispatch(request)
        except MLedgerError as e:
            return HttpResponse.error(e.http_status, str(e) or type(e).__name__)
        except Exception as e:  # a bug or an environment failure: 500, logged with the trace
            log.exception("%s %s failed", request.method, request.path)
            return HttpResponse.error(500, f"Internal server error: {type(e).__name__}: {e}")

    def _dispatch(self, request: HttpRequest) -> HttpResponse:
        path = request.path.strip("/")
        segments = path.split("/") if path else []
        if segments == ["metrics"]:
            if self._metrics is None:
                return _not_found()
            if request.method != "GET":
                return _method_not_allowed(("GET",))
            return HttpResponse(200, self._metrics().encode("utf-8"), METRICS_CONTENT_TYPE)
        if not segments or segments[0] != "admin":
            return _not_found()
        role = self._authenticate(request)  # Pulsar's authentication filter runs first
        located = self._locate(segments)
        if located is None:
            return _not_found()
        version, domain, tenant, namespace, cluster, rest = located
        if version == "v1" and cluster != self._cluster:
            raise PreconditionFailedError(f"Cluster {cluster} does not exist")
        matched = _match(rest)
        if matched is None:
            return _not_found()
        methods, params = matched
        if request.method not in methods:
            return _method_not_allowed(tuple(methods))
        if domain != "persistent":
            return HttpResponse.error(405, "Operation not allowed on non-persistent topic")
        call = Call(self._admin.as_role(role), version, tenant, namespace, params, request)
        return methods[request.method](call)

    def _locate(self, segments: list[str]) -> tuple[str, str, str, str, str, list[str]] | None:
        """(version, domain, tenant, namespace, cluster, rest) of an ``/admin`` path, else None."""
        if len(segments) < 2 or segments[0] != "admin":
            return None
        if segments[1] == "v2":
            if len(segments) < 5 or segments[2] not in ("persistent", "non-persistent"):
                return None
            tenant = decode_segment(segments[3], "tenant")
            namespace = decode_segment(segments[4], "namespace")
            return "v2", segments[2], tenant, namespace, self._cluster, segments[5:]
        v1 = segments[2:] if segments[1] == "v1" else segments[1:]
        if len(v1) < 4 or v1[0] not in ("persistent", "non-persistent"):
            return None
        prop = decode_segment(v1[1], "property")
        cluster = decode_segment(v1[2], "cluster")
        namespace = decode_segment(v1[3], "namespace")
        return "v1", v1[0], prop, namespace, cluster, v1[4:]

    def _authenticate(self, request: HttpRequest) -> str | None:
        required = self._admin.authorization_enabled
        role = self._roles.role_for(request.headers, required=required)
        if required and not role:  # role_for raises already; kept as the invariant
            raise UnauthenticatedError(AUTHENTICATION_REQUIRED)
        return role


def _not_found() -> HttpResponse:
    return HttpResponse.error(404, "HTTP 404 Not Found")


def _method_not_allowed(methods: Sequence[str]) -> HttpResponse:
    return HttpResponse.error(405, "HTTP 405 Method Not Allowed", (("Allow", ", ".join(sorted(methods))),))
