"""REST routes registered from the admin operation table (:mod:`mledger.admin._operations`).

A router module writes each handler once, under its operation's name
(``@routes.handles("get_stats", response_model=...)``: only what is REST's own, the response
model, the documented request body, extra error statuses); :meth:`OperationRoutes.add_to` then
adds one route per operation of the table, in the table's order, with the table's method, path,
success status and summary. A handler without an operation, or an operation without a handler,
is a :class:`~mledger.core._errors.ConfigError` when the router is built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter

from ..admin._operations import AdminOperation, Group, operations
from ..core._errors import ConfigError

__all__ = ["OperationRoutes"]

F = TypeVar("F", bound=Callable[..., Any])


def _no_options(op: AdminOperation) -> dict[str, Any]:
    return {}


class OperationRoutes:
    """The handlers of one router for the operations of ``groups``, keyed by operation name."""

    def __init__(self, *groups: Group) -> None:
        self._operations = tuple(op for group in groups for op in operations(group))
        self._names = {op.name for op in self._operations}
        if len(self._names) != len(self._operations):
            raise ConfigError(f"operation names repeat across {groups}")
        self._handlers: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}

    def handles(self, name: str, **options: Any) -> Callable[[F], F]:
        """Decorator: the handler of operation ``name``; ``options`` go to ``add_api_route``."""
        if name not in self._names:
            raise ConfigError(f"no admin operation {name!r} in the table")

        def register(fn: F) -> F:
            self._handlers[name] = (fn, options)
            return fn

        return register

    def add_to(
        self,
        router: APIRouter,
        path: Callable[[AdminOperation], str] = lambda op: op.path,
        options: Callable[[AdminOperation], dict[str, Any]] = _no_options,
    ) -> None:
        """One route per operation, in the table's order, at ``path(op)`` with the table's method,
        status and summary plus ``options(op)`` and the handler's own options."""
        missing = sorted(self._names - set(self._handlers))
        if missing:
            raise ConfigError(f"admin operations without a REST handler: {missing}")
        for op in self._operations:
            handler, own = self._handlers[op.name]
            router.add_api_route(
                path(op),
                handler,
                methods=[op.method],
                summary=op.summary,
                status_code=op.status,
                **options(op),
                **own,
            )
