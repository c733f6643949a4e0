"""A persistent topic (or one partition of a partitioned topic) over its managed ledger.

The topic owns its managed ledger (named by :attr:`TopicName.managed_ledger_name
<mledger.broker.TopicName.managed_ledger_name>`), its producers, its subscriptions (one
durable cursor each; opening the topic re-opens every stored subscription with its type) and
its deduplication hook (:mod:`mledger.broker._hooks`). Cursors named ``pulsar.dedup`` or starting
with the replicator prefix are system cursors, never subscriptions.

Publishing is pipelined (:meth:`Topic.publish_entries`): under a separate publish lock each
entry is checked by the deduplication hook and queued on the managed ledger, which writes the
queued entries in order, several per store write; deduplication records each stored entry and
the publisher hears about it in publish order, without the publish lock being held across any
store write. So PIP-6's "pushed but not yet persisted" state is real here: a retry of a message
whose write is pending is answered Unknown. A failed write fences the topic until its pending
writes completed, then the pushed sequence ids are reset to the persisted ones (Pulsar's
``addFailed`` / ``decrementPendingWriteOpsAndCheck``).

Locking: one re-entrant lock guards the producer and subscription maps; the publish lock guards
the dedup check, the queueing and the fence (never held across I/O or a callback).

A topic sees its broker as a :class:`TopicOwner` (settings, the deduplication hook it builds,
producer names); frontends that serve remote clients hear about it through
:class:`TopicListener`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from functools import partial
from typing import Protocol

from ..codec import EntryMetadata, MessageId, encode_entry
from ..core import (
    INT64_MAX,
    EntryTooLargeError,
    InvalidRequestError,
    ManagedLedgerClosedError,
    MLedgerError,
    NotFoundError,
    Position,
)
from ..managed_ledger import InitialPosition, ManagedLedger
from ._compaction import COMPACTION_SUBSCRIPTION, CompactedTopic, LongRunningProcessStatus
from ._errors import (
    AlreadyClosedError,
    MessageDupUnknownError,
    PersistenceError,
    ProducerBusyError,
    SubscriptionBusyError,
    TopicFencedError,
    TopicTerminatedError,
    store_failures,
)
from ._hooks import (
    DEDUPLICATION_CURSOR_NAME,
    BrokerSettings,
    Deduplication,
    DedupVerdict,
    PublishContext,
    is_deduplication_off,
)
from ._journal import BrokerJournal, TopicJournal
from ._names import TopicName
from ._producer import Producer, ProducerListener
from ._publishing import FramedPublish, PublishCallback, PublishResult
from ._rates import RateWindow
from ._stats import TopicStats
from ._subscription import SUBSCRIPTION_TYPE_PROPERTY, Subscription
from ._types import ClientInfo, SubscriptionType

__all__ = [
    "DEDUPLICATION_CURSOR_NAME",
    "FramedPublish",
    "PublishCallback",
    "PublishResult",
    "Topic",
    "TopicListener",
    "TopicOwner",
]

log = logging.getLogger(__name__)

_new_tuple = tuple.__new__

_NOT_DUPLICATE = DedupVerdict.NOT_DUPLICATE
_UNKNOWN = DedupVerdict.UNKNOWN


class TopicListener(Protocol):
    """Told about a topic's appends and its closing (see :mod:`mledger.broker._listeners`)."""

    def entries_added(self, topic: Topic) -> None:
        """Entries were appended to ``topic`` (called after the append returned)."""
        ...

    def topic_closed(self, topic: Topic) -> None:
        """``topic`` closed (deleted, or the broker is closing)."""
        ...


class TopicOwner(BrokerSettings, Protocol):
    """The broker serving a topic, as the topic sees it: its settings, and what follows."""

    def check_producer_backlog_quota(self, topic: Topic, producer_name: str) -> None:
        """Raise ``BacklogQuotaExceededError`` when the topic's backlog quota refuses new
        producers (Pulsar's ``checkBacklogQuotaExceeded``)."""
        ...

    def make_deduplication(self, topic: Topic) -> Deduplication:
        """The deduplication hook for ``topic`` (by the broker's policy and factory)."""
        ...

    def generate_producer_name(self) -> str:
        """A producer name unique within the broker."""
        ...

    @property
    def journal(self) -> BrokerJournal | None:
        """What hears stored entries and cursor changes (:mod:`mledger.broker._journal`)."""
        ...


class Topic:
    """One persistent topic or partition. Obtain with ``Broker.get_topic`` / ``create_topic``."""

    def __init__(self, broker: TopicOwner, topic_name: TopicName, ml: ManagedLedger) -> None:
        self._broker = broker
        self.topic_name = topic_name
        self._name = str(topic_name)
        self._ml = ml
        self._lock = threading.RLock()
        self._publish_lock = threading.Lock()
        # Publishes queued on the ledger: issued ones count up under the publish lock, completed
        # ones on the ledger's writer thread (one at a time), so a successful write's
        # completion takes no lock; the difference is read under the lock (the fence).
        self._issued_publishes = 0
        self._completed_publishes = 0
        self._fenced = False
        self._failed_publishes: list[PublishContext] = []
        ml.set_failure_listener(self._failure_reported)
        self._producers: dict[str, Producer] = {}
        self._next_producer_id = 0
        # Stats: what was stored (counted by the write completions, one at a time), and what
        # subscriptions gone had sent (Pulsar's msgOutFromRemovedSubscriptions).
        self._msg_in = 0
        self._bytes_in = 0
        self._in_rates = RateWindow(broker.clock.now_ms())
        self.last_active_ms = broker.clock.now_ms()
        """When the topic was loaded or last found active by the inactive-topic check (Pulsar's
        ``lastActive``, on the broker's clock; :mod:`mledger.broker._inactive_topics`)."""
        self._removed_msg_out = 0
        self._removed_bytes_out = 0
        self._subscriptions: dict[str, Subscription] = {}
        self._listeners: list[TopicListener] = []
        self._closed = False
        journal = broker.journal
        self.journal = (
            None
            if journal is None
            else TopicJournal(journal, str(topic_name.partitioned_topic), topic_name.partition_index, broker.clock)
        )
        """This topic's view of the broker's journal (None: nothing is recorded)."""
        self.compaction = CompactedTopic(ml, self.journal)
        """The topic's compaction (:mod:`mledger.broker._compaction`): its compacted view and runs."""
        for cursor in ml.cursors:
            if self.is_system_cursor(cursor.name):
                continue
            stored = cursor.cursor_properties.get(SUBSCRIPTION_TYPE_PROPERTY)
            try:
                sub_type = SubscriptionType.parse(stored) if stored else SubscriptionType.EXCLUSIVE
            except InvalidRequestError:
                log.warning("%s: subscription %s has unknown type %r; using Exclusive", self.name, cursor.name, stored)
                sub_type = SubscriptionType.EXCLUSIVE
            self._subscriptions[cursor.name] = Subscription(self, cursor.name, cursor, sub_type)
        if self.journal is not None and (self._subscriptions or any(i.entries for i in ml.ledger_infos())):
            self.journal.not_recorded("entries or subscriptions stored before the recording started")
        self._dedup: Deduplication = broker.make_deduplication(self)

    # -- views ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The full topic name, ``persistent://tenant/ns/local``."""
        return self._name

    @property
    def partition_index(self) -> int:
        """This partition's index, -1 for a non-partitioned topic."""
        return self.topic_name.partition_index

    @property
    def broker(self) -> TopicOwner:
        """The broker serving this topic."""
        return self._broker

    @property
    def managed_ledger(self) -> ManagedLedger:
        """The topic's managed ledger."""
        return self._ml

    @property
    def deduplication(self) -> Deduplication:
        """The topic's deduplication hook."""
        return self._dedup

    @property
    def producers(self) -> list[Producer]:
        """Connected producers."""
        with self._lock:
            return list(self._producers.values())

    @property
    def subscriptions(self) -> dict[str, Subscription]:
        """Subscriptions by name (a copy)."""
        with self._lock:
            return dict(self._subscriptions)

    def subscription_names(self) -> list[str]:
        """Sorted subscription names."""
        with self._lock:
            return sorted(self._subscriptions)

    def get_subscription(self, name: str) -> Subscription:
        """The subscription ``name``; raises ``NotFoundError`` (404)."""
        with self._lock:
            sub = self._subscriptions.get(name)
        if sub is None:
            raise NotFoundError(f"Subscription {name!r} not found on topic {self.name}")
        return sub

    def has_connections(self) -> bool:
        """Whether producers or consumers are connected."""
        with self._lock:
            return bool(self._producers) or any(s.consumers for s in self._subscriptions.values())

    def is_system_cursor(self, name: str) -> bool:
        """Whether a cursor of this name is internal (dedup, compaction, replication), not a subscription."""
        system = (DEDUPLICATION_CURSOR_NAME, COMPACTION_SUBSCRIPTION)
        return name in system or name.startswith(self._broker.config.replicator_prefix)

    def previous_position(self, position: Position) -> Position:
        """The position before ``position`` in the topic: ``L:E-1``, else the last entry of the
        nearest earlier non-empty ledger, else ``(first earlier ledger or L, -1)`` (Pulsar's
        ``ManagedLedgerImpl.getPreviousPosition``). O(log ledgers)."""
        return self._ml.previous_position(position)

    def last_message_id(self, read_compacted: bool = False) -> tuple[Position, int]:
        """The topic's last message as GET_LAST_MESSAGE_ID answers it: the last entry's
        position and, when that entry is a batch, the index of its last message (-1 otherwise,
        and for an entry that cannot be read). For a ``read_compacted`` consumer of a topic
        that ends at or below the compaction horizon, the compacted view's last message
        (Pulsar's ``getLargestBatchIndexWhenPossible`` and
        ``handleLastMessageIdFromCompactionService``). Reads the last entry (may block on
        storage)."""
        last = self._ml.last_confirmed_entry
        if read_compacted:
            compacted = self.compaction.last_message_id(last)
            if compacted is not None:
                return compacted
        if last.entry_id < 0:
            return last, -1
        try:
            metadata = self._ml.read_entry(last).metadata
        except MLedgerError:
            return last, -1
        if metadata.batched or metadata.num_messages > 1:
            return last, max(metadata.num_messages, 1) - 1
        return last, -1

    def stats(self) -> TopicStats:
        """Counters of the ledger, the producers and each subscription's stats, with the
        message counters and rates (see :mod:`mledger.broker._stats`)."""
        now = self._broker.clock.now_ms()
        interval_ms = self._broker.config.stats_update_frequency_in_secs * 1000
        with self._lock:
            subs = dict(self._subscriptions)
            producers = sorted(self._producers.values(), key=lambda p: p.name)
            removed_msg_out, removed_bytes_out = self._removed_msg_out, self._removed_bytes_out
        ml_stats = self._ml.stats()
        msg_in, bytes_in = self._msg_in, self._bytes_in
        rate_in, throughput_in = self._in_rates.rates(now, interval_ms, msg_in, bytes_in)
        sub_stats = {name: sub.stats() for name, sub in sorted(subs.items())}
        return TopicStats(
            name=self.name,
            entries=ml_stats.number_of_entries,
            last_confirmed_entry=ml_stats.last_confirmed_entry,
            producers=tuple(p.name for p in producers),
            subscriptions=sub_stats,
            publishers=tuple(p.stats(now, interval_ms) for p in producers),
            msg_in_counter=msg_in,
            bytes_in_counter=bytes_in,
            msg_rate_in=rate_in,
            msg_throughput_in=throughput_in,
            msg_out_counter=removed_msg_out + sum(s.msg_out_counter for s in sub_stats.values()),
            bytes_out_counter=removed_bytes_out + sum(s.bytes_out_counter for s in sub_stats.values()),
            storage_size=ml_stats.total_size,
        )

    def _count_published(self, accepted: list[tuple[int, PublishContext]], raws: list[bytes]) -> None:
        """Count stored entries into the topic's and their producers' counters. Write
        completions only (one at a time); a racy read of the producer map is fine."""
        producers = self._producers
        messages = size = 0
        # Counted per run of one producer's entries (a batch is mostly one producer's), not
        # per entry: one producer lookup and call per run.
        name: str | None = None
        run_messages = run_size = 0
        for (_, ctx), raw in zip(accepted, raws, strict=True):
            n, b = ctx.num_messages, len(raw)
            messages += n
            size += b
            if ctx.producer_name != name:
                self._count_stored(producers, name, run_messages, run_size)
                name, run_messages, run_size = ctx.producer_name, 0, 0
            run_messages += n
            run_size += b
        self._count_stored(producers, name, run_messages, run_size)
        self._msg_in += messages
        self._bytes_in += size

    @staticmethod
    def _count_stored(producers: dict[str, Producer], name: str | None, messages: int, size: int) -> None:
        if name is not None and messages | size:
            producer = producers.get(name)
            if producer is not None:
                producer.count_stored(messages, size)

    def _count_removed_subscription(self, sub: Subscription) -> None:
        """Keep what a subscription going away had sent in the topic's counters (lock held)."""
        stats = sub.stats()
        self._removed_msg_out += stats.msg_out_counter
        self._removed_bytes_out += stats.bytes_out_counter

    # -- subscriptions -------------------------------------------------------------------------
    def subscribe(
        self,
        name: str,
        sub_type: SubscriptionType | str = SubscriptionType.EXCLUSIVE,
        initial_position: InitialPosition = InitialPosition.LATEST,
    ) -> Subscription:
        """Create the subscription ``name`` (cursor at ``initial_position``, Pulsar's default
        LATEST) or return the existing one, switching its type if no consumer is connected.

        Raises ``InvalidRequestError`` for a bad or reserved name or type,
        ``SubscriptionBusyError`` when the type differs and consumers are connected,
        ``PersistenceError`` when the store fails to create the cursor or record its type
        (Pulsar's ``PersistentTopic.getDurableSubscription``: ``openCursorFailed``).
        """
        sub_type = SubscriptionType.parse(sub_type)
        if not isinstance(name, str) or not name or "/" in name:
            raise InvalidRequestError(f"invalid subscription name {name!r}")
        if self.is_system_cursor(name):
            raise InvalidRequestError(f"invalid subscription name {name!r}: reserved for a system cursor")
        if not isinstance(initial_position, InitialPosition):
            raise InvalidRequestError(f"invalid initial position {initial_position!r}: expected an InitialPosition")
        failed = f"subscription {name} of topic {self.name} could not be created"
        with self._lock:
            self._check_open()
            sub = self._subscriptions.get(name)
            if sub is None:
                with store_failures(PersistenceError, failed):
                    cursor = self._ml.open_cursor(
                        name, initial_position, cursor_properties={SUBSCRIPTION_TYPE_PROPERTY: sub_type.value}
                    )
                sub = Subscription(self, name, cursor, sub_type)
                self._subscriptions[name] = sub
                if self.journal is not None:
                    self.journal.subscription_created(
                        name, sub_type.name, initial_position.value, cursor.mark_delete_position
                    )
                return sub
        old_type = sub.type
        with store_failures(PersistenceError, failed):
            sub.change_type(sub_type)
        if self.journal is not None and sub.durable and sub.type is not old_type:  # Pulsar's subscribe again
            self.journal.subscription_created(
                name, sub_type.name, initial_position.value, sub.cursor.mark_delete_position
            )
        return sub

    def open_non_durable_subscription(
        self,
        name: str,
        sub_type: SubscriptionType | str = SubscriptionType.EXCLUSIVE,
        start_position: Position | None = None,
        initial_position: InitialPosition = InitialPosition.LATEST,
    ) -> Subscription:
        """A reader's subscription: an in-memory cursor starting after ``start_position``
        (``initial_position`` when None or past the last entry; ledger -1 means earliest),
        nothing persisted, removed when its last consumer leaves (Pulsar's non-durable
        subscription). An existing subscription of that name is returned as it is, and a
        cursor of that name kept open by a reset (:meth:`remove_non_durable_subscription`) is
        taken over as it is (the start position is ignored then).

        Raises ``InvalidRequestError`` for a bad or reserved name.
        """
        sub_type = SubscriptionType.parse(sub_type)
        if not isinstance(name, str) or not name or "/" in name or self.is_system_cursor(name):
            raise InvalidRequestError(f"invalid subscription name {name!r}")
        with self._lock:
            self._check_open()
            sub = self._subscriptions.get(name)
            if sub is not None:
                return sub
            cursor = self._ml.open_non_durable_cursor(start_position, name, initial_position)
            sub = Subscription(self, name, cursor, sub_type, durable=False)
            self._subscriptions[name] = sub
            return sub

    def remove_non_durable_subscription(self, sub: Subscription, keep_cursor: bool = False) -> None:
        """Drop a non-durable subscription whose last consumer left (the subscription calls this).

        ``keep_cursor``: its consumers were disconnected by a cursor reset; the cursor stays
        open in the ledger, and :meth:`open_non_durable_subscription` under the same name (the
        reader reconnecting) continues from it (Pulsar keeps the reset cursor)."""
        with self._lock:
            if self._subscriptions.get(sub.name) is not sub or sub.consumers:
                return
            self._count_removed_subscription(sub)
            del self._subscriptions[sub.name]
        sub.close()
        if not keep_cursor:
            sub.cursor.close()

    def delete_subscription(self, name: str, force: bool = False) -> None:
        """Delete a subscription and its cursor. ``NotFoundError``; ``SubscriptionBusyError``
        ("Subscription has active connected consumers") while consumers are connected, unless
        ``force`` (Pulsar's ``deleteForcefully``: the consumers are disconnected first, and
        reconnect as clients do)."""
        with self._lock:
            self._check_open()
            sub = self.get_subscription(name)
            if sub.consumers and not force:
                raise SubscriptionBusyError(f"Subscription {name!r} on {self.name} has active connected consumers")
            self._count_removed_subscription(sub)
            sub.close()
            del self._subscriptions[name]
            if sub.durable:
                self._ml.delete_cursor(name)
                if self.journal is not None:
                    self.journal.subscription_deleted(name)
            else:
                sub.cursor.close()

    # -- producers -----------------------------------------------------------------------------
    def create_producer(
        self,
        producer_name: str | None = None,
        initial_sequence_id: int | None = None,
        listener: ProducerListener | None = None,
        client: ClientInfo | None = None,
    ) -> Producer:
        """Attach a producer; a broker-unique name is generated when None. ``listener`` hears
        when the broker closes the producer (a remote producer; see
        :mod:`mledger.broker._listeners`); ``client`` is what its client told about it (its
        ``client_id`` becomes the producer id; reported in the stats).

        After a failed write, a producer is admitted only once the store accepts a write
        again (:meth:`ManagedLedger.check_writable`): until then this raises
        ``PersistenceError``, so that the producers disconnected by the failure stay away
        while, say, the disk is full, instead of resending every pending message in a loop.

        Raises ``ProducerBusyError`` when a producer of that name is connected here,
        ``TopicTerminatedError`` once the topic was terminated, ``BacklogQuotaExceededError``
        while its backlog quota (by size or time) refuses producers, ``InvalidRequestError`` for a bad
        name or initial sequence id.
        """
        _check_producer_args(producer_name, initial_sequence_id)
        if self._ml.is_terminated:
            raise TopicTerminatedError(f"Topic {self.name} was already terminated")
        self._check_writable()
        name = producer_name if producer_name is not None else self._broker.generate_producer_name()
        self._broker.check_producer_backlog_quota(self, name)
        with self._lock:
            self._check_open()
            if name in self._producers:
                raise ProducerBusyError(f"Producer with name '{name}' is already connected to topic {self.name}")
            if client is not None and client.client_id is not None:
                producer_id = client.client_id
            else:
                producer_id = self._next_producer_id
                self._next_producer_id += 1
            producer = Producer(self, name, initial_sequence_id, listener, producer_id=producer_id, client=client)
            self._producers[name] = producer
            self._dedup.producer_added(name)
            return producer

    def _check_writable(self) -> None:
        if self._ml.write_failure is None:
            return
        try:
            self._ml.check_writable()
        except ManagedLedgerClosedError:
            raise
        except Exception as exc:
            raise PersistenceError(f"topic {self.name} cannot store messages: {exc}") from exc

    def remove_producer(self, producer: Producer) -> None:
        """``producer`` closed: forget it (its ``close`` calls this)."""
        with self._lock:
            if self._producers.get(producer.name) is producer:
                del self._producers[producer.name]
                self._dedup.producer_removed(producer.name)

    def publish(
        self,
        producer_name: str,
        payload: bytes,
        metadata: EntryMetadata,
        sequence_id: int,
        highest_sequence_id: int,
        num_messages: int,
    ) -> Position | None:
        """Append one entry through the deduplication hook; None when it was a duplicate.

        Blocks until it is stored (after every publish queued before). Raises
        ``MessageDupUnknownError`` (nothing written), ``TopicFencedError``, and whatever the
        append raises.
        """
        item = FramedPublish(
            producer_name, sequence_id, highest_sequence_id, num_messages, metadata, encode_entry(payload, metadata)
        )
        waiter = _PublishWaiter()
        self.publish_entries([item], waiter, start_writing=False)
        self.start_writing(inline=True)
        result = waiter.wait()[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def publish_entries(
        self, items: Sequence[FramedPublish], callback: PublishCallback, *, start_writing: bool = True
    ) -> None:
        """Publish entries already framed (a Pulsar client's bytes, or a producer's): the
        pipelined publish path (Pulsar's ``PersistentTopic.publishMessage``). Never waits on
        the store.

        Each item goes through the deduplication hook now, in call order: a duplicate or an
        Unknown verdict writes nothing; the others are queued as one add on the managed
        ledger, behind every earlier publish. ``callback(results)`` runs once the add
        completed (on the thread that wrote it; at once when nothing needed writing), with
        one result per item, in order: its position, None for a duplicate, or the exception
        that refused it (``MessageDupUnknownError``, ``EntryTooLargeError``,
        ``TopicFencedError``, ``AlreadyClosedError``, or the store's error for a failed
        write). Callbacks of writes run in publish order, so a producer's results arrive in
        sequence order; deduplication records a stored entry before its callback runs.

        A failed write fences the topic, as Pulsar does: the publishes queued behind it fail
        too, new ones fail with ``TopicFencedError`` until the last pending one completed, and
        then deduplication resets its pushed sequence ids to the persisted ones
        (``resetHighestSequenceIdPushed``), so the producers' retries are accepted.

        ``start_writing=False`` only queues: call :meth:`start_writing` after releasing your
        own locks (a caller that holds a lock must not write inline: callbacks may run).
        """
        n = len(items)
        results: list[PublishResult] = [None] * n
        refused: BaseException | None = None
        immediate = False
        with self._publish_lock:
            if self._closed:
                refused = AlreadyClosedError(f"topic {self.name} is closed")
            elif self._ml.is_terminated:
                refused = TopicTerminatedError(f"Topic {self.name} was already terminated")
            elif self._fenced:
                refused = TopicFencedError(
                    f"topic {self.name} is fenced after a failed write; retry when its pending writes completed"
                )
            else:
                accepted: list[tuple[int, PublishContext]] = []
                raws: list[bytes] = []
                limit = self._ml.store.max_entry_size
                dedup = self._dedup
                name = self.name
                # deduplication off: every publish is new, no call per message to say so
                check = None if is_deduplication_off(dedup) else dedup.check
                accept = accepted.append
                keep = raws.append
                for i, item in enumerate(items):
                    producer_name, sequence_id, highest, num_messages, metadata, framed = item
                    if len(framed) > limit:
                        results[i] = EntryTooLargeError(
                            f"entry of {len(framed)} bytes exceeds the maximum entry size {limit}"
                        )
                        continue
                    # FramedPublish's first five fields are PublishContext's after the topic:
                    # built with tuple.__new__, not the named tuple's Python-level __new__
                    ctx = _new_tuple(
                        PublishContext, (name, producer_name, sequence_id, highest, num_messages, metadata)
                    )
                    verdict = _NOT_DUPLICATE if check is None else check(ctx)
                    if verdict is _NOT_DUPLICATE:
                        accept((i, ctx))
                        keep(framed)
                    elif verdict is _UNKNOWN:
                        results[i] = MessageDupUnknownError(
                            f"Cannot determine whether the message is a duplicate at this time (producer"
                            f" {producer_name!r}, sequence id {sequence_id}, topic {name})"
                        )
                if not accepted:
                    # Nothing to write: answered at once, as Pulsar completes a Dup or Unknown.
                    # A producer's order holds: its duplicate is older than anything it has
                    # pending (stored in sequence order), and Unknown is an error it retries.
                    immediate = True
                else:
                    try:
                        self._ml.add_entries_with_callback(
                            raws,
                            partial(self._entries_written, results, accepted, raws, callback),
                            framed=True,
                            start_writing=False,
                        )
                        self._issued_publishes += 1
                    except MLedgerError as exc:  # the ledger closed under us: nothing queued
                        refused = exc
                        # They were pushed: undo that as for a failed write.
                        self._failed_publishes.extend(ctx for _, ctx in accepted)
                        self._fenced = True
                        self._unfence_if_idle()
        if refused is not None:
            callback([refused] * n)
            return
        if immediate:
            callback(results)
            return
        if start_writing:
            self._ml.start_writing()

    def start_writing(self, inline: bool = False) -> None:
        """Start writing what :meth:`publish_entries` queued (see
        :meth:`ManagedLedger.start_writing`); ``inline``: the caller waits for its results
        anyway, so write on this thread if no write is under way."""
        self._ml.start_writing(inline=inline)

    def wait_for_publishes(self, timeout: float | None = None) -> bool:
        """Block until every queued publish completed; False when ``timeout`` passed first."""
        return self._ml.wait_for_adds(timeout)

    def _entries_written(
        self,
        results: list[PublishResult],
        accepted: list[tuple[int, PublishContext]],
        raws: list[bytes],
        callback: PublishCallback,
        positions: list[Position] | None,
        error: BaseException | None,
    ) -> None:
        """The managed-ledger callback of one :meth:`publish_entries` call (bound with
        :func:`functools.partial`): records the positions with deduplication, counts, journals
        and answers ``callback``; on the ledger's writer thread."""
        if error is None:
            assert positions is not None
            dedup = self._dedup
            if is_deduplication_off(dedup):  # nothing to record: no call per entry
                for (i, _), position in zip(accepted, positions, strict=True):
                    results[i] = position
            else:
                record = dedup.record_persisted
                for (i, ctx), position in zip(accepted, positions, strict=True):
                    record(ctx, position)
                    results[i] = position
            self._count_published(accepted, raws)
            if self.journal is not None:
                self.journal.entries_persisted(
                    [(position, ctx) for (_, ctx), position in zip(accepted, positions, strict=True)]
                )
            self._publish_completed(None)
            if positions:
                self._notify_entries_added()
        else:
            for i, _ in accepted:
                results[i] = error
            self._publish_completed([ctx for _, ctx in accepted])
        callback(results)

    def _publish_completed(self, failed: Sequence[PublishContext] | None) -> None:
        """One queued publish completed (``failed``: the contexts of a failed write). Runs on
        the ledger's writer thread, the only one counting completions."""
        if failed is None:
            self._completed_publishes += 1
            if not self._fenced:
                return
            with self._publish_lock:
                self._unfence_if_idle()
            return
        with self._publish_lock:
            self._completed_publishes += 1
            if not self._fenced:
                log.debug("%s: a write failed; fencing the topic until its pending writes completed", self.name)
            self._fenced = True
            self._failed_publishes.extend(failed)
        self._disconnect_producers()

    def _disconnect_producers(self) -> None:
        """Pulsar's ``addFailed``: disconnect the remote producers, which may reconnect only
        once the store accepts writes again (:meth:`create_producer`)."""
        self.disconnect_producers("a write failed")

    def disconnect_producers(self, why: str) -> int:
        """Disconnect the remote producers (they may reconnect; a library producer stays);
        logs ``why`` with the count. Returns how many were disconnected."""
        with self._lock:
            producers = list(self._producers.values())
        n = sum(producer.disconnect() for producer in producers)
        if n:
            log.info("%s: %s; disconnected %d producers", self.name, why, n)
        return n

    def _failure_reported(self) -> None:
        """The ledger reported a failed write and everything failed with it (writer thread)."""
        with self._publish_lock:
            self._unfence_if_idle()

    @property
    def is_fenced(self) -> bool:
        """Whether publishes are refused after a failed write (until its pending ones completed)."""
        return self._fenced

    def _unfence_if_idle(self) -> None:
        """Pulsar's ``decrementPendingWriteOpsAndCheck`` (caller holds the publish lock): once
        nothing is pending and the ledger finished reporting the failure, reset the pushed
        sequence ids to the persisted ones and lift the fence."""
        if self._fenced and self._issued_publishes == self._completed_publishes and not self._ml.adds_failing:
            failed, self._failed_publishes = self._failed_publishes, []
            for ctx in failed:
                self._dedup.record_failed(ctx)  # pushed := persisted
            self._fenced = False

    # -- termination -----------------------------------------------------------------------------
    def terminate(self) -> MessageId:
        """Terminate the topic (Pulsar's ``PersistentTopic.terminate``): the managed ledger takes
        no more entries (publishes queued before complete), producers are disconnected and new
        ones refused with ``TopicTerminatedError``, and each subscription that acknowledged
        everything tells its consumers they reached the end of the topic (the others once they
        have). Returns the last message's id (partition -1, as Pulsar's ``MessageIdImpl``).
        Idempotent. Raises ``AlreadyClosedError`` once closed."""
        with self._lock:
            self._check_open()
        position = self._ml.terminate()
        with self._lock:
            producers = list(self._producers.values())
            subs = list(self._subscriptions.values())
        for producer in producers:
            producer.disconnect()
        for sub in subs:
            sub.check_end_of_topic()
        return MessageId(position.ledger_id, position.entry_id)

    @property
    def is_terminated(self) -> bool:
        """Whether the topic was terminated (now or before a restart)."""
        return self._ml.is_terminated

    # -- listeners -------------------------------------------------------------------------------
    def add_listener(self, listener: TopicListener) -> None:
        """Tell ``listener`` about appends and the topic's closing (see
        :mod:`mledger.broker._listeners`). Idempotent."""
        with self._lock:
            if listener not in self._listeners:
                self._listeners = [*self._listeners, listener]

    def remove_listener(self, listener: TopicListener) -> None:
        """Stop telling ``listener``. Idempotent."""
        with self._lock:
            self._listeners = [x for x in self._listeners if x is not listener]

    def _notify_entries_added(self) -> None:
        for listener in self._listeners:
            listener.entries_added(self)

    # -- compaction ----------------------------------------------------------------------------
    def trigger_compaction(self) -> None:
        """Start compacting the topic in the background (Pulsar's ``triggerCompaction``).

        Raises ``CompactionInProgressError`` (409) while a compaction runs.
        """
        self._check_open()
        self.compaction.trigger()

    def compaction_status(self) -> LongRunningProcessStatus:
        """The status of the topic's last compaction (``NOT_RUN`` before any)."""
        return self.compaction.status()

    def check_compaction(self, threshold_bytes: int) -> bool:
        """Compact when the bytes not compacted yet exceed ``threshold_bytes`` (0: never) and
        no compaction runs (Pulsar's ``checkCompaction``); return whether one started."""
        if self._closed or threshold_bytes <= 0 or self.compaction.is_running():
            return False
        if self.compaction.backlog_size() <= threshold_bytes:
            return False
        self.compaction.trigger()
        return True

    # -- lifecycle -------------------------------------------------------------------------------
    def run_due_tasks(self) -> int:
        """Dispatch what is due on every subscription (``Broker.run_due_tasks`` calls it after
        firing the broker's timers); returns the messages dispatched."""
        if self._closed:
            return 0
        return sum(sub.dispatch() for sub in self.subscriptions.values())

    def update_rates(self, now_ms: int) -> None:
        """Close the stats interval of the topic's, its producers' and its consumers' rates at
        ``now_ms`` (Pulsar's ``updateRates``, fired by the broker's stats timer every
        ``stats_update_frequency_in_secs``). O(producers + consumers)."""
        with self._lock:
            subs = list(self._subscriptions.values())
            producers = list(self._producers.values())
        interval_ms = self._broker.config.stats_update_frequency_in_secs * 1000
        self._in_rates.close(now_ms, interval_ms, self._msg_in, self._bytes_in)
        for producer in producers:
            producer.update_rates(now_ms, interval_ms)
        for sub in subs:
            sub.update_rates(now_ms, interval_ms)

    def close(self) -> None:
        """Disconnect producers and consumers and close the ledger (cursors persist). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            subs = list(self._subscriptions.values())
            producers = list(self._producers.values())
            self._producers.clear()
        for producer in producers:
            producer.closed_by_broker()
        for sub in subs:
            sub.close()
        self._ml.wait_for_adds()  # the last snapshot covers every write that was pending
        self._dedup.close()
        self._ml.close()
        for listener in self._listeners:
            listener.topic_closed(self)

    @property
    def is_closed(self) -> bool:
        """Whether the topic was closed."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError(f"topic {self.name} is closed")

    def __repr__(self) -> str:
        return f"Topic({self.name!r})"


class _PublishWaiter:
    """The callback of a blocking publish."""

    __slots__ = ("lock", "results")

    def __init__(self) -> None:
        self.results: list[PublishResult] | None = None
        self.lock = threading.Lock()
        self.lock.acquire()

    def __call__(self, results: list[PublishResult]) -> None:
        self.results = results
        self.lock.release()

    def wait(self) -> list[PublishResult]:
        self.lock.acquire()
        assert self.results is not None
        return self.results


def _check_producer_args(producer_name: object, initial_sequence_id: object) -> None:
    if producer_name is not None and (not isinstance(producer_name, str) or not producer_name):
        raise InvalidRequestError(f"invalid producer name {producer_name!r}")
    if initial_sequence_id is not None and (
        isinstance(initial_sequence_id, bool)
        or not isinstance(initial_sequence_id, int)
        or not -1 <= initial_sequence_id <= INT64_MAX
    ):
        raise InvalidRequestError(f"invalid initial_sequence_id {initial_sequence_id!r}: expected an int >= -1")
