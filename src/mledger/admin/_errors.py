"""Admin conditions with no class in :mod:`mledger.core` (each subclasses ``MLedgerError``)."""

from __future__ import annotations

from ..core import MLedgerError

__all__ = ["ExpiryNotIssuedError", "SubscriptionAlreadyExistsError"]


class SubscriptionAlreadyExistsError(MLedgerError):
    """``create_subscription`` named a subscription that exists (Pulsar: 409
    "Subscription already exists for topic")."""

    http_status = 409


class ExpiryNotIssuedError(MLedgerError):
    """An ``expire-messages`` call the subscription did not run (Pulsar: 409 "Expire message by
    timestamp not issued ..." / "Expire message by position not issued ...")."""

    http_status = 409
