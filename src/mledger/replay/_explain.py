"""``mledger replay ... --explain SUBSCRIPTION``: why a stop at the end of the replay would
redeliver what the outputs say, per Pulsar rule, for every topic-partition of one subscription.

The log is replayed once more in this process under one setting, with a partition model that
asks the subscription's cursor for :meth:`~mledger.managed_ledger.ManagedCursor.explain_redelivery`
right after the replay's end (the state the ``cursors`` output describes), then drops it: memory
stays that of the single-process replay. The worst moment is not explained (its state is gone
by the end; the ``_max_at_ms`` columns say when it was).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from ..managed_ledger import RedeliveryExplanation, StopExplanation
from ._broker_model import BrokerModel
from ._model import SubscriptionResult
from ._settings import ReplaySettings
from ._summary import table_lines

__all__ = ["PartitionExplanation", "explain_replay", "format_explanations"]


@dataclass(frozen=True)
class PartitionExplanation:
    """One topic-partition's explanation of the subscription (:func:`explain_replay`)."""

    topic: str
    partition: int
    explanation: RedeliveryExplanation


class _ExplainingModel(BrokerModel):
    """The replay's broker model, which explains one subscription's cursor at the end."""

    def __init__(
        self, topic: str, partition: int, settings: ReplaySettings, subscription: str, found: list[PartitionExplanation]
    ) -> None:
        super().__init__(topic, partition, settings)
        self._explained = subscription
        self._found = found
        self._topic_name = topic

    def finish(self, end_ms: int, emit_state: bool) -> list[SubscriptionResult]:
        results = super().finish(end_ms, emit_state)
        if self.has_subscription(self._explained):
            cursor = self.cursor(self._explained)
            explanation = None if cursor is None else cursor.explain_redelivery()
            if explanation is not None:
                self._found.append(PartitionExplanation(self._topic_name, self._partition, explanation))
        return results


def explain_replay(
    input_dir: str, subscription: str, settings: ReplaySettings | None = None, fixed: Sequence[str] = ()
) -> list[PartitionExplanation]:
    """Replay ``input_dir`` (raw or prepared) in this process under ``settings`` and explain
    ``subscription``'s cursor of every topic-partition at the end, in replay order (empty when no
    topic-partition has it). Blocks for a whole single-process replay; writes its outputs to a
    temporary directory, removed after."""
    from ._local import run_single_process

    found: list[PartitionExplanation] = []

    def model(topic: str, partition: int, chosen: ReplaySettings) -> BrokerModel:
        return _ExplainingModel(topic, partition, chosen, subscription, found)

    out = tempfile.mkdtemp(prefix="mledger-explain-")
    try:
        run_single_process(input_dir, f"{out}/out", settings, model_factory=model, fixed=fixed)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return found


def _stop_lines(title: str, stop: StopExplanation) -> list[str]:
    head = f"{title}: {stop.messages:,} acknowledged messages ({stop.entries:,} entries) redelivered"
    head += f"; the record read back: {stop.record}"
    if not stop.rules:
        return [head]
    rows: list[list[object]] = []
    for share in stop.rules:
        more = share.ranges - len(share.shown)
        shown = ", ".join(share.shown) + (f" and {more:,} more" if more > 0 else "")
        rows.append([share.rule.value, share.messages, share.entries, shown])
    return [head, *table_lines(["rule", "messages", "entries", "what (ranges; batch indexes)"], rows, text=2)]


def format_explanations(subscription: str, found: Sequence[PartitionExplanation]) -> str:
    """The explanations as text: per topic-partition, the crash and the unload, one row per rule."""
    if not found:
        return f"--explain {subscription}: no topic-partition of the log has this subscription"
    lines: list[str] = []
    for item in found:
        e = item.explanation
        lines += [
            "",
            f"why a stop at the end redelivers what it does: {item.topic} partition {item.partition}, "
            f"subscription {subscription} (mark-delete {e.mark_delete})",
        ]
        lines += _stop_lines("  crash (after the last persist)", e.crash)
        lines += _stop_lines("  unload or clean restart (the close path)", e.unload)
    return "\n".join(lines)
