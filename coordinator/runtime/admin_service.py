"""The servicer's administration RPCs: DescribeGroups, ListGroups, DeleteGroups, OffsetDelete, the group
configs and FindCoordinator, with the ACL operation each needs, as Kafka's KafkaApis asks them of GROUP
resources. Requests over many groups run in chunks and are authorized per group (`Service.submit_each`);
ListGroups lists only the groups the caller may DESCRIBE. DescribeGroups shows member hosts (`client_host`)
only to callers holding DESCRIBE itself (an ACL naming DESCRIBE or ALL): a consumer whose READ implies
DESCRIBE may see its group and its members, but not the network addresses of the other members' machines."""

from __future__ import annotations

from typing import Any

from groupcoord.coordinator.core import limits
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.runtime.pipeline import (
    ALTER_CONFIGS,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    Caller,
    Service,
    denied,
    rpc,
)
from groupcoord.coordinator.runtime.pipeline import echo as _echo
from groupcoord.coordinator.runtime.service_base import add_partition_errors, topic_partitions_to_pb
from groupcoord.wire.v1 import coordinator_pb2 as pb


class AdminService(Service):
    @rpc(DESCRIBE, pb.DescribeGroupsResponse, per_group=True)
    async def DescribeGroups(self, request: pb.DescribeGroupsRequest, caller: Caller) -> pb.DescribeGroupsResponse:
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
                if caller.secured and not caller.may(DESCRIBE, g.group_id, implied=False):
                    for m in dg.members:
                        m.client_host = ""
                budget[0] -= dg.ByteSize()
                out.append(dg if budget[0] >= 0 else invalid(g.group_id, Errors.INVALID_REQUEST, over))
            return out

        out = pb.DescribeGroupsResponse()
        await self.submit_each("DescribeGroups", ids, self.shard.describe_groups, invalid, convert, out.groups,
                               caller, DESCRIBE)
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

    @rpc(DESCRIBE, pb.ListGroupsResponse, per_group=True)
    async def ListGroups(self, request: pb.ListGroupsRequest, caller: Caller) -> pb.ListGroupsResponse:
        states, types = list(request.states_filter), list(request.types_filter)
        limits.check_count("states filters", len(states), limits.LIST_FILTERS_MAX)
        limits.check_count("types filters", len(types), limits.LIST_FILTERS_MAX)
        limits.check_lengths("filter", states + types)
        resp = await self.submit("ListGroups", lambda now: self.shard.list_groups(states, types, now))
        return pb.ListGroupsResponse(groups=[
            pb.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.group_state,
                           group_type=g.group_type) for g in resp if caller.may(DESCRIBE, g.group_id)])

    @rpc(DELETE, pb.DeleteGroupsResponse, per_group=True)
    async def DeleteGroups(self, request: pb.DeleteGroupsRequest, caller: Caller) -> pb.DeleteGroupsResponse:
        def invalid(group_id: str, code: Errors, message: str) -> pb.DeletableGroupResult:
            return pb.DeletableGroupResult(group_id=group_id, error_code=int(code), error_message=message)

        out = pb.DeleteGroupsResponse()
        await self.submit_each("DeleteGroups", list(request.group_ids), self.shard.delete_groups, invalid,
                               lambda resp: [invalid(r.group_id, r.error_code, r.error_message) for r in resp],
                               out.results, caller, DELETE)
        return out

    @rpc(DELETE, pb.OffsetDeleteResponse)
    async def OffsetDelete(self, request: pb.OffsetDeleteRequest, caller: Caller) -> pb.OffsetDeleteResponse:
        limits.check_group_id(request.group_id)
        limits.check_count("partitions", sum(len(t.partition_indexes) for t in request.topics),
                           limits.OFFSETS_MAX_PARTITIONS)
        limits.check_lengths("topic name", (t.name for t in request.topics), limits.TOPIC_NAME_MAX_CHARS)
        partitions = [(t.name, p) for t in request.topics for p in t.partition_indexes]
        whole, per_partition = await self.submit("OffsetDelete", lambda now: self.shard.delete_offsets(
            request.group_id, partitions, now), request.group_id)
        out = pb.OffsetDeleteResponse(error_code=int(whole.error_code), error_message=whole.error_message)
        add_partition_errors(out.topics, per_partition)
        return out

    @rpc(DESCRIBE_CONFIGS, pb.DescribeGroupConfigsResponse, per_group=True)
    async def DescribeGroupConfigs(self, request: pb.DescribeGroupConfigsRequest,
                                   caller: Caller) -> pb.DescribeGroupConfigsResponse:
        def invalid(group_id: str, code: Errors, message: str) -> pb.DescribedGroupConfig:
            return pb.DescribedGroupConfig(group_id=group_id, error_code=int(code), error_message=message)

        def convert(resp: list[Any]) -> list[pb.DescribedGroupConfig]:
            return [pb.DescribedGroupConfig(
                group_id=r.group_id, error_code=int(r.error_code), error_message=r.error_message,
                configs=[pb.ConfigEntry(name=c.name, value=c.value, is_default=c.is_default) for c in r.configs])
                for r in resp]

        out = pb.DescribeGroupConfigsResponse()
        await self.submit_each("DescribeGroupConfigs", list(request.group_ids), self.shard.describe_group_configs,
                               invalid, convert, out.results, caller, DESCRIBE_CONFIGS)
        return out

    @rpc(ALTER_CONFIGS, pb.AlterGroupConfigsResponse)
    async def AlterGroupConfigs(self, request: pb.AlterGroupConfigsRequest,
                                caller: Caller) -> pb.AlterGroupConfigsResponse:
        names = [c.name for c in request.configs]
        updates = {c.name: (c.value if c.HasField("value") else None) for c in request.configs}
        limits.check_group_id(request.group_id)
        limits.check_config_updates(updates)
        if len(set(names)) != len(names):
            raise CoordinatorError(Errors.INVALID_REQUEST, "a config name appears more than once.")
        resp = await self.submit("AlterGroupConfigs", lambda now: self.shard.alter_group_configs(
            request.group_id, updates, request.validate_only, now), request.group_id)
        return pb.AlterGroupConfigsResponse(error_code=int(resp.error_code), error_message=resp.error_message)

    @rpc(DESCRIBE, pb.FindCoordinatorResponse, per_group=True)
    async def FindCoordinator(self, request: pb.FindCoordinatorRequest, caller: Caller) -> pb.FindCoordinatorResponse:
        """A single instance serves every group: it answers with its own advertised address. Instances sharing a
        Kafka state topic answer with the owner of the group's partition; while no instance owns it (a move in
        progress), COORDINATOR_NOT_AVAILABLE, and the client asks again. `serve --workers N`: the worker owning
        the group's partition. With ACLs, a key the caller may not DESCRIBE is refused."""
        from groupcoord.coordinator.runtime.sharding import PartitionOwnership
        from groupcoord.coordinator.runtime.workers import StaticOwnership

        if len(request.keys) > limits.ADMIN_MAX_GROUP_IDS:
            message = f"{len(request.keys)} keys in one request; at most {limits.ADMIN_MAX_GROUP_IDS} are accepted."
            return pb.FindCoordinatorResponse(coordinators=[
                pb.Coordinator(key=_echo(k), error_code=int(Errors.INVALID_REQUEST), error_message=message,
                               node_id=-1) for k in request.keys])
        too_long = f"a group id is at most {limits.ID_MAX_CHARS} characters."
        router = self.runtime.router
        directory = router if isinstance(router, (PartitionOwnership, StaticOwnership)) else None
        out = pb.FindCoordinatorResponse()
        for key in request.keys:
            if len(key) > limits.ID_MAX_CHARS:
                out.coordinators.add(key=_echo(key), error_code=int(Errors.INVALID_GROUP_ID), error_message=too_long,
                                     node_id=-1)
            elif not caller.may(DESCRIBE, key):
                out.coordinators.add(key=key, error_code=int(Errors.GROUP_AUTHORIZATION_FAILED),
                                     error_message=denied(DESCRIBE, key), node_id=-1)
            elif directory is None:
                host, port = self.runtime.advertised
                out.coordinators.add(key=key, host=host, port=port, node_id=0)
            else:
                found = directory.locate(key)
                out.coordinators.add(key=key, host=found.host, port=found.port, error_code=int(found.error),
                                     error_message=found.message, node_id=0 if found.error is Errors.NONE else -1)
        return out
