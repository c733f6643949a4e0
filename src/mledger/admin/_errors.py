"""Admin conditions with no class in :mod:`mledger.core._errors` (each subclasses ``MLedgerError``)."""

from __future__ import annotations

from ..core._errors import MLedgerError

__all__ = ["SubscriptionAlreadyExistsError"]


class SubscriptionAlreadyExistsError(MLedgerError):
    """``create_subscription`` named a subscription that exists (Pulsar: 409
    "Subscription already exists for topic")."""

    http_status = 409
