"""The exception hierarchy: one base class, one subclass per condition.

Every error carries the code each front end answers it with, as data beside the message (as
h11's ``ProtocolError`` carries ``error_status_hint``): ``http_status``, the status Pulsar's
REST API answers, and ``server_error``, the :class:`ServerError` Pulsar's binary protocol
answers (``BrokerServiceException.getClientErrorCode``). Both are class attributes, inherited
by subclasses; an instance may set its own. The protocol session, the REST app and the remote
admin client all read these two attributes (:func:`server_error_of`, :func:`error_class_for_status`),
never the message text.
"""

from __future__ import annotations

from enum import IntEnum


class ServerError(IntEnum):
    """Pulsar's ``ServerError`` enum (``PulsarApi.proto``): the same names and wire numbers."""

    UnknownError = 0
    MetadataError = 1
    PersistenceError = 2
    AuthenticationError = 3
    AuthorizationError = 4
    ConsumerBusy = 5
    ServiceNotReady = 6
    ProducerBlockedQuotaExceededError = 7
    ProducerBlockedQuotaExceededException = 8
    ChecksumError = 9
    UnsupportedVersionError = 10
    TopicNotFound = 11
    SubscriptionNotFound = 12
    ConsumerNotFound = 13
    TooManyRequests = 14
    TopicTerminatedError = 15
    ProducerBusy = 16
    InvalidTopicName = 17
    IncompatibleSchema = 18
    ConsumerAssignError = 19
    TransactionCoordinatorNotFound = 20
    InvalidTxnStatus = 21
    NotAllowedError = 22
    TransactionConflict = 23
    TransactionNotFound = 24
    ProducerFenced = 25


class MLedgerError(Exception):
    """Base class of every error raised by mledger.

    ``http_status`` 500 and ``server_error`` ``ServiceNotReady`` unless a subclass says
    otherwise (Pulsar answers an unexpected broker exception so on each front end)."""

    http_status: int = 500
    server_error: ServerError = ServerError.ServiceNotReady


class InvalidPositionError(MLedgerError):
    """A position is malformed, lies beyond the last confirmed entry, or is no entry of the
    ledger. ``position`` is the ``(ledger_id, entry_id)`` refused where the error names one
    (an acknowledgement's), so that a layer above can word it in its own terms."""

    http_status = 412

    def __init__(self, *args: object, position: tuple[int, int] | None = None) -> None:
        super().__init__(*args)
        self.position = position


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
    server_error = ServerError.TopicTerminatedError


class CursorModifyingError(MLedgerError):
    """A read raced with a cursor reset: it was refused or its result discarded."""

    http_status = 409


class ConcurrentResetError(MLedgerError):
    """A second reset was asked for while one is running; it was not applied."""

    http_status = 409


class EntryTooLargeError(MLedgerError):
    """An entry is larger than the store's maximum entry size."""

    http_status = 413
    server_error = ServerError.NotAllowedError


class StateCorruptedError(MLedgerError):
    """Stored bytes could not be decoded into a valid state."""

    server_error = ServerError.PersistenceError


class BadVersionError(MLedgerError):
    """A metadata put carried a stale version (compare-and-set failed)."""

    http_status = 409


class StoreLockedError(MLedgerError):
    """The data directory is held by another process."""


class LedgerNotFoundError(MLedgerError):
    """A ledger id is unknown to the store."""

    http_status = 404


class LedgerNotConsumedError(MLedgerError):
    """Ledgers asked to be deleted hold entries a durable cursor has not consumed (its persisted
    mark-delete is below them, or a reset may move it back): nothing was deleted."""

    http_status = 412


class NotFoundError(MLedgerError):
    """A topic, subscription, cursor or ledger does not exist."""

    http_status = 404
    server_error = ServerError.TopicNotFound


class NotAllowedError(MLedgerError):
    """The operation is not allowed in this state (e.g. a cumulative-ack subscription)."""

    http_status = 405
    server_error = ServerError.NotAllowedError


class PermissionDeniedError(MLedgerError):
    """The caller's role lacks the permission for the operation."""

    http_status = 403
    server_error = ServerError.AuthorizationError


class UnauthenticatedError(MLedgerError):
    """No credentials were given while authorization is on."""

    http_status = 401


class InvalidRequestError(MLedgerError):
    """A request (body, parameter) is malformed."""

    http_status = 400
    server_error = ServerError.NotAllowedError


class InvalidMessageIdError(InvalidRequestError):
    """A message id is malformed: bad bytes, bad base64 text, or a field out of range (HTTP 400)."""


class InvalidTopicNameError(InvalidRequestError):
    """A topic name does not parse, or names the wrong kind of topic (HTTP 400; clients get
    ``InvalidTopicName``)."""

    server_error = ServerError.InvalidTopicName


class PreconditionFailedError(MLedgerError):
    """A request parameter fails a precondition (e.g. a negative id)."""

    http_status = 412


class ConfigError(MLedgerError, ValueError):
    """A configuration value is invalid."""

    http_status = 400


class MissingExtraError(MLedgerError, ImportError):
    """An optional dependency (an extra of the mledger package) is not installed."""


def server_error_of(exc: BaseException) -> ServerError:
    """The binary protocol's :class:`ServerError` for ``exc``: its ``server_error``, or
    ``UnknownError`` for an exception that is not mledger's. O(1)."""
    return exc.server_error if isinstance(exc, MLedgerError) else ServerError.UnknownError


_BY_HTTP_STATUS: dict[int, type[MLedgerError]] = {
    cls.http_status: cls
    for cls in (
        InvalidRequestError,
        UnauthenticatedError,
        PermissionDeniedError,
        NotFoundError,
        NotAllowedError,
        PreconditionFailedError,
        EntryTooLargeError,
    )
}
"""HTTP status -> the error class a client raises for it, keyed by the classes' own
``http_status`` (the same attribute the REST app answers with)."""


def error_class_for_status(status: int) -> type[MLedgerError] | None:
    """The error class for an HTTP error ``status`` answered by an mledger or Pulsar admin
    server (400 -> :class:`InvalidRequestError`, 404 -> :class:`NotFoundError`, ...); None for
    a status no class owns (409, 500, ...). O(1)."""
    return _BY_HTTP_STATUS.get(status)
