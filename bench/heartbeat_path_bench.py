"""groupcoord's own CPU per steady ConsumerGroupHeartbeat, without gRPC: the core, the runtime, the servicer.

    python -m bench.heartbeat_path_bench [--members 200] [--heartbeats 20000] [--rounds 7]

Issue 30 step 3 compares groupcoord's server CPU per heartbeat with a bare gRPC echo server's; what groupcoord
adds on top of the transport is this path. It builds a shard with one 1,000-partition topic, a runtime and the
GroupCoordinator servicer behind the request pipeline (in process, no server), joins `--members` members in 10
groups and brings them to a stable assignment, then times steady heartbeats (group id, member id, epoch) three
ways (and the core's steady heartbeat alone, which the servicer tries first), each the best of `--rounds`
rounds, in CPU time of the thread (a shared machine's other load does not count): the core alone
(`shard.consumer_group_heartbeat`), through `CoordinatorRuntime.submit`, and the whole pipeline as gRPC calls
it (decoding the request's bytes, the unary handler or the stream handler, encoding the response). The
differences are the runtime's and the servicer's shares.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest
from groupcoord.coordinator.core.metadata import MetadataImage, TopicMetadata, topic_id_for_name
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.runtime.executor import BackgroundExecutor
from groupcoord.coordinator.runtime.metrics import CoordinatorMetrics
from groupcoord.coordinator.runtime.pipeline import Pipeline
from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime
from groupcoord.coordinator.runtime.service import GroupCoordinatorService
from groupcoord.wire.v1 import coordinator_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["GroupCoordinator"]


class Handlers:
    """Stands in for the grpc.aio server: keeps the handlers the pipeline registers."""

    def __init__(self) -> None:
        self.by_name: dict[str, Any] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        self.by_name.update(handlers)


class Context:
    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"

    def invocation_metadata(self) -> tuple[()]:
        return ()


async def stable_members(unary: Any, members: int,
                         settled: Callable[[], bool] = lambda: True) -> list[tuple[str, str, int]]:
    """Join, then heartbeat with the owned partitions until no answer changes and `settled()` (every group's
    target computed: offloaded runs come back through the event loop, so each round yields to it):
    (group id, member id, epoch)."""
    context = Context()
    state: list[list[Any]] = []
    for i in range(members):
        join = pb.ConsumerGroupHeartbeatRequest(group_id=f"g{i % 10}", member_epoch=0, rebalance_timeout_ms=30_000,
                                                subscribed_topic_names=pb.StringList(values=["bench"]),
                                                server_assignor="uniform")
        answer = await unary(join, context)
        state.append([join.group_id, answer.member_id, answer.member_epoch, answer])
    for _ in range(200):
        await asyncio.sleep(0.05)
        changed = 0
        for member in state:
            request = pb.ConsumerGroupHeartbeatRequest(group_id=member[0], member_id=member[1], member_epoch=member[2])
            if member[3].HasField("assignment"):
                request.topic_partitions.SetInParent()
                for tp in member[3].assignment.topic_partitions:
                    request.topic_partitions.topics.add(topic_id=tp.topic_id, partitions=tp.partitions)
            answer = await unary(request, context)
            if answer.error_code or answer.member_epoch != member[2] or answer.HasField("assignment"):
                changed += 1
            member[2], member[3] = answer.member_epoch, answer
        if not changed and settled():
            return [(g, m, e) for g, m, e, _ in state]
    raise SystemExit("the members did not reach a stable assignment")


async def best(rounds: int, n: int, run: Callable[[int], Awaitable[None]]) -> float:
    """The fewest CPU µs per heartbeat over `rounds` rounds of `n`."""
    out = []
    for _ in range(rounds):
        started = time.thread_time()
        await run(n)
        out.append((time.thread_time() - started) / n * 1e6)
    return min(out)


async def measure(args: argparse.Namespace) -> dict[str, float]:
    shard = GroupCoordinatorShard(BrokerConfig.from_mapping({}), lambda: str(uuid.uuid4()))
    shard.metadata = MetadataImage.of([TopicMetadata(topic_id_for_name("bench"), "bench", 1000)])
    metrics = CoordinatorMetrics(1)
    runtime = CoordinatorRuntime(shard, metrics, BackgroundExecutor(1, metrics))
    await runtime.start()
    try:
        handlers = Handlers()
        Pipeline().add(handlers, GroupCoordinatorService(runtime), SERVICE)  # type: ignore[arg-type]
        unary, streamed = handlers.by_name["ConsumerGroupHeartbeat"], handlers.by_name["ConsumerGroupHeartbeatStream"]
        members = await stable_members(unary.unary_unary, args.members, lambda: all(
            g.group_epoch == g.target_assignment_epoch for g in shard.groups.values()))  # type: ignore[attr-defined]
        core = [ConsumerGroupHeartbeatRequest(g, m, e) for g, m, e in members]
        wire = [pb.ConsumerGroupHeartbeatRequest(group_id=g, member_id=m, member_epoch=e).SerializeToString()
                for g, m, e in members]
        decode, encode, context, k = unary.request_deserializer, unary.response_serializer, Context(), len(members)

        async def core_alone(n: int) -> None:
            now = runtime.clock()
            for i in range(n):
                shard.apply(shard.consumer_group_heartbeat(core[i % k], now))

        async def core_steady(n: int) -> None:
            now = runtime.clock()
            for i in range(n):
                g, m, e = members[i % k]
                shard.consumer_group_steady_heartbeat(g, m, e, None, now)

        async def through_runtime(n: int) -> None:
            for i in range(n):
                request = core[i % k]
                await runtime.submit("ConsumerGroupHeartbeat",
                                     lambda now, r=request: shard.consumer_group_heartbeat(r, now),  # type: ignore[misc]
                                     (request.group_id,))

        async def unary_call(n: int) -> None:
            for i in range(n):
                encode(await unary.unary_unary(decode(wire[i % k]), context))

        async def stream_call(n: int) -> None:
            async def requests() -> AsyncIterator[Any]:
                for i in range(n):
                    yield decode(wire[i % k])
            async for answer in streamed.stream_stream(requests(), context):
                encode(answer)

        return {name: await best(args.rounds, args.heartbeats, run) for name, run in (
            ("core", core_alone), ("steady", core_steady), ("runtime", through_runtime), ("unary", unary_call),
            ("stream", stream_call))}
    finally:
        await runtime.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=int, default=200)
    p.add_argument("--heartbeats", type=int, default=20_000, help="heartbeats per round")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    r = asyncio.run(measure(args))
    print(f"\nsteady heartbeats of {args.members} members, CPU µs per heartbeat (best of {args.rounds} rounds of "
          f"{args.heartbeats:,}):\n")
    print("| path | µs per heartbeat | of which |\n|---|---|---|")
    print(f"| the core (`shard.consumer_group_heartbeat`) | {r['core']:.2f} | |")
    print(f"| the core's steady heartbeat (`shard.consumer_group_steady_heartbeat`) | {r['steady']:.2f} | |")
    print(f"| through `CoordinatorRuntime.submit` | {r['runtime']:.2f} | runtime {r['runtime'] - r['core']:.2f} |")
    # A steady heartbeat goes through the core's steady path, not `submit`: what is around it is the rest.
    for name, label in (("unary", "unary handler, decode and encode included"),
                        ("stream", "stream handler, per message")):
        print(f"| {label} | {r[name]:.2f} | pipeline, servicer and runtime around the core's steady path "
              f"{r[name] - r['steady']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
