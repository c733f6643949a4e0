"""Models that document request bodies in the OpenAPI document only.

The handlers parse these bodies with the admin library's Pulsar-compatible parsers (their exact
error messages, any content type), so FastAPI never validates them; these models describe the
accepted JSON for ``/openapi.json`` and ``/docs``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from ..admin import MessageIdItem

__all__ = ["SkipMessageIdsBody"]


class SkipMessageIdsObject(BaseModel):
    """``{"type": "messageId" | "byteArray", "messageIds": [...]}``; a missing or empty ``type``
    means ``byteArray`` (base64 strings)."""

    model_config = ConfigDict(populate_by_name=True)

    type: Literal["messageId", "byteArray"] | None = None
    message_ids: list[MessageIdItem] | list[str] = Field(alias="messageIds")


class SkipMessageIdsBody(RootModel[list[str] | SkipMessageIdsObject]):
    """Pulsar's skipByMessageIds body: an array of base64 ``MessageIdData`` (as any Pulsar client
    serializes a MessageId), or an object naming its format."""
