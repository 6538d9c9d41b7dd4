"""HeartbeatBatcher against a real coordinator process: concurrent heartbeats share messages and each gets its
own answer, a crowd larger than a message holds is split at the coordinator's limit, linger gathers heartbeats
sent apart, and a coordinator that stops answering (SIGSTOP) fails every waiting heartbeat by its deadline,
after which a new stream serves."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest

from groupcoord.clients.heartbeat_batcher import BATCH_MAX_HEARTBEATS, HeartbeatBatcher
from groupcoord.coordinator.core import limits
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.clients.cluster import Coordinator

SETTINGS = {"group.consumer.min.heartbeat.interval.ms": 20, "group.consumer.heartbeat.interval.ms": 200,
            "group.consumer.min.session.timeout.ms": 500, "group.consumer.session.timeout.ms": 30000}


def join(group: str) -> pb.ConsumerGroupHeartbeatRequest:
    return pb.ConsumerGroupHeartbeatRequest(group_id=group, member_epoch=0, rebalance_timeout_ms=5000,
                                            subscribed_topic_names=pb.StringList(values=["orders"]),
                                            topic_partitions=pb.TopicPartitionsList())


@pytest.fixture(scope="module")
def coordinator() -> Any:
    c = Coordinator(SETTINGS).start()
    try:
        yield c
    finally:
        c.stop()


def run(coordinator: Coordinator, body: Callable[[HeartbeatBatcher], Awaitable[Any]], linger_ms: float = 0.0) -> Any:
    async def main() -> Any:
        async with grpc.aio.insecure_channel(coordinator.address) as channel:
            batcher = HeartbeatBatcher(pb_grpc.GroupCoordinatorStub(channel), linger_ms)
            try:
                return await body(batcher)
            finally:
                await batcher.close()
    return asyncio.run(main())


def test_the_client_limit_is_the_coordinators() -> None:
    assert BATCH_MAX_HEARTBEATS == limits.HEARTBEAT_BATCH_MAX


def test_concurrent_heartbeats_share_messages_and_each_gets_its_own_answer(coordinator: Coordinator) -> None:
    async def body(batcher: HeartbeatBatcher) -> None:
        joined = await asyncio.gather(*(batcher.heartbeat(join(f"share-{k % 4}"), timeout=10) for k in range(200)))
        assert [a.error_code for a in joined] == [0] * 200
        assert len({a.member_id for a in joined}) == 200
        assert batcher.messages < 200  # they travelled together
        # each answer is its own request's: a heartbeat names its member, and the answer names it back
        groups = [f"share-{k % 4}" for k in range(200)]
        again = await asyncio.gather(*(batcher.heartbeat(pb.ConsumerGroupHeartbeatRequest(
            group_id=g, member_id=a.member_id, member_epoch=a.member_epoch), timeout=10)
            for g, a in zip(groups, joined, strict=True)))
        assert [a.member_id for a in again] == [a.member_id for a in joined]
        assert [a.error_code for a in again] == [0] * 200

    run(coordinator, body)


def test_more_waiting_heartbeats_than_a_message_holds_are_split_at_the_limit(coordinator: Coordinator) -> None:
    async def body(batcher: HeartbeatBatcher) -> None:
        n = 2 * BATCH_MAX_HEARTBEATS + 500
        joined = await asyncio.gather(*(batcher.heartbeat(join(f"split-{k % 10}"), timeout=30) for k in range(n)))
        assert [a.error_code for a in joined] == [0] * n  # a message over the limit is refused heartbeat by heartbeat
        assert batcher.heartbeats == n and batcher.messages >= 3

    run(coordinator, body)


def test_linger_gathers_heartbeats_sent_apart_into_one_message(coordinator: Coordinator) -> None:
    async def body(batcher: HeartbeatBatcher) -> None:
        first = asyncio.ensure_future(batcher.heartbeat(join("linger"), timeout=10))
        await asyncio.sleep(0.02)
        second = asyncio.ensure_future(batcher.heartbeat(join("linger"), timeout=10))
        answers = await asyncio.gather(first, second)
        assert [a.error_code for a in answers] == [0, 0]
        assert (batcher.messages, batcher.heartbeats) == (1, 2)

    run(coordinator, body, linger_ms=300)


def test_a_coordinator_that_stops_answering_fails_every_waiting_heartbeat_by_its_deadline_then_a_new_stream_serves(
        coordinator: Coordinator) -> None:
    async def body(batcher: HeartbeatBatcher) -> None:
        member = await batcher.heartbeat(join("paused"), timeout=10)
        coordinator.pause()
        try:
            started = time.monotonic()
            failures = await asyncio.gather(*(batcher.heartbeat(join("paused"), timeout=0.5) for _ in range(5)),
                                            return_exceptions=True)
            assert time.monotonic() - started < 5
            assert all(isinstance(f, grpc.RpcError) for f in failures)
            assert {f.code() for f in failures if isinstance(f, grpc.RpcError)} == {grpc.StatusCode.DEADLINE_EXCEEDED}
        finally:
            coordinator.resume()
        again = await batcher.heartbeat(pb.ConsumerGroupHeartbeatRequest(
            group_id="paused", member_id=member.member_id, member_epoch=member.member_epoch), timeout=10)
        assert again.error_code == 0 and again.member_id == member.member_id

    run(coordinator, body)


def test_answers_that_come_in_several_messages_are_all_delivered() -> None:
    small = Coordinator({**SETTINGS, "groupcoord.response.max.bytes": 16384}).start()
    try:
        async def body(batcher: HeartbeatBatcher) -> None:
            n = BATCH_MAX_HEARTBEATS  # about 60 bytes an answer: at least 4 messages of at most 15 KB
            joined = await asyncio.gather(*(batcher.heartbeat(join("small-answers"), timeout=30) for _ in range(n)))
            assert [a.error_code for a in joined] == [0] * n
            assert len({a.member_id for a in joined}) == n and batcher.heartbeats == n

        run(small, body)
    finally:
        small.stop()
