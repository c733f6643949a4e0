"""mledger's extensions of the admin REST API: fault injection (``/admin/v2/mledger/faults``)
and the broker's manual clock (``/admin/v2/mledger/clock``).

The routes are the ``faults`` and ``clock`` operations of the admin operation table
(:data:`mledger.admin.OPERATIONS`), their handlers generated from it
(:func:`~mledger.rest._operation_routes.namespace_handler`): a superuser under authorization;
the faults 404 unless the broker was started with fault injection, a clock advance 409 unless
the broker runs on a manual clock (:mod:`mledger.admin`). They are left out of
``/openapi.json``, which documents Pulsar's admin API.
"""

from __future__ import annotations

from fastapi import APIRouter

from ._operation_routes import OperationRoutes, namespace_handler

__all__ = ["extensions_router"]


def extensions_router(prefix: str = "") -> APIRouter:
    """The routes above, under ``prefix`` (``/admin/v2`` in the app), not documented."""
    router = APIRouter(prefix=prefix, include_in_schema=False)
    OperationRoutes("faults", "clock").add_to(router, namespace_handler)
    return router
