"""The exception hierarchy: one base class, one subclass per condition.

Every error that the admin API can surface carries ``http_status``, the status code
Pulsar's REST API would answer with.
"""

from __future__ import annotations


class MLedgerError(Exception):
    """Base class of every error raised by mledger."""

    http_status: int = 500


class InvalidPositionError(MLedgerError):
    """A position is malformed, or lies beyond the last confirmed entry."""

    http_status = 412


class MarkDeletingMarkedPositionError(MLedgerError):
    """A mark-delete asked to move the mark-delete position backwards."""

    http_status = 412


class CursorAlreadyClosedError(MLedgerError):
    """The cursor has been closed (or deleted)."""

    http_status = 412


class ManagedLedgerClosedError(MLedgerError):
    """The managed ledger (or its factory) has been closed."""

    http_status = 412


class ManagedLedgerTerminatedError(MLedgerError):
    """The managed ledger was terminated: it accepts no more entries (Pulsar's
    ``ManagedLedgerTerminatedException``)."""

    http_status = 412


class CursorModifyingError(MLedgerError):
    """A read raced with a cursor reset: it was refused or its result discarded."""

    http_status = 409


class ConcurrentResetError(MLedgerError):
    """A second reset was asked for while one is running; it was not applied."""

    http_status = 409


class EntryTooLargeError(MLedgerError):
    """An entry is larger than the store's maximum entry size."""

    http_status = 413


class StateCorruptedError(MLedgerError):
    """Stored bytes could not be decoded into a valid state."""


class BadVersionError(MLedgerError):
    """A metadata put carried a stale version (compare-and-set failed)."""

    http_status = 409


class StoreLockedError(MLedgerError):
    """The data directory is held by another process."""


class LedgerNotFoundError(MLedgerError):
    """A ledger id is unknown to the store."""

    http_status = 404


class NotFoundError(MLedgerError):
    """A topic, subscription, cursor or ledger does not exist."""

    http_status = 404


class NotAllowedError(MLedgerError):
    """The operation is not allowed in this state (e.g. a cumulative-ack subscription)."""

    http_status = 405


class PermissionDeniedError(MLedgerError):
    """The caller's role lacks the permission for the operation."""

    http_status = 403


class UnauthenticatedError(MLedgerError):
    """No credentials were given while authorization is on."""

    http_status = 401


class InvalidRequestError(MLedgerError):
    """A request (body, parameter) is malformed."""

    http_status = 400


class InvalidMessageIdError(InvalidRequestError):
    """A message id is malformed: bad bytes, bad base64 text, or a field out of range (HTTP 400)."""


class PreconditionFailedError(MLedgerError):
    """A request parameter fails a precondition (e.g. a negative id)."""

    http_status = 412


class ConfigError(MLedgerError, ValueError):
    """A configuration value is invalid."""

    http_status = 400


class MissingExtraError(MLedgerError, ImportError):
    """An optional dependency (an extra of the mledger package) is not installed."""
