"""What every request of one app shares: the admin, the role resolver, the cluster name and the
worker threads admin calls run on."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import Request

from ..admin import Admin
from ._auth import RoleResolver
from ._middleware import Scope, caller_role

__all__ = ["AppContext", "context_of"]


class AppContext:
    """Shared by every request of one app; thread-safe.

    ``max_concurrency`` bounds the admin calls running at once: they run on a thread pool of
    that size (admin calls may block on storage; the event loop must not), and requests over it
    wait their turn, they are not refused. The pool starts with the first call;
    :meth:`close` stops it.
    """

    def __init__(self, admin: Admin, roles: RoleResolver, cluster: str, max_concurrency: int) -> None:
        self.admin = admin
        self.roles = roles
        self.cluster = cluster
        self.max_concurrency = max_concurrency
        self._executor: ThreadPoolExecutor | None = None

    async def admin_for(self, scope: Scope) -> Admin:
        """The admin acting for the caller of the request of ``scope``: when authorization is
        on, the caller's role (:func:`~mledger.rest._middleware.caller_role`, awaited: a password
        is verified off the loop), raising 401 (no role) or 429 (a throttled password check)."""
        if not self.admin.authorization_enabled:
            return self.admin
        return self.admin.as_role(await caller_role(self.roles, scope))

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on a worker thread, at most ``max_concurrency`` at once."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="mledger-rest")
        call = functools.partial(fn, *args, **kwargs) if args or kwargs else fn
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def close(self) -> None:
        """Stop the worker threads once their calls are done (new calls start a new pool)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)


def context_of(request: Request) -> AppContext:
    """The :class:`AppContext` of the app serving ``request``."""
    context: AppContext = request.app.state.mledger
    return context
