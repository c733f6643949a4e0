"""Errors of the binary protocol, h11's split: the peer broke the protocol, or we would have.

:class:`RemoteProtocolError` means the bytes a client sent cannot be handled (a frame over the
size limit, a frame that does not parse, a command out of place); the server answers what it
can and closes the connection. :class:`LocalProtocolError` means this side was about to send
something the protocol does not allow (a bug in the caller). Both subclass
:class:`ProtocolError`, which subclasses :class:`~mledger.core.MLedgerError`.
"""

from __future__ import annotations

from enum import Enum

from ..core import MLedgerError, TransitionRefusedError

__all__ = [
    "FrameTooLargeError",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "StateTransitionError",
    "UnknownListenerError",
]


class ProtocolError(MLedgerError):
    """Base class of the protocol's errors."""


class RemoteProtocolError(ProtocolError):
    """The client sent something the protocol does not allow; the connection must close."""


class FrameTooLargeError(RemoteProtocolError):
    """A frame's announced size exceeds the server's limit (``max_message_size`` + padding)."""


class LocalProtocolError(ProtocolError):
    """This side tried to send something the protocol does not allow."""


class StateTransitionError(LocalProtocolError, TransitionRefusedError):
    """The connection's transition table has no move for an event in the current state (h11's
    ``_fire_event_triggered_transitions`` refusal); ``state`` and ``event`` name them. When the
    event is the client's (a second CONNECT) the connection raises
    :class:`RemoteProtocolError` from it instead."""

    def __init__(self, state: Enum, event: Enum) -> None:
        super().__init__(state, event, f"no transition for {event.value} in state {state.value}")


class UnknownListenerError(ProtocolError):
    """A lookup named an advertised listener the broker does not have: Pulsar's
    ``PulsarServerException`` from ``NamespaceService``, answered ``ServiceNotReady`` on the
    binary protocol and 500 over HTTP."""

    http_status = 500
