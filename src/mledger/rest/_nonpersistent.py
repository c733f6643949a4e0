"""Pulsar's ``NonPersistentTopics`` REST resources (v2), mapped onto ``Admin.non_persistent``.

The routes are the ``non_persistent`` operations of the admin operation table
(:data:`mledger.admin.OPERATIONS`), under
``/admin/v2/non-persistent/{tenant}/{namespace}``, their handlers generated as the topic routes'
(:func:`mledger.rest._topics.topics_router`). They are added before the persistent routes'
non-persistent twins, which answer 405 for everything else (``Operation not allowed on
non-persistent topic``), as v1 does for every non-persistent path. Checks run in the order of the
persistent routes: authentication, the names (412 for a namespace, 400 for a topic), then one
admin call on a worker thread.
"""

from __future__ import annotations

from fastapi import APIRouter

from ..admin import NON_PERSISTENT_BASE
from ._topics import topics_router

__all__ = ["non_persistent_router"]


def non_persistent_router(prefix: str = "/admin/v2" + NON_PERSISTENT_BASE) -> APIRouter:
    """The non-persistent topic routes under ``prefix``; left out of the OpenAPI document, as the
    405 routes they stand before."""
    return topics_router("v2", "non-persistent", prefix, include_in_schema=False, group="non_persistent")
