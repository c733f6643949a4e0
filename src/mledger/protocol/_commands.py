"""The command table: every ``BaseCommand.Type`` of protocol v20, what mledger does with it.

This table is the single source of truth for three things: which commands the server handles
(:class:`~mledger.protocol._session.Session` has one ``handle_<name>`` method per supported
client command, and a test checks the two agree), what the connection answers at once for a
command it does not handle (:mod:`mledger.protocol._connection`), and the generated coverage
table ``docs/protocol-coverage.md`` (``scripts/gen_protocol_coverage.py``; a test fails when
the committed file is stale).

Rules, as in Pulsar's ``ServerCnx``:

* a client request that is not supported is answered with ``ERROR`` carrying its request id
  and Pulsar's ``NotAllowedError`` (transactions, topic-list watchers) naming the command, so
  nothing waits for the client's operation timeout;
* a command only a server sends (``MESSAGE``, ``SEND_RECEIPT``, ...) arriving from a client is
  a protocol violation: the connection is closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..codec.proto import PulsarApi_pb2 as api

__all__ = ["COMMANDS", "CommandSpec", "Direction", "Support", "spec_of"]


class Direction(Enum):
    """Who sends a command."""

    CLIENT = "client -> server"
    SERVER = "server -> client"
    BOTH = "both ways"


class Support(Enum):
    """What mledger does with a command it receives."""

    HANDLED = "handled"
    ANSWERED_WITH_ERROR = "answered with an error"
    IGNORED = "ignored"
    CLOSES_CONNECTION = "closes the connection"
    SENT = "sent by the server"


@dataclass(frozen=True)
class CommandSpec:
    """One row of the table."""

    type: api.BaseCommand.Type.ValueType
    name: str
    field: str
    """The ``BaseCommand`` field holding the command's message."""
    direction: Direction
    support: Support
    answer: str
    """What the server does or answers, in words (the coverage table's last column)."""
    request_id_field: str | None = None
    """Where an unsupported request keeps its request id (answered with ERROR)."""
    error: api.ServerError.ValueType | None = None
    """The ``ServerError`` an unsupported request is answered with."""

    @property
    def handler_name(self) -> str:
        """The session method that handles the command (``handle_<name in lower case>``)."""
        return f"handle_{self.name.lower()}"


_T = api.BaseCommand
_NOT_ALLOWED = api.NotAllowedError


def _fields() -> dict[int, str]:
    return {fd.number: fd.name for fd in api.BaseCommand.DESCRIPTOR.fields if fd.number != 1}


def _build() -> dict[int, CommandSpec]:
    fields = _fields()
    h, s = Direction.CLIENT, Direction.SERVER
    rows: list[
        tuple[api.BaseCommand.Type.ValueType, Direction, Support, str, str | None, api.ServerError.ValueType | None]
    ] = [
        (
            _T.CONNECT,
            h,
            Support.HANDLED,
            "CONNECTED (protocol version = min(client, 20), max_message_size); ERROR AuthenticationError for a bad token",
            None,
            None,
        ),
        (_T.CONNECTED, s, Support.SENT, "answer to CONNECT", None, None),
        (
            _T.SUBSCRIBE,
            h,
            Support.HANDLED,
            "SUCCESS, or ERROR (ConsumerBusy, SubscriptionNotFound, TopicNotFound, AuthorizationError, IncompatibleSchema under the topic's schema compatibility strategy, NotAllowedError for read_compacted on Shared/Key_Shared, PersistenceError when the store fails to load the topic or to store the cursor, ...); a consumer's schema on an idle topic becomes its first version; read_compacted reads the compacted view up to the horizon; on a non-persistent:// topic the consumer joins the in-memory subscription (NotAllowedError for read_compacted)",
            None,
            None,
        ),
        (
            _T.PRODUCER,
            h,
            Support.HANDLED,
            "PRODUCER_SUCCESS (producer name, last_sequence_id, schema_version), or ERROR (ProducerBusy, ProducerFenced, AuthorizationError, IncompatibleSchema under the topic's schema compatibility strategy, TopicTerminatedError on a terminated topic, PersistenceError while the store refuses writes or fails to load the topic, ...); a non-persistent:// topic is loaded in memory",
            None,
            None,
        ),
        (
            _T.SEND,
            h,
            Support.HANDLED,
            "SEND_RECEIPT once the entry is stored, or SEND_ERROR (ChecksumError, NotAllowedError, TopicTerminatedError once the topic was terminated; PersistenceError for a failed write, whose topic's producers get CLOSE_PRODUCER); non-persistent: SEND_RECEIPT (0:0) at once, the message handed to a consumer with a permit per subscription, else dropped and counted",
            None,
            None,
        ),
        (_T.SEND_RECEIPT, s, Support.SENT, "answer to SEND", None, None),
        (_T.SEND_ERROR, s, Support.SENT, "answer to SEND", None, None),
        (
            _T.MESSAGE,
            s,
            Support.SENT,
            "one per delivered entry, with redelivery_count and the remaining ack_set of a partly acked batch",
            None,
            None,
        ),
        (
            _T.ACK,
            h,
            Support.HANDLED,
            "individual and cumulative acks, batch-index ack_sets; ACK_RESPONSE when a request id is given, after the cursor state is stored (under --defaults pulsar-*: at once, as Pulsar; non-persistent: nothing to acknowledge)",
            None,
            None,
        ),
        (
            _T.FLOW,
            h,
            Support.HANDLED,
            "adds permits (messages, not entries) and dispatches; non-persistent: the permits go to the consumer at once",
            None,
            None,
        ),
        (
            _T.UNSUBSCRIBE,
            h,
            Support.HANDLED,
            "SUCCESS, or ERROR ConsumerBusy while other consumers are connected",
            None,
            None,
        ),
        (_T.SUCCESS, s, Support.SENT, "answer to SUBSCRIBE, UNSUBSCRIBE, SEEK, CLOSE_*", None, None),
        (_T.ERROR, s, Support.SENT, "answer to a failed request", None, None),
        (
            _T.CLOSE_PRODUCER,
            Direction.BOTH,
            Support.HANDLED,
            "SUCCESS; the server sends it when the topic is deleted",
            None,
            None,
        ),
        (
            _T.CLOSE_CONSUMER,
            Direction.BOTH,
            Support.HANDLED,
            "SUCCESS; the server sends it on seek, reset, and when the topic or subscription is deleted",
            None,
            None,
        ),
        (_T.PRODUCER_SUCCESS, s, Support.SENT, "answer to PRODUCER", None, None),
        (
            _T.PING,
            Direction.BOTH,
            Support.HANDLED,
            "PONG; the server pings a connection idle for keep_alive_interval_seconds and closes it without an answer",
            None,
            None,
        ),
        (_T.PONG, Direction.BOTH, Support.HANDLED, "keeps the connection alive", None, None),
        (
            _T.REDELIVER_UNACKNOWLEDGED_MESSAGES,
            h,
            Support.HANDLED,
            "negative acks: the given ids (Shared, Key_Shared) or everything unacked",
            None,
            None,
        ),
        (
            _T.PARTITIONED_METADATA,
            h,
            Support.HANDLED,
            "PARTITIONED_METADATA_RESPONSE (0 for a non-partitioned topic; Failed ServiceNotReady when a metadata read fails)",
            None,
            None,
        ),
        (_T.PARTITIONED_METADATA_RESPONSE, s, Support.SENT, "answer to PARTITIONED_METADATA", None, None),
        (
            _T.LOOKUP,
            h,
            Support.HANDLED,
            "LOOKUP_RESPONSE Connect to this server, authoritative; advertised_listener_name picks an advertised "
            "listener's URLs (unknown: ServiceNotReady `the broker do not have <name> listener`); "
            "Failed ServiceNotReady when a metadata read fails",
            None,
            None,
        ),
        (_T.LOOKUP_RESPONSE, s, Support.SENT, "answer to LOOKUP", None, None),
        (
            _T.CONSUMER_STATS,
            h,
            Support.HANDLED,
            "CONSUMER_STATS_RESPONSE (permits, unacked, backlog, type)",
            None,
            None,
        ),
        (_T.CONSUMER_STATS_RESPONSE, s, Support.SENT, "answer to CONSUMER_STATS", None, None),
        (
            _T.REACHED_END_OF_TOPIC,
            s,
            Support.SENT,
            "to each consumer of a terminated topic once its subscription acknowledged everything (clients of protocol v9+)",
            None,
            None,
        ),
        (
            _T.SEEK,
            h,
            Support.HANDLED,
            "resets the cursor (message id or publish time), CLOSE_CONSUMER, then SUCCESS (a reader's reset cursor is kept for its reconnection); ERROR NotAllowedError on a non-persistent topic",
            None,
            None,
        ),
        (
            _T.GET_LAST_MESSAGE_ID,
            h,
            Support.HANDLED,
            "GET_LAST_MESSAGE_ID_RESPONSE with the mark-delete position (read_compacted, topic ending at the compaction horizon: the compacted view's last message); ERROR NotAllowedError on a non-persistent topic",
            None,
            None,
        ),
        (_T.GET_LAST_MESSAGE_ID_RESPONSE, s, Support.SENT, "answer to GET_LAST_MESSAGE_ID", None, None),
        (
            _T.ACTIVE_CONSUMER_CHANGE,
            s,
            Support.SENT,
            "Failover: to every consumer when the active one changes",
            None,
            None,
        ),
        (
            _T.GET_TOPICS_OF_NAMESPACE,
            h,
            Support.HANDLED,
            "GET_TOPICS_OF_NAMESPACE_RESPONSE by mode (PERSISTENT: the stored topics and partitions; NON_PERSISTENT: "
            "the non-persistent topics loaded now; ALL: both), filtered by the pattern, or ERROR "
            "AuthorizationError without GET_TOPICS on the namespace (a namespace-level produce or consume grant)",
            None,
            None,
        ),
        (_T.GET_TOPICS_OF_NAMESPACE_RESPONSE, s, Support.SENT, "answer to GET_TOPICS_OF_NAMESPACE", None, None),
        (
            _T.GET_SCHEMA,
            h,
            Support.HANDLED,
            "GET_SCHEMA_RESPONSE (latest or the asked version), error TopicNotFound when none",
            None,
            None,
        ),
        (_T.GET_SCHEMA_RESPONSE, s, Support.SENT, "answer to GET_SCHEMA", None, None),
        (_T.AUTH_CHALLENGE, s, Support.SENT, "never: tokens are checked once, on CONNECT", None, None),
        (_T.AUTH_RESPONSE, h, Support.IGNORED, "ignored: the server never sends AUTH_CHALLENGE", None, None),
        (_T.ACK_RESPONSE, s, Support.SENT, "answer to ACK with a request id", None, None),
        (
            _T.GET_OR_CREATE_SCHEMA,
            h,
            Support.HANDLED,
            "GET_OR_CREATE_SCHEMA_RESPONSE (schema version), error IncompatibleSchema (the topic's strategy, or auto-update off)",
            None,
            None,
        ),
        (_T.GET_OR_CREATE_SCHEMA_RESPONSE, s, Support.SENT, "answer to GET_OR_CREATE_SCHEMA", None, None),
        (
            _T.NEW_TXN,
            h,
            Support.ANSWERED_WITH_ERROR,
            "ERROR NotAllowedError: transactions are not supported",
            "request_id",
            _NOT_ALLOWED,
        ),
        (_T.NEW_TXN_RESPONSE, s, Support.SENT, "never", None, None),
        (
            _T.ADD_PARTITION_TO_TXN,
            h,
            Support.ANSWERED_WITH_ERROR,
            "ERROR NotAllowedError: transactions are not supported",
            "request_id",
            _NOT_ALLOWED,
        ),
        (_T.ADD_PARTITION_TO_TXN_RESPONSE, s, Support.SENT, "never", None, None),
        (
            _T.ADD_SUBSCRIPTION_TO_TXN,
            h,
            Support.ANSWERED_WITH_ERROR,
            "ERROR NotAllowedError: transactions are not supported",
            "request_id",
            _NOT_ALLOWED,
        ),
        (_T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE, s, Support.SENT, "never", None, None),
        (
            _T.END_TXN,
            h,
            Support.ANSWERED_WITH_ERROR,
            "ERROR NotAllowedError: transactions are not supported",
            "request_id",
            _NOT_ALLOWED,
        ),
        (_T.END_TXN_RESPONSE, s, Support.SENT, "never", None, None),
        (
            _T.END_TXN_ON_PARTITION,
            h,
            Support.ANSWERED_WITH_ERROR,
            "ERROR NotAllowedError: transactions are not supported",
            "request_id",
            _NOT_ALLOWED,
        ),
        (_T.END_TXN_ON_PARTITION_RESPONSE, s, Support.SENT, "never", None, None),
        (
            _T.END_TXN_ON_SUBSCRIPTION,
            h,
            Support.ANSWERED_WITH_ERROR,
            "ERROR NotAllowedError: transactions are not supported",
            "request_id",
            _NOT_ALLOWED,
        ),
        (_T.END_TXN_ON_SUBSCRIPTION_RESPONSE, s, Support.SENT, "never", None, None),
        (
            _T.TC_CLIENT_CONNECT_REQUEST,
            h,
            Support.ANSWERED_WITH_ERROR,
            "ERROR NotAllowedError: there is no transaction coordinator",
            "request_id",
            _NOT_ALLOWED,
        ),
        (_T.TC_CLIENT_CONNECT_RESPONSE, s, Support.SENT, "never", None, None),
        (
            _T.WATCH_TOPIC_LIST,
            h,
            Support.ANSWERED_WITH_ERROR,
            "ERROR NotAllowedError: topic-list watchers are not announced (clients poll GET_TOPICS_OF_NAMESPACE)",
            "request_id",
            _NOT_ALLOWED,
        ),
        (_T.WATCH_TOPIC_LIST_SUCCESS, s, Support.SENT, "never", None, None),
        (_T.WATCH_TOPIC_UPDATE, s, Support.SENT, "never", None, None),
        (
            _T.WATCH_TOPIC_LIST_CLOSE,
            h,
            Support.ANSWERED_WITH_ERROR,
            "ERROR NotAllowedError: topic-list watchers are not supported",
            "request_id",
            _NOT_ALLOWED,
        ),
        (_T.TOPIC_MIGRATED, s, Support.SENT, "never: topics do not migrate", None, None),
    ]
    table: dict[int, CommandSpec] = {}
    for type_, direction, support, answer, rid, error in rows:
        if direction is Direction.SERVER:
            support = Support.SENT
        table[type_] = CommandSpec(type_, _T.Type.Name(type_), fields[type_], direction, support, answer, rid, error)
    return table


COMMANDS: dict[int, CommandSpec] = _build()
"""Every ``BaseCommand.Type`` value -> its :class:`CommandSpec`, in type order."""


def spec_of(type_: int) -> CommandSpec | None:
    """The row of a type number, None for a number protocol v20 does not define."""
    return COMMANDS.get(type_)
