"""The steady heartbeat through the servicer and the runtime (issue 30, step 6): a ConsumerGroupHeartbeat with
only the group id, member id and epoch is answered by the core's steady path with the session deadline
re-armed and nothing run through the operation queue, giving the same reply and state as the full path; the
runtime sends it the full way whenever the full path would queue it, make it wait for an earlier write, or
refuse it, and the servicer whenever the request carries anything else."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Awaitable, Callable
from typing import Any

from bench.heartbeat_path_bench import Context, Handlers
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.runtime.executor import BackgroundExecutor
from groupcoord.coordinator.runtime.metrics import CoordinatorMetrics
from groupcoord.coordinator.runtime.pipeline import Caller, Pipeline
from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime
from groupcoord.coordinator.runtime.service import GroupCoordinatorService
from groupcoord.wire.v1 import coordinator_pb2 as pb
from tests.core.context import image_of, shard_state
from tests.durability.runtime_harness import CONFIG

SERVICE = pb.DESCRIPTOR.services_by_name["GroupCoordinator"]


class FullPathService(GroupCoordinatorService):
    """The reference: every heartbeat through the full path."""

    def submit_steady(self, name: str, fn: Callable[[int], Any], group_id: str) -> Any | None:
        return None


class Server:
    """A runtime and the servicer behind the pipeline, in process, on a clock the test moves."""

    def __init__(self, service_type: type[GroupCoordinatorService] = GroupCoordinatorService,
                 sink: Any = None) -> None:
        self.now = 1_000_000
        ids = itertools.count(1)
        self.shard = GroupCoordinatorShard(BrokerConfig.from_mapping(CONFIG), lambda: f"m{next(ids)}",
                                           image_of({"foo": 6, "bar": 3}))
        metrics = CoordinatorMetrics(1)
        self.runtime = CoordinatorRuntime(self.shard, metrics, BackgroundExecutor(1, metrics), sink=sink,
                                          clock=lambda: self.now)
        self.service = service_type(self.runtime)
        handlers = Handlers()
        Pipeline().add(handlers, self.service, SERVICE)  # type: ignore[arg-type]
        self._unary = handlers.by_name["ConsumerGroupHeartbeat"]

    async def start(self) -> None:
        await self.runtime.start()

    async def call(self, request: pb.ConsumerGroupHeartbeatRequest) -> pb.ConsumerGroupHeartbeatResponse:
        """As gRPC does: the request's bytes decoded, the handler, the reply encoded (and decoded to compare)."""
        decode, encode = self._unary.request_deserializer, self._unary.response_serializer
        data = encode(await self._unary.unary_unary(decode(request.SerializeToString()), Context()))
        return pb.ConsumerGroupHeartbeatResponse.FromString(data)

    @property
    def operations(self) -> int:
        """Operations run through the queue (or inline by `submit`); a steady heartbeat is not one."""
        return self.runtime.metrics.event_processing_time.count

    async def advance(self, ms: int) -> None:
        """Move the clock and run what the timers due by then queue (session expiries)."""
        self.now += ms
        timers = self.runtime.timers
        timers.stop()
        timers.fire()
        await self.runtime.submit("drain", lambda t: self.shard.list_groups([], [], t))


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())


def join(group_id: str, member_id: str = "") -> pb.ConsumerGroupHeartbeatRequest:
    return pb.ConsumerGroupHeartbeatRequest(group_id=group_id, member_id=member_id, member_epoch=0,
                                            rebalance_timeout_ms=5000,
                                            subscribed_topic_names=pb.StringList(values=["foo", "bar"]),
                                            topic_partitions=pb.TopicPartitionsList())


def bare(group_id: str, member_id: str, epoch: int) -> pb.ConsumerGroupHeartbeatRequest:
    return pb.ConsumerGroupHeartbeatRequest(group_id=group_id, member_id=member_id, member_epoch=epoch)


def ack(server: Server, group_id: str, member_id: str) -> pb.ConsumerGroupHeartbeatRequest:
    """A heartbeat reporting as owned what the coordinator says the member may own now."""
    member = server.shard.groups[group_id].members[member_id]  # type: ignore[attr-defined]
    request = bare(group_id, member_id, member.member_epoch)
    request.topic_partitions.SetInParent()
    for topic_id, parts in sorted(member.assigned_sets().items()):
        request.topic_partitions.topics.add(topic_id=topic_id, partitions=sorted(parts))
    return request


async def stable(server: Server, group_id: str, n: int) -> list[tuple[str, int]]:
    members = [(await server.call(join(group_id))).member_id for _ in range(n)]
    for _ in range(10):
        for mid in members:
            await server.call(ack(server, group_id, mid))
        group = server.shard.groups[group_id]
        if group.state().value == "STABLE":  # type: ignore[attr-defined]
            return [(mid, group.members[mid].member_epoch) for mid in members]  # type: ignore[attr-defined]
    raise AssertionError("the group did not stabilise")


def test_random_heartbeats_get_the_same_replies_and_state_as_the_full_path() -> None:
    async def scenario() -> None:
        steady, full = Server(), Server(FullPathService)
        await steady.start()
        await full.start()
        rng = random.Random(7)
        try:
            for _ in range(1_500):
                gid = rng.choice(["g1", "g2"])
                group = steady.shard.groups.get(gid)
                members = sorted(group.members) if group is not None else []  # type: ignore[attr-defined]
                mid = rng.choice(members) if members else ""
                epoch = group.members[mid].member_epoch if mid else 0  # type: ignore[union-attr]
                roll = rng.random()
                requests: list[pb.ConsumerGroupHeartbeatRequest] = []
                if roll < 0.06 or not members:
                    requests.append(join(gid))
                elif roll < 0.6:
                    requests.append(bare(gid, mid, epoch))
                elif roll < 0.66:
                    requests.append(bare(gid, rng.choice([mid, "nobody", " ", "x" * 300]),
                                         epoch + rng.choice([-1, 0, 1])))
                elif roll < 0.85:
                    requests.append(ack(steady, gid, mid))
                elif roll < 0.88:
                    requests.append(bare(gid, mid, -1))
                else:
                    ms = rng.choice([50, 300, 1_200])
                    for server in (steady, full):
                        await server.advance(ms)
                for request in requests:
                    assert await steady.call(request) == await full.call(request), request
            assert shard_state(steady.shard) == shard_state(full.shard)
            assert steady.shard.timer_deadlines == full.shard.timer_deadlines
            assert steady.runtime.timers._deadline == full.runtime.timers._deadline
            assert steady.shard.stats == full.shard.stats
            assert steady.operations < full.operations - 300  # the steady heartbeats ran no operation
        finally:
            await steady.runtime.stop()
            await full.runtime.stop()
    run(scenario)


def test_a_steady_heartbeat_runs_no_operation_and_gets_the_same_reply_object_again() -> None:
    async def scenario() -> None:
        server = Server()
        await server.start()
        try:
            [(mid, epoch), _] = await stable(server, "g", 2)
            before = server.operations
            server.now += 10
            first = await server.service.ConsumerGroupHeartbeat(bare("g", mid, epoch), Caller(Context()))
            server.now += 10
            again = await server.service.ConsumerGroupHeartbeat(bare("g", mid, epoch), Caller(Context()))
            assert again is first
            assert first == pb.ConsumerGroupHeartbeatResponse(member_id=mid, member_epoch=epoch,
                                                              heartbeat_interval_ms=100, session_timeout_ms=1000)
            assert server.operations == before
            assert server.runtime.timers._deadline[("session", "g", mid)] == server.now + 1000
        finally:
            await server.runtime.stop()
    run(scenario)


def test_a_heartbeat_carrying_any_other_field_takes_the_full_path() -> None:
    async def scenario() -> None:
        server = Server()
        await server.start()
        try:
            [(mid, epoch), _] = await stable(server, "g", 2)
            fields: list[dict[str, Any]] = [
                {"rebalance_timeout_ms": 5000}, {"subscribed_topic_names": pb.StringList(values=["foo", "bar"])},
                {"server_assignor": "uniform"}, {"rack_id": "r1"}, {"topic_partitions": pb.TopicPartitionsList()},
            ]
            for extra in fields:
                epoch = server.shard.groups["g"].members[mid].member_epoch  # type: ignore[attr-defined]
                before = server.operations
                reply = await server.call(pb.ConsumerGroupHeartbeatRequest(group_id="g", member_id=mid,
                                                                           member_epoch=epoch, **extra))
                assert server.operations == before + 1, extra
                assert reply.error_code == 0, (extra, reply)
            before = server.operations
            reply = await server.call(bare("g" * 300, mid, epoch))  # over the id limit: refused by the full path
            assert reply.error_code == Errors.INVALID_REQUEST
        finally:
            await server.runtime.stop()
    run(scenario)


class HeldSink:
    """A record sink whose appends complete when the test says."""

    def __init__(self) -> None:
        self.held: list[asyncio.Future[None]] = []

    def append(self, records: list[Any]) -> Awaitable[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.held.append(future)
        return future


def test_the_full_path_when_something_is_queued_or_an_earlier_write_is_pending_or_refused() -> None:
    async def scenario() -> None:
        sink = HeldSink()
        server = Server(sink=sink)
        await server.start()
        try:
            joining = asyncio.ensure_future(server.call(join("g")))
            await asyncio.sleep(0)
            while sink.held and not all(f.done() for f in sink.held):
                for f in sink.held:
                    if not f.done():
                        f.set_result(None)
                await asyncio.sleep(0)
            mid = (await joining).member_id
            for _ in range(5):
                acked = asyncio.ensure_future(server.call(ack(server, "g", mid)))
                await asyncio.sleep(0)
                for f in sink.held:
                    if not f.done():
                        f.set_result(None)
                await acked
            epoch = server.shard.groups["g"].members[mid].member_epoch  # type: ignore[attr-defined]
            assert server.shard.groups["g"].state().value == "STABLE"  # type: ignore[attr-defined]

            def steady() -> Any:
                return server.service.submit_steady("t", lambda now: server.shard.consumer_group_steady_heartbeat(
                    "g", mid, epoch, None, now), "g")

            assert steady() is not None
            # An earlier write not yet durable: the reply must wait for it, so the full path answers.
            other = asyncio.ensure_future(server.call(join("g2")))
            await asyncio.sleep(0)
            assert sink.held[-1].done() is False
            assert steady() is None
            waiting = asyncio.ensure_future(server.call(bare("g", mid, epoch)))
            await asyncio.sleep(0)
            assert not waiting.done()  # held behind the pending write, as the full path holds it
            sink.held[-1].set_result(None)
            assert (await waiting).member_epoch == epoch
            await other
            assert steady() is not None
            # Something queued: it runs first.
            server.runtime._enqueue("queued", lambda t: server.shard.list_groups([], [], t))
            assert steady() is None
            await server.runtime.submit("drain", lambda t: server.shard.list_groups([], [], t))
            assert steady() is not None
            # A router that sends the group elsewhere, a log that failed, a state still loading.
            server.runtime.router = lambda gid: (Errors.NOT_COORDINATOR, "elsewhere")
            assert steady() is None
            assert (await server.call(bare("g", mid, epoch))).error_code == Errors.NOT_COORDINATOR
            server.runtime.router = lambda gid: None
            assert steady() is not None
            server.runtime.loaded = False
            assert steady() is None
            assert (await server.call(bare("g", mid, epoch))).error_code == Errors.COORDINATOR_LOAD_IN_PROGRESS
            server.runtime.loaded = True
            server.runtime.failed = RuntimeError("disk gone")
            assert steady() is None
            assert (await server.call(bare("g", mid, epoch))).error_code == Errors.COORDINATOR_NOT_AVAILABLE
            server.runtime.failed = None
        finally:
            await server.runtime.stop()
    run(scenario)
