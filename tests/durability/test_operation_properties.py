"""Property: whatever sequence of operations arrives (valid and invalid, of every group type) and whatever fails
on the way (a handler raising after its records were built, a replay raising half-way through an operation, the
log's writes failing), a handler changes nothing and memory equals a fresh replay of the durable log after
every step. After a failed log the
coordinator stops; the test restarts it from the directory, as an operator would, and goes on."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.core.classic.messages import JoinGroupRequest
from groupcoord.coordinator.core.errors import CoordinatorError
from groupcoord.coordinator.core.messages import (
    CommitPartition,
    ConsumerGroupHeartbeatRequest,
    OffsetCommitRequest,
)
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.core.share.handlers import heartbeat as share_heartbeat
from groupcoord.coordinator.core.share.records import ShareGroupHeartbeatRequest
from groupcoord.coordinator.core.streams import handlers as streams_shard
from groupcoord.coordinator.core.streams.messages import StreamsHeartbeatRequest
from groupcoord.coordinator.core.streams.records import NO_TASKS
from groupcoord.coordinator.core.streams.topology import StreamsTopology, Subtopology
from tests.durability.runtime_harness import RuntimeHarness
from tests.purity import state_of

GROUPS = ("g1", "g2", "g3")
VALID_TOPOLOGY = StreamsTopology(1, (Subtopology("0", source_topics=("lines",)),))
INVALID_TOPOLOGY = StreamsTopology(1, (Subtopology("0"),))  # no source topics: STREAMS_INVALID_TOPOLOGY


class InjectedFault(Exception):
    pass


def consumer_join(gid: str, member: str) -> Callable[[GroupCoordinatorShard, int], Any]:
    req = ConsumerGroupHeartbeatRequest(group_id=gid, member_id="", member_epoch=0, rebalance_timeout_ms=5000,
                                        subscribed_topic_names=("foo",), topic_partitions={})
    return lambda shard, now: shard.consumer_group_heartbeat(req, now)


def consumer_leave(gid: str, member: str) -> Callable[[GroupCoordinatorShard, int], Any]:
    def op(shard: GroupCoordinatorShard, now: int) -> Any:
        group = shard.groups.get(gid)
        member_id = next(iter(getattr(group, "members", {}) or {}), "nobody")
        return shard.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
            group_id=gid, member_id=member_id, member_epoch=-1), now)
    return op


def consumer_unknown_member(gid: str, member: str) -> Callable[[GroupCoordinatorShard, int], Any]:
    req = ConsumerGroupHeartbeatRequest(group_id=gid, member_id="nobody", member_epoch=3)
    return lambda shard, now: shard.consumer_group_heartbeat(req, now)


def share_join(gid: str, member: str) -> Callable[[GroupCoordinatorShard, int], Any]:
    req = ShareGroupHeartbeatRequest(gid, "", 0, subscribed_topic_names=("foo",))
    return lambda shard, now: share_heartbeat(shard, req, now)


def streams_join(topology: StreamsTopology) -> Callable[[str, str], Callable[[GroupCoordinatorShard, int], Any]]:
    def make(gid: str, member: str) -> Callable[[GroupCoordinatorShard, int], Any]:
        req = StreamsHeartbeatRequest(gid, member, 0, topology=topology, process_id=member, rebalance_timeout_ms=1000,
                                      active_tasks=NO_TASKS, standby_tasks=NO_TASKS, warmup_tasks=NO_TASKS)
        return lambda shard, now: streams_shard.heartbeat(shard, req, now)
    return make


def commit(gid: str, member: str) -> Callable[[GroupCoordinatorShard, int], Any]:
    req = OffsetCommitRequest(gid, "", -1, [CommitPartition("foo", len(member) % 4, 10 * len(member))])
    return lambda shard, now: shard.offset_commit(req, now)


def delete(gid: str, member: str) -> Callable[[GroupCoordinatorShard, int], Any]:
    return lambda shard, now: shard.delete_groups([gid], now)


OPERATIONS: dict[str, Callable[[str, str], Callable[[GroupCoordinatorShard, int], Any]]] = {
    "consumer-join": consumer_join, "consumer-leave": consumer_leave,
    "consumer-unknown-member": consumer_unknown_member, "share-join": share_join,
    "streams-join": streams_join(VALID_TOPOLOGY), "streams-join-invalid-topology": streams_join(INVALID_TOPOLOGY),
    "commit": commit, "delete": delete,
}
FAULTS = ("none", "none", "none", "raise-after", "raise-in-replay", "break-log")

step = st.one_of(
    st.tuples(st.sampled_from(sorted(OPERATIONS)), st.sampled_from(GROUPS), st.sampled_from(("a", "bb", "ccc")),
              st.sampled_from(FAULTS), st.integers(1, 4)),
    st.tuples(st.just("classic-join"), st.sampled_from(GROUPS), st.just(""), st.sampled_from(FAULTS), st.just(1)),
    st.tuples(st.just("timers"), st.just(""), st.just(""), st.sampled_from(FAULTS), st.sampled_from((500, 3000))),
)


def fail_on_replay(shard: GroupCoordinatorShard, nth: int) -> Callable[[], None]:
    """Make the `nth` replay of the next operation raise (before applying), once; returns the undo. Only replays
    inside an operation count: the runtime's own putting back is not the fault injected."""
    original = dict(shard._replayers)
    count = [0]

    def wrap(fn: Callable[[Any], None]) -> Callable[[Any], None]:
        def replay(record: Any) -> None:
            if shard.applied is not None:
                count[0] += 1
            if count[0] == nth:
                shard._replayers.update(original)
                raise InjectedFault(f"replay {nth} fails")
            fn(record)
        return replay

    shard._replayers.update({t: wrap(fn) for t, fn in original.items()})
    return lambda: shard._replayers.update(original)


def checked_pure(shard: GroupCoordinatorShard, kind: str, handler: Callable[[], Any]) -> Any:
    """Run a handler: it must leave the shard's state as it found it (tests/purity.py)."""
    before = state_of(shard)
    result = handler()
    assert state_of(shard) == before, f"the handler of {kind} changed the shard's state"
    return result


async def run_step(h: RuntimeHarness, kind: str, gid: str, member: str, fault: str, n: int,
                   parked: list[asyncio.Future[Any]]) -> None:
    assert h.runtime is not None
    if fault == "break-log":
        h.break_log()
    shard = h.shard
    if kind == "timers":
        on_timer = shard.on_timer
        shard.on_timer = lambda key, now: checked_pure(shard, kind, lambda: on_timer(key, now))  # type: ignore[method-assign]
        try:
            await h.fire_timers(n)
        finally:
            del shard.on_timer
        return
    if kind == "classic-join":
        req = JoinGroupRequest(group_id=gid, member_id="", protocol_type="consumer", protocols=(("range", b""),),
                               session_timeout_ms=10000, rebalance_timeout_ms=10000, reason="", client_id="c")
        parked.append(asyncio.ensure_future(h.runtime.submit_parkable(
            "JoinGroup",
            lambda now, token: checked_pure(shard, kind, lambda: shard.classic_group_join(req, now, token)), gid)))
        await asyncio.sleep(0)
        await h.drain()
        return
    handler = OPERATIONS[kind](gid, member)
    undo: Callable[[], None] = lambda: None  # noqa: E731

    def op(now: int) -> Any:
        result = checked_pure(shard, kind, lambda: handler(shard, now))
        if fault == "raise-after":
            raise InjectedFault("after the handler returned")
        return result

    if fault == "raise-in-replay":
        undo = fail_on_replay(shard, n)
    try:
        with contextlib.suppress(InjectedFault, CoordinatorError, OSError):
            await h.submit(kind, op, gid)
    finally:
        undo()
    await h.drain()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=25))
def test_memory_equals_a_fresh_replay_of_the_durable_log_after_every_step(steps: list[tuple[Any, ...]]) -> None:
    async def main(directory: Path) -> None:
        h = RuntimeHarness(directory)
        await h.start()
        parked: list[asyncio.Future[Any]] = []
        try:
            for i, (kind, gid, member, fault, n) in enumerate(steps):
                await run_step(h, kind, gid, member, fault, n, parked)
                assert h.memory() == h.durable(), f"after step {i}: {kind} {gid} fault={fault}"
                assert h.runtime is not None
                if h.runtime.failed is not None:  # fail-stop: restart from the directory
                    await h.stop()
                    await h.start()
                    assert h.memory() == h.durable()
        finally:
            for future in parked:
                future.cancel()
            await asyncio.gather(*parked, return_exceptions=True)
            await h.stop()

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(Path(tmp) / "log"))
