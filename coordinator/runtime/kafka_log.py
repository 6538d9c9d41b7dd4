"""The record log in a compacted Kafka topic: the role `FileLog` plays on local disk, the way Kafka's group
coordinator keeps its state in `__consumer_offsets`.

Layout. A group's records go to partition `state_partition(group_id, P)` (see
`groupcoord.coordinator.core.partitioning`),
so one partition holds everything about a group, in order, and whoever owns the partition coordinates the
group. The message key names what the record is about, as `__consumer_offsets` keys do: the record kind, the
group id, and the member id or the topic-partition (`["offset_commit","g","orders",3]`, JSON so no id can
make two keys collide). A later record with the same key supersedes the earlier one completely, so
compaction (`cleanup.policy=compact`) keeps exactly what replay needs. Tombstone records (a member left, an
offset deleted) are written as ordinary values under the key of what they delete, which replay applies. After
an operation's message, a null-valued message (Kafka's tombstone) under each key the operation deleted lets
compaction drop that key's earlier messages and then the key itself (`kafka_tombstones`); replay skips nulls.

One message per record, in transactions (`transactional=True`, the sharded mode). Each record is its own
message under `record_key(record)`, as in Kafka's `__consumer_offsets`; the transaction holding an operation's
messages makes it atomic on a `read_committed` replay, and compaction keeps only each key's last message, so
what replay reads is bounded by live state, not by history. The value is an operation of one record.

One message per operation, without transactions. The value holds all records an operation wrote for one group's
partition (`record_codec.encode_operation`), so replay applies them whole or not at all; values written before
this format (one `LogRecord`) still load as operations of one record, and both load alongside messages of one
record each. An operation of one record is keyed as above and compacts as before. An operation of several records
is keyed `["operation", group id, unique]`: no later message supersedes it, so compaction never drops it (it may
still hold the only copy of a record; compacting such operations needs snapshots, not keys). An operation whose
message would exceed the producer's `message.max.bytes` is refused with `RecordTooLargeError` before anything is
produced, as the file log refuses one over its loader's limit. An operation touching groups on several partitions
produces one message per partition: atomic per group, not across partitions.

Writing. An idempotent producer (`enable.idempotence=true`, `acks=all`) keeps each partition in order without
duplicates across retries; `linger.ms` batches the records of concurrent operations. `append` returns an
awaitable completed from the delivery callbacks (a thread polls the producer), so a response leaves only once
every broker in the ISR has its records. A failed delivery fails the awaitable: the runtime then fails stop.

Transactions. Each owned partition is written by its own transactional producer (`kafka_txn`): `acquire(p)` runs
`init_transactions` with the partition's stable `transactional.id`, which fences the previous owner; `append`
queues each partition's messages on its writer, which commits the operations of a few ms per transaction and
acknowledges them after the commit. An append to a partition this instance has not acquired, or whose writer was
fenced, fails with `PartitionFenced`.

Reading. `load_partition` reads one partition from its beginning to the high watermark taken at the start,
with a plain consumer (assign, no group, `isolation.level=read_committed`): the owner of a partition is its only
writer, so that is everything it committed, and nothing of an aborted or fenced transaction.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.coordinator.core import records as r
from groupcoord.coordinator.core.classic.records import ClassicGroupMetadata, ClassicGroupMetadataTombstone
from groupcoord.coordinator.core.mixed.group import (
    ConsumerGroupClassicMemberMetadata,
    ConsumerGroupClassicMemberMetadataTombstone,
)
from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.coordinator.core.share import records as sr
from groupcoord.coordinator.core.streams import records as st
from groupcoord.coordinator.runtime import record_codec
from groupcoord.coordinator.runtime.kafka_tombstones import deleted_keys
from groupcoord.coordinator.runtime.kafka_txn import PartitionWriter
from groupcoord.coordinator.runtime.record_codec import PartitionFenced, RecordTooLargeError

log = logging.getLogger("groupcoord.kafka_log")

# Room for what a message adds to its key and value in a record batch (headers, lengths, batch header).
MESSAGE_OVERHEAD = 512

# The key kind of each record type: a tombstone shares the kind of what it deletes, so compaction keeps it.
_KEY_KIND: dict[type, str] = {
    r.ConsumerGroupMetadata: "group_metadata",
    r.ConsumerGroupMetadataTombstone: "group_metadata",
    r.ConsumerGroupMemberMetadata: "member_metadata",
    r.ConsumerGroupMemberMetadataTombstone: "member_metadata",
    r.ConsumerGroupTargetAssignmentMember: "target_member",
    r.ConsumerGroupTargetAssignmentMemberTombstone: "target_member",
    r.ConsumerGroupTargetAssignmentMetadata: "target_metadata",
    r.ConsumerGroupCurrentMemberAssignment: "current_assignment",
    r.ConsumerGroupCurrentMemberAssignmentTombstone: "current_assignment",
    r.OffsetCommit: "offset_commit",
    r.OffsetCommitTombstone: "offset_commit",
    r.GroupConfig: "group_config",
    r.ConsumerGroupRegularExpression: "regex",
    r.ConsumerGroupRegularExpressionTombstone: "regex",
    r.GroupEmptySince: "empty_since",
    r.GroupEmptySinceTombstone: "empty_since",
    ClassicGroupMetadata: "classic_group",
    ClassicGroupMetadataTombstone: "classic_group",  # same key as the record it deletes, so compaction drops both
    ConsumerGroupClassicMemberMetadata: "classic_member_metadata",
    ConsumerGroupClassicMemberMetadataTombstone: "classic_member_metadata",
    # Share groups (KIP-932).
    sr.ShareGroupMetadata: "share_metadata",
    sr.ShareGroupMetadataTombstone: "share_metadata",
    sr.ShareGroupMemberMetadata: "share_member_metadata",
    sr.ShareGroupMemberMetadataTombstone: "share_member_metadata",
    sr.ShareGroupTargetAssignmentMember: "share_target_member",
    sr.ShareGroupTargetAssignmentMemberTombstone: "share_target_member",
    sr.ShareGroupTargetAssignmentMetadata: "share_target_metadata",
    sr.ShareGroupCurrentMemberAssignment: "share_current_assignment",
    sr.ShareGroupCurrentMemberAssignmentTombstone: "share_current_assignment",
    sr.SharePartitionState: "share_partition",
    sr.SharePartitionStateTombstone: "share_partition",
    # Streams groups (KIP-1071).
    st.StreamsGroupMetadata: "streams_metadata",
    st.StreamsGroupMetadataTombstone: "streams_metadata",
    st.StreamsGroupTopologyRecord: "streams_topology",
    st.StreamsGroupTopologyTombstone: "streams_topology",
    st.StreamsGroupMemberMetadata: "streams_member_metadata",
    st.StreamsGroupMemberMetadataTombstone: "streams_member_metadata",
    st.StreamsGroupTargetAssignmentMember: "streams_target_member",
    st.StreamsGroupTargetAssignmentMemberTombstone: "streams_target_member",
    st.StreamsGroupTargetAssignmentMetadata: "streams_target_metadata",
    st.StreamsGroupCurrentMemberAssignment: "streams_current_assignment",
    st.StreamsGroupCurrentMemberAssignmentTombstone: "streams_current_assignment",
}


def record_key(record: Any) -> bytes:
    """The compaction key: kind, group id, then member id, regex, or topic and partition when the record has them.
    Other record types are keyed by their type name the same way (give a new type and its tombstone one kind)."""
    parts: list[str | int] = [_KEY_KIND.get(type(record), type(record).__name__), record.group_id]
    for name in ("member_id", "regex", "topic", "topic_id", "partition"):
        value = getattr(record, name, None)
        if value is not None:
            parts.append(value)
    return json.dumps(parts, separators=(",", ":"), ensure_ascii=False).encode()


class StateTopicError(RuntimeError):
    """The state topic is missing and cannot be created, or has another partition count than configured."""


@dataclass(frozen=True, slots=True)
class PartitionLoad:
    partition: int
    records: int
    end_offset: int  # the high watermark the load read up to
    seconds: float


class _Delivery:
    """One `append`: completes when every record is acknowledged, or fails with the first error."""

    __slots__ = ("future", "_remaining", "_lock")

    def __init__(self, count: int) -> None:
        self.future: Future[None] = Future()
        self._remaining = count
        self._lock = threading.Lock()

    def on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        with self._lock:
            if self.future.done():
                return
            if err is not None:
                self.future.set_exception(KafkaException(err))
                return
            self._remaining -= 1
            if self._remaining == 0:
                self.future.set_result(None)


class KafkaRecordLog:
    """The runtime's record sink (see `RecordSink`) on a Kafka topic, plus per-partition loading."""

    def __init__(self, bootstrap_servers: str, topic: str, partitions: int, *, client_id: str = "groupcoord",
                 linger_ms: int = 5, delivery_timeout_ms: int = 30_000, create_topic: bool = True,
                 client_config: Mapping[str, Any] | None = None, producer_config: Mapping[str, Any] | None = None,
                 consumer_config: Mapping[str, Any] | None = None, transactional: bool = False,
                 on_fenced: Callable[[PartitionFenced, bool], None] | None = None,
                 encode: Callable[[Any], bytes] = record_codec.encode,
                 decode: Callable[[bytes], Any] = record_codec.decode) -> None:
        if partitions < 1:
            raise ValueError(f"the state topic needs at least one partition, got {partitions}")
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.partitions = partitions
        self.client_id = client_id
        self.create_topic = create_topic
        # Settings for every client (security, e.g. SASL/SSL); producer_config and consumer_config add to them.
        self._client_config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, **(client_config or {})}
        self._producer_config: dict[str, Any] = {
            **self._client_config, "client.id": client_id, "enable.idempotence": True,
            "acks": "all", "linger.ms": linger_ms, "delivery.timeout.ms": delivery_timeout_ms,
            **(producer_config or {})}
        self._consumer_config: dict[str, Any] = {
            **self._client_config, "client.id": f"{client_id}-loader",
            # A consumer needs a group id; this one never joins it nor commits (assign only).
            "group.id": f"{client_id}-loader", "enable.auto.commit": False, "enable.partition.eof": True,
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50, "isolation.level": "read_committed",
            **(consumer_config or {})}
        self._encode = encode
        self._decode = decode
        # librdkafka refuses a message over message.max.bytes (default 1000000); refuse it first, cleanly.
        self.max_message_bytes = int(self._producer_config.get("message.max.bytes", 1_000_000))
        self._op_ids = itertools.count(time.time_ns())
        self._producer: Producer | None = None
        self._poller: threading.Thread | None = None
        self._closed = threading.Event()
        self._outstanding: set[Future[None]] = set()
        self._outstanding_lock = threading.Lock()
        # Transactions: one writer per acquired partition; `on_fenced(error, fatal)` hears of a failed one.
        self.transactional = transactional
        self.on_fenced = on_fenced
        self.linger_s = linger_ms / 1000
        self.instance_id = f"{client_id}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._writers: dict[int, PartitionWriter] = {}
        self._acquisitions = itertools.count(1)

    # --- lifecycle --------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Check (or create) the topic, then start the producer and its polling thread. Blocking."""
        producer = Producer(self._producer_config)
        try:
            self._check_topic(producer)
        except BaseException:
            producer.close()
            raise
        self._producer = producer
        self._poller = threading.Thread(target=self._poll, name="groupcoord-kafka-log", daemon=True)
        self._poller.start()

    def _check_topic(self, producer: Producer) -> None:
        # All topics, not this one: asking a broker for one topic's metadata may auto-create it (with the
        # broker's default partition count, which would then disagree with ours).
        metadata = producer.list_topics(timeout=10)
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None:
            if not self.create_topic:
                raise StateTopicError(f"state topic {self.topic!r} does not exist; create it with "
                                      f"{self.partitions} partitions and cleanup.policy=compact")
            self._create_topic()
            return
        if len(topic.partitions) != self.partitions:
            raise StateTopicError(
                f"state topic {self.topic!r} has {len(topic.partitions)} partitions but {self.partitions} are "
                "configured: every instance must use the topic's partition count (groups are placed by "
                "hash mod partitions)")

    def _create_topic(self) -> None:
        admin = AdminClient({**self._client_config, "client.id": self.client_id})
        new = NewTopic(self.topic, num_partitions=self.partitions, config={"cleanup.policy": "compact"})
        try:
            admin.create_topics([new], request_timeout=15)[self.topic].result(timeout=20)
        except KafkaException as e:
            if e.args and e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            raise StateTopicError(f"cannot create state topic {self.topic!r} ({self.partitions} partitions, "
                                  f"cleanup.policy=compact): {e}; create it yourself") from e
        except Exception as e:  # a timeout: e.g. a cluster without the CreateTopics API
            raise StateTopicError(f"cannot create state topic {self.topic!r}: {type(e).__name__}: {e}; "
                                  f"create it with {self.partitions} partitions and cleanup.policy=compact") from e
        log.info("created state topic %s with %d partitions (cleanup.policy=compact)", self.topic, self.partitions)

    def _poll(self) -> None:
        producer = self._producer
        assert producer is not None
        while not self._closed.is_set():
            producer.poll(0.05)

    def close(self, timeout_s: float = 10.0) -> None:
        """Deliver what is queued (up to `timeout_s`), stop polling; appends still undelivered fail."""
        producer = self._producer
        if producer is None or self._closed.is_set():
            return
        self._closed.set()
        if self._poller is not None:
            self._poller.join(timeout=5)
        remaining = producer.flush(timeout_s)
        if remaining:
            log.error("%d record(s) were not delivered to %s before closing", remaining, self.topic)
            producer.purge()
            producer.flush(0)
        producer.close()
        for partition, writer in list(self._writers.items()):
            if abandoned := writer.close(timeout_s):
                log.error("%d append(s) to %s-%d had not committed before closing: failed", abandoned, self.topic,
                          partition)
        self._writers.clear()
        for future in self.pending():
            if not future.done():
                future.set_exception(RuntimeError("the Kafka record log closed before delivery"))

    # --- transactional writers (one per owned partition) -----------------------------------------------------
    def acquire(self, partition: int, timeout_s: float = 60.0) -> str:
        """Start writing `partition` in transactions: `init_transactions` with its stable id fences the previous
        owner and aborts its open transaction. Call before loading the partition. Blocking; returns the tag
        the writer puts on its messages."""
        self.release(partition)
        tag = f"{self.instance_id}/{next(self._acquisitions)}"
        config = {**self._producer_config, "linger.ms": 0}
        writer = PartitionWriter(self.topic, partition, config, writer_tag=tag, linger_s=self.linger_s,
                                 on_failed=self._writer_failed)
        writer.start(timeout_s)
        self._writers[partition] = writer
        return tag

    def release(self, partition: int, timeout_s: float = 30.0) -> int:
        """Stop writing `partition`: commit what is queued (or fail it, if fenced), close its producer. What has
        not committed within `timeout_s` is failed and the writer abandoned (`PartitionWriter.abandon`: a hand-off
        must not wait for a transaction that may never commit); returns how many appends that failed."""
        writer = self._writers.pop(partition, None)
        return 0 if writer is None else writer.close(timeout_s)

    def writer_tag(self, partition: int) -> str | None:
        writer = self._writers.get(partition)
        return None if writer is None else writer.writer_tag

    def _writer_failed(self, writer: PartitionWriter, error: PartitionFenced, fatal: bool) -> None:
        if self._writers.get(writer.partition) is writer and self.on_fenced is not None:
            self.on_fenced(error, fatal)

    # --- appending --------------------------------------------------------------------------------------------
    def append(self, records: list[Any]) -> Awaitable[None] | None:
        """Produce one operation's `records` (called on the event loop) as one message per state partition; the
        awaitable completes when all are acknowledged. Raises `RecordTooLargeError`, producing nothing, if a
        message would exceed the producer's `message.max.bytes`."""
        producer = self._producer
        if producer is None or self._closed.is_set():
            raise RuntimeError("the Kafka record log is not started or is closed")
        if not records:
            return None
        messages: list[tuple[int, bytes, bytes | None]] = list(self._operation_messages(records))
        messages += [(state_partition(group_id, self.partitions), key, None)  # Kafka tombstones, for compaction
                     for group_id, key in deleted_keys(records, record_key)]
        if self.transactional:
            return self._append_transactional(messages, len(records))
        delivery = _Delivery(len(messages))
        with self._outstanding_lock:
            self._outstanding.add(delivery.future)
        delivery.future.add_done_callback(self._forget)
        for partition, key, value in messages:
            while True:
                try:
                    producer.produce(self.topic, value=value, key=key, partition=partition,
                                     on_delivery=delivery.on_delivery)
                    break
                except BufferError:  # the local queue is full: the polling thread drains it
                    time.sleep(0.005)
                except KafkaException as e:
                    if not delivery.future.done():
                        delivery.future.set_exception(e)
                    return asyncio.wrap_future(delivery.future)
        return asyncio.wrap_future(delivery.future)

    def _append_transactional(self, messages: list[tuple[int, bytes, bytes | None]], count: int) -> Awaitable[None]:
        """Queue each partition's messages on its writer; the awaitable completes when every transaction holding
        them committed, or fails with `PartitionFenced` (nothing of a partition not acquired is written)."""
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for partition, key, value in messages:
            by_partition.setdefault(partition, []).append((key, value))
        futures: list[Future[None]] = []
        for partition, batch in by_partition.items():
            writer = self._writers.get(partition)
            if writer is None:
                failed: Future[None] = Future()
                failed.set_exception(PartitionFenced(partition, "this instance does not write it (not acquired)"))
                futures.append(failed)
            else:
                futures.append(writer.submit(batch))
        if len(futures) == 1:
            return asyncio.wrap_future(futures[0])
        return asyncio.ensure_future(self._all(futures))

    @staticmethod
    async def _all(futures: list[Future[None]]) -> None:
        """Every partition's transaction; the first failure (all are awaited, so none is left unobserved)."""
        results = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    def pending_for(self, partitions: list[int]) -> list[Future[None]]:
        """The appends to `partitions` not yet committed (a hand-off waits for them)."""
        out: list[Future[None]] = []
        for p in partitions:
            writer = self._writers.get(p)
            if writer is not None:
                out += writer.pending()
        return out

    def _operation_messages(self, records: list[Any]) -> list[tuple[int, bytes, bytes]]:
        """(partition, key, value) per state partition the operation touches, in the order first touched."""
        by_partition: dict[int, list[Any]] = {}
        for record in records:
            by_partition.setdefault(state_partition(record.group_id, self.partitions), []).append(record)
        out = []
        for partition, recs in by_partition.items():
            if self.transactional:  # one message per record, keyed by it: the transaction makes them atomic
                for record in recs:
                    out.append(self._message(partition, record_key(record),
                                             record_codec.encode_operation([record], self._encode), records))
                continue
            if len(recs) == 1:
                key = record_key(recs[0])
            else:
                key = json.dumps(["operation", recs[0].group_id, f"{self.client_id}-{next(self._op_ids)}"],
                                 separators=(",", ":"), ensure_ascii=False).encode()
            out.append(self._message(partition, key, record_codec.encode_operation(recs, self._encode), records))
        return out

    def _message(self, partition: int, key: bytes, value: bytes, records: list[Any]) -> tuple[int, bytes, bytes]:
        if len(key) + len(value) + MESSAGE_OVERHEAD > self.max_message_bytes:
            raise RecordTooLargeError(len(key) + len(value) + MESSAGE_OVERHEAD, self.max_message_bytes,
                                      frozenset(r.group_id for r in records))
        return partition, key, value

    def _forget(self, future: Future[None]) -> None:
        with self._outstanding_lock:
            self._outstanding.discard(future)

    def pending(self) -> list[Future[None]]:
        """The appends not yet acknowledged (a handoff waits for them before the next owner loads)."""
        with self._outstanding_lock:
            out = list(self._outstanding)
        return out + self.pending_for(list(self._writers))

    # --- loading ----------------------------------------------------------------------------------------------
    def load_partition(self, partition: int, apply: Callable[[Any], None], timeout_s: float = 60.0) -> PartitionLoad:
        """Read `partition` from its beginning up to its current high watermark, passing each decoded record to
        `apply` in order. Blocking; raises on a record it cannot decode or after `timeout_s`."""
        started = time.monotonic()
        consumer = Consumer(self._consumer_config)
        count = 0
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=timeout_s)
            if high > 0:
                consumer.assign([TopicPartition(self.topic, partition, OFFSET_BEGINNING)])
                count = self._read_until(consumer, partition, high, apply, started + timeout_s)
        finally:
            consumer.close()
        return PartitionLoad(partition, count, high, time.monotonic() - started)

    def _read_until(self, consumer: Consumer, partition: int, high: int, apply: Callable[[Any], None],
                    deadline: float) -> int:
        count = 0
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"loading {self.topic}-{partition} did not reach offset {high} in time")
            for msg in consumer.consume(1000, timeout=0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        return count
                    if err.fatal() or not err.retriable():
                        raise KafkaException(err)
                    continue
                offset = msg.offset()
                if offset is None:
                    continue
                if offset >= high:
                    return count
                value = msg.value()
                if value is not None:  # a null value only tells compaction to drop the key
                    try:
                        operation = record_codec.decode_operation(value, self._decode)
                    except record_codec.RecordDecodeError as e:
                        raise record_codec.RecordDecodeError(
                            f"{self.topic}-{partition} offset {offset}: {e}") from None
                    for record in operation:
                        apply(record)
                    count += len(operation)
                if offset >= high - 1:
                    return count
