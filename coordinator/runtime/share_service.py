"""The share-group gRPC servicer (`ShareGroupCoordinator`): protobuf to the core's share messages and back.

It decides nothing: every operation is queued on the runtime like the other group operations, so share
groups share the event loop, the log and the timers. Errors go back in-band with Kafka's codes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from groupcoord.coordinator.core import limits, share_handlers
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.share_records import (
    AcknowledgeRange,
    AcquirePartition,
    ShareAcknowledgeRequest,
    ShareAcquireRequest,
    ShareGroupHeartbeatRequest,
)
from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime
from groupcoord.wire.v1 import share_pb2 as spb
from groupcoord.wire.v1 import share_pb2_grpc as spb_grpc

log = logging.getLogger("groupcoord.share")
T = TypeVar("T")
MAX_PARTITIONS = 10_000  # partitions or acknowledgement batches in one request


def _peer_host(context: Any) -> str:
    peer = context.peer() if context is not None else ""
    return peer.rsplit(":", 1)[0] if peer else ""


class ShareGroupService(spb_grpc.ShareGroupCoordinatorServicer):
    def __init__(self, runtime: CoordinatorRuntime) -> None:
        self.runtime = runtime
        self.shard = runtime.shard

    def principal_of(self, context: Any) -> str | None:
        return None

    async def _run(self, name: str, group_id: str, fn: Callable[[int], Any],
                   on_error: Callable[[Errors, str], T]) -> Any:
        if not self.runtime.loaded:
            return on_error(Errors.COORDINATOR_LOAD_IN_PROGRESS, "The coordinator is loading its state; retry.")
        if self.runtime.failed is not None:
            return on_error(Errors.COORDINATOR_NOT_AVAILABLE, "The coordinator's record log failed; restart it.")
        if self.runtime.router is not None:
            refusal = self.runtime.router(group_id)
            if refusal is not None:
                return on_error(*refusal)
        try:
            limits.check_group_id(group_id)
            return await self.runtime.submit(name, fn)
        except CoordinatorError as e:
            return on_error(e.code, e.message)
        except Exception as e:
            log.exception("%s failed", name)
            return on_error(Errors.UNKNOWN_SERVER_ERROR, f"internal error: {type(e).__name__}")

    async def ShareGroupHeartbeat(self, request: spb.ShareGroupHeartbeatRequest,
                                  context: grpc.aio.ServicerContext) -> spb.ShareGroupHeartbeatResponse:
        def error(code: Errors, message: str) -> spb.ShareGroupHeartbeatResponse:
            return spb.ShareGroupHeartbeatResponse(error_code=int(code), error_message=message,
                                                   member_id=request.member_id[:limits.ID_MAX_CHARS],
                                                   member_epoch=request.member_epoch)

        try:
            limits.check_length("member_id", request.member_id)
            limits.check_length("rack_id", request.rack_id if request.HasField("rack_id") else None)
            limits.check_length("client_id", request.client_id)
            names = None
            if request.HasField("subscribed_topic_names"):
                limits.check_count("subscribed topic names", len(request.subscribed_topic_names.values),
                                   limits.SUBSCRIPTION_MAX_TOPICS)
                limits.check_lengths("topic name", request.subscribed_topic_names.values,
                                     limits.TOPIC_NAME_MAX_CHARS)
                names = tuple(request.subscribed_topic_names.values)
        except CoordinatorError as e:
            return error(e.code, e.message)
        req = ShareGroupHeartbeatRequest(
            request.group_id, request.member_id, request.member_epoch,
            request.rack_id if request.HasField("rack_id") else None, names, request.client_id,
            _peer_host(context), self.principal_of(context))

        response = await self._run("ShareGroupHeartbeat", request.group_id,
                                   lambda now: share_handlers.heartbeat(self.shard, req, now), error)
        if isinstance(response, spb.ShareGroupHeartbeatResponse):
            return response
        out = spb.ShareGroupHeartbeatResponse(
            error_code=int(response.error_code), error_message=response.error_message,
            member_id=response.member_id, member_epoch=response.member_epoch,
            heartbeat_interval_ms=response.heartbeat_interval_ms, has_assignment=response.assignment is not None)
        image = self.shard.metadata
        for topic_id, parts in sorted((response.assignment or {}).items()):
            t = image.by_id.get(topic_id)
            out.assignment.add(topic_id=topic_id, partitions=sorted(parts), topic_name=t.name if t else "")
        return out

    async def ShareAcquire(self, request: spb.ShareAcquireRequest,
                           context: grpc.aio.ServicerContext) -> spb.ShareAcquireResponse:
        def error(code: Errors, message: str) -> spb.ShareAcquireResponse:
            return spb.ShareAcquireResponse(error_code=int(code), error_message=message)

        try:
            limits.check_length("member_id", request.member_id)
            limits.check_count("partitions", len(request.partitions), MAX_PARTITIONS)
            limits.check_lengths("topic id", (p.topic_id for p in request.partitions), limits.TOPIC_NAME_MAX_CHARS)
        except CoordinatorError as e:
            return error(e.code, e.message)
        req = ShareAcquireRequest(request.group_id, request.member_id, tuple(
            AcquirePartition(p.topic_id, p.partition, p.log_start_offset, p.log_end_offset)
            for p in request.partitions), request.max_records, self.principal_of(context))
        response = await self._run("ShareAcquire", request.group_id,
                                   lambda now: share_handlers.acquire(self.shard, req, now), error)
        if isinstance(response, spb.ShareAcquireResponse):
            return response
        out = spb.ShareAcquireResponse(error_code=int(response.error_code), error_message=response.error_message,
                                       record_lock_duration_ms=response.record_lock_duration_ms)
        for p in response.partitions:
            part = out.partitions.add(topic_id=p.topic_id, partition=p.partition, error_code=int(p.error_code),
                                      error_message=p.error_message, lock_deadline_ms=p.lock_deadline_ms,
                                      start_offset=p.start_offset)
            for first, last, count in p.ranges:
                part.acquired_records.add(first_offset=first, last_offset=last, delivery_count=count)
        return out

    async def ShareAcknowledge(self, request: spb.ShareAcknowledgeRequest,
                               context: grpc.aio.ServicerContext) -> spb.ShareAcknowledgeResponse:
        def error(code: Errors, message: str) -> spb.ShareAcknowledgeResponse:
            return spb.ShareAcknowledgeResponse(error_code=int(code), error_message=message)

        try:
            limits.check_length("member_id", request.member_id)
            limits.check_count("acknowledgement batches", len(request.batches), MAX_PARTITIONS)
            limits.check_lengths("topic id", (b.topic_id for b in request.batches), limits.TOPIC_NAME_MAX_CHARS)
        except CoordinatorError as e:
            return error(e.code, e.message)
        req = ShareAcknowledgeRequest(request.group_id, request.member_id, tuple(
            AcknowledgeRange(b.topic_id, b.partition, b.first_offset, b.last_offset, b.acknowledge_type)
            for b in request.batches), self.principal_of(context))
        response = await self._run("ShareAcknowledge", request.group_id,
                                   lambda now: share_handlers.acknowledge(self.shard, req, now), error)
        if isinstance(response, spb.ShareAcknowledgeResponse):
            return response
        out = spb.ShareAcknowledgeResponse(error_code=int(response.error_code), error_message=response.error_message)
        for r in response.results:
            out.results.add(topic_id=r.topic_id, partition=r.partition, first_offset=r.first, last_offset=r.last,
                            error_code=int(r.error_code), error_message=r.error_message)
        return out

    async def DescribeShareGroupOffsets(self, request: spb.DescribeShareGroupOffsetsRequest,
                                        context: grpc.aio.ServicerContext) -> spb.DescribeShareGroupOffsetsResponse:
        def error(code: Errors, message: str) -> spb.DescribeShareGroupOffsetsResponse:
            return spb.DescribeShareGroupOffsetsResponse(error_code=int(code), error_message=message)

        def run(now: int) -> Any:
            try:
                return Result(share_handlers.describe_offsets(self.shard, request.group_id))
            except CoordinatorError as e:
                return Result(error(e.code, e.message))

        response = await self._run("DescribeShareGroupOffsets", request.group_id, run, error)
        if isinstance(response, spb.DescribeShareGroupOffsetsResponse):
            return response
        out = spb.DescribeShareGroupOffsetsResponse()
        image = self.shard.metadata
        for topic_id, partition, sp in response:
            t = image.by_id.get(topic_id)
            out.partitions.add(topic_id=topic_id, topic_name=t.name if t else "", partition=partition,
                               start_offset=sp.start_offset, end_offset=sp.next_offset, in_flight=sp.in_flight,
                               acquired=sp.acquired_count(), available=sp.available_count())
        return out
