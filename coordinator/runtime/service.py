"""The gRPC servicer: translates protobuf to the core's messages and back, and queues the operation.

It decides nothing. Errors go back in-band with Kafka's codes; a request that cannot even be translated
(or a bug) is answered with INVALID_REQUEST / UNKNOWN_SERVER_ERROR, never by killing the server.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from groupcoord.coordinator.core import limits
from groupcoord.coordinator.core.classic_group import ClassicGroup
from groupcoord.coordinator.core.classic_messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
)
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.messages import (
    CommitPartition,
    ConsumerGroupHeartbeatRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

log = logging.getLogger("groupcoord.service")

T = TypeVar("T")
# SyncGroupRequest has no field for the seed's "the leader transmits an error": a leader that could not compute
# the assignment sends its (Kafka) error code in this gRPC request metadata key; see `SyncGroup`.
LEADER_ERROR_METADATA_KEY = "groupcoord-assignment-error"


def topic_partitions_to_pb(tps: Mapping[str, Iterable[int]], image: MetadataImage) -> list[pb.TopicPartitions]:
    out = []
    for topic_id in sorted(tps):
        t = image.by_id.get(topic_id)
        out.append(pb.TopicPartitions(topic_id=topic_id, partitions=sorted(tps[topic_id]),
                                      topic_name=t.name if t else ""))
    return out


def _owned_from_pb(msg: pb.ConsumerGroupHeartbeatRequest) -> dict[str, frozenset[int]] | None:
    if not msg.HasField("topic_partitions"):
        return None
    owned: dict[str, frozenset[int]] = {}
    for tp in msg.topic_partitions.topics:
        seen = owned.get(tp.topic_id)
        owned[tp.topic_id] = frozenset(tp.partitions) if seen is None else seen.union(tp.partitions)
    return owned


def _leader_error(context: grpc.aio.ServicerContext) -> Errors:
    for key, value in context.invocation_metadata() or ():
        if key == LEADER_ERROR_METADATA_KEY:
            try:
                code = int(value)
            except ValueError:
                message = f"{LEADER_ERROR_METADATA_KEY} must be a Kafka error code, not {limits.shorten(value)}."
                raise CoordinatorError(Errors.INVALID_REQUEST, message) from None
            if code == 0:
                return Errors.NONE
            return Errors(code) if code in Errors._value2member_map_ else Errors.UNKNOWN_SERVER_ERROR
    return Errors.NONE


def _check_ids(group_id: str, *values: str | None) -> None:
    """The group id (INVALID_GROUP_ID when too long) and the member/instance ids of a request."""
    limits.check_group_id(group_id)
    for v in values:
        limits.check_length("member or instance id", v)


def _owned_count(msg: pb.ConsumerGroupHeartbeatRequest, cap: int = limits.OWNED_MAX_PARTITIONS) -> None:
    """Counted on the protobuf before any translation: translating a huge list is itself the cost. `cap` is
    at least the partitions the metadata knows (`_owned_cap`): a member may own what it was assigned."""
    if msg.HasField("topic_partitions"):
        topics = msg.topic_partitions.topics
        limits.check_count("owned topics", len(topics), cap)  # regexes may match many
        limits.check_count("owned topic-partitions", sum(len(tp.partitions) for tp in topics), cap)
        limits.check_lengths("owned topic id", (tp.topic_id for tp in topics), limits.TOPIC_NAME_MAX_CHARS)
    if msg.HasField("subscribed_topic_names"):
        limits.check_count("subscribed topic names", len(msg.subscribed_topic_names.values),
                           limits.SUBSCRIPTION_MAX_TOPICS)


@dataclass(frozen=True, slots=True)
class _Refused:
    """What `_run` hands back when a chunk of an admin request is refused as a whole (loading, not owner)."""

    code: Errors
    message: str


def _echo(value: str) -> str:
    """An id echoed in a response field: as sent when within the limits, else only its first characters."""
    return value if len(value) <= limits.ID_MAX_CHARS else value[:limits.ECHO_MAX_CHARS]


class GroupCoordinatorService(pb_grpc.GroupCoordinatorServicer):
    def __init__(self, runtime: CoordinatorRuntime) -> None:
        self.runtime = runtime
        self._owned_cap_for: tuple[object, int] = (None, limits.OWNED_MAX_PARTITIONS)
        self.shard = runtime.shard
        self._max_bytes: int = runtime.shard.config["message.max.bytes"]

    def principal_of(self, context: Any) -> str | None:
        """The authenticated caller, passed to the core with member requests; None: no authentication."""
        return None

    async def _run(self, name: str, fn: Callable[[int], Any], on_error: Callable[[Errors, str], T],
                   group_ids: Iterable[str] = ()) -> Any:
        if not self.runtime.loaded:
            return on_error(Errors.COORDINATOR_LOAD_IN_PROGRESS, "The coordinator is loading its state; retry.")
        if self.runtime.failed is not None:
            return on_error(Errors.COORDINATOR_NOT_AVAILABLE,
                            f"The coordinator's record log failed ({self.runtime.failed}); it must be restarted.")
        router = self.runtime.router
        if router is not None:
            for group_id in group_ids:
                refusal = router(group_id)
                if refusal is not None:
                    return on_error(*refusal)
        try:
            return await self.runtime.submit(name, fn)
        except CoordinatorError as e:
            return on_error(e.code, e.message)
        except Exception as e:
            log.exception("%s failed", name)
            message = f"internal error: {type(e).__name__}: {limits.shorten(str(e))}"
            return on_error(Errors.UNKNOWN_SERVER_ERROR, message)

    # --- ConsumerGroupHeartbeat -----------------------------------------------------------------------------
    async def ConsumerGroupHeartbeat(self, request: pb.ConsumerGroupHeartbeatRequest,
                                     context: grpc.aio.ServicerContext) -> pb.ConsumerGroupHeartbeatResponse:
        return await self._heartbeat(request, context)

    async def ConsumerGroupHeartbeatStream(
        self, request_iterator: AsyncIterator[pb.ConsumerGroupHeartbeatRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ConsumerGroupHeartbeatResponse]:
        async for request in request_iterator:
            yield await self._heartbeat(request, context)

    async def ConsumerGroupHeartbeatBatchStream(
        self, request_iterator: AsyncIterator[pb.ConsumerGroupHeartbeatBatchRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[pb.ConsumerGroupHeartbeatBatchResponse]:
        async for batch in request_iterator:
            yield await self._heartbeat_batch(batch.heartbeats, context)

    async def _heartbeat_batch(self, heartbeats: Sequence[pb.ConsumerGroupHeartbeatRequest],
                               context: grpc.aio.ServicerContext) -> pb.ConsumerGroupHeartbeatBatchResponse:
        """Every heartbeat of one batch message, handled as the unary call handles it (authorization included,
        through `_heartbeat`), answered in order. They run concurrently: one that writes records waits for
        them to be durable without holding back the others, as on separate streams."""
        if len(heartbeats) > limits.HEARTBEAT_BATCH_MAX:
            message = (f"a heartbeat batch holds at most {limits.HEARTBEAT_BATCH_MAX:,} heartbeats; "
                       f"this one holds {len(heartbeats):,}")
            return pb.ConsumerGroupHeartbeatBatchResponse(responses=[
                pb.ConsumerGroupHeartbeatResponse(error_code=int(Errors.INVALID_REQUEST), error_message=message,
                                                  member_id=_echo(h.member_id), member_epoch=h.member_epoch)
                for h in heartbeats])
        if len(heartbeats) == 1:
            return pb.ConsumerGroupHeartbeatBatchResponse(responses=[await self._heartbeat(heartbeats[0], context)])
        responses = await asyncio.gather(*(self._heartbeat(h, context) for h in heartbeats))
        return pb.ConsumerGroupHeartbeatBatchResponse(responses=responses)

    def _owned_cap(self) -> int:
        """The most owned topic-partitions a heartbeat may carry: the documented limit, or every partition the
        metadata knows when that is more (the coordinator may assign one member all of them, and its
        acknowledgement must not be refused). Computed once per metadata image."""
        image = self.runtime.shard.metadata
        if self._owned_cap_for[0] is not image:
            known = sum(t.partition_count for t in image.by_id.values())
            self._owned_cap_for = (image, max(limits.OWNED_MAX_PARTITIONS, known))
        return self._owned_cap_for[1]

    async def _heartbeat(self, request: pb.ConsumerGroupHeartbeatRequest,
                         context: grpc.aio.ServicerContext) -> pb.ConsumerGroupHeartbeatResponse:
        def error(code: Errors, message: str) -> pb.ConsumerGroupHeartbeatResponse:
            return pb.ConsumerGroupHeartbeatResponse(error_code=int(code), error_message=message,
                                                     member_id=_echo(request.member_id),
                                                     member_epoch=request.member_epoch)

        try:
            # Kafka validates a ConsumerGroupHeartbeat's fields with INVALID_REQUEST, the group id included
            limits.check_length("group_id", request.group_id)
            _owned_count(request, self._owned_cap())
            has = request.HasField  # each optional field is read once: this runs for every heartbeat
            instance_id = request.instance_id if has("instance_id") else None
            rack_id = request.rack_id if has("rack_id") else None
            regex = request.subscribed_topic_regex if has("subscribed_topic_regex") else None
            server_assignor = request.server_assignor if has("server_assignor") else None
            names = tuple(request.subscribed_topic_names.values) if has("subscribed_topic_names") else None
            member_epoch = request.member_epoch
            limits.check_heartbeat(request.member_id, instance_id, rack_id, regex, server_assignor, names)
            req = ConsumerGroupHeartbeatRequest(
                group_id=request.group_id, member_id=request.member_id, member_epoch=member_epoch,
                instance_id=instance_id, rack_id=rack_id,
                rebalance_timeout_ms=request.rebalance_timeout_ms if has("rebalance_timeout_ms") else None,
                subscribed_topic_names=names, subscribed_topic_regex=regex, server_assignor=server_assignor,
                topic_partitions=_owned_from_pb(request) if has("topic_partitions") else None,
                client_host=context.peer() if member_epoch == 0 else "",
                principal=self.principal_of(context),
            )
        except CoordinatorError as e:
            return error(e.code, e.message)
        resp = await self._run("ConsumerGroupHeartbeat",
                               lambda now: self.shard.consumer_group_heartbeat(req, now), error, [req.group_id])
        if isinstance(resp, pb.ConsumerGroupHeartbeatResponse):
            return resp
        out = pb.ConsumerGroupHeartbeatResponse(
            error_code=int(resp.error_code), error_message=resp.error_message, member_id=resp.member_id,
            member_epoch=resp.member_epoch, heartbeat_interval_ms=resp.heartbeat_interval_ms,
            session_timeout_ms=resp.session_timeout_ms)
        if resp.assignment is not None:
            out.assignment.topic_partitions.extend(topic_partitions_to_pb(resp.assignment, self.shard.metadata))
        return out

    # --- classic protocol ------------------------------------------------------------------------------------
    async def _run_parkable(self, name: str, fn: Callable[[int, int], Any], on_error: Callable[[Errors, str], T],
                            group_id: str) -> Any:
        """`_run` for JoinGroup/SyncGroup, which may park at the coordinator until other members arrive."""
        if not self.runtime.loaded:
            return on_error(Errors.COORDINATOR_LOAD_IN_PROGRESS, "The coordinator is loading its state; retry.")
        if self.runtime.failed is not None:
            return on_error(Errors.COORDINATOR_NOT_AVAILABLE,
                            f"The coordinator's record log failed ({self.runtime.failed}); it must be restarted.")
        router = self.runtime.router
        refusal = router(group_id) if router is not None else None
        if refusal is not None:
            return on_error(*refusal)
        try:
            return await self.runtime.submit_parkable(name, fn)
        except CoordinatorError as e:
            return on_error(e.code, e.message)
        except Exception as e:
            log.exception("%s failed", name)
            message = f"internal error: {type(e).__name__}: {limits.shorten(str(e))}"
            return on_error(Errors.UNKNOWN_SERVER_ERROR, message)

    async def JoinGroup(self, request: pb.JoinGroupRequest, context: grpc.aio.ServicerContext) -> pb.JoinGroupResponse:
        def error(code: Errors, message: str) -> pb.JoinGroupResponse:
            return pb.JoinGroupResponse(error_code=int(code), error_message=message, generation_id=-1,
                                        member_id=_echo(request.member_id))

        try:
            _check_ids(request.group_id, request.member_id, request.group_instance_id)
            limits.check_count("protocols", len(request.protocols), limits.CLASSIC_MAX_PROTOCOLS)
            req = JoinGroupRequest(
                group_id=request.group_id, member_id=request.member_id, protocol_type=request.protocol_type,
                protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
                session_timeout_ms=request.session_timeout_ms, rebalance_timeout_ms=request.rebalance_timeout_ms,
                instance_id=request.group_instance_id if request.HasField("group_instance_id") else None,
                reason=limits.truncate_reason(request.reason), client_host=context.peer(),
                principal=self.principal_of(context))
            limits.check_classic_protocols(req.protocol_type, req.protocols, self._max_bytes)
        except CoordinatorError as e:
            return error(e.code, e.message)

        def join(now: int, token: int) -> Any:
            group = self.shard.groups.get(req.group_id)
            if isinstance(group, ClassicGroup):  # in the group's operation: sees the members as they are now
                limits.check_classic_group_metadata(group.members, req.member_id, req.protocols, self._max_bytes)
            return self.shard.classic_group_join(req, now, token)

        resp = await self._run_parkable("JoinGroup", join, error, req.group_id)
        if isinstance(resp, pb.JoinGroupResponse):
            return resp
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

    async def SyncGroup(self, request: pb.SyncGroupRequest, context: grpc.aio.ServicerContext) -> pb.SyncGroupResponse:
        """The leader may report that it could not compute the assignment (the seed's "leader transmits an
        error") with the metadata key `groupcoord-assignment-error: <Kafka error code>`: the generation is then
        invalidated and the error goes to every member waiting in SyncGroup."""
        def error(code: Errors, message: str) -> pb.SyncGroupResponse:
            return pb.SyncGroupResponse(error_code=int(code), error_message=message)

        try:
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
                error_code=_leader_error(context), principal=self.principal_of(context))
            limits.check_sync_assignments(req.assignments, self._max_bytes)
        except CoordinatorError as e:
            return error(e.code, e.message)
        resp = await self._run_parkable(
            "SyncGroup", lambda now, token: self.shard.classic_group_sync(req, now, token), error, req.group_id)
        if isinstance(resp, pb.SyncGroupResponse):
            return resp
        out = pb.SyncGroupResponse(error_code=int(resp.error_code), error_message=resp.error_message,
                                   assignment=resp.assignment)
        if resp.protocol_type is not None:
            out.protocol_type = resp.protocol_type
        if resp.protocol_name is not None:
            out.protocol_name = resp.protocol_name
        return out

    async def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext) -> pb.HeartbeatResponse:
        def error(code: Errors, message: str) -> pb.HeartbeatResponse:
            return pb.HeartbeatResponse(error_code=int(code), error_message=message)

        try:
            _check_ids(request.group_id, request.member_id, request.group_instance_id)
        except CoordinatorError as e:
            return error(e.code, e.message)
        req = HeartbeatRequest(request.group_id, request.generation_id, request.member_id,
                               request.group_instance_id if request.HasField("group_instance_id") else None,
                               self.principal_of(context))
        resp = await self._run("Heartbeat", lambda now: self.shard.classic_group_heartbeat(req, now), error,
                               [req.group_id])
        if isinstance(resp, pb.HeartbeatResponse):
            return resp
        return pb.HeartbeatResponse(error_code=int(resp.error_code), error_message=resp.error_message)

    async def LeaveGroup(self, request: pb.LeaveGroupRequest,
                         context: grpc.aio.ServicerContext) -> pb.LeaveGroupResponse:
        def error(code: Errors, message: str) -> pb.LeaveGroupResponse:
            out = pb.LeaveGroupResponse(error_code=int(code), error_message=message)
            for m in request.members[:limits.LEAVE_MAX_MEMBERS]:
                member = out.members.add(member_id=_echo(m.member_id), error_code=int(code), error_message=message)
                if m.HasField("group_instance_id"):
                    member.group_instance_id = _echo(m.group_instance_id)
            return out

        try:
            limits.check_group_id(request.group_id)
            limits.check_count("members", len(request.members), limits.LEAVE_MAX_MEMBERS)
            _check_ids(request.group_id, *(m.member_id for m in request.members),
                       *(m.group_instance_id for m in request.members))
        except CoordinatorError as e:
            return error(e.code, e.message)
        req = LeaveGroupRequest(request.group_id, tuple(
            MemberIdentity(m.member_id, m.group_instance_id if m.HasField("group_instance_id") else None,
                           limits.truncate_reason(m.reason))
            for m in request.members), self.principal_of(context))
        resp = await self._run("LeaveGroup", lambda now: self.shard.classic_group_leave(req, now), error,
                               [req.group_id])
        if isinstance(resp, pb.LeaveGroupResponse):
            return resp
        out = pb.LeaveGroupResponse(error_code=int(resp.error_code), error_message=resp.error_message)
        for m in resp.members:
            member = out.members.add(member_id=m.member_id, error_code=int(m.error_code),
                                     error_message=m.error_message)
            if m.instance_id is not None:
                member.group_instance_id = m.instance_id
        return out

    # --- offsets -------------------------------------------------------------------------------------------
    async def OffsetCommit(self, request: pb.OffsetCommitRequest,
                           context: grpc.aio.ServicerContext) -> pb.OffsetCommitResponse:
        def error(code: Errors, message: str) -> pb.OffsetCommitResponse:
            out = pb.OffsetCommitResponse(error_code=int(code), error_message=message)
            if code is Errors.INVALID_REQUEST or code is Errors.INVALID_GROUP_ID:
                return out  # the request itself is at fault: do not echo what may be huge
            for t in request.topics:
                out.topics.add(name=t.name, partitions=[
                    pb.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(code),
                                                     error_message=message) for p in t.partitions])
            return out

        try:
            _check_ids(request.group_id, request.member_id,
                       request.group_instance_id if request.HasField("group_instance_id") else None)
            limits.check_count("partitions", sum(len(t.partitions) for t in request.topics),
                               limits.OFFSETS_MAX_PARTITIONS)
            limits.check_lengths("topic name", (t.name for t in request.topics), limits.TOPIC_NAME_MAX_CHARS)
        except CoordinatorError as e:
            return error(e.code, e.message)
        partitions = [
            CommitPartition(t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                            p.committed_metadata if p.HasField("committed_metadata") else None)
            for t in request.topics for p in t.partitions
        ]
        req = OffsetCommitRequest(request.group_id, request.member_id, request.generation_id_or_member_epoch,
                                  partitions,
                                  request.group_instance_id if request.HasField("group_instance_id") else None,
                                  self.principal_of(context))
        resp = await self._run("OffsetCommit", lambda now: self.shard.offset_commit(req, now), error, [req.group_id])
        if isinstance(resp, pb.OffsetCommitResponse):
            return resp
        out = pb.OffsetCommitResponse(error_code=int(resp.error_code), error_message=resp.error_message)
        by_topic: dict[str, pb.OffsetCommitResponseTopic] = {}
        for pe in resp.partitions:
            topic = by_topic.get(pe.topic)
            if topic is None:
                topic = by_topic[pe.topic] = out.topics.add(name=pe.topic)
            topic.partitions.add(partition_index=pe.partition, error_code=int(pe.error_code),
                                 error_message=pe.error_message)
        return out

    async def OffsetFetch(self, request: pb.OffsetFetchRequest,
                          context: grpc.aio.ServicerContext) -> pb.OffsetFetchResponse:
        def error(code: Errors, message: str) -> pb.OffsetFetchResponse:
            return pb.OffsetFetchResponse(error_code=int(code), error_message=message)

        topics: dict[str, list[int] | None] | None = None
        try:
            _check_ids(request.group_id, request.member_id)
            if request.HasField("topics"):
                wanted = request.topics.topics
                limits.check_count("topics", len(wanted), limits.OFFSETS_MAX_PARTITIONS)
                limits.check_count("partitions", sum(len(t.partition_indexes) for t in wanted),
                                   limits.OFFSETS_MAX_PARTITIONS)
                limits.check_lengths("topic name", (t.name for t in wanted), limits.TOPIC_NAME_MAX_CHARS)
                topics = {t.name: list(t.partition_indexes) or None for t in wanted}
        except CoordinatorError as e:
            return error(e.code, e.message)
        req = OffsetFetchRequest(request.group_id, request.member_id, request.member_epoch, topics,
                                 request.require_stable)
        resp = await self._run("OffsetFetch", lambda now: self.shard.offset_fetch(req, now), error, [req.group_id])
        if isinstance(resp, pb.OffsetFetchResponse):
            return resp
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

    # --- administration --------------------------------------------------------------------------------------
    async def _run_chunked(self, name: str, ids: list[str], fn: Callable[[list[str], int], Any],
                           invalid: Callable[[str, Errors, str], T], convert: Callable[[Any], list[T]],
                           target: Any) -> None:
        """An admin request over many group ids, as one queued operation per `ADMIN_CHUNK_GROUP_IDS` ids with a
        yield to the loop between chunks, so that no single request holds the event loop for long (Kafka gives
        no snapshot across groups either). Over `ADMIN_MAX_GROUP_IDS` ids, the whole request is refused; an id
        over the length limit gets INVALID_GROUP_ID on its own. Results go into the response's repeated field
        `target` chunk by chunk (no final copy of them all), in the order of `ids`."""
        if len(ids) > limits.ADMIN_MAX_GROUP_IDS:
            message = f"{len(ids)} group ids in one request; at most {limits.ADMIN_MAX_GROUP_IDS} are accepted."
            target.extend(invalid(_echo(g), Errors.INVALID_REQUEST, message) for g in ids)
            return
        step = limits.ADMIN_CHUNK_GROUP_IDS
        for start in range(0, len(ids), step):
            if start:
                await asyncio.sleep(0)
            chunk = ids[start:start + step]
            valid = [g for g in chunk if len(g) <= limits.ID_MAX_CHARS]
            results: list[T] = []
            if valid:
                resp = await self._run(name, functools.partial(fn, valid), _Refused, valid)
                results = ([invalid(g, resp.code, resp.message) for g in valid] if isinstance(resp, _Refused)
                           else convert(resp))
            it = iter(results)
            target.extend(next(it) if len(g) <= limits.ID_MAX_CHARS else invalid(
                _echo(g), Errors.INVALID_GROUP_ID,
                f"group_id of {len(g)} characters is longer than {limits.ID_MAX_CHARS}.") for g in chunk)

    async def DescribeGroups(self, request: pb.DescribeGroupsRequest,
                             context: grpc.aio.ServicerContext) -> pb.DescribeGroupsResponse:
        def invalid(group_id: str, code: Errors, message: str) -> pb.DescribedGroup:
            return pb.DescribedGroup(group_id=group_id, error_code=int(code), error_message=message)

        ids = list(request.group_ids)
        over = (f"the response would exceed groupcoord.response.max.bytes="
                f"{self.runtime.shard.config['groupcoord.response.max.bytes']}; describe fewer groups per request.")
        # room kept for an error entry per id, so that the response with its refusals still fits
        budget = [self.runtime.shard.config["groupcoord.response.max.bytes"] - 1024
                  - sum(min(len(g), limits.ID_MAX_CHARS) + len(over) + 16 for g in ids)]

        def convert(described: list[Any]) -> list[pb.DescribedGroup]:
            """Stop converting once the response would exceed groupcoord.response.max.bytes: a request naming
            one large classic group 10,000 times must not build gigabytes before gRPC refuses to send them."""
            out = []
            for g in described:
                if budget[0] < 0:
                    out.append(invalid(g.group_id, Errors.INVALID_REQUEST, over))
                    continue
                dg = self._described_to_pb(g)
                budget[0] -= dg.ByteSize()
                out.append(dg if budget[0] >= 0 else invalid(g.group_id, Errors.INVALID_REQUEST, over))
            return out

        out = pb.DescribeGroupsResponse()
        await self._run_chunked("DescribeGroups", ids, self.shard.describe_groups, invalid, convert, out.groups)
        return out

    def _described_to_pb(self, g: Any) -> pb.DescribedGroup:
        image = self.shard.metadata
        dg = pb.DescribedGroup(
            group_id=g.group_id, error_code=int(g.error_code), error_message=g.error_message,
            group_type=g.group_type, group_state=g.group_state, group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch, assignor_name=g.assignor_name, protocol_type=g.protocol_type,
            assignment_timestamp_ms=g.assignment_timestamp_ms)
        for m in g.members:
            dm = dg.members.add(
                member_id=m.member_id, member_epoch=m.member_epoch, state=m.state,
                subscribed_topic_names=list(m.subscribed_topic_names), client_id=m.client_id,
                client_host=m.client_host, member_metadata=m.member_metadata,
                member_assignment=m.member_assignment)
            if m.instance_id is not None:
                dm.instance_id = m.instance_id
            if m.rack_id is not None:
                dm.rack_id = m.rack_id
            if m.subscribed_topic_regex is not None:
                dm.subscribed_topic_regex = m.subscribed_topic_regex
            dm.assignment.extend(topic_partitions_to_pb(m.assignment, image))
            dm.target_assignment.extend(topic_partitions_to_pb(m.target_assignment, image))
            dm.partitions_pending_revocation.extend(
                topic_partitions_to_pb(m.partitions_pending_revocation, image))
        return dg

    async def ListGroups(self, request: pb.ListGroupsRequest,
                         context: grpc.aio.ServicerContext) -> pb.ListGroupsResponse:
        def error(code: Errors, message: str) -> pb.ListGroupsResponse:
            return pb.ListGroupsResponse(error_code=int(code), error_message=message)

        states, types = list(request.states_filter), list(request.types_filter)
        try:
            limits.check_count("states filters", len(states), limits.LIST_FILTERS_MAX)
            limits.check_count("types filters", len(types), limits.LIST_FILTERS_MAX)
            limits.check_lengths("filter", states + types)
        except CoordinatorError as e:
            return error(e.code, e.message)
        resp = await self._run("ListGroups", lambda now: self.shard.list_groups(states, types, now), error)
        if isinstance(resp, pb.ListGroupsResponse):
            return resp
        return pb.ListGroupsResponse(groups=[
            pb.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.group_state,
                           group_type=g.group_type) for g in resp])

    async def DeleteGroups(self, request: pb.DeleteGroupsRequest,
                           context: grpc.aio.ServicerContext) -> pb.DeleteGroupsResponse:
        def invalid(group_id: str, code: Errors, message: str) -> pb.DeletableGroupResult:
            return pb.DeletableGroupResult(group_id=group_id, error_code=int(code), error_message=message)

        out = pb.DeleteGroupsResponse()
        await self._run_chunked("DeleteGroups", list(request.group_ids), self.shard.delete_groups, invalid,
                                lambda resp: [invalid(r.group_id, r.error_code, r.error_message) for r in resp],
                                out.results)
        return out

    async def OffsetDelete(self, request: pb.OffsetDeleteRequest,
                           context: grpc.aio.ServicerContext) -> pb.OffsetDeleteResponse:
        def error(code: Errors, message: str) -> pb.OffsetDeleteResponse:
            return pb.OffsetDeleteResponse(error_code=int(code), error_message=message)

        try:
            limits.check_group_id(request.group_id)
            limits.check_count("partitions", sum(len(t.partition_indexes) for t in request.topics),
                               limits.OFFSETS_MAX_PARTITIONS)
            limits.check_lengths("topic name", (t.name for t in request.topics), limits.TOPIC_NAME_MAX_CHARS)
        except CoordinatorError as e:
            return error(e.code, e.message)
        partitions = [(t.name, p) for t in request.topics for p in t.partition_indexes]
        resp = await self._run("OffsetDelete", lambda now: self.shard.delete_offsets(
            request.group_id, partitions, now), error, [request.group_id])
        if isinstance(resp, pb.OffsetDeleteResponse):
            return resp
        whole, per_partition = resp
        out = pb.OffsetDeleteResponse(error_code=int(whole.error_code), error_message=whole.error_message)
        by_topic: dict[str, pb.OffsetDeleteResponseTopic] = {}
        for pe in per_partition:
            topic = by_topic.get(pe.topic)
            if topic is None:
                topic = by_topic[pe.topic] = out.topics.add(name=pe.topic)
            topic.partitions.add(partition_index=pe.partition, error_code=int(pe.error_code),
                                 error_message=pe.error_message)
        return out

    async def DescribeGroupConfigs(self, request: pb.DescribeGroupConfigsRequest,
                                   context: grpc.aio.ServicerContext) -> pb.DescribeGroupConfigsResponse:
        def invalid(group_id: str, code: Errors, message: str) -> pb.DescribedGroupConfig:
            return pb.DescribedGroupConfig(group_id=group_id, error_code=int(code), error_message=message)

        def convert(resp: list[Any]) -> list[pb.DescribedGroupConfig]:
            return [pb.DescribedGroupConfig(
                group_id=r.group_id, error_code=int(r.error_code), error_message=r.error_message,
                configs=[pb.ConfigEntry(name=c.name, value=c.value, is_default=c.is_default) for c in r.configs])
                for r in resp]

        out = pb.DescribeGroupConfigsResponse()
        await self._run_chunked("DescribeGroupConfigs", list(request.group_ids), self.shard.describe_group_configs,
                                invalid, convert, out.results)
        return out

    async def AlterGroupConfigs(self, request: pb.AlterGroupConfigsRequest,
                                context: grpc.aio.ServicerContext) -> pb.AlterGroupConfigsResponse:
        def error(code: Errors, message: str) -> pb.AlterGroupConfigsResponse:
            return pb.AlterGroupConfigsResponse(error_code=int(code), error_message=message)

        names = [c.name for c in request.configs]
        updates = {c.name: (c.value if c.HasField("value") else None) for c in request.configs}
        try:
            limits.check_group_id(request.group_id)
            limits.check_config_updates(updates)
        except CoordinatorError as e:
            return error(e.code, e.message)
        if len(set(names)) != len(names):
            return error(Errors.INVALID_REQUEST, "a config name appears more than once.")
        resp = await self._run("AlterGroupConfigs", lambda now: self.shard.alter_group_configs(
            request.group_id, updates, request.validate_only, now), error, [request.group_id])
        if isinstance(resp, pb.AlterGroupConfigsResponse):
            return resp
        return pb.AlterGroupConfigsResponse(error_code=int(resp.error_code), error_message=resp.error_message)

    async def FindCoordinator(self, request: pb.FindCoordinatorRequest,
                              context: grpc.aio.ServicerContext) -> pb.FindCoordinatorResponse:
        """A single instance serves every group: it answers with its own advertised address. Instances sharing a
        Kafka state topic answer with the owner of the group's partition; while no instance owns it (a move in
        progress), COORDINATOR_NOT_AVAILABLE, and the client asks again. `serve --workers N`: the worker owning
        the group's partition."""
        from groupcoord.coordinator.runtime.sharding import PartitionOwnership
        from groupcoord.coordinator.runtime.workers import StaticOwnership

        if len(request.keys) > limits.ADMIN_MAX_GROUP_IDS:
            message = f"{len(request.keys)} keys in one request; at most {limits.ADMIN_MAX_GROUP_IDS} are accepted."
            return pb.FindCoordinatorResponse(coordinators=[
                pb.Coordinator(key=_echo(k), error_code=int(Errors.INVALID_REQUEST), error_message=message,
                               node_id=-1) for k in request.keys])
        too_long = f"a group id is at most {limits.ID_MAX_CHARS} characters."
        router = self.runtime.router
        if not isinstance(router, (PartitionOwnership, StaticOwnership)):
            host, port = self.runtime.advertised
            return pb.FindCoordinatorResponse(coordinators=[
                pb.Coordinator(key=k, host=host, port=port, node_id=0) if len(k) <= limits.ID_MAX_CHARS else
                pb.Coordinator(key=_echo(k), error_code=int(Errors.INVALID_GROUP_ID), error_message=too_long,
                               node_id=-1) for k in request.keys])
        out = pb.FindCoordinatorResponse()
        for key in request.keys:
            if len(key) > limits.ID_MAX_CHARS:
                out.coordinators.add(key=_echo(key), error_code=int(Errors.INVALID_GROUP_ID), error_message=too_long,
                                     node_id=-1)
                continue
            found = router.locate(key)
            out.coordinators.add(key=key, host=found.host, port=found.port, error_code=int(found.error),
                                 error_message=found.message, node_id=0 if found.error is Errors.NONE else -1)
        return out
