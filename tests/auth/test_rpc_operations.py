"""Every RPC of every service is marked for the request pipeline with the ACL operation Kafka's KafkaApis asks
of the group: one table, read off the servicers, so an RPC cannot be added without saying what it needs."""

from __future__ import annotations

from typing import Any

import pytest

from groupcoord.coordinator.runtime.pipeline import Pipeline, stream_of
from groupcoord.coordinator.runtime.server import SERVICE, SHARE_SERVICE, STREAMS_SERVICE
from groupcoord.coordinator.runtime.service import GroupCoordinatorService
from groupcoord.coordinator.runtime.share_service import ShareGroupService
from groupcoord.coordinator.runtime.streams_service import StreamsService

STREAM = "each message as ConsumerGroupHeartbeat"
KAFKA = {
    "ConsumerGroupHeartbeat": "READ", "ConsumerGroupHeartbeatStream": STREAM,
    "ConsumerGroupHeartbeatBatchStream": STREAM, "JoinGroup": "READ", "SyncGroup": "READ", "Heartbeat": "READ",
    "LeaveGroup": "READ", "OffsetCommit": "READ", "OffsetFetch": "DESCRIBE",
    "DescribeGroups": "DESCRIBE per group", "ListGroups": "DESCRIBE per group", "DeleteGroups": "DELETE per group",
    "OffsetDelete": "DELETE", "DescribeGroupConfigs": "DESCRIBE_CONFIGS per group",
    "AlterGroupConfigs": "ALTER_CONFIGS", "FindCoordinator": "DESCRIBE per group",
    "ShareGroupHeartbeat": "READ", "ShareAcquire": "READ", "ShareAcknowledge": "READ",
    "DescribeShareGroupOffsets": "DESCRIBE",
    "StreamsGroupHeartbeat": "READ", "StreamsGroupDescribe": "DESCRIBE per group",
}


def _needs(servicer: type, name: str) -> str:
    spec: Any = getattr(servicer, name).__rpc__
    if spec.response is None:
        return STREAM
    return f"{spec.operation} per group" if spec.per_group else str(spec.operation)


def test_every_rpc_of_every_service_needs_the_operation_kafka_asks() -> None:
    table = {m.name: _needs(servicer, m.name)
             for servicer, service in ((GroupCoordinatorService, SERVICE), (ShareGroupService, SHARE_SERVICE),
                                       (StreamsService, STREAMS_SERVICE))
             for m in service.methods}
    assert table == KAFKA


def test_a_stream_served_message_by_message_must_name_a_unary_rpc_of_its_servicer() -> None:
    """`@stream_of` lets the pipeline serve the stream as one loop over its messages, each through the unary
    RPC it names (authorized and mapped as that RPC): a name that is no unary @rpc is refused at registration."""
    class Servicer:
        @stream_of("ConsumerGroupHeartbeat")
        async def ConsumerGroupHeartbeatStream(self, requests: Any, caller: Any) -> Any:  # noqa: N802
            yield None

        async def ConsumerGroupHeartbeat(self, request: Any, caller: Any) -> Any:  # noqa: N802 - not marked @rpc
            return None

    with pytest.raises(TypeError, match="names no unary @rpc"):
        Pipeline()._handler(Servicer(), SERVICE.methods_by_name["ConsumerGroupHeartbeatStream"])
    assert GroupCoordinatorService.ConsumerGroupHeartbeatStream.__rpc__.each == "ConsumerGroupHeartbeat"
