"""GroupMember's heartbeats on ConsumerGroupHeartbeatStream keep a deadline per heartbeat: a coordinator that stops
answering (SIGSTOP) fails the heartbeat within the deadline, the stream is never reused, and heartbeats resume
on a new stream once it answers again."""

from __future__ import annotations

import time

import grpc
import pytest

from groupcoord.clients.heartbeat_stream import HeartbeatStream
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.clients.cluster import Coordinator

SETTINGS = {"group.consumer.min.heartbeat.interval.ms": 20, "group.consumer.heartbeat.interval.ms": 200,
            "group.consumer.min.session.timeout.ms": 500, "group.consumer.session.timeout.ms": 5000}


def join(group: str) -> pb.ConsumerGroupHeartbeatRequest:
    return pb.ConsumerGroupHeartbeatRequest(group_id=group, member_id="", member_epoch=0, rebalance_timeout_ms=5000,
                                            subscribed_topic_names=pb.StringList(values=["orders"]),
                                            topic_partitions=pb.TopicPartitionsList())


def test_a_stream_heartbeat_past_its_deadline_fails_and_the_stream_is_not_reused() -> None:
    coordinator = Coordinator(SETTINGS).start()
    channel = grpc.insecure_channel(coordinator.address)
    try:
        stream = HeartbeatStream(pb_grpc.GroupCoordinatorStub(channel))
        first = stream.call(join("stream-a"), timeout=10)
        second = stream.call(pb.ConsumerGroupHeartbeatRequest(group_id="stream-a", member_id=first.member_id,
                                                              member_epoch=first.member_epoch), timeout=10)
        assert first.error_code == 0 and second.error_code == 0 and second.member_id == first.member_id
        coordinator.pause()
        try:
            started = time.monotonic()
            with pytest.raises(grpc.RpcError) as e:
                stream.call(join("stream-b"), timeout=0.5)
            assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert time.monotonic() - started < 5
            assert stream.broken
        finally:
            coordinator.resume()
        with pytest.raises(grpc.RpcError):  # never reused: its late response must not answer a later request
            stream.call(join("stream-c"), timeout=5)
        fresh = HeartbeatStream(pb_grpc.GroupCoordinatorStub(channel))
        third = fresh.call(pb.ConsumerGroupHeartbeatRequest(group_id="stream-a", member_id=first.member_id,
                                                            member_epoch=second.member_epoch), timeout=10)
        assert third.error_code == 0 and third.member_id == first.member_id
        fresh.close()
    finally:
        channel.close()
        coordinator.kill()
