"""``mledger-admin --output table``: the CLI's structured results as rich tables, for people.

The default output stays JSON (pulsar-admin's, and what scripts parse); these renderings are
only for a terminal. Each function prints to ``console`` (stdout by default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from ..admin import (
    CancelDelayedMessageResult,
    PartitionedTopicInternalStats,
    PartitionedTopicStatsData,
    PersistentTopicInternalStats,
    TopicStatsData,
)

__all__ = ["print_cancel_result", "print_messages", "print_stats", "print_topic_stats"]


def _console(console: Console | None) -> Console:
    return console if console is not None else Console(soft_wrap=True)


def print_stats(
    stats: PersistentTopicInternalStats | PartitionedTopicInternalStats, title: str, console: Console | None = None
) -> None:
    """A topic's (or each partition's) ledger summary, ledgers and cursors."""
    out = _console(console)
    if isinstance(stats, PartitionedTopicInternalStats):
        out.print(f"{title}: {stats.metadata.partitions} partitions")
        for name, partition in stats.partitions.items():
            print_stats(partition, name, out)
        return
    summary = Table(title=title, show_header=False, title_justify="left")
    summary.add_column("field", style="bold")
    summary.add_column("value")
    for field, value in (
        ("entries", stats.number_of_entries),
        ("size (bytes)", stats.total_size),
        ("entries added", stats.entries_added_counter),
        ("last confirmed entry", stats.last_confirmed_entry),
        ("state", stats.state),
    ):
        summary.add_row(field, str(value))
    out.print(summary)
    ledgers = Table(title="ledgers", title_justify="left")
    for column in ("ledger", "entries", "size"):
        ledgers.add_column(column, justify="right")
    for ledger in stats.ledgers:
        ledgers.add_row(str(ledger.ledger_id), str(ledger.entries), str(ledger.size))
    out.print(ledgers)
    cursors = Table(title="cursors", title_justify="left")
    for column, justify in (
        ("subscription", "left"),
        ("mark-delete", "right"),
        ("read", "right"),
        ("backlog", "right"),
        ("ack holes", "right"),
        ("state", "left"),
    ):
        cursors.add_column(column, justify=justify)  # type: ignore[arg-type]
    for name, cursor in sorted(stats.cursors.items()):
        cursors.add_row(
            name,
            cursor.mark_delete_position,
            cursor.read_position,
            str(cursor.number_of_entries_in_backlog),
            str(cursor.total_non_contiguous_deleted_messages_range),
            cursor.state,
        )
    out.print(cursors)


def print_cancel_result(result: CancelDelayedMessageResult, console: Console | None = None) -> None:
    """Per subscription: whether the delayed message is cancelled there."""
    table = Table(title=f"{result.topic} {result.ledger_id}:{result.entry_id}", title_justify="left")
    table.add_column("subscription")
    table.add_column("cancelled")
    for name, ok in sorted(result.results.items()):
        table.add_row(name, "yes" if ok else "[red]no (cumulative-ack type)[/red]")
    _console(console).print(table)


def print_messages(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], console: Console | None = None) -> None:
    """Produced ids or consumed messages: one row each, the given JSON fields as columns."""
    table = Table(title_justify="left")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*("" if row.get(c) is None else str(row.get(c)) for c in columns))
    _console(console).print(table)


def print_topic_stats(
    stats: TopicStatsData | PartitionedTopicStatsData, title: str, console: Console | None = None
) -> None:
    """A topic's stats: in/out figures, publishers, subscriptions with their consumers (and
    each partition's, when the partitioned stats carry them)."""
    out = _console(console)
    summary = Table(title=title, show_header=False, title_justify="left")
    summary.add_column("field", style="bold")
    summary.add_column("value")
    rows: list[tuple[str, object]] = []
    if isinstance(stats, PartitionedTopicStatsData):
        rows.append(("partitions", stats.metadata.partitions))
    rows += [
        ("in: msg/s, bytes/s", f"{stats.msg_rate_in:.2f}, {stats.msg_throughput_in:.2f}"),
        ("out: msg/s, bytes/s", f"{stats.msg_rate_out:.2f}, {stats.msg_throughput_out:.2f}"),
        ("in: messages, bytes", f"{stats.msg_in_counter}, {stats.bytes_in_counter}"),
        ("out: messages, bytes", f"{stats.msg_out_counter}, {stats.bytes_out_counter}"),
        ("storage size", stats.storage_size),
        ("backlog size", stats.backlog_size),
        ("deduplication", stats.deduplication_status),
    ]
    for field, value in rows:
        summary.add_row(field, str(value))
    out.print(summary)
    publishers = Table(title="publishers", title_justify="left")
    for column in ("producer", "id", "access mode", "msg/s", "address", "client"):
        publishers.add_column(column)
    for p in stats.publishers:
        publishers.add_row(
            p.producer_name or "",
            str(p.producer_id),
            p.access_mode,
            f"{p.msg_rate_in:.2f}",
            p.address or "",
            p.client_version or "",
        )
    out.print(publishers)
    subscriptions = Table(title="subscriptions", title_justify="left")
    for column in ("subscription", "type", "backlog", "unacked", "delayed", "msg/s out", "consumers"):
        subscriptions.add_column(column)
    for name, sub in sorted(stats.subscriptions.items()):
        consumers = ", ".join(
            f"{c.consumer_name} (permits {c.available_permits}, unacked {c.unacked_messages})" for c in sub.consumers
        )
        subscriptions.add_row(
            name,
            sub.type or "",
            str(sub.msg_backlog),
            str(sub.unacked_messages),
            str(sub.msg_delayed),
            f"{sub.msg_rate_out:.2f}",
            consumers,
        )
    out.print(subscriptions)
    if isinstance(stats, PartitionedTopicStatsData):
        for name, partition in stats.partitions.items():
            print_topic_stats(partition, name, out)
