"""A share-group (KIP-932) member: queue semantics over Kafka with groupcoord handing out offset ranges.

`ShareMember` heartbeats in the background (ShareGroupHeartbeat), and `poll()`:
1. reads each assigned partition's watermarks from Kafka,
2. asks the coordinator to acquire up to `max_records` offsets (ShareAcquire): ranges locked to this member
   until the record lock duration passes,
3. reads exactly those offsets from Kafka (assign + seek),
and returns them as `ShareRecord`s. The caller processes them and `acknowledge()`s: ACCEPT (done), RELEASE
(give it back for redelivery) or REJECT (archive). A lock that expired before its acknowledgement comes back
as INVALID_RECORD_STATE in `AckResult.lock_expired`: another member may have received the record meanwhile,
so the caller knows its processing of that record was a duplicate. `ShareRecord.lock_expired()` tells before
acknowledging (by the local clock, from the lock duration the coordinator reported); RENEW (KIP-1222) extends a
held lock by the lock duration, for processing that takes longer.

`acquire()` and `acknowledge_ranges()` are the same steps on offset ranges without reading the records, for a
caller that reads them elsewhere (the Spark source's share mode: executors read the ranges the driver holds).
Such a caller may also say where the watermarks come from (`watermarks`, then no Kafka consumer is opened and
`poll()` is not available): the fault suite's share members acquire from a log whose end grows with the clock.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import grpc
from confluent_kafka import Consumer, TopicPartition

from groupcoord.wire.v1 import share_pb2 as spb
from groupcoord.wire.v1 import share_pb2_grpc as spb_grpc

log = logging.getLogger("groupcoord.share_member")

ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4
INVALID_RECORD_STATE = 121
FENCED_MEMBER_EPOCH = 110
UNKNOWN_MEMBER_ID = 25
GROUP_ID_NOT_FOUND = 69


@dataclass(frozen=True, slots=True)
class ShareRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    delivery_count: int
    lock_deadline: float  # time.monotonic() when the lock is expected to expire
    topic_id: str = ""

    def lock_expired(self) -> bool:
        return time.monotonic() >= self.lock_deadline


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """Offsets first..last (inclusive) of one partition, held by this member until `lock_deadline`."""

    topic: str
    topic_id: str
    partition: int
    first_offset: int
    last_offset: int
    delivery_count: int
    lock_deadline: float  # time.monotonic() when the lock is expected to expire

    @property
    def count(self) -> int:
        return self.last_offset - self.first_offset + 1


@dataclass(frozen=True, slots=True)
class AckResult:
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    error_code: int
    error_message: str = ""

    @property
    def lock_expired(self) -> bool:
        return self.error_code == INVALID_RECORD_STATE


class ShareMember:
    def __init__(self, target: str, group_id: str, topics: Iterable[str], bootstrap_servers: str,
                 member_id: str | None = None, credentials: grpc.ChannelCredentials | None = None,
                 kafka_config: dict[str, Any] | None = None, channel: grpc.Channel | None = None,
                 watermarks: Callable[[str, int], tuple[int, int]] | None = None, rpc_timeout_s: float = 10.0) -> None:
        self.group_id = group_id
        self.topics = tuple(sorted(set(topics)))
        self.member_id = member_id or str(uuid.uuid4())
        self.member_epoch = 0
        self.heartbeat_interval_s = 0.5
        # `channel`: a ready channel (e.g. `groupcoord.clients.credentials.Credentials.channel`: TLS plus a
        # bearer token)
        self._channel = channel or (grpc.secure_channel(target, credentials) if credentials is not None
                                    else grpc.insecure_channel(target))
        self._stub = spb_grpc.ShareGroupCoordinatorStub(self._channel)
        self._lock = threading.Lock()
        self._assignment: dict[tuple[str, int], str] = {}  # (topic name, partition) -> topic id
        self._names: dict[str, str] = {}  # topic id -> name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: tuple[int, str] | None = None
        self.record_lock_duration_ms = 0  # as the coordinator last reported it
        self.rpc_timeout_s = rpc_timeout_s
        # `watermarks(topic, partition) -> (log start, log end)`: given, no Kafka consumer is opened
        self._watermarks = watermarks
        self._consumer = None if watermarks is not None else Consumer(
            {"bootstrap.servers": bootstrap_servers, "group.id": f"share-reader-{group_id}",
             "enable.auto.commit": False, "enable.partition.eof": True, **(kafka_config or {})})

    # --- membership -----------------------------------------------------------------------------------------
    def start(self) -> ShareMember:
        self.heartbeat()
        self._thread = threading.Thread(target=self._heartbeat_loop, name=f"share-hb-{self.member_id[:8]}",
                                        daemon=True)
        self._thread.start()
        return self

    def heartbeat(self) -> spb.ShareGroupHeartbeatResponse:
        req = spb.ShareGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                             member_epoch=self.member_epoch)
        if self.member_epoch == 0:
            req.subscribed_topic_names.values.extend(self.topics)
        resp = self._stub.ShareGroupHeartbeat(req, timeout=self.rpc_timeout_s)
        with self._lock:
            forgotten = resp.error_code == GROUP_ID_NOT_FOUND and req.member_epoch > 0  # e.g. restarted without state
            if resp.error_code in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) or forgotten:
                self.member_epoch = 0  # rejoin on the next beat; the coordinator released our locks
                self._assignment = {}
            elif resp.error_code:
                self.last_error = (resp.error_code, resp.error_message)
            else:
                self.member_epoch = resp.member_epoch
                self.heartbeat_interval_s = max(resp.heartbeat_interval_ms, 10) / 1000
                if resp.has_assignment:
                    self._assignment = {(tp.topic_name, p): tp.topic_id for tp in resp.assignment
                                        for p in tp.partitions}
                    self._names.update({tp.topic_id: tp.topic_name for tp in resp.assignment})
        return resp

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_interval_s):
            try:
                self.heartbeat()
            except grpc.RpcError as e:
                log.warning("share heartbeat failed: %s", e.code())

    def assignment(self) -> frozenset[tuple[str, int]]:
        with self._lock:
            return frozenset(self._assignment)

    # --- acquire and read -------------------------------------------------------------------------------------
    def poll(self, max_records: int = 500, timeout: float = 5.0) -> list[ShareRecord]:
        by_partition: dict[tuple[str, str, int], list[AcquiredRange]] = {}
        for r in self.acquire(max_records, timeout):
            by_partition.setdefault((r.topic, r.topic_id, r.partition), []).append(r)
        out: list[ShareRecord] = []
        for (name, topic_id, p), got in sorted(by_partition.items()):
            ranges = [(r.first_offset, r.last_offset, r.delivery_count) for r in got]
            out.extend(self._read(name, topic_id, p, ranges, got[0].lock_deadline, timeout))
        return out

    def acquire(self, max_records: int = 500, timeout: float = 5.0) -> list[AcquiredRange]:
        """Lock up to `max_records` offsets of the assigned partitions (ShareAcquire), without reading them."""
        with self._lock:
            assigned = dict(self._assignment)
        if not assigned:
            return []
        req = spb.ShareAcquireRequest(group_id=self.group_id, member_id=self.member_id, max_records=max_records)
        for (name, p), topic_id in sorted(assigned.items()):
            if self._watermarks is not None:
                low, high = self._watermarks(name, p)
            else:
                assert self._consumer is not None
                low, high = self._consumer.get_watermark_offsets(TopicPartition(name, p), timeout=timeout)
            req.partitions.add(topic_id=topic_id, partition=p, log_start_offset=max(low, 0),
                               log_end_offset=max(high, 0))
        sent = time.monotonic()
        resp = self._stub.ShareAcquire(req, timeout=self.rpc_timeout_s)
        if resp.error_code:
            self.last_error = (resp.error_code, resp.error_message)
            return []
        self.record_lock_duration_ms = resp.record_lock_duration_ms
        deadline = sent + resp.record_lock_duration_ms / 1000
        return [AcquiredRange(self._names.get(part.topic_id, ""), part.topic_id, part.partition, r.first_offset,
                              r.last_offset, r.delivery_count, deadline)
                for part in resp.partitions if not part.error_code for r in part.acquired_records]

    def _read(self, topic: str, topic_id: str, partition: int, ranges: list[tuple[int, int, int]],
              deadline: float, timeout: float) -> list[ShareRecord]:
        """The records of the acquired ranges, read from Kafka with assign + seek."""
        first = min(r[0] for r in ranges)
        last = max(r[1] for r in ranges)
        counts = {o: c for f, la, c in ranges for o in range(f, la + 1)}
        if self._consumer is None:
            raise RuntimeError("poll() reads from Kafka: this member was made with `watermarks`, use acquire()")
        self._consumer.assign([TopicPartition(topic, partition, first)])
        out: list[ShareRecord] = []
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            msgs = self._consumer.consume(num_messages=min(last - first + 1, 1000), timeout=0.5)
            done = False
            for m in msgs:
                if m.error() is not None:
                    done = True  # end of partition: offsets missing from the log (compaction, aborts)
                    continue
                off = m.offset()
                if off is None:
                    continue
                if off in counts:
                    out.append(ShareRecord(topic, partition, off, m.key(), m.value(), counts[off], deadline, topic_id))
                if off >= last:
                    done = True
            if done:
                break
        return out

    # --- acknowledge ------------------------------------------------------------------------------------------
    def acknowledge(self, records: Iterable[ShareRecord], acknowledge_type: int = ACCEPT) -> list[AckResult]:
        """Acknowledge records (contiguous offsets go as one range)."""
        by_partition: dict[tuple[str, str, int], list[int]] = {}
        for r in records:
            by_partition.setdefault((r.topic, r.topic_id, r.partition), []).append(r.offset)
        req = spb.ShareAcknowledgeRequest(group_id=self.group_id, member_id=self.member_id)
        for (_name, topic_id, p), offsets in sorted(by_partition.items()):
            for first, last in _runs(sorted(set(offsets))):
                req.batches.add(topic_id=topic_id, partition=p, first_offset=first, last_offset=last,
                                acknowledge_type=acknowledge_type)
        if not req.batches:
            return []
        resp = self._stub.ShareAcknowledge(req, timeout=self.rpc_timeout_s)
        if resp.error_code:
            self.last_error = (resp.error_code, resp.error_message)
        return [AckResult(self._names.get(r.topic_id, r.topic_id), r.partition, r.first_offset, r.last_offset,
                          r.error_code, r.error_message) for r in resp.results]

    def acknowledge_ranges(self, ranges: Iterable[AcquiredRange], acknowledge_type: int = ACCEPT) -> list[AckResult]:
        """Acknowledge (or RENEW) whole acquired ranges in one request. A top-level error (e.g. this member was
        fenced) comes back as that error on every range."""
        ranges = list(ranges)
        req = spb.ShareAcknowledgeRequest(group_id=self.group_id, member_id=self.member_id)
        for r in ranges:
            req.batches.add(topic_id=r.topic_id, partition=r.partition, first_offset=r.first_offset,
                            last_offset=r.last_offset, acknowledge_type=acknowledge_type)
        if not req.batches:
            return []
        resp = self._stub.ShareAcknowledge(req, timeout=self.rpc_timeout_s)
        if resp.error_code:
            self.last_error = (resp.error_code, resp.error_message)
            return [AckResult(r.topic, r.partition, r.first_offset, r.last_offset, resp.error_code,
                              resp.error_message) for r in ranges]
        return [AckResult(self._names.get(r.topic_id, r.topic_id), r.partition, r.first_offset, r.last_offset,
                          r.error_code, r.error_message) for r in resp.results]

    def close(self, leave: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if leave and self.member_epoch > 0:
            with contextlib.suppress(grpc.RpcError):
                self._stub.ShareGroupHeartbeat(spb.ShareGroupHeartbeatRequest(
                    group_id=self.group_id, member_id=self.member_id, member_epoch=-1), timeout=5)
        if self._consumer is not None:
            self._consumer.close()
        self._channel.close()


def _runs(offsets: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for o in offsets:
        if out and out[-1][1] + 1 == o:
            out[-1] = (out[-1][0], o)
        else:
            out.append((o, o))
    return out
