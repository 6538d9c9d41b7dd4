"""The share-group gRPC servicer (`ShareGroupCoordinator`): protobuf to the core's share messages and back.

It decides nothing: every operation is queued on the runtime like the other group operations, so share
groups share the event loop, the log and the timers, and every RPC goes through the same request pipeline
(`pipeline.py`): ShareGroupHeartbeat, ShareAcquire and ShareAcknowledge need READ on the group, as Kafka's
ShareGroupHeartbeat, ShareFetch and ShareAcknowledge do; DescribeShareGroupOffsets needs DESCRIBE.
"""

from __future__ import annotations

from typing import Any

from groupcoord.coordinator.core import limits
from groupcoord.coordinator.core.errors import CoordinatorError
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.share import acquisition as share_acquisition
from groupcoord.coordinator.core.share import handlers as share_handlers
from groupcoord.coordinator.core.share.records import (
    AcknowledgeRange,
    AcquirePartition,
    ShareAcknowledgeRequest,
    ShareAcquireRequest,
    ShareGroupHeartbeatRequest,
)
from groupcoord.coordinator.runtime.pipeline import DESCRIBE, READ, Caller, Service, rpc
from groupcoord.wire.v1 import share_pb2 as spb

MAX_PARTITIONS = 10_000  # partitions or acknowledgement batches in one request


def _peer_host(caller: Caller) -> str:
    peer = caller.peer()
    return peer.rsplit(":", 1)[0] if peer else ""


class ShareGroupService(Service):
    @rpc(READ, spb.ShareGroupHeartbeatResponse)
    async def ShareGroupHeartbeat(self, request: spb.ShareGroupHeartbeatRequest,
                                  caller: Caller) -> spb.ShareGroupHeartbeatResponse:
        limits.check_group_id(request.group_id)
        limits.check_length("member_id", request.member_id)
        limits.check_length("rack_id", request.rack_id if request.HasField("rack_id") else None)
        limits.check_length("client_id", request.client_id)
        names = None
        if request.HasField("subscribed_topic_names"):
            limits.check_count("subscribed topic names", len(request.subscribed_topic_names.values),
                               limits.SUBSCRIPTION_MAX_TOPICS)
            limits.check_lengths("topic name", request.subscribed_topic_names.values, limits.TOPIC_NAME_MAX_CHARS)
            names = tuple(request.subscribed_topic_names.values)
        req = ShareGroupHeartbeatRequest(
            request.group_id, request.member_id, request.member_epoch,
            request.rack_id if request.HasField("rack_id") else None, names, request.client_id,
            _peer_host(caller), caller.principal)
        response = await self.submit("ShareGroupHeartbeat", lambda now: share_handlers.heartbeat(self.shard, req, now),
                                     req.group_id)
        out = spb.ShareGroupHeartbeatResponse(
            error_code=int(response.error_code), error_message=response.error_message,
            member_id=response.member_id, member_epoch=response.member_epoch,
            heartbeat_interval_ms=response.heartbeat_interval_ms, has_assignment=response.assignment is not None)
        image = self.shard.metadata
        for topic_id, parts in sorted((response.assignment or {}).items()):
            t = image.by_id.get(topic_id)
            out.assignment.add(topic_id=topic_id, partitions=sorted(parts), topic_name=t.name if t else "")
        return out

    @rpc(READ, spb.ShareAcquireResponse)
    async def ShareAcquire(self, request: spb.ShareAcquireRequest, caller: Caller) -> spb.ShareAcquireResponse:
        limits.check_group_id(request.group_id)
        limits.check_length("member_id", request.member_id)
        limits.check_count("partitions", len(request.partitions), MAX_PARTITIONS)
        limits.check_lengths("topic id", (p.topic_id for p in request.partitions), limits.TOPIC_NAME_MAX_CHARS)
        req = ShareAcquireRequest(request.group_id, request.member_id, tuple(
            AcquirePartition(p.topic_id, p.partition, p.log_start_offset, p.log_end_offset)
            for p in request.partitions), request.max_records, caller.principal)
        response = await self.submit("ShareAcquire", lambda now: share_acquisition.acquire(self.shard, req, now),
                                     req.group_id)
        out = spb.ShareAcquireResponse(error_code=int(response.error_code), error_message=response.error_message,
                                       record_lock_duration_ms=response.record_lock_duration_ms)
        for p in response.partitions:
            part = out.partitions.add(topic_id=p.topic_id, partition=p.partition, error_code=int(p.error_code),
                                      error_message=p.error_message, lock_deadline_ms=p.lock_deadline_ms,
                                      start_offset=p.start_offset)
            for first, last, count in p.ranges:
                part.acquired_records.add(first_offset=first, last_offset=last, delivery_count=count)
        return out

    @rpc(READ, spb.ShareAcknowledgeResponse)
    async def ShareAcknowledge(self, request: spb.ShareAcknowledgeRequest,
                               caller: Caller) -> spb.ShareAcknowledgeResponse:
        limits.check_group_id(request.group_id)
        limits.check_length("member_id", request.member_id)
        limits.check_count("acknowledgement batches", len(request.batches), MAX_PARTITIONS)
        limits.check_lengths("topic id", (b.topic_id for b in request.batches), limits.TOPIC_NAME_MAX_CHARS)
        req = ShareAcknowledgeRequest(request.group_id, request.member_id, tuple(
            AcknowledgeRange(b.topic_id, b.partition, b.first_offset, b.last_offset, b.acknowledge_type)
            for b in request.batches), caller.principal)
        response = await self.submit("ShareAcknowledge",
                                     lambda now: share_acquisition.acknowledge(self.shard, req, now), req.group_id)
        out = spb.ShareAcknowledgeResponse(error_code=int(response.error_code), error_message=response.error_message)
        for r in response.results:
            out.results.add(topic_id=r.topic_id, partition=r.partition, first_offset=r.first, last_offset=r.last,
                            error_code=int(r.error_code), error_message=r.error_message)
        return out

    @rpc(DESCRIBE, spb.DescribeShareGroupOffsetsResponse)
    async def DescribeShareGroupOffsets(self, request: spb.DescribeShareGroupOffsetsRequest,
                                        caller: Caller) -> spb.DescribeShareGroupOffsetsResponse:
        limits.check_group_id(request.group_id)

        def run(now: int) -> Result[Any]:
            try:
                return Result(share_acquisition.describe_offsets(self.shard, request.group_id))
            except CoordinatorError as e:  # an answer, not a failed operation: the runtime logs those
                return Result(e)

        response = await self.submit("DescribeShareGroupOffsets", run, request.group_id)
        if isinstance(response, CoordinatorError):
            raise response
        out = spb.DescribeShareGroupOffsetsResponse()
        image = self.shard.metadata
        for topic_id, partition, sp in response:
            t = image.by_id.get(topic_id)
            out.partitions.add(topic_id=topic_id, topic_name=t.name if t else "", partition=partition,
                               start_offset=sp.start_offset, end_offset=sp.next_offset, in_flight=sp.in_flight,
                               acquired=sp.acquired_count(), available=sp.available_count())
        return out
