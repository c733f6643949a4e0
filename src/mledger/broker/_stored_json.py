"""JSON objects kept in the metadata store: the broker's tenants, namespace and topic policies.

Pulsar keeps these as JSON documents under ``/admin/...`` and changes them by read, modify and
a versioned write, retried when another writer got there first (``MetadataCache.readModifyUpdateOrCreate``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..core import BadVersionError, StateCorruptedError
from ..storage import NEW_NODE, Store

__all__ = ["create_object", "decode_object", "update_object"]

_TRIES = 5


def decode_object(path: str, data: bytes, what: str = "policies") -> dict[str, Any]:
    """The JSON object stored at ``path``; ``StateCorruptedError`` naming ``what`` and the path
    when ``data`` is not JSON or not an object. O(len(data))."""
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise StateCorruptedError(f"{what} at {path} are not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise StateCorruptedError(f"{what} at {path} are not a JSON object")
    return value


def create_object(store: Store, path: str, value: object) -> bool:
    """Write ``value`` as a new JSON document at ``path``; False, writing nothing, when ``path``
    exists already. Blocks on the store."""
    try:
        store.put(path, json.dumps(value).encode(), NEW_NODE)
    except BadVersionError:
        return False
    return True


def update_object(
    store: Store, path: str, change: Callable[[dict[str, Any]], None], owner: str, *, delete_empty: bool = False
) -> None:
    """Read the policies object at ``path`` (``{}`` when absent), let ``change`` modify it in
    place, and write it back under the version read; a concurrent write makes it start again.

    With ``delete_empty``, an object left empty is deleted instead of written. Blocks on the
    store. ``change`` may raise (nothing is written then); ``BadVersionError`` naming ``owner``
    when the object changed under every try; ``StateCorruptedError`` as :func:`decode_object`.
    """
    for _ in range(_TRIES):
        stored = store.get(path)
        current = decode_object(path, stored.data) if stored is not None else {}
        change(current)
        try:
            if delete_empty and not current:
                if stored is not None:
                    store.delete(path, stored.version)
                return
            store.put(path, json.dumps(current).encode(), NEW_NODE if stored is None else stored.version)
            return
        except BadVersionError:
            continue
    raise BadVersionError(f"policies of {owner} changed concurrently; retry")
