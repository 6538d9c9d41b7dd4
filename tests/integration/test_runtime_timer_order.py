"""The runtime's order of events around a due timer: popped, a heartbeat already queued runs, then the timer's
operation runs. The member heartbeat in time, so it must stay (the core checks the deadline when the timer
operation runs, not when the runtime popped it)."""

from __future__ import annotations

import asyncio
import itertools

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.runtime.executor import BackgroundExecutor
from groupcoord.coordinator.runtime.metrics import CoordinatorMetrics
from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime
from tests.core.context import image_of
from tests.durability.runtime_harness import CONFIG


def test_heartbeat_queued_before_a_popped_session_timer_keeps_the_member() -> None:
    async def scenario() -> None:
        now = [1_000_000]
        ids = itertools.count(1)
        shard = GroupCoordinatorShard(BrokerConfig.from_mapping(CONFIG), lambda: f"m{next(ids)}",
                                      image_of({"foo": 4}))
        metrics = CoordinatorMetrics(1)
        runtime = CoordinatorRuntime(shard, metrics, BackgroundExecutor(1, metrics), clock=lambda: now[0])
        await runtime.start()
        try:
            joined = await runtime.submit("join", lambda t: shard.consumer_group_heartbeat(
                ConsumerGroupHeartbeatRequest(group_id="g", member_id="", member_epoch=0, rebalance_timeout_ms=5000,
                                              subscribed_topic_names=("foo",), topic_partitions={}), t))
            member_id, epoch = joined.member_id, joined.member_epoch
            # Keep the runtime's own wake-up from firing on the wall clock; we drive the timer by hand.
            runtime.timers.stop()
            now[0] += 1000  # the session deadline is reached
            heartbeat = ConsumerGroupHeartbeatRequest(group_id="g", member_id=member_id, member_epoch=epoch)
            runtime._enqueue("heartbeat", lambda t: shard.consumer_group_heartbeat(heartbeat, t))  # queued first
            runtime.timers.fire()  # pops the due session timer and queues its operation behind the heartbeat
            await runtime.submit("drain", lambda t: shard.list_groups([], [], t))
            assert member_id in shard.groups["g"].members
            assert shard.stats.members_fenced_session == 0
        finally:
            await runtime.stop()

    asyncio.run(scenario())
