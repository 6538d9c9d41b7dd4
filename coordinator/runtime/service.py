"""The GroupCoordinator servicer: translates protobuf to the core's messages and back, and queues the operation.

It decides nothing. Every RPC goes through the request pipeline (`pipeline.py`): the member RPCs need READ on
the group (ConsumerGroupHeartbeat and its streams, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit),
OffsetFetch DESCRIBE, as in Kafka. Errors go back in-band with Kafka's codes; a request that cannot even be
translated (or a bug) is answered with INVALID_REQUEST / UNKNOWN_SERVER_ERROR, never by killing the server. The
caller's principal travels into the core with each member request: a member joined by one principal cannot be
heartbeated, committed for, synced or removed by another (core/principals.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from groupcoord.coordinator.core import limits
from groupcoord.coordinator.core.classic.group import ClassicGroup
from groupcoord.coordinator.core.classic.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
)
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import (
    CommitPartition,
    ConsumerGroupHeartbeatRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from groupcoord.coordinator.runtime.admin_service import AdminService
from groupcoord.coordinator.runtime.pipeline import DESCRIBE, READ, Caller, rpc, stream, stream_of
from groupcoord.coordinator.runtime.pipeline import echo as _echo
from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime
from groupcoord.coordinator.runtime.service_base import (
    _check_ids,
    _leader_error,
    _owned_count,
    _owned_from_pb,
    add_partition_errors,
    topic_partitions_to_pb,
)
from groupcoord.wire.v1 import coordinator_pb2 as pb

STEADY_REPLIES_MAX = 50_000  # prebuilt steady replies kept (one per member); all are dropped when full


def _in_messages(responses: list[pb.ConsumerGroupHeartbeatResponse],
                 budget: int) -> Iterator[pb.ConsumerGroupHeartbeatBatchResponse]:
    """A batch's answers, in order, in as few messages as fit within `budget` bytes each: the heartbeats are
    already handled, so answers that would not fit one message (groupcoord.response.max.bytes) go in the
    next rather than failing the stream. One answer bigger than the budget goes alone, as a unary call's
    would."""
    if len(responses) == 1:  # nothing to split: one answer goes alone whatever its size
        yield pb.ConsumerGroupHeartbeatBatchResponse(responses=responses)
        return
    start, size = 0, 0
    for k, response in enumerate(responses):
        grows = response.ByteSize() + 6  # its tag and length prefix
        if size + grows > budget and k > start:
            yield pb.ConsumerGroupHeartbeatBatchResponse(responses=responses[start:k])
            start, size = k, 0
        size += grows
    yield pb.ConsumerGroupHeartbeatBatchResponse(responses=responses[start:])


def _leave_refused(request: pb.LeaveGroupRequest, code: Errors, message: str) -> pb.LeaveGroupResponse:
    out = pb.LeaveGroupResponse(error_code=int(code), error_message=message)
    for m in request.members[:limits.LEAVE_MAX_MEMBERS]:
        member = out.members.add(member_id=_echo(m.member_id), error_code=int(code), error_message=message)
        if m.HasField("group_instance_id"):
            member.group_instance_id = _echo(m.group_instance_id)
    return out


def _commit_refused(request: pb.OffsetCommitRequest, code: Errors, message: str) -> pb.OffsetCommitResponse:
    """Kafka answers every partition with the error, unless the request itself is at fault (do not echo what
    may be huge)."""
    out = pb.OffsetCommitResponse(error_code=int(code), error_message=message)
    if code is Errors.INVALID_REQUEST or code is Errors.INVALID_GROUP_ID or \
            sum(len(t.partitions) for t in request.topics) > limits.OFFSETS_MAX_PARTITIONS:
        return out
    for t in request.topics:
        out.topics.add(name=_echo(t.name), partitions=[
            pb.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(code),
                                             error_message=message) for p in t.partitions])
    return out


class GroupCoordinatorService(AdminService):
    def __init__(self, runtime: CoordinatorRuntime) -> None:
        super().__init__(runtime)
        self._owned_cap_for: tuple[object, int] = (None, limits.OWNED_MAX_PARTITIONS)
        self._max_bytes: int = runtime.shard.config["message.max.bytes"]
        # member id -> (epoch, (heartbeat interval, session timeout), its steady reply): `_steady_reply`
        self._steady_replies: dict[str, tuple[int, tuple[int, int], pb.ConsumerGroupHeartbeatResponse]] = {}

    # --- ConsumerGroupHeartbeat -----------------------------------------------------------------------------
    @stream_of("ConsumerGroupHeartbeat")
    async def ConsumerGroupHeartbeatStream(
        self, requests: AsyncIterator[pb.ConsumerGroupHeartbeatRequest], caller: Caller
    ) -> AsyncIterator[pb.ConsumerGroupHeartbeatResponse]:
        async for request in requests:
            yield await self.ConsumerGroupHeartbeat(request, caller)

    @stream
    async def ConsumerGroupHeartbeatBatchStream(
        self, requests: AsyncIterator[pb.ConsumerGroupHeartbeatBatchRequest], caller: Caller
    ) -> AsyncIterator[pb.ConsumerGroupHeartbeatBatchResponse]:
        budget = self.runtime.shard.config["groupcoord.response.max.bytes"] - 1024  # room for the framing
        async for batch in requests:
            for message in _in_messages(await self._heartbeat_batch(batch.heartbeats, caller), budget):
                yield message

    async def _heartbeat_batch(self, heartbeats: Sequence[pb.ConsumerGroupHeartbeatRequest],
                               caller: Caller) -> list[pb.ConsumerGroupHeartbeatResponse]:
        """Every heartbeat of one batch message, handled as the unary call handles it (authorization included),
        answered in order. They run concurrently: one that writes records waits for
        them to be durable without holding back the others, as on separate streams. They start
        `HEARTBEAT_BATCH_SLICE` per pass of the event loop, so other streams' requests are read and handled
        between slices: a batch of a thousand heartbeats (a large group's, each following a new epoch) holds
        other groups back by a slice, not by the whole batch."""
        if len(heartbeats) > limits.HEARTBEAT_BATCH_MAX:
            message = (f"a heartbeat batch holds at most {limits.HEARTBEAT_BATCH_MAX:,} heartbeats; "
                       f"this one holds {len(heartbeats):,}")
            return [pb.ConsumerGroupHeartbeatResponse(error_code=int(Errors.INVALID_REQUEST), error_message=message,
                                                      member_id=_echo(h.member_id), member_epoch=h.member_epoch)
                    for h in heartbeats]
        if len(heartbeats) == 1:  # the common case under light load: no task to create for it
            return [await self.ConsumerGroupHeartbeat(heartbeats[0], caller)]
        step = limits.HEARTBEAT_BATCH_SLICE
        running: list[asyncio.Future[pb.ConsumerGroupHeartbeatResponse]] = []
        for start in range(0, len(heartbeats), step):
            if start:
                await asyncio.sleep(0)  # the slice before runs in the next pass, with whatever I/O is ready
            running.extend(asyncio.ensure_future(self.ConsumerGroupHeartbeat(h, caller))
                           for h in heartbeats[start:start + step])
        return list(await asyncio.gather(*running))

    def _owned_cap(self) -> int:
        """The most owned topic-partitions a heartbeat may carry: the documented limit, or every partition the
        metadata knows when that is more (the coordinator may assign one member all of them, and its
        acknowledgement must not be refused). Computed once per metadata image."""
        image = self.runtime.shard.metadata
        if self._owned_cap_for[0] is not image:
            known = sum(t.partition_count for t in image.by_id.values())
            self._owned_cap_for = (image, max(limits.OWNED_MAX_PARTITIONS, known))
        return self._owned_cap_for[1]

    @rpc(READ, pb.ConsumerGroupHeartbeatResponse)
    async def ConsumerGroupHeartbeat(self, request: pb.ConsumerGroupHeartbeatRequest,
                                     caller: Caller) -> pb.ConsumerGroupHeartbeatResponse:
        # Kafka validates a ConsumerGroupHeartbeat's fields with INVALID_REQUEST, the group id included. This runs
        # for every heartbeat: each optional field is read once, and a check is called only where it could fail
        # (a steady heartbeat carries the group id, the member id and the epoch alone).
        group_id, member_id, member_epoch = request.group_id, request.member_id, request.member_epoch
        has = request.HasField
        owned, subscribed = has("topic_partitions"), has("subscribed_topic_names")
        instance_id = request.instance_id if has("instance_id") else None
        rack_id = request.rack_id if has("rack_id") else None
        regex = request.subscribed_topic_regex if has("subscribed_topic_regex") else None
        server_assignor = request.server_assignor if has("server_assignor") else None
        rebalance_timeout_ms = request.rebalance_timeout_ms if has("rebalance_timeout_ms") else None
        shard = self.shard
        if not owned and not subscribed and instance_id is None and rack_id is None and regex is None \
                and server_assignor is None and rebalance_timeout_ms is None and member_epoch > 0 \
                and len(group_id) <= limits.ID_MAX_CHARS and len(member_id) <= limits.ID_MAX_CHARS:
            principal = caller.principal
            steady = self.submit_steady(
                "ConsumerGroupHeartbeat",
                lambda now: shard.consumer_group_steady_heartbeat(group_id, member_id, member_epoch, principal, now),
                group_id)
            if steady is not None:
                return self._steady_reply(member_id, member_epoch, steady)
        if len(group_id) > limits.ID_MAX_CHARS:
            limits.check_length("group_id", group_id)
        if owned or subscribed:  # counted before anything is translated
            _owned_count(request, self._owned_cap())
        names = tuple(request.subscribed_topic_names.values) if subscribed else None
        if len(member_id) > limits.ID_MAX_CHARS or instance_id is not None or rack_id is not None \
                or regex is not None or server_assignor is not None or names is not None:
            limits.check_heartbeat(member_id, instance_id, rack_id, regex, server_assignor, names)
        req = ConsumerGroupHeartbeatRequest(
            group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms, names, regex,
            server_assignor, _owned_from_pb(request) if owned else None, "",
            caller.peer() if member_epoch == 0 else "", caller.principal)
        resp = await self.submit("ConsumerGroupHeartbeat", lambda now: shard.consumer_group_heartbeat(req, now),
                                 group_id)
        out = pb.ConsumerGroupHeartbeatResponse(
            error_code=resp.error_code, error_message=resp.error_message, member_id=resp.member_id,
            member_epoch=resp.member_epoch, heartbeat_interval_ms=resp.heartbeat_interval_ms,
            session_timeout_ms=resp.session_timeout_ms)
        if resp.assignment is not None:
            out.assignment.topic_partitions.extend(topic_partitions_to_pb(resp.assignment, shard.metadata))
        return out

    def _steady_reply(self, member_id: str, member_epoch: int,
                      steady: tuple[int, int]) -> pb.ConsumerGroupHeartbeatResponse:
        """A steady heartbeat's reply (`steady`: its heartbeat interval and session timeout), the same message as
        last time when nothing in it changed: it depends on the member id, the epoch and those two alone, and
        nothing mutates a reply once returned."""
        replies = self._steady_replies
        cached = replies.get(member_id)
        if cached is not None and cached[0] == member_epoch and cached[1] == steady:
            return cached[2]
        out = pb.ConsumerGroupHeartbeatResponse(member_id=member_id, member_epoch=member_epoch,
                                                heartbeat_interval_ms=steady[0], session_timeout_ms=steady[1])
        if len(replies) >= STEADY_REPLIES_MAX:
            replies.clear()
        replies[member_id] = (member_epoch, steady, out)
        return out

    # --- classic protocol ------------------------------------------------------------------------------------
    @rpc(READ, pb.JoinGroupResponse)
    async def JoinGroup(self, request: pb.JoinGroupRequest, caller: Caller) -> pb.JoinGroupResponse:
        _check_ids(request.group_id, request.member_id, request.group_instance_id)
        limits.check_count("protocols", len(request.protocols), limits.CLASSIC_MAX_PROTOCOLS)
        req = JoinGroupRequest(
            group_id=request.group_id, member_id=request.member_id, protocol_type=request.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
            session_timeout_ms=request.session_timeout_ms, rebalance_timeout_ms=request.rebalance_timeout_ms,
            instance_id=request.group_instance_id if request.HasField("group_instance_id") else None,
            reason=limits.truncate_reason(request.reason), client_host=caller.peer(), principal=caller.principal)
        limits.check_classic_protocols(req.protocol_type, req.protocols, self._max_bytes)

        def join(now: int, token: int) -> Any:
            group = self.shard.groups.get(req.group_id)
            if isinstance(group, ClassicGroup):  # in the group's operation: sees the members as they are now
                limits.check_classic_group_metadata(group.members, req.member_id, req.protocols, self._max_bytes)
            return self.shard.classic_group_join(req, now, token)

        resp = await self.submit_parkable("JoinGroup", join, req.group_id)
        out = pb.JoinGroupResponse(error_code=int(resp.error_code), error_message=resp.error_message,
                                   generation_id=resp.generation_id, leader=resp.leader, member_id=resp.member_id,
                                   skip_assignment=resp.skip_assignment)
        if resp.protocol_type is not None:
            out.protocol_type = resp.protocol_type
        if resp.protocol_name is not None:
            out.protocol_name = resp.protocol_name
        for m in resp.members:
            member = out.members.add(member_id=m.member_id, metadata=m.metadata)
            if m.instance_id is not None:
                member.group_instance_id = m.instance_id
        return out

    @rpc(READ, pb.SyncGroupResponse)
    async def SyncGroup(self, request: pb.SyncGroupRequest, caller: Caller) -> pb.SyncGroupResponse:
        """The leader may report that it could not compute the assignment (the seed's "leader transmits an
        error") with the metadata key `groupcoord-assignment-error: <Kafka error code>`: the generation is then
        invalidated and the error goes to every member waiting in SyncGroup."""
        _check_ids(request.group_id, request.member_id, request.group_instance_id)
        limits.check_length("protocol_type", request.protocol_type)
        limits.check_length("protocol_name", request.protocol_name)
        limits.check_count("assignments", len(request.assignments), limits.SYNC_MAX_ASSIGNMENTS)
        req = SyncGroupRequest(
            group_id=request.group_id, generation_id=request.generation_id, member_id=request.member_id,
            instance_id=request.group_instance_id if request.HasField("group_instance_id") else None,
            protocol_type=request.protocol_type if request.HasField("protocol_type") else None,
            protocol_name=request.protocol_name if request.HasField("protocol_name") else None,
            assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
            error_code=_leader_error(caller.metadata()), principal=caller.principal)
        limits.check_sync_assignments(req.assignments, self._max_bytes)
        resp = await self.submit_parkable(
            "SyncGroup", lambda now, token: self.shard.classic_group_sync(req, now, token), req.group_id)
        out = pb.SyncGroupResponse(error_code=int(resp.error_code), error_message=resp.error_message,
                                   assignment=resp.assignment)
        if resp.protocol_type is not None:
            out.protocol_type = resp.protocol_type
        if resp.protocol_name is not None:
            out.protocol_name = resp.protocol_name
        return out

    @rpc(READ, pb.HeartbeatResponse)
    async def Heartbeat(self, request: pb.HeartbeatRequest, caller: Caller) -> pb.HeartbeatResponse:
        _check_ids(request.group_id, request.member_id, request.group_instance_id)
        req = HeartbeatRequest(request.group_id, request.generation_id, request.member_id,
                               request.group_instance_id if request.HasField("group_instance_id") else None,
                               caller.principal)
        resp = await self.submit("Heartbeat", lambda now: self.shard.classic_group_heartbeat(req, now), req.group_id)
        return pb.HeartbeatResponse(error_code=int(resp.error_code), error_message=resp.error_message)

    @rpc(READ, pb.LeaveGroupResponse, refuse=_leave_refused)
    async def LeaveGroup(self, request: pb.LeaveGroupRequest, caller: Caller) -> pb.LeaveGroupResponse:
        limits.check_group_id(request.group_id)
        limits.check_count("members", len(request.members), limits.LEAVE_MAX_MEMBERS)
        _check_ids(request.group_id, *(m.member_id for m in request.members),
                   *(m.group_instance_id for m in request.members))
        req = LeaveGroupRequest(request.group_id, tuple(
            MemberIdentity(m.member_id, m.group_instance_id if m.HasField("group_instance_id") else None,
                           limits.truncate_reason(m.reason))
            for m in request.members), caller.principal)
        resp = await self.submit("LeaveGroup", lambda now: self.shard.classic_group_leave(req, now), req.group_id)
        out = pb.LeaveGroupResponse(error_code=int(resp.error_code), error_message=resp.error_message)
        for m in resp.members:
            member = out.members.add(member_id=m.member_id, error_code=int(m.error_code),
                                     error_message=m.error_message)
            if m.instance_id is not None:
                member.group_instance_id = m.instance_id
        return out

    # --- offsets -------------------------------------------------------------------------------------------
    @rpc(READ, pb.OffsetCommitResponse, refuse=_commit_refused)
    async def OffsetCommit(self, request: pb.OffsetCommitRequest, caller: Caller) -> pb.OffsetCommitResponse:
        instance_id = request.group_instance_id if request.HasField("group_instance_id") else None
        _check_ids(request.group_id, request.member_id, instance_id)
        limits.check_count("partitions", sum(len(t.partitions) for t in request.topics),
                           limits.OFFSETS_MAX_PARTITIONS)
        limits.check_lengths("topic name", (t.name for t in request.topics), limits.TOPIC_NAME_MAX_CHARS)
        partitions = [
            CommitPartition(t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                            p.committed_metadata if p.HasField("committed_metadata") else None)
            for t in request.topics for p in t.partitions
        ]
        req = OffsetCommitRequest(request.group_id, request.member_id, request.generation_id_or_member_epoch,
                                  partitions, instance_id, caller.principal)
        resp = await self.submit("OffsetCommit", lambda now: self.shard.offset_commit(req, now), req.group_id)
        out = pb.OffsetCommitResponse(error_code=int(resp.error_code), error_message=resp.error_message)
        add_partition_errors(out.topics, resp.partitions)
        return out

    @rpc(DESCRIBE, pb.OffsetFetchResponse)
    async def OffsetFetch(self, request: pb.OffsetFetchRequest, caller: Caller) -> pb.OffsetFetchResponse:
        topics: dict[str, list[int] | None] | None = None
        _check_ids(request.group_id, request.member_id)
        if request.HasField("topics"):
            wanted = request.topics.topics
            limits.check_count("topics", len(wanted), limits.OFFSETS_MAX_PARTITIONS)
            limits.check_count("partitions", sum(len(t.partition_indexes) for t in wanted),
                               limits.OFFSETS_MAX_PARTITIONS)
            limits.check_lengths("topic name", (t.name for t in wanted), limits.TOPIC_NAME_MAX_CHARS)
            topics = {t.name: list(t.partition_indexes) or None for t in wanted}
        req = OffsetFetchRequest(request.group_id, request.member_id, request.member_epoch, topics,
                                 request.require_stable)
        resp = await self.submit("OffsetFetch", lambda now: self.shard.offset_fetch(req, now), req.group_id)
        out = pb.OffsetFetchResponse(error_code=int(resp.error_code), error_message=resp.error_message)
        by_topic: dict[str, pb.OffsetFetchResponseTopic] = {}
        for o in resp.offsets:
            topic = by_topic.get(o.topic)
            if topic is None:
                topic = by_topic[o.topic] = out.topics.add(name=o.topic)
            topic.partitions.add(partition_index=o.partition, committed_offset=o.committed_offset,
                                 committed_leader_epoch=o.leader_epoch, metadata=o.metadata,
                                 error_code=int(o.error_code))
        return out
