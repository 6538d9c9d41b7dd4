"""The gRPC servicer: translates protobuf to the core's messages and back, and queues the operation.

It decides nothing. Errors go back in-band with Kafka's codes; a request that cannot even be translated
(or a bug) is answered with INVALID_REQUEST / UNKNOWN_SERVER_ERROR, never by killing the server.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, TypeVar

import grpc

from coordinator.core.classic_group import CLASSIC_RECORD_TYPES
from coordinator.core.classic_messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
)
from coordinator.core.errors import CoordinatorError, Errors
from coordinator.core.messages import (
    CommitPartition,
    ConsumerGroupHeartbeatRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from coordinator.core.metadata import MetadataImage
from coordinator.runtime import record_codec
from coordinator.runtime.runtime import CoordinatorRuntime
from groupcoord.v1 import coordinator_pb2 as pb
from groupcoord.v1 import coordinator_pb2_grpc as pb_grpc

log = logging.getLogger("groupcoord.service")

T = TypeVar("T")
MAX_ID_LENGTH = 255 * 4  # Kafka ids are strings; keep absurd sizes out of the state and the log
# SyncGroupRequest has no field for the seed's "the leader transmits an error": a leader that could not compute
# the assignment sends its (Kafka) error code in this gRPC request metadata key; see `SyncGroup`.
LEADER_ERROR_METADATA_KEY = "groupcoord-assignment-error"

for _record_type in CLASSIC_RECORD_TYPES:  # the classic group's records travel as GenericRecord
    record_codec.register_generic(_record_type)


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
    owned: dict[str, set[int]] = {}
    for tp in msg.topic_partitions.topics:
        owned.setdefault(tp.topic_id, set()).update(tp.partitions)
    return {t: frozenset(p) for t, p in owned.items()}


def _leader_error(context: grpc.aio.ServicerContext) -> Errors:
    for key, value in context.invocation_metadata() or ():
        if key == LEADER_ERROR_METADATA_KEY:
            try:
                code = int(value)
            except ValueError:
                message = f"{LEADER_ERROR_METADATA_KEY} must be a Kafka error code, not {value!r}."
                raise CoordinatorError(Errors.INVALID_REQUEST, message) from None
            if code == 0:
                return Errors.NONE
            return Errors(code) if code in Errors._value2member_map_ else Errors.UNKNOWN_SERVER_ERROR
    return Errors.NONE


def _check_ids(*values: str) -> None:
    for v in values:
        if len(v) > MAX_ID_LENGTH:
            raise CoordinatorError(Errors.INVALID_REQUEST, f"id of {len(v)} characters exceeds {MAX_ID_LENGTH}.")


class GroupCoordinatorService(pb_grpc.GroupCoordinatorServicer):
    def __init__(self, runtime: CoordinatorRuntime) -> None:
        self.runtime = runtime
        self.shard = runtime.shard

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
            return on_error(Errors.UNKNOWN_SERVER_ERROR, f"internal error: {type(e).__name__}: {e}")

    # --- ConsumerGroupHeartbeat -----------------------------------------------------------------------------
    async def ConsumerGroupHeartbeat(self, request: pb.ConsumerGroupHeartbeatRequest,
                                     context: grpc.aio.ServicerContext) -> pb.ConsumerGroupHeartbeatResponse:
        return await self._heartbeat(request, context)

    async def ConsumerGroupHeartbeatStream(
        self, request_iterator: AsyncIterator[pb.ConsumerGroupHeartbeatRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ConsumerGroupHeartbeatResponse]:
        async for request in request_iterator:
            yield await self._heartbeat(request, context)

    async def _heartbeat(self, request: pb.ConsumerGroupHeartbeatRequest,
                         context: grpc.aio.ServicerContext) -> pb.ConsumerGroupHeartbeatResponse:
        def error(code: Errors, message: str) -> pb.ConsumerGroupHeartbeatResponse:
            return pb.ConsumerGroupHeartbeatResponse(error_code=int(code), error_message=message,
                                                     member_id=request.member_id, member_epoch=request.member_epoch)

        try:
            _check_ids(request.group_id, request.member_id, request.instance_id)
            req = ConsumerGroupHeartbeatRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                member_epoch=request.member_epoch,
                instance_id=request.instance_id if request.HasField("instance_id") else None,
                rack_id=request.rack_id if request.HasField("rack_id") else None,
                rebalance_timeout_ms=request.rebalance_timeout_ms if request.HasField("rebalance_timeout_ms")
                else None,
                subscribed_topic_names=tuple(request.subscribed_topic_names.values)
                if request.HasField("subscribed_topic_names") else None,
                subscribed_topic_regex=request.subscribed_topic_regex
                if request.HasField("subscribed_topic_regex") else None,
                server_assignor=request.server_assignor if request.HasField("server_assignor") else None,
                topic_partitions=_owned_from_pb(request),
                client_host=context.peer() if request.member_epoch == 0 else "",
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
            return on_error(Errors.UNKNOWN_SERVER_ERROR, f"internal error: {type(e).__name__}: {e}")

    async def JoinGroup(self, request: pb.JoinGroupRequest, context: grpc.aio.ServicerContext) -> pb.JoinGroupResponse:
        def error(code: Errors, message: str) -> pb.JoinGroupResponse:
            return pb.JoinGroupResponse(error_code=int(code), error_message=message, generation_id=-1,
                                        member_id=request.member_id)

        try:
            _check_ids(request.group_id, request.member_id, request.group_instance_id)
            req = JoinGroupRequest(
                group_id=request.group_id, member_id=request.member_id, protocol_type=request.protocol_type,
                protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
                session_timeout_ms=request.session_timeout_ms, rebalance_timeout_ms=request.rebalance_timeout_ms,
                instance_id=request.group_instance_id if request.HasField("group_instance_id") else None,
                reason=request.reason, client_host=context.peer())
        except CoordinatorError as e:
            return error(e.code, e.message)
        resp = await self._run_parkable(
            "JoinGroup", lambda now, token: self.shard.classic_group_join(req, now, token), error, req.group_id)
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
            req = SyncGroupRequest(
                group_id=request.group_id, generation_id=request.generation_id, member_id=request.member_id,
                instance_id=request.group_instance_id if request.HasField("group_instance_id") else None,
                protocol_type=request.protocol_type if request.HasField("protocol_type") else None,
                protocol_name=request.protocol_name if request.HasField("protocol_name") else None,
                assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
                error_code=_leader_error(context))
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
                               request.group_instance_id if request.HasField("group_instance_id") else None)
        resp = await self._run("Heartbeat", lambda now: self.shard.classic_group_heartbeat(req, now), error,
                               [req.group_id])
        if isinstance(resp, pb.HeartbeatResponse):
            return resp
        return pb.HeartbeatResponse(error_code=int(resp.error_code), error_message=resp.error_message)

    async def LeaveGroup(self, request: pb.LeaveGroupRequest,
                         context: grpc.aio.ServicerContext) -> pb.LeaveGroupResponse:
        def error(code: Errors, message: str) -> pb.LeaveGroupResponse:
            out = pb.LeaveGroupResponse(error_code=int(code), error_message=message)
            for m in request.members:
                member = out.members.add(member_id=m.member_id, error_code=int(code), error_message=message)
                if m.HasField("group_instance_id"):
                    member.group_instance_id = m.group_instance_id
            return out

        try:
            _check_ids(request.group_id, *(m.member_id for m in request.members),
                       *(m.group_instance_id for m in request.members))
        except CoordinatorError as e:
            return error(e.code, e.message)
        req = LeaveGroupRequest(request.group_id, tuple(
            MemberIdentity(m.member_id, m.group_instance_id if m.HasField("group_instance_id") else None, m.reason)
            for m in request.members))
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
            for t in request.topics:
                out.topics.add(name=t.name, partitions=[
                    pb.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(code),
                                                     error_message=message) for p in t.partitions])
            return out

        partitions = [
            CommitPartition(t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                            p.committed_metadata if p.HasField("committed_metadata") else None)
            for t in request.topics for p in t.partitions
        ]
        req = OffsetCommitRequest(request.group_id, request.member_id, request.generation_id_or_member_epoch,
                                  partitions,
                                  request.group_instance_id if request.HasField("group_instance_id") else None)
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
        if request.HasField("topics"):
            topics = {}
            for t in request.topics.topics:
                topics[t.name] = list(t.partition_indexes) or None
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
    async def DescribeGroups(self, request: pb.DescribeGroupsRequest,
                             context: grpc.aio.ServicerContext) -> pb.DescribeGroupsResponse:
        ids = list(request.group_ids)

        def error(code: Errors, message: str) -> pb.DescribeGroupsResponse:
            return pb.DescribeGroupsResponse(groups=[
                pb.DescribedGroup(group_id=g, error_code=int(code), error_message=message) for g in ids])

        resp = await self._run("DescribeGroups", lambda now: self.shard.describe_groups(ids, now), error, ids)
        if isinstance(resp, pb.DescribeGroupsResponse):
            return resp
        image = self.shard.metadata
        out = pb.DescribeGroupsResponse()
        for g in resp:
            dg = out.groups.add(
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
        return out

    async def ListGroups(self, request: pb.ListGroupsRequest,
                         context: grpc.aio.ServicerContext) -> pb.ListGroupsResponse:
        def error(code: Errors, message: str) -> pb.ListGroupsResponse:
            return pb.ListGroupsResponse(error_code=int(code), error_message=message)

        states, types = list(request.states_filter), list(request.types_filter)
        resp = await self._run("ListGroups", lambda now: self.shard.list_groups(states, types, now), error)
        if isinstance(resp, pb.ListGroupsResponse):
            return resp
        return pb.ListGroupsResponse(groups=[
            pb.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.group_state,
                           group_type=g.group_type) for g in resp])

    async def DeleteGroups(self, request: pb.DeleteGroupsRequest,
                           context: grpc.aio.ServicerContext) -> pb.DeleteGroupsResponse:
        ids = list(request.group_ids)

        def error(code: Errors, message: str) -> pb.DeleteGroupsResponse:
            return pb.DeleteGroupsResponse(results=[
                pb.DeletableGroupResult(group_id=g, error_code=int(code), error_message=message) for g in ids])

        resp = await self._run("DeleteGroups", lambda now: self.shard.delete_groups(ids, now), error, ids)
        if isinstance(resp, pb.DeleteGroupsResponse):
            return resp
        return pb.DeleteGroupsResponse(results=[
            pb.DeletableGroupResult(group_id=r.group_id, error_code=int(r.error_code), error_message=r.error_message)
            for r in resp])

    async def DescribeGroupConfigs(self, request: pb.DescribeGroupConfigsRequest,
                                   context: grpc.aio.ServicerContext) -> pb.DescribeGroupConfigsResponse:
        ids = list(request.group_ids)

        def error(code: Errors, message: str) -> pb.DescribeGroupConfigsResponse:
            return pb.DescribeGroupConfigsResponse(results=[
                pb.DescribedGroupConfig(group_id=g, error_code=int(code), error_message=message) for g in ids])

        resp = await self._run("DescribeGroupConfigs", lambda now: self.shard.describe_group_configs(ids, now),
                               error, ids)
        if isinstance(resp, pb.DescribeGroupConfigsResponse):
            return resp
        return pb.DescribeGroupConfigsResponse(results=[
            pb.DescribedGroupConfig(group_id=r.group_id, error_code=int(r.error_code), error_message=r.error_message,
                                    configs=[pb.ConfigEntry(name=c.name, value=c.value, is_default=c.is_default)
                                             for c in r.configs])
            for r in resp])

    async def AlterGroupConfigs(self, request: pb.AlterGroupConfigsRequest,
                                context: grpc.aio.ServicerContext) -> pb.AlterGroupConfigsResponse:
        def error(code: Errors, message: str) -> pb.AlterGroupConfigsResponse:
            return pb.AlterGroupConfigsResponse(error_code=int(code), error_message=message)

        names = [c.name for c in request.configs]
        if len(set(names)) != len(names):
            return error(Errors.INVALID_REQUEST, "a config name appears more than once.")
        updates = {c.name: (c.value if c.HasField("value") else None) for c in request.configs}
        resp = await self._run("AlterGroupConfigs", lambda now: self.shard.alter_group_configs(
            request.group_id, updates, request.validate_only, now), error, [request.group_id])
        if isinstance(resp, pb.AlterGroupConfigsResponse):
            return resp
        return pb.AlterGroupConfigsResponse(error_code=int(resp.error_code), error_message=resp.error_message)

    async def FindCoordinator(self, request: pb.FindCoordinatorRequest,
                              context: grpc.aio.ServicerContext) -> pb.FindCoordinatorResponse:
        """A single instance serves every group: it answers with its own advertised address. Instances sharing a
        Kafka state topic answer with the owner of the group's partition; while no instance owns it (a move in
        progress), COORDINATOR_NOT_AVAILABLE, and the client asks again."""
        from coordinator.runtime.sharding import PartitionOwnership

        router = self.runtime.router
        if not isinstance(router, PartitionOwnership):
            host, port = self.runtime.advertised
            return pb.FindCoordinatorResponse(coordinators=[
                pb.Coordinator(key=k, host=host, port=port, node_id=0) for k in request.keys])
        out = pb.FindCoordinatorResponse()
        for key in request.keys:
            found = router.locate(key)
            out.coordinators.add(key=key, host=found.host, port=found.port, error_code=int(found.error),
                                 error_message=found.message, node_id=0 if found.error is Errors.NONE else -1)
        return out
