"""The command kinds a fault can match and how Pulsar answers each with an error: plain data,
shared by the fault models (:mod:`mledger.broker._fault_specs`, which import pydantic) and the
registry (:mod:`mledger.broker._faults`, imported by every broker: no pydantic there, so a
broker that never arms a fault never imports it)."""

from __future__ import annotations

__all__ = [
    "ACTIONS",
    "BROKER_ACTIONS",
    "COMMAND_KINDS",
    "CONNECTION_ACTIONS",
    "ERROR_ANSWERS",
    "MESSAGE",
    "RESTART",
    "STORE_ACTIONS",
    "UNANSWERED",
]

ERROR_ANSWERS: dict[str, str] = {
    "CONNECT": "ERROR (request id 0), then the connection closes",
    "PRODUCER": "ERROR",
    "SUBSCRIBE": "ERROR",
    "SEND": "SEND_ERROR",
    "ACK": "ACK_RESPONSE carrying the error (ACKs with a request id: consumers with ack receipts)",
    "LOOKUP": "LOOKUP_RESPONSE Failed",
    "PARTITIONED_METADATA": "PARTITIONED_METADATA_RESPONSE Failed",
    "GET_TOPICS_OF_NAMESPACE": "ERROR",
    "SEEK": "ERROR",
    "UNSUBSCRIBE": "ERROR",
    "CLOSE_PRODUCER": "ERROR",
    "CLOSE_CONSUMER": "ERROR",
    "GET_LAST_MESSAGE_ID": "ERROR",
    "GET_SCHEMA": "GET_SCHEMA_RESPONSE carrying the error",
    "GET_OR_CREATE_SCHEMA": "GET_OR_CREATE_SCHEMA_RESPONSE carrying the error",
    "CONSUMER_STATS": "CONSUMER_STATS_RESPONSE carrying the error",
}
"""The client commands Pulsar answers, and the frame its broker answers an error with
(``ServerCnx``: ``newError``, ``newSendError``, ``newLookupErrorResponse``,
``newPartitionMetadataResponse``, ``newAckResponse``, ...): what an ``error`` fault sends."""

UNANSWERED = ("FLOW", "REDELIVER_UNACKNOWLEDGED_MESSAGES")
"""The client commands a fault matches that have no answer."""
MESSAGE = "MESSAGE"
"""The one kind a fault matches on the way out: a MESSAGE frame to a consumer."""

COMMAND_KINDS: tuple[str, ...] = (*ERROR_ANSWERS, *UNANSWERED)
"""The client commands a fault matches (PING, PONG and the transaction commands are answered by
the connection itself and never reach a fault)."""


CONNECTION_ACTIONS = frozenset({"close", "half_open", "pause"})
"""Actions on connections: the protocol server performs them."""
BROKER_ACTIONS = frozenset({"terminate_topic", "delete_subscription", "unload_topic"})
"""Actions on the broker's topics: the registry performs them."""
RESTART = "restart"
"""The action on the broker's process: a crash or clean restart, by the front end that can
restart the broker in place (:class:`~mledger.protocol.EmbeddedBroker`)."""
STORE_ACTIONS = frozenset({"disk_full", "slow_writes"})
"""Actions on the store's writes: triggered by the writes themselves."""
ACTIONS = (
    "error",
    "delay",
    "close",
    "half_open",
    "pause",
    "disk_full",
    "slow_writes",
    "unload_topic",
    "restart",
    "terminate_topic",
    "delete_subscription",
    "duplicate",
    "redeliver",
)
"""Every action, in the order the docs list them."""
