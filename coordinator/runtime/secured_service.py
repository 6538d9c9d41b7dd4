"""The gRPC servicer with authentication and Kafka-style authorization in front of every RPC.

Operations per RPC, as Kafka's KafkaApis asks them of GROUP resources:
- READ: ConsumerGroupHeartbeat (and its stream), JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
  and the share-group RPCs (ShareGroupHeartbeat, ShareAcquire, ShareAcknowledge: `SecuredShareService`), and
  StreamsGroupHeartbeat;
- DESCRIBE: OffsetFetch, DescribeGroups, DescribeShareGroupOffsets, StreamsGroupDescribe, FindCoordinator, and
  ListGroups, which lists only the groups the caller may DESCRIBE;
- DELETE: DeleteGroups, OffsetDelete (Kafka also asks READ of each topic; we have no topic ACLs);
  DESCRIBE_CONFIGS / ALTER_CONFIGS: DescribeGroupConfigs / AlterGroupConfigs.
(the streams RPCs are another service, streams_service.py, which asks this class's `_may`.)
A refusal is GROUP_AUTHORIZATION_FAILED (30) in-band, per group in the many-group admin responses. A caller
without credentials is refused with gRPC UNAUTHENTICATED before any of this.

DescribeGroups shows member hosts (`client_host`) only to callers holding DESCRIBE itself (an ACL naming
DESCRIBE or ALL): a consumer whose READ implies DESCRIBE may see its group and its members, but not the
network addresses of the other members' machines.

The principal also travels into the core with each member request: a member joined by one principal cannot
be heartbeated, committed for, synced or removed by another (core/principals.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from groupcoord.coordinator.core import limits
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.runtime.acl import Authorizer
from groupcoord.coordinator.runtime.auth import TokenStore, Unauthenticated, authenticate
from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime
from groupcoord.coordinator.runtime.service import GroupCoordinatorService, _echo
from groupcoord.coordinator.runtime.share_service import ShareGroupService
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import share_pb2 as spb

DENIED = int(Errors.GROUP_AUTHORIZATION_FAILED)


def _denied(operation: str, group_id: str) -> str:
    return f"Not authorized to {operation} group {_echo(group_id)!r}."


class SecuredService(GroupCoordinatorService):
    def __init__(self, runtime: CoordinatorRuntime, authorizer: Authorizer, tokens: TokenStore | None) -> None:
        super().__init__(runtime)
        self.authorizer = authorizer
        self.tokens = tokens

    def principal_of(self, context: Any) -> str | None:
        try:
            return authenticate(context, self.tokens)
        except Unauthenticated:
            return None

    async def _principal(self, context: grpc.aio.ServicerContext) -> str:
        try:
            return authenticate(context, self.tokens)
        except Unauthenticated as e:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(e))
            raise  # abort raises; this line is for the type checker

    async def _may(self, context: grpc.aio.ServicerContext, operation: str, group_id: str) -> bool:
        return self.authorizer.allowed(await self._principal(context), operation, group_id)

    # --- member RPCs: READ ----------------------------------------------------------------------------------
    async def _heartbeat(self, request: pb.ConsumerGroupHeartbeatRequest,
                         context: grpc.aio.ServicerContext) -> pb.ConsumerGroupHeartbeatResponse:
        if not await self._may(context, "READ", request.group_id):
            return pb.ConsumerGroupHeartbeatResponse(error_code=DENIED, error_message=_denied("READ", request.group_id),
                                                     member_id=_echo(request.member_id),
                                                     member_epoch=request.member_epoch)
        return await super()._heartbeat(request, context)

    async def JoinGroup(self, request: pb.JoinGroupRequest, context: grpc.aio.ServicerContext) -> pb.JoinGroupResponse:
        if not await self._may(context, "READ", request.group_id):
            return pb.JoinGroupResponse(error_code=DENIED, error_message=_denied("READ", request.group_id),
                                        generation_id=-1, member_id=_echo(request.member_id))
        return await super().JoinGroup(request, context)

    async def SyncGroup(self, request: pb.SyncGroupRequest, context: grpc.aio.ServicerContext) -> pb.SyncGroupResponse:
        if not await self._may(context, "READ", request.group_id):
            return pb.SyncGroupResponse(error_code=DENIED, error_message=_denied("READ", request.group_id))
        return await super().SyncGroup(request, context)

    async def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext) -> pb.HeartbeatResponse:
        if not await self._may(context, "READ", request.group_id):
            return pb.HeartbeatResponse(error_code=DENIED, error_message=_denied("READ", request.group_id))
        return await super().Heartbeat(request, context)

    async def LeaveGroup(self, request: pb.LeaveGroupRequest,
                         context: grpc.aio.ServicerContext) -> pb.LeaveGroupResponse:
        if not await self._may(context, "READ", request.group_id):
            message = _denied("READ", request.group_id)
            out = pb.LeaveGroupResponse(error_code=DENIED, error_message=message)
            for m in request.members[:limits.LEAVE_MAX_MEMBERS]:
                out.members.add(member_id=_echo(m.member_id), error_code=DENIED, error_message=message)
            return out
        return await super().LeaveGroup(request, context)

    async def OffsetCommit(self, request: pb.OffsetCommitRequest,
                           context: grpc.aio.ServicerContext) -> pb.OffsetCommitResponse:
        if not await self._may(context, "READ", request.group_id):
            message = _denied("READ", request.group_id)
            out = pb.OffsetCommitResponse(error_code=DENIED, error_message=message)
            if sum(len(t.partitions) for t in request.topics) <= limits.OFFSETS_MAX_PARTITIONS:
                for t in request.topics:  # Kafka answers every partition with the error
                    out.topics.add(name=_echo(t.name), partitions=[
                        pb.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=DENIED)
                        for p in t.partitions])
            return out
        return await super().OffsetCommit(request, context)

    # --- DESCRIBE -------------------------------------------------------------------------------------------
    async def OffsetFetch(self, request: pb.OffsetFetchRequest,
                          context: grpc.aio.ServicerContext) -> pb.OffsetFetchResponse:
        if not await self._may(context, "DESCRIBE", request.group_id):
            return pb.OffsetFetchResponse(error_code=DENIED, error_message=_denied("DESCRIBE", request.group_id))
        return await super().OffsetFetch(request, context)

    async def FindCoordinator(self, request: pb.FindCoordinatorRequest,
                              context: grpc.aio.ServicerContext) -> pb.FindCoordinatorResponse:
        principal = await self._principal(context)
        out = await super().FindCoordinator(request, context)
        for key, found in zip(request.keys, out.coordinators, strict=False):
            if found.error_code == 0 and not self.authorizer.allowed(principal, "DESCRIBE", key):
                found.Clear()
                found.MergeFrom(pb.Coordinator(key=_echo(key), error_code=DENIED, node_id=-1,
                                               error_message=_denied("DESCRIBE", key)))
        return out

    async def ListGroups(self, request: pb.ListGroupsRequest,
                         context: grpc.aio.ServicerContext) -> pb.ListGroupsResponse:
        principal = await self._principal(context)
        out = await super().ListGroups(request, context)
        visible = [g for g in out.groups if self.authorizer.allowed(principal, "DESCRIBE", g.group_id)]
        del out.groups[:]
        out.groups.extend(visible)
        return out

    async def DescribeGroups(self, request: pb.DescribeGroupsRequest,
                             context: grpc.aio.ServicerContext) -> pb.DescribeGroupsResponse:
        principal = await self._principal(context)

        async def described(ids: list[str]) -> list[pb.DescribedGroup]:
            resp = await super(SecuredService, self).DescribeGroups(pb.DescribeGroupsRequest(group_ids=ids), context)
            for g in resp.groups:
                if not self.authorizer.allowed(principal, "DESCRIBE", g.group_id, implied=False):
                    for m in g.members:
                        m.client_host = ""
            return list(resp.groups)

        def invalid(group_id: str) -> pb.DescribedGroup:
            return pb.DescribedGroup(group_id=_echo(group_id), error_code=DENIED,
                                     error_message=_denied("DESCRIBE", group_id))

        out = pb.DescribeGroupsResponse()
        out.groups.extend(await self._split(principal, "DESCRIBE", list(request.group_ids), described, invalid))
        return out

    async def _split(self, principal: str, operation: str, ids: list[str], run: Callable[[list[str]], Any],
                     invalid: Callable[[str], Any]) -> list[Any]:
        """One result per id, in order: the ids `principal` may `operation` go to `run`, the rest are refused.
        Over the admin cap, everything goes to `run`, which refuses the request as a whole."""
        if len(ids) > limits.ADMIN_MAX_GROUP_IDS:
            return list(await run(ids))
        allowed = [self.authorizer.allowed(principal, operation, g) for g in ids]
        results = iter(await run([g for g, ok in zip(ids, allowed, strict=True) if ok]))
        return [next(results) if ok else invalid(g) for g, ok in zip(ids, allowed, strict=True)]

    # --- DELETE and configs ---------------------------------------------------------------------------------
    async def DeleteGroups(self, request: pb.DeleteGroupsRequest,
                           context: grpc.aio.ServicerContext) -> pb.DeleteGroupsResponse:
        principal = await self._principal(context)

        async def run(ids: list[str]) -> list[pb.DeletableGroupResult]:
            resp = await super(SecuredService, self).DeleteGroups(pb.DeleteGroupsRequest(group_ids=ids), context)
            return list(resp.results)

        out = pb.DeleteGroupsResponse()
        out.results.extend(await self._split(principal, "DELETE", list(request.group_ids), run, lambda g: (
            pb.DeletableGroupResult(group_id=_echo(g), error_code=DENIED, error_message=_denied("DELETE", g)))))
        return out

    async def OffsetDelete(self, request: pb.OffsetDeleteRequest,
                           context: grpc.aio.ServicerContext) -> pb.OffsetDeleteResponse:
        if not await self._may(context, "DELETE", request.group_id):
            return pb.OffsetDeleteResponse(error_code=DENIED, error_message=_denied("DELETE", request.group_id))
        return await super().OffsetDelete(request, context)

    async def DescribeGroupConfigs(self, request: pb.DescribeGroupConfigsRequest,
                                   context: grpc.aio.ServicerContext) -> pb.DescribeGroupConfigsResponse:
        principal = await self._principal(context)

        async def run(ids: list[str]) -> list[pb.DescribedGroupConfig]:
            resp = await super(SecuredService, self).DescribeGroupConfigs(
                pb.DescribeGroupConfigsRequest(group_ids=ids), context)
            return list(resp.results)

        out = pb.DescribeGroupConfigsResponse()
        out.results.extend(await self._split(principal, "DESCRIBE_CONFIGS", list(request.group_ids), run, lambda g: (
            pb.DescribedGroupConfig(group_id=_echo(g), error_code=DENIED,
                                    error_message=_denied("DESCRIBE_CONFIGS", g)))))
        return out

    async def AlterGroupConfigs(self, request: pb.AlterGroupConfigsRequest,
                                context: grpc.aio.ServicerContext) -> pb.AlterGroupConfigsResponse:
        if not await self._may(context, "ALTER_CONFIGS", request.group_id):
            return pb.AlterGroupConfigsResponse(error_code=DENIED,
                                                error_message=_denied("ALTER_CONFIGS", request.group_id))
        return await super().AlterGroupConfigs(request, context)


class SecuredShareService(ShareGroupService):
    """The share-group RPCs behind the same authentication and ACLs: each needs READ on the group, as Kafka's
    ShareGroupHeartbeat, ShareFetch and ShareAcknowledge do."""

    def __init__(self, runtime: CoordinatorRuntime, authorizer: Authorizer, tokens: TokenStore | None) -> None:
        super().__init__(runtime)
        self.authorizer = authorizer
        self.tokens = tokens

    def principal_of(self, context: Any) -> str | None:
        try:
            return authenticate(context, self.tokens)
        except Unauthenticated:
            return None

    async def _may_read(self, context: grpc.aio.ServicerContext, group_id: str) -> bool:
        try:
            principal = authenticate(context, self.tokens)
        except Unauthenticated as e:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(e))
            raise
        return self.authorizer.allowed(principal, "READ", group_id)

    async def ShareGroupHeartbeat(self, request: spb.ShareGroupHeartbeatRequest,
                                  context: grpc.aio.ServicerContext) -> spb.ShareGroupHeartbeatResponse:
        if not await self._may_read(context, request.group_id):
            return spb.ShareGroupHeartbeatResponse(error_code=DENIED, error_message=_denied("READ", request.group_id),
                                                   member_id=_echo(request.member_id),
                                                   member_epoch=request.member_epoch)
        return await super().ShareGroupHeartbeat(request, context)

    async def ShareAcquire(self, request: spb.ShareAcquireRequest,
                           context: grpc.aio.ServicerContext) -> spb.ShareAcquireResponse:
        if not await self._may_read(context, request.group_id):
            return spb.ShareAcquireResponse(error_code=DENIED, error_message=_denied("READ", request.group_id))
        return await super().ShareAcquire(request, context)

    async def ShareAcknowledge(self, request: spb.ShareAcknowledgeRequest,
                               context: grpc.aio.ServicerContext) -> spb.ShareAcknowledgeResponse:
        if not await self._may_read(context, request.group_id):
            return spb.ShareAcknowledgeResponse(error_code=DENIED, error_message=_denied("READ", request.group_id))
        return await super().ShareAcknowledge(request, context)

    async def DescribeShareGroupOffsets(self, request: spb.DescribeShareGroupOffsetsRequest,
                                        context: grpc.aio.ServicerContext) -> spb.DescribeShareGroupOffsetsResponse:
        try:
            principal = authenticate(context, self.tokens)
        except Unauthenticated as e:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(e))
            raise
        if not self.authorizer.allowed(principal, "DESCRIBE", request.group_id):
            return spb.DescribeShareGroupOffsetsResponse(error_code=DENIED,
                                                         error_message=_denied("DESCRIBE", request.group_id))
        return await super().DescribeShareGroupOffsets(request, context)
