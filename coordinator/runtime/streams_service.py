"""The StreamsGroupCoordinator gRPC service: translates StreamsGroupHeartbeat / StreamsGroupDescribe between
protobuf and the core's values and runs them on the shard's event loop, through the same request pipeline as
every other RPC (`pipeline.py`). It decides nothing; like Kafka's KafkaApis it adds the topic creator's recent
failures to a heartbeat's MISSING_INTERNAL_TOPICS status."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from groupcoord.coordinator.core import limits
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.streams import handlers as streams_shard
from groupcoord.coordinator.core.streams.group import (
    StreamsGroupState,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResponse,
)
from groupcoord.coordinator.core.streams.internal_topics import with_creation_errors
from groupcoord.coordinator.core.streams.messages import CreateInternalTopics
from groupcoord.coordinator.core.streams.records import Tasks
from groupcoord.coordinator.core.streams.topology import CopartitionGroup, StreamsTopology, Subtopology, TopicInfo
from groupcoord.coordinator.runtime.pipeline import DESCRIBE, READ, Caller, Service, rpc
from groupcoord.wire.v1 import streams_pb2 as spb

MAX_TASK_IDS = 100_000  # per list in one request: bounds the work one heartbeat can ask for


def tasks_from_pb(msg: spb.StreamsTaskIdList) -> Tasks:
    if sum(len(t.partitions) for t in msg.tasks) > MAX_TASK_IDS:
        raise ValueError("too many task ids")
    return frozenset((t.subtopology_id, p) for t in msg.tasks for p in t.partitions)


def tasks_to_pb(tasks: Iterable[tuple[str, int]]) -> list[spb.StreamsTaskIds]:
    by: dict[str, list[int]] = {}
    for s, p in tasks:
        by.setdefault(s, []).append(p)
    return [spb.StreamsTaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(by.items())]


def _info(t: spb.StreamsTopicInfo) -> TopicInfo:
    return TopicInfo(t.name, t.partitions, t.replication_factor, tuple((kv.key, kv.value) for kv in t.topic_configs))


def _info_pb(t: TopicInfo) -> spb.StreamsTopicInfo:
    return spb.StreamsTopicInfo(name=t.name, partitions=t.partitions, replication_factor=t.replication_factor,
                                topic_configs=[spb.StreamsKeyValue(key=k, value=v) for k, v in t.topic_configs])


def topology_from_pb(t: spb.StreamsTopology) -> StreamsTopology:
    return StreamsTopology(t.epoch, tuple(
        Subtopology(s.subtopology_id, tuple(s.source_topics), tuple(s.repartition_sink_topics),
                    tuple(_info(i) for i in s.repartition_source_topics),
                    tuple(_info(i) for i in s.state_changelog_topics),
                    tuple(CopartitionGroup(tuple(g.source_topics), tuple(g.repartition_source_topics))
                          for g in s.copartition_groups))
        for s in t.subtopologies))


def topology_to_pb(t: StreamsTopology) -> spb.StreamsTopology:
    return spb.StreamsTopology(epoch=t.epoch, subtopologies=[
        spb.StreamsSubtopology(
            subtopology_id=s.subtopology_id, source_topics=s.source_topics,
            repartition_sink_topics=s.repartition_sink_topics,
            repartition_source_topics=[_info_pb(i) for i in s.repartition_source_topics],
            state_changelog_topics=[_info_pb(i) for i in s.state_changelog_topics],
            copartition_groups=[spb.StreamsCopartitionGroup(source_topics=g.source_topics,
                                                            repartition_source_topics=g.repartition_source_topics)
                                for g in s.copartition_groups])
        for s in t.subtopologies])


def _offsets(msg: spb.StreamsTaskOffsetList) -> dict[tuple[str, int], int]:
    if len(msg.offsets) > MAX_TASK_IDS:
        raise ValueError("too many task offsets")
    return {(o.subtopology_id, o.partition): o.offset for o in msg.offsets}


def _offsets_pb(offsets: Mapping[tuple[str, int], int]) -> list[spb.StreamsTaskOffset]:
    return [spb.StreamsTaskOffset(subtopology_id=s, partition=p, offset=o) for (s, p), o in sorted(offsets.items())]


def request_from_pb(r: spb.StreamsGroupHeartbeatRequest, peer: str,
                    principal: str | None = None) -> StreamsHeartbeatRequest:
    def opt(name: str) -> Any:
        return getattr(r, name) if r.HasField(name) else None  # type: ignore[arg-type]

    return StreamsHeartbeatRequest(
        group_id=r.group_id, member_id=r.member_id, member_epoch=r.member_epoch,
        endpoint_information_epoch=r.endpoint_information_epoch, instance_id=opt("instance_id"),
        rack_id=opt("rack_id"), rebalance_timeout_ms=r.rebalance_timeout_ms,
        topology=topology_from_pb(r.topology) if r.HasField("topology") else None,
        active_tasks=tasks_from_pb(r.active_tasks) if r.HasField("active_tasks") else None,
        standby_tasks=tasks_from_pb(r.standby_tasks) if r.HasField("standby_tasks") else None,
        warmup_tasks=tasks_from_pb(r.warmup_tasks) if r.HasField("warmup_tasks") else None,
        process_id=opt("process_id"),
        user_endpoint=(r.user_endpoint.host, r.user_endpoint.port) if r.HasField("user_endpoint") else None,
        client_tags=tuple((kv.key, kv.value) for kv in r.client_tags.items) if r.HasField("client_tags") else None,
        task_offsets=_offsets(r.task_offsets) if r.HasField("task_offsets") else None,
        task_end_offsets=_offsets(r.task_end_offsets) if r.HasField("task_end_offsets") else None,
        shutdown_application=r.shutdown_application, client_id=r.client_id,
        client_host=peer if r.member_epoch == 0 else "", principal=principal)


def response_to_pb(resp: StreamsHeartbeatResponse) -> spb.StreamsGroupHeartbeatResponse:
    out = spb.StreamsGroupHeartbeatResponse(
        error_code=resp.error_code, member_id=resp.member_id, member_epoch=resp.member_epoch,
        heartbeat_interval_ms=resp.heartbeat_interval_ms, acceptable_recovery_lag=resp.acceptable_recovery_lag,
        task_offset_interval_ms=resp.task_offset_interval_ms)
    if resp.error_message is not None:
        out.error_message = resp.error_message
    if resp.status is not None:
        out.status.SetInParent()
        out.status.items.extend(spb.StreamsStatus(status_code=int(s.code), status_detail=s.detail)
                                for s in resp.status)
    out.endpoint_information_epoch = resp.endpoint_information_epoch
    if resp.partitions_by_user_endpoint is not None:
        out.partitions_by_user_endpoint.SetInParent()
        for e in resp.partitions_by_user_endpoint:
            item = out.partitions_by_user_endpoint.items.add()
            item.user_endpoint.host, item.user_endpoint.port = e.host, e.port
            item.active_partitions.extend(spb.StreamsTopicPartitions(topic=t, partitions=ps) for t, ps in e.active)
            item.standby_partitions.extend(spb.StreamsTopicPartitions(topic=t, partitions=ps) for t, ps in e.standby)
    for name in ("active_tasks", "standby_tasks", "warmup_tasks"):
        tasks = getattr(resp, name)
        if tasks is not None:
            field = getattr(out, name)
            field.SetInParent()
            field.tasks.extend(tasks_to_pb(tasks))
    return out


class StreamsService(Service):
    """StreamsGroupHeartbeat needs READ on the group and StreamsGroupDescribe DESCRIBE, as Kafka's; with ACLs on,
    StreamsGroupDescribe shows no member hosts (stricter than DescribeGroups)."""

    @rpc(READ, spb.StreamsGroupHeartbeatResponse)
    async def StreamsGroupHeartbeat(self, request: spb.StreamsGroupHeartbeatRequest,
                                    caller: Caller) -> spb.StreamsGroupHeartbeatResponse:
        if len(request.group_id) > limits.ID_MAX_CHARS or len(request.member_id) > limits.ID_MAX_CHARS:
            raise CoordinatorError(Errors.INVALID_REQUEST, "GroupId or MemberId is too long.")
        try:
            req = request_from_pb(request, caller.peer(), caller.principal)
        except ValueError as e:
            raise CoordinatorError(Errors.INVALID_REQUEST, str(e)) from None
        shard = self.shard
        asked: list[str] = []  # the internal topics this heartbeat asks the topic creator for

        def op(now: int) -> Result[StreamsHeartbeatResponse]:
            res = streams_shard.heartbeat(shard, req, now)
            asked.extend(t.name for task in res.tasks if isinstance(task, CreateInternalTopics) for t in task.topics)
            return res

        resp = await self.submit("StreamsGroupHeartbeat", op, req.group_id)
        creator = self.runtime.topic_creator
        if asked and resp.status and creator is not None:
            resp = replace(resp, status=with_creation_errors(resp.status, creator.errors(asked)))
        return response_to_pb(resp)

    @rpc(DESCRIBE, spb.StreamsGroupDescribeResponse, per_group=True)
    async def StreamsGroupDescribe(self, request: spb.StreamsGroupDescribeRequest,
                                   caller: Caller) -> spb.StreamsGroupDescribeResponse:
        def invalid(group_id: str, code: Errors, message: str) -> spb.StreamsDescribedGroup:
            return spb.StreamsDescribedGroup(group_id=group_id, error_code=int(code), error_message=message)

        def hosts_hidden(described: list[spb.StreamsDescribedGroup]) -> list[spb.StreamsDescribedGroup]:
            if caller.secured:
                for g in described:
                    for m in g.members:
                        m.client_host = ""
            return described

        out = spb.StreamsGroupDescribeResponse()
        await self.submit_each("StreamsGroupDescribe", list(request.group_ids),
                               lambda ids, now: Result([describe(self.shard, g) for g in ids]), invalid, hosts_hidden,
                               out.groups, caller, DESCRIBE)
        return out


def describe(shard: Any, group_id: str) -> spb.StreamsDescribedGroup:
    """Kafka's StreamsGroupDescribe for one group: state, epochs, topology and every member's tasks."""
    sg = shard.streams
    g = sg.groups.get(group_id)
    if g is None:
        return spb.StreamsDescribedGroup(group_id=group_id[:limits.ECHO_MAX_CHARS],
                                         group_state=StreamsGroupState.DEAD.value,
                                         error_code=int(Errors.GROUP_ID_NOT_FOUND),
                                         error_message="The group is not a streams group or does not exist.")
    out = spb.StreamsDescribedGroup(group_id=group_id, group_state=sg.state(group_id).value,
                                    group_epoch=g.group_epoch, assignment_epoch=g.target_assignment_epoch)
    if g.topology is not None:
        out.topology.CopyFrom(topology_to_pb(g.topology))
    for mid in sorted(g.members):
        m = g.members[mid]
        cur = g.current.get(mid)
        tgt = g.target.get(mid)
        d = out.members.add(member_id=mid, member_epoch=cur.member_epoch if cur else 0, client_id=m.client_id,
                            client_host=m.client_host, topology_epoch=m.topology_epoch, process_id=m.process_id,
                            client_tags=[spb.StreamsKeyValue(key=k, value=v) for k, v in m.client_tags],
                            task_offsets=_offsets_pb(m.task_offsets),
                            task_end_offsets=_offsets_pb(m.task_end_offsets))
        if m.instance_id is not None:
            d.instance_id = m.instance_id
        if m.rack_id is not None:
            d.rack_id = m.rack_id
        if m.user_endpoint is not None:
            d.user_endpoint.host, d.user_endpoint.port = m.user_endpoint
        if cur is not None:
            d.active_tasks.extend(tasks_to_pb(cur.active))
            d.standby_tasks.extend(tasks_to_pb(cur.standby))
            d.warmup_tasks.extend(tasks_to_pb(cur.warmup))
        if tgt is not None and g.target_assignment_epoch:
            d.target_active_tasks.extend(tasks_to_pb(tgt.active))
            d.target_standby_tasks.extend(tasks_to_pb(tgt.standby))
            d.target_warmup_tasks.extend(tasks_to_pb(tgt.warmup))
    return out
