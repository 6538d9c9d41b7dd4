"""A classic-protocol (JoinGroup/SyncGroup) group member over gRPC, and the consumer built on it.

`ClassicMembership` is the generic member of the seed: it joins, and when the coordinator makes it the leader
it computes every member's state; it syncs, heartbeats, and rejoins when told to. What the metadata and the
state bytes mean is left to a protocol type (hooks `_protocols`, `_assign`, `_on_synced`, ...):

- `ClassicGroupMember` (protocol type "consumer"): subscriptions and partition assignments in Kafka's
  consumer embedded protocol (`consumer_protocol.py`); the leader runs the chosen assignor from `assignors/`
  (range, roundrobin, cooperative-sticky, lag). Eager rebalancing revokes everything before rejoining;
  cooperative (KIP-429; every configured assignor must support it) keeps the partitions across the
  rebalance, revokes only those that move, and then rejoins for the follow-up rebalance that hands them on.
- `groupcoord.clients.leader_election.LeaderElection` (protocol type "leader"): single-writer election.

Usage::

    member = ClassicGroupMember("127.0.0.1:50051", "my-group", ["orders"], partitions={"orders": 24},
                                on_assigned=..., on_revoked=...)
    member.start()
    ...  # member.assignment() is what this process may read now
    member.close()  # LeaveGroup (a static member just stops, keeping its place for a restart)

One background thread per member runs the protocol; every public method may be called from any thread.
A JoinGroup or a follower's SyncGroup waits at the coordinator until the rebalance completes; the coordinator
counts a member parked there as alive, so no heartbeats are needed meanwhile.

Safety (as `GroupMember`; see `clients/lease.py`): the member's lease runs from when its last successful
Heartbeat, JoinGroup or SyncGroup was sent, for the session timeout it sends in JoinGroup minus the margin.
`assignment()` and `lease_valid()` read the monotonic clock themselves; the protocol thread calls `on_lost`
and rejoins when the lease runs out. An unreachable coordinator or 14/15/16: partitions kept only while the
lease holds. Any other error releases first, then rejoins with a jittered, bounded backoff; a fatal one
(`FATAL_ERRORS`) releases, stops, calls `on_fatal_error`, and `wait_stable()` raises it. A JoinGroup or
SyncGroup the coordinator holds (up to the rebalance timeout) does not hold `on_lost` back: the thread waits
for the answer only until the lease ends, releases, then waits on (`_call`).
"""

from __future__ import annotations

import abc
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

import grpc

from groupcoord.assignors.api import PartitionOffsets
from groupcoord.assignors.classic import COOPERATIVE, ClassicSubscription, get_classic_assignor
from groupcoord.clients.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    TopicPartition,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from groupcoord.clients.credentials import NO_CREDENTIALS, Credentials
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

log = logging.getLogger("groupcoord.classic")

Callback = Callable[[frozenset[TopicPartition]], None]
LagSource = Callable[[Sequence[TopicPartition]], Mapping[TopicPartition, PartitionOffsets]]

# Kafka error codes the member reacts to.
NONE = 0
UNKNOWN_SERVER_ERROR = -1
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
INVALID_SESSION_TIMEOUT = 26
GROUP_AUTHORIZATION_FAILED = 30
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
GROUP_MAX_SIZE_REACHED = 81
RETRIABLE = frozenset({COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR})
# Configuration errors a retry cannot fix: release, stop, report.
FATAL_ERRORS = frozenset({INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, GROUP_AUTHORIZATION_FAILED,
                          UNSUPPORTED_VERSION, INVALID_REQUEST, GROUP_MAX_SIZE_REACHED, FENCED_INSTANCE_ID})
# The coordinator's gRPC metadata key for a leader that could not compute the assignment (SyncGroupRequest has
# no field for it): the generation is invalidated and the other members rejoin.
ASSIGNMENT_ERROR_METADATA_KEY = "groupcoord-assignment-error"


class ClassicMemberError(RuntimeError):
    """A fatal error for this member (e.g. incompatible protocols, fenced static instance)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"error {code}: {message}")
        self.code = code
        self.message = message


class AssignmentError(Exception):
    """The leader could not compute the assignment; `code` is reported to the coordinator."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Phase(enum.Enum):
    UNJOINED = "UNJOINED"
    JOINING = "JOINING"
    SYNCING = "SYNCING"
    STABLE = "STABLE"


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """A member as the leader sees it in its JoinGroup response."""

    member_id: str
    instance_id: str | None
    metadata: bytes


class ClassicMembership(LeaseTimers, abc.ABC):
    """The generic classic-protocol member; subclasses give the protocol type its meaning."""

    protocol_type: str = ""

    def __init__(self, target: str, group_id: str, *, instance_id: str | None = None,
                 session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 30_000,
                 heartbeat_interval_ms: int = 3_000, channel: grpc.Channel | None = None,
                 rpc_timeout_s: float = 10.0,
                 on_fatal_error: Callable[[ClassicMemberError], None] | None = None,
                 credentials: Credentials | None = None) -> None:
        self.group_id = group_id
        self._credentials = credentials or NO_CREDENTIALS  # TLS, certificate, token (clients/credentials.py)
        self._target = target
        self._on_fatal_error = on_fatal_error
        self.instance_id = instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self._own_channel = channel is None
        self._channel = channel or self._credentials.channel(target, CHANNEL_OPTIONS)
        self._stub = pb_grpc.GroupCoordinatorStub(self._channel)
        self._rpc_timeout_s = rpc_timeout_s
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._stable = threading.Event()
        self._thread: threading.Thread | None = None
        self.member_id = ""
        self.generation = -1
        self.leader_id = ""
        self.protocol_name: str | None = None
        self.phase = Phase.UNJOINED
        self._need_join = True
        self._rejoin_requests = 0  # request_rejoin() calls: one arriving during a rebalance is not lost
        self._inflight: Any = None  # the grpc future the protocol thread waits on
        # time.monotonic() when the last successful heartbeat/join/sync was *sent*; None: no lease
        self._last_ok: float | None = None
        self._failures = 0
        self.fatal_error: ClassicMemberError | None = None
        self.rebalances = 0

    # --- hooks ---------------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def _protocols(self) -> list[tuple[str, bytes]]:
        """The (protocol name, metadata) pairs this member supports, in preference order."""

    def _prepare_join(self) -> None:
        """Called before every JoinGroup (eager consumers revoke here, a writer steps down)."""
        return None  # optional hook: nothing to do by default

    @abc.abstractmethod
    def _assign(self, protocol_name: str, members: list[JoinedMember]) -> dict[str, bytes]:
        """Leader only: every member's state. Raise `AssignmentError` to invalidate the generation."""

    @abc.abstractmethod
    def _on_synced(self, protocol_name: str, state: bytes) -> bool:
        """This member's state for the new generation; True asks for another rebalance at once."""

    def _on_lost(self) -> None:
        """The generation is gone (fenced, removed, unknown): drop whatever it gave this member."""
        return None  # optional hook: nothing to do by default

    def _on_close(self) -> None:
        """The member is closing (before its LeaveGroup): give back what it holds. Not called by `kill`."""
        return None  # optional hook: nothing to do by default

    # --- public API ------------------------------------------------------------------------------------------------
    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name=f"groupcoord-classic-{self.group_id}", daemon=True)
        self._thread.start()
        return self

    def wait_stable(self, timeout: float = 30.0) -> bool:
        """Block until the member has completed a rebalance (it has a generation and its state). Raises the
        `ClassicMemberError` the member stopped on, if any."""
        stable = self._stable.wait(timeout)
        if self.fatal_error is not None:
            raise self.fatal_error
        return stable

    def is_leader(self) -> bool:
        with self._lock:
            return self.phase is Phase.STABLE and bool(self.member_id) and self.leader_id == self.member_id

    def request_rejoin(self) -> None:
        """Rejoin now (the leader uses this when something only it can see, such as topic metadata, changed)."""
        with self._lock:
            self._need_join = True
            self._rejoin_requests += 1
        self._wake.set()

    def close(self, leave: bool = True) -> None:
        """Stop; a dynamic member leaves the group (LeaveGroup), so the rest rebalance at once. A static member
        never leaves on close (KIP-345): a restart within the session timeout gets its place back."""
        self._stopping.set()
        self._wake.set()
        self._on_close()  # revoke before leaving: once it has left, others may be given what it held
        with self._lock:
            member_id = self.member_id
        if leave and member_id and self.instance_id is None:
            identity = pb.MemberIdentity(member_id=member_id, reason="the member is closing")
            try:
                self._stub.LeaveGroup(pb.LeaveGroupRequest(group_id=self.group_id, members=[identity]),
                                      timeout=self._rpc_timeout_s)
            except grpc.RpcError as e:
                log.warning("leave of group %s failed: %s", self.group_id, e.code())
        self._cancel_inflight()
        self._stop_thread()

    def kill(self) -> None:
        """Stop like a crashed process: no LeaveGroup, in-flight calls cut; the session timeout notices."""
        self._stopping.set()
        self._wake.set()
        self._cancel_inflight()
        self._stop_thread()

    def _cancel_inflight(self) -> None:
        """Cut the call the protocol thread waits in (a JoinGroup may be parked for a rebalance timeout)."""
        with self._lock:
            inflight = self._inflight
        if inflight is not None:
            inflight.cancel()

    def _call(self, method: Any, request: Any, timeout: float, metadata: list[tuple[str, str]] | None = None) -> Any:
        """The call's answer; if the lease runs out while it waits, release first (`on_lost`), then keep waiting.
        A JoinGroup or SyncGroup may wait up to the rebalance timeout: on a cut link its answer never comes, and
        the coordinator gives the member's partitions away one session after its last heartbeat, before the call's
        deadline (the Kafka-backed fault suite: `on_lost` 0.5 s after another member was assigned them)."""
        future = method.future(request, timeout=timeout, metadata=metadata or None)
        with self._lock:
            self._inflight = future
        try:
            if self._stopping.is_set():
                future.cancel()
            while True:
                expires = self.lease_expires_at()
                try:
                    return future.result(timeout=None if expires is None else max(0.0, expires - time.monotonic()))
                except grpc.FutureTimeoutError:
                    self._expire_lease()
        finally:
            with self._lock:
                self._inflight = None

    def _stop_thread(self) -> None:
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.rebalance_timeout_ms / 1000 + self._rpc_timeout_s + 5)
        with self._lock:
            self.phase = Phase.UNJOINED
        if self._own_channel:
            self._channel.close()

    # --- the protocol loop -----------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._loop()
        except Exception as e:  # a bug: never stop silently while holding anything
            log.exception("member %s of group %s failed", self.member_id, self.group_id)
            self._fail(ClassicMemberError(UNKNOWN_SERVER_ERROR, f"member thread failed: {type(e).__name__}"))

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._expire_lease()
            try:
                with self._lock:
                    need_join = self._need_join
                delay = self._join_and_sync() if need_join else self._heartbeat_once()
            except (grpc.RpcError, grpc.FutureCancelledError) as e:
                if self._stopping.is_set():
                    return
                self._failures += 1
                code = e.code() if isinstance(e, grpc.RpcError) else "cancelled"
                log.info("member %s of group %s: %s; retrying", self.member_id, self.group_id, code)
                if isinstance(e, grpc.RpcError):
                    self._reconnect()
                delay = self._retry_delay()
            except ClassicMemberError as e:
                self._fail(e)
                return
            if delay > 0:
                self._wake.wait(self._until_lease_end(delay))
                self._wake.clear()

    def _fail(self, error: ClassicMemberError) -> None:
        """Release first, then surface the error."""
        log.error("member %s of group %s stopped: %s", self.member_id, self.group_id, error)
        self.fatal_error = error
        self._lose()
        self._stable.set()  # wake wait_stable, which raises
        if self._on_fatal_error is not None:
            try:
                self._on_fatal_error(error)
            except Exception:
                log.exception("on_fatal_error callback failed")

    def lease_expires_at(self) -> float | None:
        """The `time.monotonic()` at which what this member holds counts as lost unless a heartbeat succeeds."""
        with self._lock:
            if self._last_ok is None:
                return None
            return self._last_ok + lease_duration_s(self.session_timeout_ms, self.heartbeat_interval_ms)

    def _expire_lease(self) -> None:
        expires = self.lease_expires_at()
        if expires is not None and time.monotonic() >= expires:
            log.warning("member %s of group %s: no successful heartbeat within its lease; rejoining",
                        self.member_id, self.group_id)
            self._lose()
            with self._lock:
                self._need_join = True

    def _reconnect(self) -> None:
        """A fresh channel after a transport failure: it connects on the next call instead of waiting out
        gRPC's reconnect backoff, and drops a connection that went silent."""
        if not self._own_channel or self._stopping.is_set():
            return
        with self._lock:
            old = self._channel
            self._channel = self._credentials.channel(self._target, CHANNEL_OPTIONS)
            self._stub = pb_grpc.GroupCoordinatorStub(self._channel)
        old.close()

    def _join_and_sync(self) -> float:
        with self._lock:
            starting = self.phase is not Phase.JOINING
            if starting:
                self.phase = Phase.JOINING
                self._stable.clear()
        if starting:
            self._prepare_join()
        with self._lock:
            request = pb.JoinGroupRequest(
                group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
                protocol_type=self.protocol_type,
                protocols=[pb.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in self._protocols()])
            if self.instance_id is not None:
                request.group_instance_id = self.instance_id
            rejoin_requests = self._rejoin_requests
        if self._stopping.is_set():
            return 0.0
        sent = time.monotonic()
        response = self._call(self._stub.JoinGroup, request, self.rebalance_timeout_ms / 1000 + self._rpc_timeout_s)
        code = response.error_code
        if code == MEMBER_ID_REQUIRED:
            with self._lock:
                self.member_id = response.member_id
            return 0.0
        if code != NONE:
            return self._on_error("JoinGroup", code, response.error_message)
        with self._lock:
            self.member_id = response.member_id
            self.generation = response.generation_id
            self.leader_id = response.leader
            self.protocol_name = response.protocol_name if response.HasField("protocol_name") else None
            self.phase = Phase.SYNCING
            if self._last_ok is not None:
                self._last_ok = sent  # the coordinator restarts the session timer when the join completes
        return self._sync(response, rejoin_requests)

    def _sync(self, joined: pb.JoinGroupResponse, rejoin_requests: int) -> float:
        protocol = self.protocol_name or ""
        request = pb.SyncGroupRequest(group_id=self.group_id, generation_id=joined.generation_id,
                                      member_id=joined.member_id, protocol_type=self.protocol_type,
                                      protocol_name=protocol)
        if self.instance_id is not None:
            request.group_instance_id = self.instance_id
        metadata: list[tuple[str, str]] = []
        if joined.leader == joined.member_id and not joined.skip_assignment:
            members = [JoinedMember(m.member_id, m.group_instance_id if m.HasField("group_instance_id") else None,
                                    bytes(m.metadata)) for m in joined.members]
            try:
                for member_id, state in self._assign(protocol, members).items():
                    request.assignments.add(member_id=member_id, assignment=state)
            except AssignmentError as e:
                log.error("leader %s of group %s could not assign: %s", self.member_id, self.group_id, e)
                metadata.append((ASSIGNMENT_ERROR_METADATA_KEY, str(e.code)))
        sent = time.monotonic()
        response = self._call(self._stub.SyncGroup, request, self.rebalance_timeout_ms / 1000 + self._rpc_timeout_s,
                              metadata)
        if response.error_code != NONE:
            return self._on_error("SyncGroup", response.error_code, response.error_message)
        rejoin = self._on_synced(protocol, bytes(response.assignment))
        with self._lock:
            self.phase = Phase.STABLE
            self._last_ok = sent
            self._failures = 0
            self._need_join = rejoin or self._rejoin_requests != rejoin_requests
            self.rebalances += 1
        self._stable.set()
        return 0.0 if rejoin else self.heartbeat_interval_ms / 1000

    def _heartbeat_once(self) -> float:
        with self._lock:
            request = pb.HeartbeatRequest(group_id=self.group_id, generation_id=self.generation,
                                          member_id=self.member_id)
            if self.instance_id is not None:
                request.group_instance_id = self.instance_id
        sent = time.monotonic()
        response = self._call(self._stub.Heartbeat, request, self._heartbeat_deadline())
        if response.error_code == NONE:
            with self._lock:
                self._last_ok = sent
                self._failures = 0
            return self.heartbeat_interval_ms / 1000
        return self._on_error("Heartbeat", response.error_code, response.error_message)

    def _on_error(self, api: str, code: int, message: str) -> float:
        """What the Kafka client does on each error: rejoin, reset, retry, or give up."""
        if code == REBALANCE_IN_PROGRESS:
            self.request_rejoin()
            return 0.0
        if code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            log.warning("member %s of group %s: %s answered %d (%s); rejoining", self.member_id, self.group_id, api,
                        code, message)
            self._lose()
            with self._lock:
                if code == UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                self.generation = -1
                self._need_join = True
            return 0.0
        if code in RETRIABLE:  # the member may still own what it has: keep it while the lease holds
            self._failures += 1
            return self._retry_delay()
        if code in FATAL_ERRORS:
            raise ClassicMemberError(code, f"{api}: {message[:200]}")
        if api == "SyncGroup":
            # The leader's error, propagated by the coordinator: the generation is invalid, rejoin.
            log.warning("member %s of group %s: SyncGroup failed with %d (%s); rejoining", self.member_id,
                        self.group_id, code, message)
            self.request_rejoin()
            return 0.0
        # An error this client does not know: release first, then rejoin after a backoff.
        log.warning("member %s of group %s: %s answered %d (%s); releasing and rejoining", self.member_id,
                    self.group_id, api, code, message[:200])
        self._failures += 1
        self._lose()
        with self._lock:
            self.generation = -1
            self._need_join = True
        return jittered_backoff_s(self._failures, BACKOFF_BASE_S, BACKOFF_MAX_S)

    def _lose(self) -> None:
        with self._lock:
            self.phase = Phase.UNJOINED
            self._last_ok = None
            self._stable.clear()
        self._on_lost()

    def lease_valid(self) -> bool:
        """True while the coordinator cannot yet have removed this member: its last successful heartbeat or
        SyncGroup was sent less than its lease (session timeout minus margin) ago."""
        with self._lock:
            return self.phase is Phase.STABLE and not self._stopping.is_set() and self._lease_unexpired()

    def _lease_unexpired(self) -> bool:
        expires = self.lease_expires_at()
        return expires is not None and time.monotonic() < expires




class ClassicGroupMember(ClassicMembership):
    """A consumer in a classic group ("consumer" protocol type), with eager or cooperative rebalancing."""

    protocol_type = PROTOCOL_TYPE

    def __init__(self, target: str, group_id: str, topics: Iterable[str], *,
                 partitions: Mapping[str, int] | Callable[[], Mapping[str, int]],
                 assignors: Sequence[str] = ("cooperative-sticky",), rack_id: str | None = None,
                 user_data: bytes | None = None, lag: LagSource | None = None, auto_offset_reset: str = "latest",
                 on_assigned: Callback | None = None, on_revoked: Callback | None = None,
                 on_lost: Callback | None = None, instance_id: str | None = None,
                 session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 30_000,
                 heartbeat_interval_ms: int = 3_000, channel: grpc.Channel | None = None,
                 rpc_timeout_s: float = 10.0,
                 on_fatal_error: Callable[[ClassicMemberError], None] | None = None,
                 credentials: Credentials | None = None) -> None:
        super().__init__(target, group_id, instance_id=instance_id, session_timeout_ms=session_timeout_ms,
                         rebalance_timeout_ms=rebalance_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
                         channel=channel, rpc_timeout_s=rpc_timeout_s, on_fatal_error=on_fatal_error,
                         credentials=credentials)
        self.topics = tuple(sorted(set(topics)))
        if not self.topics:
            raise ValueError("subscribe to at least one topic")
        if not assignors:
            raise ValueError("name at least one assignor")
        self.assignors = tuple(assignors)
        self._partitions = partitions
        self.rack_id = rack_id
        self.user_data = user_data
        self._lag = lag
        self._auto_offset_reset = auto_offset_reset
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._on_lost_cb = on_lost
        # KIP-429: cooperative only if every configured assignor supports it (Kafka's rule).
        self.cooperative = all(COOPERATIVE in get_classic_assignor(a).supported_protocols for a in self.assignors)
        self._owned: set[TopicPartition] = set()

    # --- public API ------------------------------------------------------------------------------------------------
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions this member may process now: empty once its lease has run out (checked here, on the
        monotonic clock, before the protocol thread has noticed)."""
        with self._lock:
            if not self._lease_unexpired():
                if self._owned:
                    self._wake.set()
                return frozenset()
            return frozenset(self._owned)

    def owns(self, tp: TopicPartition) -> bool:
        """May this process act on `tp` now? (Lease-aware, like `assignment()`.)"""
        return tp in self.assignment()

    def commit_offsets(self, offsets: Mapping[TopicPartition, int], metadata: str = "") -> dict[TopicPartition, int]:
        """Commit (next offset to read) under this member's generation; per-partition error codes back
        (ILLEGAL_GENERATION or REBALANCE_IN_PROGRESS: commit again after the rebalance)."""
        with self._lock:
            request = pb.OffsetCommitRequest(group_id=self.group_id, member_id=self.member_id,
                                             generation_id_or_member_epoch=self.generation)
            if self.instance_id is not None:
                request.group_instance_id = self.instance_id
        by_topic: dict[str, pb.OffsetCommitRequestTopic] = {}
        for (topic, p), offset in sorted(offsets.items()):
            t = by_topic.get(topic)
            if t is None:
                t = by_topic[topic] = request.topics.add(name=topic)
            t.partitions.add(partition_index=p, committed_offset=offset, committed_leader_epoch=-1,
                             committed_metadata=metadata)
        response = self._stub.OffsetCommit(request, timeout=self._rpc_timeout_s)
        return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}

    def fetch_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Committed offsets (-1 when none)."""
        request = pb.OffsetFetchRequest(group_id=self.group_id, member_epoch=-1)
        request.topics.SetInParent()
        wanted: dict[str, list[int]] = {}
        for topic, p in partitions:
            wanted.setdefault(topic, []).append(p)
        for topic, ps in sorted(wanted.items()):
            request.topics.topics.add(name=topic, partition_indexes=sorted(ps))
        response = self._stub.OffsetFetch(request, timeout=self._rpc_timeout_s)
        if response.error_code:
            raise ClassicMemberError(response.error_code, response.error_message)
        return {(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions}

    # --- hooks -----------------------------------------------------------------------------------------------------
    def _protocols(self) -> list[tuple[str, bytes]]:
        owned = tuple(sorted(self._owned)) if self.cooperative else ()
        generation = self.generation if self.cooperative else -1
        metadata = encode_subscription(Subscription(self.topics, self.user_data, owned, generation, self.rack_id))
        return [(name, metadata) for name in self.assignors]

    def _prepare_join(self) -> None:
        if self.cooperative:
            return
        with self._lock:
            revoked = frozenset(self._owned)  # eager: give everything back before joining
            self._owned.clear()
        if revoked:
            self._callback(self._on_revoked, revoked)

    def _assign(self, protocol_name: str, members: list[JoinedMember]) -> dict[str, bytes]:
        try:
            assignor = get_classic_assignor(protocol_name)
        except KeyError:
            raise AssignmentError(INCONSISTENT_GROUP_PROTOCOL, f"unknown assignor {protocol_name!r}") from None
        try:
            subscriptions = {}
            for m in members:
                s = decode_subscription(m.metadata)
                subscriptions[m.member_id] = ClassicSubscription(s.topics, s.owned_partitions, s.generation,
                                                                 s.rack_id, s.user_data or b"")
            known = self._partitions() if callable(self._partitions) else self._partitions
            topics = set().union(*(s.topics for s in subscriptions.values()))
            counts = {t: n for t, n in known.items() if t in topics}
            lag = self._lag([(t, p) for t, n in sorted(counts.items()) for p in range(n)]) if self._lag else None
            result = assignor.assign(counts, subscriptions, lag, self._auto_offset_reset)
        except Exception as e:  # a bug or bad metadata: the coordinator invalidates the generation
            raise AssignmentError(UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}") from e
        return {m.member_id: encode_assignment(Assignment(tuple(result.get(m.member_id, ())))) for m in members}

    def _on_synced(self, protocol_name: str, state: bytes) -> bool:
        target = set(decode_assignment(state).partitions)
        with self._lock:
            revoked = frozenset(self._owned - target)
            added = frozenset(target - self._owned)
            self._owned -= revoked  # cooperative: stop reading what moves before anyone else may get it
        if revoked:
            self._callback(self._on_revoked, revoked)
        with self._lock:
            if self._stopping.is_set():  # closing: it already gave everything back
                return False
            self._owned |= added
        if added:
            self._callback(self._on_assigned, added)
        return bool(revoked)  # KIP-429: the follow-up rebalance hands the revoked partitions on

    def _on_lost(self) -> None:
        with self._lock:
            lost = frozenset(self._owned)
            self._owned.clear()
        if lost:
            self._callback(self._on_lost_cb, lost)

    def _on_close(self) -> None:
        with self._lock:
            revoked = frozenset(self._owned)
            self._owned.clear()
        if revoked:
            self._callback(self._on_revoked, revoked)

    def _callback(self, cb: Callback | None, tps: frozenset[TopicPartition]) -> None:
        if cb is None:
            return
        try:
            cb(tps)
        except Exception:
            log.exception("callback %s failed for %s", getattr(cb, "__name__", cb), sorted(tps))
