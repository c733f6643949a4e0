"""Fault injection over REST: ``/admin/v2/mledger/faults`` (an mledger extension).

The routes are the ``faults`` operations of the admin operation table
(:data:`mledger.admin.OPERATIONS`), their handlers generated from it
(:func:`~mledger.rest._operation_routes.namespace_handler`): a superuser under authorization,
404 unless the broker was started with fault injection (:mod:`mledger.admin`). They are
left out of ``/openapi.json``, which documents Pulsar's admin API.
"""

from __future__ import annotations

from fastapi import APIRouter

from ._operation_routes import OperationRoutes, namespace_handler

__all__ = ["faults_router"]


def faults_router(prefix: str = "") -> APIRouter:
    """The routes above, under ``prefix`` (``/admin/v2`` in the app), not documented."""
    router = APIRouter(prefix=prefix, include_in_schema=False)
    OperationRoutes("faults").add_to(router, namespace_handler)
    return router
