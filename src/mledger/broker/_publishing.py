"""What a publish hands the topic, and what it gets back (the pipelined publish path).

A producer (the library's :class:`~mledger.broker.Producer`, or a protocol session
relaying a Pulsar client's SEND) hands :meth:`Topic.publish_entries
<mledger.broker.Topic.publish_entries>` :class:`FramedPublish` items and a
:data:`PublishCallback`; the callback later gets one :data:`PublishResult` per item, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..codec import EntryMetadata
from ..core import Position

__all__ = ["FramedPublish", "PublishCallback", "PublishResult"]


class FramedPublish(NamedTuple):
    """One entry to publish: its framed bytes (``[size][MessageMetadata][payload]``, optionally
    behind a client's ``[0x0e01][crc32c]``, stored unchanged) and what the deduplication hook
    needs (``metadata`` as parsed from those bytes). A named tuple: made once per message on
    the protocol's hot path."""

    producer_name: str
    sequence_id: int
    highest_sequence_id: int
    num_messages: int
    metadata: EntryMetadata
    framed: bytes


PublishResult = Position | None | BaseException
"""One published entry's outcome: its position, None (a duplicate), or why it was refused."""

PublishCallback = Callable[[list[PublishResult]], None]
"""Gets the results of one ``publish_entries`` call, one per item, in order."""
