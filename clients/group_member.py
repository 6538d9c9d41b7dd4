"""A KIP-848 consumer-group member over gRPC: heartbeats, reconciles, calls back, rejoins, leaves.

Usage::

    member = GroupMember("127.0.0.1:50051", "my-group", ["orders"],
                         on_assigned=lambda tps: ..., on_revoked=lambda tps: ...)
    member.start()
    ...  # member.assignment() is what this process may read now
    member.close()  # leaves the group (epoch -1), or -2 for a static member

Thread-safe: a background thread heartbeats; every public method may be called from any thread.
Partitions are `(topic_name, partition)` tuples. Revocation is acknowledged (reported in the next
heartbeat's owned partitions, sent at once) after `on_revoked` returns, or, with `defer_revocation=True`,
when the application calls `release()`: a Spark driver releases a partition only after its last batch's
offsets are committed, so no record is processed by two drivers.

Several coordinators: `target` may list addresses ("host1:50051,host2:50051"). When the coordinator answers
NOT_COORDINATOR (16) or COORDINATOR_NOT_AVAILABLE (15), or cannot be reached, the member asks FindCoordinator
(the current coordinator first, then each address listed or learned) which instance owns the group and
continues there; commits, fetches and the leave heartbeat retry the same way within `rpc_timeout_s`.

Safety (never act on a partition the member may have lost; see `clients/lease.py`):
- A client-side lease: the member's partitions are valid for the coordinator's session timeout (learned
  from each heartbeat response's `session_timeout_ms`) minus a margin, counted from when the last successful
  heartbeat was sent. `assignment()`, `owns()` and `lease_expires_at()` read the monotonic clock themselves,
  so a process resumed after a pause past its lease sees an empty assignment before any thread has run;
  the heartbeat thread then calls `on_lost` and rejoins.
- A slow heartbeat answer is awaited up to half the lease (one heartbeat in flight, as Kafka's consumer):
  the coordinator processes a heartbeat the client gave up on, and a missed answer can fence the member.
- Unreachable coordinator, or 14/15/16: the member keeps its partitions only while the lease holds and
  retries within one heartbeat interval on a fresh channel.
- Any other error (fenced 110, unknown member 25, group unknown 69, a code it does not know): it releases
  first (`on_lost`, empty assignment), then rejoins with epoch 0 after a jittered, bounded backoff. After
  GROUP_ID_NOT_FOUND the coordinator has forgotten the group, and other members may still hold partitions
  under their leases, so it rejoins only after one lease duration.
- A fatal error (`FATAL_ERRORS`, e.g. UNSUPPORTED_ASSIGNOR 112, INVALID_REQUEST 42): it releases, stops, calls
  `on_fatal_error(GroupMemberError)`, and `wait_joined()` raises the error; `fatal_error` keeps it.
- After `close()`, a commit or fetch (even one already retrying) raises `GroupMemberClosedError`.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from groupcoord.clients.credentials import Credentials
from groupcoord.clients.heartbeat_stream import HeartbeatStream
from groupcoord.clients.lease import (
    BACKOFF_BASE_S,
    BACKOFF_MAX_S,
    CHANNEL_OPTIONS,
    LeaseTimers,
    jittered_backoff_s,
    lease_duration_s,
)
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

log = logging.getLogger("groupcoord.client")

TopicPartition = tuple[str, int]
Callback = Callable[[frozenset[TopicPartition]], None]


def _insecure_channel(address: str) -> grpc.Channel:
    return grpc.insecure_channel(address, options=CHANNEL_OPTIONS)

# Kafka error codes the member reacts to.
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
FENCED_INSTANCE_ID = 82
GROUP_ID_NOT_FOUND = 69
GROUP_AUTHORIZATION_FAILED = 30
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
GROUP_MAX_SIZE_REACHED = 81
UNSUPPORTED_ASSIGNOR = 112
INVALID_REGULAR_EXPRESSION = 128
UNKNOWN_SERVER_ERROR = -1
RETRIABLE = {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}
# Configuration errors a retry cannot fix (Kafka's consumer treats them as fatal too).
FATAL_ERRORS = {GROUP_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION, INVALID_REQUEST, GROUP_MAX_SIZE_REACHED,
                FENCED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION}
# Answers after which the member asks FindCoordinator where the group is now.
FIND_COORDINATOR_ON = {COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}
# gRPC failures that mean "this coordinator cannot be reached" (the call is retried elsewhere).
TRANSPORT_ERRORS = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
FIND_COORDINATOR_TIMEOUT_S = 2.0
# The coordinator refuses an OffsetCommit naming more partitions (README "Limits"); larger commits are split.
MAX_PARTITIONS_PER_COMMIT = 2000

R = TypeVar("R")


class GroupMemberError(RuntimeError):
    """A fatal error for this member (e.g. invalid request, unsupported assignor)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"error {code}: {message}")
        self.code = code
        self.message = message


class GroupMemberClosedError(GroupMemberError):
    """A call on a member after `close()`: it has left its group (or let its session run out) and owns nothing.
    Kafka's consumer raises IllegalStateException here; the code is UNKNOWN_MEMBER_ID, what the coordinator
    answers a member that has left."""

    def __init__(self, group_id: str) -> None:
        super().__init__(UNKNOWN_MEMBER_ID, f"the member of group {group_id} is closed")


@dataclass(frozen=True, slots=True)
class _Route:
    """The coordinator the member talks to now; replaced whole when the group moves."""

    address: str
    channel: grpc.Channel
    stub: Any  # GroupCoordinatorStub
    owned: bool  # opened here (closed here); False for a channel the application passed in


@dataclass(frozen=True, slots=True)
class MemberStatus:
    member_id: str
    member_epoch: int
    assignment: frozenset[TopicPartition]
    pending_revocation: frozenset[TopicPartition]
    last_error: int


class GroupMember(LeaseTimers):
    def __init__(
        self,
        target: str,
        group_id: str,
        topics: Iterable[str] = (),
        *,
        topic_regex: str | None = None,
        instance_id: str | None = None,
        rack_id: str | None = None,
        server_assignor: str | None = None,
        rebalance_timeout_ms: int = 60_000,
        on_assigned: Callback | None = None,
        on_revoked: Callback | None = None,
        on_lost: Callback | None = None,
        on_fatal_error: Callable[[GroupMemberError], None] | None = None,
        defer_revocation: bool = False,
        channel: grpc.Channel | None = None,
        rpc_timeout_s: float = 10.0,
        channel_factory: Callable[[str], grpc.Channel] | None = None,
        credentials: Credentials | None = None,
        heartbeat_stream: bool = True,
    ) -> None:
        self.group_id = group_id
        self._topics = tuple(sorted(set(topics)))
        self._regex = topic_regex
        if not self._topics and topic_regex is None:
            raise ValueError("subscribe to topics or a topic_regex")
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.server_assignor = server_assignor
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._on_lost = on_lost
        self._on_fatal_error = on_fatal_error
        self._defer_revocation = defer_revocation
        # Channels to coordinators FindCoordinator names are opened with `channel_factory`; by default with
        # `credentials` (TLS, client certificate, bearer token: clients/credentials.py), else plaintext.
        if channel_factory is None and credentials is not None:
            channel_factory = functools.partial(credentials.channel, options=CHANNEL_OPTIONS)
        self._channel_factory = channel_factory or _insecure_channel
        # Addresses to ask FindCoordinator: those given, then every coordinator learned since.
        self._known = [a.strip() for a in target.split(",") if a.strip()]
        if not self._known and channel is None:
            raise ValueError("target names no coordinator address")
        first = self._known[0] if self._known else target
        ch = channel or self._channel_factory(first)
        self._route = _Route(first, ch, pb_grpc.GroupCoordinatorStub(ch), channel is None)
        self._route_lock = threading.Lock()
        self._rpc_timeout_s = rpc_timeout_s
        # Heartbeats go on one ConsumerGroupHeartbeatStream per route (clients/heartbeat_stream.py), each with
        # its own deadline; False: unary ConsumerGroupHeartbeat calls. Used by the member thread only.
        self._use_stream = heartbeat_stream
        self._stream: HeartbeatStream | None = None

        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._closed = False  # set by close() once its leave is sent; later calls raise GroupMemberClosedError
        self._thread: threading.Thread | None = None
        self.member_id = str(uuid.uuid4())
        self.member_epoch = 0
        self._owned: set[TopicPartition] = set()
        self._pending_revocation: set[TopicPartition] = set()
        self._topic_names: dict[str, str] = {}  # topic id -> name
        self._topic_ids: dict[str, str] = {}  # name -> topic id
        self._send_full = True
        self._subscription_changed = True
        # bumped by subscribe(): a heartbeat built before a change must not clear `_subscription_changed`
        self._subscription_version = 0
        self._built_subscription_version = 0
        self._last_sent_owned: frozenset[TopicPartition] | None = None
        self.heartbeat_interval_ms = 1000
        self.session_timeout_ms = 0  # the coordinator's, from its heartbeat responses (0: not known yet)
        self._lease_start: float | None = None  # time.monotonic() when the last successful heartbeat was sent
        self._failures = 0  # consecutive failed heartbeats
        self._rejoin_not_before = 0.0  # time.monotonic(): hold the rejoin until then (after the group was lost)
        self.last_error = NONE
        self.fatal_error: GroupMemberError | None = None
        self.heartbeats = 0
        self._joined = threading.Event()

    # --- public API ----------------------------------------------------------------------------------------
    def start(self) -> GroupMember:
        self._thread = threading.Thread(target=self._run, name=f"groupcoord-member-{self.group_id}", daemon=True)
        self._thread.start()
        return self

    def wait_joined(self, timeout: float = 30.0) -> bool:
        """Block until the first successful heartbeat (the member has an epoch). Raises the member's
        `GroupMemberError` if it stopped on a fatal error."""
        joined = self._joined.wait(timeout)
        if self.fatal_error is not None:
            raise self.fatal_error
        return joined

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions this member may process now: owned, not being revoked, and under a valid lease
        (checked here against the monotonic clock, not by a thread that may not have run yet)."""
        with self._lock:
            if not self._lease_valid_locked(time.monotonic()):
                if self._owned:
                    self._wake.set()  # the heartbeat thread calls on_lost and rejoins
                return frozenset()
            return frozenset(self._owned - self._pending_revocation)

    def owns(self, tp: TopicPartition) -> bool:
        """May this process act on `tp` now? (Lease-aware, like `assignment()`.)"""
        return tp in self.assignment()

    def lease_expires_at(self) -> float | None:
        """The `time.monotonic()` at which this member's partitions count as lost unless a heartbeat succeeds
        first; None while it holds none."""
        with self._lock:
            if not self._owned or self._lease_start is None:
                return None
            return self._lease_start + lease_duration_s(self.session_timeout_ms, self.heartbeat_interval_ms)

    def _lease_valid_locked(self, now: float) -> bool:
        expires = self.lease_expires_at()
        return expires is not None and now < expires

    def pending_revocation(self) -> frozenset[TopicPartition]:
        """Partitions the coordinator asked back that the application has not released yet."""
        with self._lock:
            return frozenset(self._pending_revocation)

    def status(self) -> MemberStatus:
        with self._lock:
            return MemberStatus(self.member_id, self.member_epoch, self.assignment(),
                                frozenset(self._pending_revocation), self.last_error)

    def release(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Acknowledge revocation of `partitions` (default: all pending); heartbeats at once to report it."""
        with self._lock:
            done = set(self._pending_revocation if partitions is None else partitions) & self._pending_revocation
            self._pending_revocation -= done
            self._owned -= done
        if done:
            self._wake.set()

    def subscribe(self, topics: Iterable[str]) -> None:
        with self._lock:
            self._topics = tuple(sorted(set(topics)))
            self._regex = None
            self._subscription_changed = True
            self._subscription_version += 1
        self._wake.set()

    def commit_offsets(self, offsets: dict[TopicPartition, int], metadata: str = "", *,
                       membership: tuple[str, int] | None = None) -> dict[TopicPartition, int]:
        """Commit offsets (next offset to read) with this member's epoch; returns per-partition error codes.

        `membership` (member id, epoch) commits as the member was at that time, e.g. when a batch was planned:
        the coordinator accepts it only for partitions held without a break since that epoch, so work planned
        before a loss and a quick rejoin is refused instead of being committed under the new membership.
        Large commits go in requests of MAX_PARTITIONS_PER_COMMIT (the coordinator's documented cap).
        """
        if membership is None:
            with self._lock:
                membership = (self.member_id, self.member_epoch)
        member_id, epoch = membership
        items = sorted(offsets.items())
        errors: dict[TopicPartition, int] = {}
        for start in range(0, len(items), MAX_PARTITIONS_PER_COMMIT):
            req = pb.OffsetCommitRequest(group_id=self.group_id, member_id=member_id,
                                         generation_id_or_member_epoch=epoch)
            by_topic: dict[str, pb.OffsetCommitRequestTopic] = {}
            for (topic, p), off in items[start:start + MAX_PARTITIONS_PER_COMMIT]:
                t = by_topic.get(topic)
                if t is None:
                    t = by_topic[topic] = req.topics.add(name=topic)
                t.partitions.add(partition_index=p, committed_offset=off, committed_leader_epoch=-1,
                                 committed_metadata=metadata)
            resp = self._call(functools.partial(_offset_commit, req))
            errors.update({(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions})
        return errors

    def fetch_offsets(self, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Committed offsets (-1 when none) for `partitions`, or all of the group's."""
        req = pb.OffsetFetchRequest(group_id=self.group_id, member_epoch=-1)
        if partitions is not None:
            wanted: dict[str, list[int]] = {}
            for topic, p in partitions:
                wanted.setdefault(topic, []).append(p)
            req.topics.SetInParent()
            for topic, ps in sorted(wanted.items()):
                req.topics.topics.add(name=topic, partition_indexes=sorted(ps))
        resp = self._call(lambda stub, timeout: stub.OffsetFetch(req, timeout=timeout))
        if resp.error_code:
            raise GroupMemberError(resp.error_code, resp.error_message)
        return {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions}

    def close(self, leave: bool = True) -> None:
        """Stop heartbeating and leave the group (epoch -1; -2 for a static member, which keeps its
        assignment for a rejoin within the session timeout)."""
        self._stopping.set()
        self._wake.set()
        stream = self._stream
        if stream is not None:
            stream.close()  # ends a wait for a slow answer now, rather than up to half the lease
        if self._thread is not None:
            self._thread.join(timeout=self._rpc_timeout_s + 5)
        # Revoke before leaving: once the coordinator has the leave, it may hand the partitions to others
        # before the answer gets back here.
        with self._lock:
            lost = frozenset(self._owned)
            self._owned.clear()
            self._pending_revocation.clear()
            epoch_held = self.member_epoch
            self.member_epoch = 0
        if lost and self._on_revoked is not None:
            self._safe(self._on_revoked, lost)
        if leave and epoch_held > 0:
            epoch = -2 if self.instance_id is not None else -1
            req = pb.ConsumerGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                                   member_epoch=epoch)
            if self.instance_id is not None:
                req.instance_id = self.instance_id
            try:
                self._call(lambda stub, timeout: stub.ConsumerGroupHeartbeat(req, timeout=timeout))
            except grpc.RpcError as e:
                log.warning("leave of group %s failed: %s", self.group_id, e)
        self._closed = True
        route = self._route
        if route.owned:
            route.channel.close()

    def __enter__(self) -> GroupMember:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- heartbeat loop ------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._loop()
        except Exception as e:  # a bug: never stop silently while claiming partitions
            log.exception("member of group %s failed", self.group_id)
            self._fail(GroupMemberError(UNKNOWN_SERVER_ERROR, f"member thread failed: {type(e).__name__}"))

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._expire_lease()
            hold = self._rejoin_not_before - time.monotonic()
            if hold > 0:
                self._stopping.wait(hold)
                continue
            route = self._route
            try:
                delay = self._heartbeat_once()
            except grpc.RpcError as e:
                self._drop_stream()
                if self._stopping.is_set():
                    break  # close() cancelled the heartbeat in flight
                self._failures += 1
                with self._lock:
                    self._send_full = True
                moved = False
                if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:  # overloaded: same channel, longer backoff
                    delay = self._overload_delay()
                else:
                    if e.code() in TRANSPORT_ERRORS:
                        self._reconnect(route)
                        several = len(self._known) > 1 or route.address not in self._known
                        moved = several and self._find_coordinator(self._route)
                    delay = 0.0 if moved else self._retry_delay()
                log.info("heartbeat to group %s failed: %s; retrying in %.3f s", self.group_id, e.code().name,
                         delay)
            except GroupMemberError as e:
                self._drop_stream()
                self._fail(e)
                return
            self._wake.wait(self._until_lease_end(delay))
            self._wake.clear()
        self._drop_stream()

    def _drop_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _send_heartbeat(self, route: _Route, req: pb.ConsumerGroupHeartbeatRequest) -> Any:
        """On the route's heartbeat stream (a new one after a failure or a move), or as a unary call."""
        timeout = self._answer_deadline(req.member_epoch)
        if not self._use_stream:
            return route.stub.ConsumerGroupHeartbeat(req, timeout=timeout)
        if self._stream is not None and (self._stream.broken or self._stream.stub is not route.stub):
            self._drop_stream()
        if self._stream is None:
            self._stream = HeartbeatStream(route.stub)
        return self._stream.call(req, timeout=timeout)

    def _answer_deadline(self, epoch: int) -> float:
        """How long a member (epoch > 0) waits for its heartbeat's answer: half its lease, never past its end.

        The coordinator processes a heartbeat the client gave up on, and its answer may move the member's epoch
        unseen. Kafka tolerates one missed answer, and only if the member's owned partitions are a subset of its
        assignment: a missed step of a revocation, or two missed answers in a row, fence the member
        (FENCED_MEMBER_EPOCH, "epoch N is stale (current N+1 or N+2)"). So, as Kafka's consumer waits for its one
        heartbeat in flight (request.timeout.ms), a slow answer is awaited; half the lease still leaves time for
        a retry on a fresh channel when the connection died. A join (epoch 0) keeps the short deadline: a lost
        join answer costs nothing."""
        deadline = self._heartbeat_deadline()
        if epoch <= 0:
            return deadline
        with self._lock:
            lease = lease_duration_s(self.session_timeout_ms, self.heartbeat_interval_ms)
        patient = min(self._rpc_timeout_s, lease / 2)
        expires = self.lease_expires_at()
        if expires is not None:
            patient = min(patient, max(expires - time.monotonic(), 0.05))
        return max(deadline, patient)

    def _fail(self, error: GroupMemberError) -> None:
        """Release first, then surface the error (callback, `fatal_error`, `wait_joined` raises)."""
        log.error("member of group %s stopped: %s", self.group_id, error)
        self._lose_all()
        self.fatal_error = error
        self._joined.set()
        if self._on_fatal_error is not None:
            try:
                self._on_fatal_error(error)
            except Exception:
                log.exception("on_fatal_error callback failed")

    def _expire_lease(self) -> None:
        with self._lock:
            expired = bool(self._owned) and not self._lease_valid_locked(time.monotonic())
        if expired:
            log.warning("member %s of group %s: no successful heartbeat within its lease; partitions lost",
                        self.member_id, self.group_id)
            self._lose_all()

    def _reconnect(self, failed: _Route) -> None:
        """Replace a channel this member opened after a transport failure: a fresh channel connects on the next
        call instead of waiting out gRPC's reconnect backoff, and drops a connection that went silent."""
        if not failed.owned:
            return
        with self._route_lock:
            if self._route is not failed:
                return
            channel = self._channel_factory(failed.address)
            self._route = _Route(failed.address, channel, pb_grpc.GroupCoordinatorStub(channel), True)
        failed.channel.close()

    def _build_request(self) -> pb.ConsumerGroupHeartbeatRequest:
        with self._lock:
            req = pb.ConsumerGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                                   member_epoch=self.member_epoch)
            full = self._send_full or self.member_epoch == 0
            if full or self._subscription_changed:
                self._built_subscription_version = self._subscription_version
                req.rebalance_timeout_ms = self.rebalance_timeout_ms
                if self._regex is not None:
                    req.subscribed_topic_regex = self._regex
                else:
                    req.subscribed_topic_names.values.extend(self._topics)
                if self.instance_id is not None:
                    req.instance_id = self.instance_id
                if self.rack_id is not None:
                    req.rack_id = self.rack_id
                if self.server_assignor is not None:
                    req.server_assignor = self.server_assignor
            owned = frozenset(self._owned)
            if full or owned != self._last_sent_owned:
                req.topic_partitions.SetInParent()
                if self.member_epoch != 0:
                    by_topic: dict[str, list[int]] = {}
                    for topic, p in owned:
                        tid = self._topic_ids.get(topic)
                        if tid is not None:
                            by_topic.setdefault(tid, []).append(p)
                    for tid, ps in sorted(by_topic.items()):
                        req.topic_partitions.topics.add(topic_id=tid, partitions=sorted(ps))
            return req

    def _heartbeat_once(self) -> float:
        req = self._build_request()
        route = self._route
        sent = time.monotonic()
        resp = self._send_heartbeat(route, req)
        self.heartbeats += 1
        code = resp.error_code
        with self._lock:
            self.last_error = code
        if code == NONE:
            self._failures = 0
            return self._on_success(req, resp, sent)
        self._failures += 1
        if code in RETRIABLE or code == UNRELEASED_INSTANCE_ID:
            # The member may still own its partitions: keep them while the lease holds.
            with self._lock:
                self._send_full = True
            if code in FIND_COORDINATOR_ON and self._find_coordinator(route):
                return 0.0
            return max(self.heartbeat_interval_ms / 1000.0, 0.2) if code == UNRELEASED_INSTANCE_ID \
                else self._retry_delay()
        if code in FATAL_ERRORS:
            raise GroupMemberError(code, resp.error_message[:200])
        # Fenced, unknown, forgotten, or an error this client does not know: release first, then rejoin.
        log.warning("member %s of group %s: heartbeat answered %d (%s); releasing and rejoining", self.member_id,
                    self.group_id, code, resp.error_message[:200])
        with self._lock:
            hold = lease_duration_s(self.session_timeout_ms, self.heartbeat_interval_ms)
        self._lose_all()
        if code == GROUP_ID_NOT_FOUND and req.member_epoch > 0:
            # The coordinator forgot the group: other members may still act on partitions under leases that
            # began before it did, so take new ones only once those have run out.
            self._rejoin_not_before = time.monotonic() + hold
        if self._failures <= 1:
            return 0.0
        return jittered_backoff_s(self._failures - 1, BACKOFF_BASE_S, BACKOFF_MAX_S)

    def _on_success(self, req: pb.ConsumerGroupHeartbeatRequest, resp: pb.ConsumerGroupHeartbeatResponse,
                    sent: float) -> float:
        added: frozenset[TopicPartition] = frozenset()
        revoked: frozenset[TopicPartition] = frozenset()
        with self._lock:
            self._send_full = False
            if req.HasField("rebalance_timeout_ms") and self._built_subscription_version == self._subscription_version:
                self._subscription_changed = False  # the coordinator has the current subscription
            if req.HasField("topic_partitions"):
                self._last_sent_owned = frozenset(
                    (self._topic_names.get(t.topic_id, ""), p) for t in req.topic_partitions.topics
                    for p in t.partitions)
                if req.member_epoch == 0:
                    self._last_sent_owned = frozenset()
            self.member_epoch = resp.member_epoch
            self.member_id = resp.member_id or self.member_id
            self.heartbeat_interval_ms = resp.heartbeat_interval_ms or self.heartbeat_interval_ms
            self.session_timeout_ms = resp.session_timeout_ms or self.session_timeout_ms
            self._lease_start = sent  # the coordinator's session timer restarted after this
            if resp.HasField("assignment"):
                target: set[TopicPartition] = set()
                for tp in resp.assignment.topic_partitions:
                    name = tp.topic_name or self._topic_names.get(tp.topic_id, tp.topic_id)
                    self._topic_names[tp.topic_id] = name
                    self._topic_ids[name] = tp.topic_id
                    target.update((name, p) for p in tp.partitions)
                added = frozenset(target - self._owned)
                revoked = frozenset(self._owned - target - self._pending_revocation)
                self._owned |= added
                self._pending_revocation |= revoked
        self._joined.set()
        if added and self._on_assigned is not None:
            self._safe(self._on_assigned, added)
        if revoked:
            if self._on_revoked is not None:
                self._safe(self._on_revoked, revoked)
            if not self._defer_revocation:
                self.release(revoked)
        with self._lock:
            owned_changed = frozenset(self._owned) != self._last_sent_owned
        if owned_changed:
            return 0.0  # report the change at once: the coordinator is waiting for it
        return self.heartbeat_interval_ms / 1000.0

    def _lose_all(self) -> None:
        with self._lock:
            lost = frozenset(self._owned)
            self._owned.clear()
            self._pending_revocation.clear()
            self.member_epoch = 0
            self._send_full = True
            self._last_sent_owned = None
            self._lease_start = None
        if lost and self._on_lost is not None:
            self._safe(self._on_lost, lost)

    # --- finding the coordinator -----------------------------------------------------------------------------
    def _call(self, rpc: Callable[[Any, float], R]) -> R:
        """`rpc(stub, timeout)` on the coordinator; where the group is elsewhere (15, 16) or the coordinator is
        unreachable, find the owner and call again, until `rpc_timeout_s` has passed since the first try."""
        deadline = time.monotonic() + self._rpc_timeout_s
        backoff = 0.05
        while True:
            if self._closed:
                raise GroupMemberClosedError(self.group_id)
            route = self._route
            remaining = deadline - time.monotonic()
            try:
                resp = rpc(route.stub, max(remaining, 0.05))
            except ValueError:  # grpc's "Cannot invoke RPC: Channel closed!": close() ran meanwhile
                if self._closed:
                    raise GroupMemberClosedError(self.group_id) from None
                raise
            except grpc.RpcError as e:
                overloaded = e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                if (e.code() not in TRANSPORT_ERRORS and not overloaded) or time.monotonic() >= deadline:
                    raise
                if overloaded:  # the same coordinator, later: jittered, so refused callers spread out
                    time.sleep(max(0.0, min(random.uniform(backoff, 2 * backoff), deadline - time.monotonic())))
                    backoff = min(backoff * 2, 1.0)
                    continue
            else:
                if getattr(resp, "error_code", NONE) not in RETRIABLE or time.monotonic() >= deadline:
                    return resp
            if not self._find_coordinator(route):
                time.sleep(max(0.0, min(backoff, deadline - time.monotonic())))
                backoff = min(backoff * 2, 1.0)

    def _find_coordinator(self, failed: _Route) -> bool:
        """Ask FindCoordinator on the current coordinator, then on each known address, which instance coordinates
        the group, and switch to it. True if the member now talks to another coordinator."""
        with self._route_lock:
            if self._route is not failed:  # another thread switched meanwhile
                return True
            for address in [failed.address, *(a for a in self._known if a != failed.address)]:
                owner = self._ask_coordinator(address, failed)
                if owner is None:
                    continue
                if owner == failed.address:
                    return False
                channel = self._channel_factory(owner)
                self._route = _Route(owner, channel, pb_grpc.GroupCoordinatorStub(channel), True)
                if owner not in self._known:
                    self._known.append(owner)
                log.info("group %s: coordinator moved from %s to %s", self.group_id, failed.address, owner)
                if failed.owned:
                    failed.channel.close()
                return True
            return False

    def _ask_coordinator(self, address: str, current: _Route) -> str | None:
        """The owner FindCoordinator at `address` names for the group, as HOST:PORT; None if it cannot say."""
        channel = current.channel if address == current.address else self._channel_factory(address)
        try:
            resp = pb_grpc.GroupCoordinatorStub(channel).FindCoordinator(
                pb.FindCoordinatorRequest(keys=[self.group_id]),
                timeout=min(self._rpc_timeout_s, FIND_COORDINATOR_TIMEOUT_S, self._heartbeat_deadline()))
        except grpc.RpcError:
            return None
        finally:
            if channel is not current.channel:
                channel.close()
        for c in resp.coordinators:
            if c.key == self.group_id and c.error_code == NONE and c.host and c.port:
                return f"[{c.host}]:{c.port}" if ":" in c.host else f"{c.host}:{c.port}"
        return None

    def _safe(self, cb: Callback, tps: frozenset[TopicPartition]) -> None:
        try:
            cb(tps)
        except Exception:
            log.exception("callback %s failed for %s", getattr(cb, "__name__", cb), sorted(tps))


def _offset_commit(req: pb.OffsetCommitRequest, stub: Any, timeout: float) -> pb.OffsetCommitResponse:
    return stub.OffsetCommit(req, timeout=timeout)
