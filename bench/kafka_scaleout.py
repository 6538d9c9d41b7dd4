"""Scale-out of the Kafka-backed mode: the same heartbeat load against 1, 2 and 3 instances.

    python -m bench.kafka_scaleout [--members 600] [--groups 60] [--rate 600] [--seconds 20] [--instances 1,2,3]

A real 3-broker Kafka (`groupcoord.kafka_broker`, a state topic of `--state-partitions` partitions, replication
factor 3, min.insync.replicas=2), then for each instance count a fresh state topic and that many `groupcoord
serve --state-topic` instances (`faults.kafka_cluster.serve_command`). The load is heartbeat_bench's (`Load`,
`steady_loop`: consumer-group members heartbeating open-loop at `--rate` per second in total), routed as a
client routes: FindCoordinator for each group, then to the instance named; a routing error (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE: codes 16, 14, 15) is counted (the "routing err"
columns), and the member asks FindCoordinator again. CPU is each instance's /proc utime+stime over the
measured window, and first over `--idle-seconds` without heartbeats (what an instance costs doing nothing:
metadata, lag and lease renewals), so "net" is what the heartbeats add. On a 2-core machine the total cannot
grow with instances; the table shows what each instance
costs and what routing adds, and projects the instances 100,000 members at 5 s heartbeats would need.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from bench.heartbeat_bench import Load, Member, cpu_seconds, reconcile, steady_loop, window_rate
from groupcoord.child_processes import free_ports
from groupcoord.faults.kafka_cluster import serve_command
from groupcoord.kafka_broker import KafkaBroker
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

ROUTING_ERRORS = (14, 15, 16)
PROJECTED_MEMBERS, PROJECTED_INTERVAL_S, CORE_BUDGET = 100_000, 5.0, 0.7


class RoutedLoad(Load):
    """heartbeat_bench's load, following FindCoordinator and counting what routing costs."""

    def __init__(self, stubs: dict[int, pb_grpc.GroupCoordinatorStub]) -> None:
        first = next(iter(stubs.values()))
        super().__init__(first, 0, stubs)
        self.find_coordinator = 0
        self.redirects = 0

    async def locate(self, m: Member) -> None:
        self.find_coordinator += 1
        for stub in self.by_port.values():
            try:
                found = await stub[0].FindCoordinator(pb.FindCoordinatorRequest(keys=[m.group_id]), timeout=5)
            except grpc.aio.AioRpcError:
                continue
            (c,) = found.coordinators
            if c.error_code == 0 and c.port in self.by_port:
                m.port, m.stream = c.port, None
                return

    def transport(self, m: Member) -> Any:
        call = super().transport(m)

        async def routed(req: pb.ConsumerGroupHeartbeatRequest, timeout: float) -> Any:
            resp = await call(req, timeout=timeout)
            if resp.error_code in ROUTING_ERRORS:
                self.redirects += 1
                await self.locate(m)
            return resp

        return routed


async def measure(ports: list[int], pids: list[int], args: argparse.Namespace) -> dict[str, Any]:
    channels = {p: grpc.aio.insecure_channel(f"127.0.0.1:{p}") for p in ports}
    load = RoutedLoad({p: pb_grpc.GroupCoordinatorStub(ch) for p, ch in channels.items()})
    members = [Member(f"group-{g}", "t") for g in range(args.groups) for _ in range(args.members // args.groups)]
    for m in members:
        m.port = ports[0]
    for _ in range(3):  # joins, redirects, and the members' first reconciliation
        await reconcile(load, members, rounds=4)
    joins = (load.find_coordinator, load.redirects)
    load.find_coordinator = load.redirects = load.errors = 0
    idle0 = [cpu_seconds(pid) for pid in pids]
    await asyncio.sleep(args.idle_seconds)  # the instances' own work without heartbeats (metadata, lag, leases)
    idle = [(cpu_seconds(pid) - c0) / args.idle_seconds for pid, c0 in zip(pids, idle0, strict=True)]
    load.done_at, load.recording, load.served = [], True, {}
    stop = asyncio.Event()
    t0 = time.perf_counter()
    cpu0 = [cpu_seconds(pid) for pid in pids]
    task = asyncio.create_task(steady_loop(load, members, args.rate, stop))
    await asyncio.sleep(args.seconds)
    stop.set()
    await task
    wall = time.perf_counter() - t0
    cpu = [(cpu_seconds(pid) - c0) / wall for pid, c0 in zip(pids, cpu0, strict=True)]
    heartbeats = len(load.done_at)
    for ch in channels.values():
        await ch.close()
    return {"rate": window_rate(load.done_at, t0, args), "cpu": cpu, "heartbeats": heartbeats,
            "us_per_hb": sum(cpu) * wall * 1e6 / max(1, heartbeats), "idle": sum(idle),
            "net_us_per_hb": (sum(cpu) - sum(idle)) * wall * 1e6 / max(1, heartbeats),
            "join_find": joins[0] / len(members), "join_redirects": joins[1] / len(members),
            "find_per_1000": 1000 * load.find_coordinator / max(1, heartbeats),
            "redirects_per_1000": 1000 * load.redirects / max(1, heartbeats)}


def wait_serving(ports: list[int], groups: int, timeout_s: float = 120.0) -> None:
    """Until FindCoordinator names a serving instance for every group."""
    deadline = time.monotonic() + timeout_s
    keys = [f"group-{g}" for g in range(groups)]
    while time.monotonic() < deadline:
        try:
            with grpc.insecure_channel(f"127.0.0.1:{ports[0]}") as ch:
                stub = pb_grpc.GroupCoordinatorStub(ch)
                found = stub.FindCoordinator(pb.FindCoordinatorRequest(keys=keys), timeout=5)
            if all(c.error_code == 0 and c.port in ports for c in found.coordinators):
                return
        except grpc.RpcError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the instances did not serve every group in time")


def run_case(broker: KafkaBroker, n: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    topic = f"scaleout-state-{n}"
    broker.create_topic(topic, args.state_partitions, 3, config={"cleanup.policy": "compact",
                                                                 "min.insync.replicas": "2"})
    ports = free_ports(n)
    procs = []
    try:
        for i, port in enumerate(ports):
            command = serve_command(f"127.0.0.1:{port}", broker.bootstrap_servers, topic, args.state_partitions,
                                    3000, ["--set", "group.consumer.heartbeat.interval.ms=5000"])
            with (workdir / f"instances{n}-{i}.log").open("wb") as out:
                procs.append(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT))
        wait_serving(ports, args.groups)
        return asyncio.run(measure(ports, [p.pid for p in procs], args))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def table(results: dict[int, dict[str, Any]]) -> str:
    lines = [f"{'instances':>9} {'hb/s':>6} {'CPU cores':>9} {'idle':>5} {'us/hb':>6} {'net us/hb':>9} "
             f"{'per instance (cores)':>20} {'FindCoord/1k hb':>15} {'routing err/1k hb':>17} "
             f"{'at join, per member':>20}"]
    for n, r in sorted(results.items()):
        per = " ".join(f"{c:.2f}" for c in r["cpu"])
        join = f"{r['join_find']:.2f} FC, {r['join_redirects']:.2f} err"
        lines.append(f"{n:>9} {r['rate']:>6.0f} {sum(r['cpu']):>9.2f} {r['idle']:>5.2f} {r['us_per_hb']:>6.0f} "
                     f"{r['net_us_per_hb']:>9.0f} {per:>20} {r['find_per_1000']:>15.2f} "
                     f"{r['redirects_per_1000']:>17.2f} {join:>20}")
    worst = max(r["us_per_hb"] for r in results.values())
    needed = PROJECTED_MEMBERS / PROJECTED_INTERVAL_S * worst / 1e6
    lines.append(f"projection: {PROJECTED_MEMBERS:,} members at {PROJECTED_INTERVAL_S:.0f} s heartbeats = "
                 f"{PROJECTED_MEMBERS / PROJECTED_INTERVAL_S:,.0f} heartbeats/s x {worst:.0f} us = {needed:.1f} cores; "
                 f"at {CORE_BUDGET:.0%} of a core per instance (one Python process each): "
                 f"{math.ceil(needed / CORE_BUDGET)} instances")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.kafka_scaleout", description=__doc__.split("\n")[0])
    p.add_argument("--members", type=int, default=600)
    p.add_argument("--groups", type=int, default=60)
    p.add_argument("--rate", type=float, default=600.0, help="heartbeats/s in total (default 600)")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--idle-seconds", type=float, default=5.0, help="the instances' CPU without load, measured first")
    p.add_argument("--state-partitions", type=int, default=12)
    p.add_argument("--instances", default="1,2,3")
    args = p.parse_args(argv)
    counts = [int(n) for n in args.instances.split(",")]
    workdir = Path(tempfile.mkdtemp(prefix="kafka-scaleout-"))
    results: dict[int, dict[str, Any]] = {}
    with KafkaBroker(3, heap="512m", config={"transaction.state.log.min.isr": 2}) as broker:
        broker.create_topic("t", 12, 3)
        for n in counts:
            print(f"{n} instance(s): {args.members} members in {args.groups} groups at {args.rate:.0f} heartbeats/s "
                  f"for {args.seconds:.0f} s ...", flush=True)
            results[n] = run_case(broker, n, args, workdir)
    print(table(results), flush=True)
    print(f"instance logs in {workdir}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
