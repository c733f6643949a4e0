"""What every request of one app shares: the admin, the role resolver, the cluster name and the
worker threads admin calls run on."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.to_thread
from fastapi import Request

from ..admin import Admin
from .auth import RoleResolver

__all__ = ["AppContext", "context_of"]


class AppContext:
    """Shared, immutable after construction (the limiter is anyio's, thread-safe).

    ``max_concurrency`` bounds the admin calls running at once (worker threads); requests over
    it wait their turn, they are not refused.
    """

    def __init__(self, admin: Admin, roles: RoleResolver, cluster: str, max_concurrency: int) -> None:
        self.admin = admin
        self.roles = roles
        self.cluster = cluster
        self.max_concurrency = max_concurrency
        self._limiter: anyio.CapacityLimiter | None = None

    def admin_for(self, headers: Mapping[str, str]) -> Admin:
        """The admin acting for the caller: 401 when authorization is on and no role is found."""
        if not self.admin.authorization_enabled:
            return self.admin
        return self.admin.as_role(self.roles.role_for(headers, required=True))

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on a worker thread, at most ``max_concurrency`` at once."""
        if self._limiter is None:  # created on first use: a limiter belongs to the running loop
            self._limiter = anyio.CapacityLimiter(self.max_concurrency)
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=self._limiter)


def context_of(request: Request) -> AppContext:
    """The :class:`AppContext` of the app serving ``request``."""
    context: AppContext = request.app.state.mledger
    return context
