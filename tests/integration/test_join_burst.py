"""Bursts are queued, not cancelled (issue 30 step 5), and a refused client backs off instead of retrying into
the backlog.

A restarted coordinator sees every member rejoin at once. gRPC holds calls the server has not taken up yet in
a queue of its own: at its default size (1,000, refusing at random from there up to 3,000) a burst of 5,000
joins came back with about 1,800 CANCELLED (measured before queued.max.requests existed). Sized by
queued.max.requests, the queue holds the burst and every join is answered.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import re
from collections import Counter

import grpc
import pytest

from groupcoord.clients.group_member import GroupMember
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.clients.cluster import Coordinator, wait_until

BURST = 5000
GROUPS = 50
CHANNELS = 10


async def _burst_of_joins(address: str) -> Counter[str]:
    """BURST joins (epoch 0) sent at once over CHANNELS connections; what each call ended with."""
    channels = [grpc.aio.insecure_channel(address) for _ in range(CHANNELS)]
    outcomes: Counter[str] = Counter()
    try:
        for channel in channels:
            await channel.channel_ready()
        stubs = [pb_grpc.GroupCoordinatorStub(c) for c in channels]

        async def join(i: int) -> None:
            req = pb.ConsumerGroupHeartbeatRequest(group_id=f"burst-{i % GROUPS}", member_id=f"member-{i}",
                                                   member_epoch=0, rebalance_timeout_ms=30_000,
                                                   subscribed_topic_names=pb.StringList(values=["orders"]))
            try:
                resp = await stubs[i % CHANNELS].ConsumerGroupHeartbeat(req, timeout=50)
                outcomes["answered" if resp.error_code == 0 else f"error_code {resp.error_code}"] += 1
            except grpc.aio.AioRpcError as e:
                outcomes[e.code().name] += 1

        await asyncio.gather(*(join(i) for i in range(BURST)))
    finally:
        for channel in channels:
            await channel.close()
    return outcomes


def test_a_burst_of_5000_joins_at_a_fresh_coordinator_is_queued_and_every_join_answered() -> None:
    coordinator = Coordinator({}, topics="orders:100").start()  # `groupcoord serve` on its defaults
    try:
        outcomes = asyncio.run(_burst_of_joins(coordinator.address))
    finally:
        coordinator.kill()
    assert outcomes == Counter({"answered": BURST})


def test_member_refused_with_resource_exhausted_backs_off_exponentially_on_the_same_channel(
        caplog: pytest.LogCaptureFixture) -> None:
    # One call at a time: a heartbeat stream held open below takes the only slot, so every other call is
    # refused at once with RESOURCE_EXHAUSTED.
    coordinator = Coordinator({"groupcoord.max.concurrent.requests": 1}).start()
    held: queue.Queue[pb.ConsumerGroupHeartbeatRequest | None] = queue.Queue()
    channel = grpc.insecure_channel(coordinator.address)
    member = GroupMember(coordinator.address, "refused", ["orders"], heartbeat_stream=False)
    try:
        replies = pb_grpc.GroupCoordinatorStub(channel).ConsumerGroupHeartbeatStream(iter(held.get, None))
        held.put(pb.ConsumerGroupHeartbeatRequest(group_id="holder", member_id="holder", member_epoch=0,
                                                  rebalance_timeout_ms=30_000,
                                                  subscribed_topic_names=pb.StringList(values=["orders"])))
        assert next(replies).error_code == 0  # the stream is open on the server: the slot is taken
        caplog.set_level(logging.INFO, logger="groupcoord.client")
        route = member._route
        member.start()

        def delays() -> list[float]:
            return [float(m) for m in re.findall(r"RESOURCE_EXHAUSTED; retrying in ([0-9.]+) s", caplog.text)]

        wait_until(lambda: len(delays()) >= 5, 30, "five refused heartbeats")
        first = delays()[:5]
        # Jittered to [d/2, d] with d doubling from 100 ms: each wait at least as long as the one before.
        assert first == sorted(first), first
        assert 0.05 <= first[0] <= 0.1 and first[4] >= 0.8, first
        assert member._route is route, "an overloaded coordinator is retried on the same channel"
        assert not member.wait_joined(timeout=0)
        held.put(None)  # the held stream ends: the slot is free
        replies.cancel()
        assert member.wait_joined(timeout=30)
    finally:
        held.put(None)
        member.close()
        channel.close()
        coordinator.kill()
