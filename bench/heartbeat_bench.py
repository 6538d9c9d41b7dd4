"""Heartbeats over real gRPC: throughput and latency, quiet vs a 1,000-member group rebalancing, offload on/off.

    python -m bench.heartbeat_bench [--members 5000] [--groups 50] [--rate 3000] [--seconds 10]

For each offload setting it starts `groupcoord serve` as a subprocess (its own core), and a load process
(this one) with `--members` members spread over `--groups` groups, all joined and reconciled, heartbeating
open-loop at `--rate` per second in total. Phase "quiet" measures latency as is; phase "rebalancing" adds a
1,000-member group on another topic whose membership churns continuously (one member leaves and one joins
every `--churn-ms`), with that group's assignment interval at `--assignment-interval-ms` (default 1000,
Kafka's; 0 recomputes on every change).
Latency is measured per RPC on the client. Targets (2 cores): >= 3,000 heartbeats/s, p99 <= 25 ms, and
with offload on the other groups' p99 within 2x of the quiet p99.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import grpc

from groupcoord.v1 import coordinator_pb2 as pb
from groupcoord.v1 import coordinator_pb2_grpc as pb_grpc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Member:
    group_id: str
    topic: str
    member_id: str = ""
    epoch: int = 0
    owned: dict[str, list[int]] = field(default_factory=dict)
    sent_owned: dict[str, list[int]] | None = None
    alive: bool = True


class StreamWorker:
    """One ConsumerGroupHeartbeatStream: requests go one at a time (responses come back in order)."""

    def __init__(self, stub: pb_grpc.GroupCoordinatorStub) -> None:
        self.call = stub.ConsumerGroupHeartbeatStream()
        self.lock = asyncio.Lock()

    async def __call__(self, req: pb.ConsumerGroupHeartbeatRequest, timeout: float) -> Any:
        async with self.lock:
            await self.call.write(req)
            return await self.call.read()

    async def close(self) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            await self.call.done_writing()


class Load:
    def __init__(self, stub: pb_grpc.GroupCoordinatorStub, streams: int) -> None:
        self.stub = stub
        self.workers = [StreamWorker(stub) for _ in range(streams)]
        self.latencies: list[float] = []
        self.recording = False
        self.errors = 0
        self.rpc_errors: dict[str, int] = {}
        self.done_at: list[float] = []  # completion times of successful heartbeats while recording

    def transport(self, m: Member) -> Any:
        if not self.workers:
            return self.stub.ConsumerGroupHeartbeat
        return self.workers[hash((m.group_id, id(m))) % len(self.workers)]

    async def heartbeat(self, m: Member, record: bool = True) -> None:
        req = pb.ConsumerGroupHeartbeatRequest(group_id=m.group_id, member_id=m.member_id, member_epoch=m.epoch)
        if m.epoch == 0:
            req.rebalance_timeout_ms = 30000
            req.subscribed_topic_names.values.append(m.topic)
            req.topic_partitions.SetInParent()
        elif m.owned != m.sent_owned:
            req.topic_partitions.SetInParent()
            for tid, ps in sorted(m.owned.items()):
                req.topic_partitions.topics.add(topic_id=tid, partitions=ps)
        started = time.perf_counter()
        try:
            resp = await self.transport(m)(req, timeout=30)
        except grpc.aio.AioRpcError as e:
            self.rpc_errors[e.code().name] = self.rpc_errors.get(e.code().name, 0) + 1
            return
        elapsed = (time.perf_counter() - started) * 1000
        if self.recording:
            self.done_at.append(time.perf_counter())
            if record:
                self.latencies.append(elapsed)
        if resp.error_code:
            self.errors += 1
            m.epoch, m.owned, m.sent_owned = 0, {}, None
            return
        if m.epoch != 0 and req.HasField("topic_partitions"):
            m.sent_owned = dict(m.owned)
        m.member_id, m.epoch = resp.member_id, resp.member_epoch
        if resp.HasField("assignment"):
            m.owned = {tp.topic_id: sorted(tp.partitions) for tp in resp.assignment.topic_partitions}
            if m.epoch == resp.member_epoch and req.member_epoch == 0:
                m.sent_owned = {}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def window_rate(done_at: list[float], t0: float, args: argparse.Namespace) -> float:
    """Heartbeats/s completed after every member's first heartbeat was due (one period in) until the end."""
    start = t0 + args.members / args.rate
    end = t0 + args.seconds
    return sum(1 for t in done_at if start <= t <= end) / (end - start)


async def reconcile(load: Load, members: list[Member], rounds: int = 6) -> None:
    for _ in range(rounds):
        await asyncio.gather(*(load.heartbeat(m, record=False) for m in members))


async def steady_loop(load: Load, members: list[Member], rate: float, stop: asyncio.Event) -> int:
    """Open loop: each member heartbeats every len(members)/rate seconds, starts spread evenly."""
    period = len(members) / rate
    sent = 0

    async def one(i: int, m: Member) -> None:
        nonlocal sent
        await asyncio.sleep(period * i / len(members))
        next_at = time.perf_counter()
        while not stop.is_set():
            await load.heartbeat(m)
            sent += 1
            next_at += period
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

    await asyncio.gather(*(one(i, m) for i, m in enumerate(members)))
    return sent


async def churn_loop(load: Load, big: list[Member], churn_ms: int, stop: asyncio.Event, rng: random.Random,
                     big_interval_s: float) -> int:
    """The big group: members heartbeat every `big_interval_s` like real clients, and at once when they have
    revoked partitions to report; one leaves and one joins every churn_ms, so its target assignment is
    recomputed continuously."""
    changes = 0

    async def member_loop(m: Member) -> None:
        while not stop.is_set() and m.alive:
            try:
                await load.heartbeat(m, record=False)
            except (grpc.aio.AioRpcError, asyncio.CancelledError):
                return
            if m.owned != m.sent_owned:
                continue  # report the revocation at once, as a Kafka client does
            await asyncio.sleep(big_interval_s * (0.9 + 0.2 * rng.random()))

    tasks = [asyncio.create_task(member_loop(m)) for m in list(big)]
    while not stop.is_set():
        await asyncio.sleep(churn_ms / 1000)
        if stop.is_set():
            break
        victim = big.pop(rng.randrange(len(big)))
        victim.alive = False
        with contextlib.suppress(grpc.aio.AioRpcError):
            await load.stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
                group_id=victim.group_id, member_id=victim.member_id, member_epoch=-1), timeout=30)
        newcomer = Member(victim.group_id, victim.topic)
        big.append(newcomer)
        tasks.append(asyncio.create_task(member_loop(newcomer)))
        changes += 1
    await asyncio.gather(*tasks, return_exceptions=True)  # loops end on `stop` (cancelling would kill streams)
    return changes


async def run_case(port: int, args: argparse.Namespace, offload: bool) -> dict[str, float]:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    await channel.channel_ready()
    stub = pb_grpc.GroupCoordinatorStub(channel)
    load = Load(stub, 0 if args.unary else args.streams)
    per_group = args.members // args.groups
    members = [Member(f"group-{g}", f"t{g}") for g in range(args.groups) for _ in range(per_group)]
    print(f"  joining {len(members)} members in {args.groups} groups ...", flush=True)
    await reconcile(load, members)
    out: dict[str, float] = {}

    # Quiet.
    stop = asyncio.Event()
    load.latencies, load.done_at, load.recording = [], [], True
    t0 = time.perf_counter()
    task = asyncio.create_task(steady_loop(load, members, args.rate, stop))
    await asyncio.sleep(args.seconds)
    stop.set()
    await task
    load.recording = False
    out.update(quiet_rate=window_rate(load.done_at, t0, args), quiet_p50=pct(load.latencies, 0.5),
               quiet_p99=pct(load.latencies, 0.99))

    # Rebalancing: the big group churns while the others heartbeat.
    print(f"  joining the {args.big}-member rebalancing group ...", flush=True)
    await stub.AlterGroupConfigs(pb.AlterGroupConfigsRequest(group_id="big", configs=[
        pb.AlterableConfig(name="consumer.assignment.interval.ms", value=str(args.assignment_interval_ms))]))
    big = [Member("big", "big") for _ in range(args.big)]
    # The rebalancing group is another application: its own connection and streams, so its bursts do not
    # queue on the measured groups' streams inside this load generator (they still share the coordinator).
    big_channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    big_load = Load(pb_grpc.GroupCoordinatorStub(big_channel), 0 if args.unary else 16)
    await reconcile(big_load, big, rounds=4)
    rng = random.Random(1)
    stop = asyncio.Event()
    load.latencies, load.done_at, load.recording = [], [], True
    big_load.done_at, big_load.recording = [], True
    churn = asyncio.create_task(churn_loop(big_load, big, args.churn_ms, stop, rng, args.big_interval_ms / 1000))
    task = asyncio.create_task(steady_loop(load, members, args.rate, stop))
    t0 = time.perf_counter()
    await asyncio.sleep(args.seconds)
    stop.set()
    await task
    changes = await churn
    load.recording = False
    for w in [*load.workers, *big_load.workers]:
        await w.close()
    await big_channel.close()
    out.update(busy_rate=window_rate(load.done_at, t0, args), big_rate=window_rate(big_load.done_at, t0, args),
               busy_p50=pct(load.latencies, 0.5), busy_p99=pct(load.latencies, 0.99),
               churn=changes, errors=load.errors + sum(load.rpc_errors.values()) + big_load.errors)
    if load.rpc_errors:
        print(f"  rpc errors: {load.rpc_errors}", flush=True)
    await channel.close()
    return out


def start_server(port: int, args: argparse.Namespace, offload: bool) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "groupcoord", "--log-level", "INFO", "serve", "--listen", f"127.0.0.1:{port}",
           "--set", f"group.consumer.assignor.offload.enable={'true' if offload else 'false'}",
           "--set", "group.consumer.session.timeout.ms=60000", "--set", "group.consumer.max.session.timeout.ms=60000",
           "--topic", f"big:{args.big_partitions}"]
    for g in range(args.groups):
        cmd += ["--topic", f"t{g}:{args.partitions}"]
    log = open(f"/tmp/groupcoord-bench-{port}.log", "w")  # noqa: SIM115
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def main(argv: list[str] | None = None) -> int:
    gc.set_threshold(50_000, 50, 100)  # keep the load generator's own GC pauses out of the latencies
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=int, default=5000)
    p.add_argument("--groups", type=int, default=50)
    p.add_argument("--partitions", type=int, default=200, help="partitions of each small group's topic")
    p.add_argument("--big", type=int, default=1000, help="members of the rebalancing group")
    p.add_argument("--big-partitions", type=int, default=4000)
    p.add_argument("--rate", type=float, default=3000.0, help="target heartbeats/s of the small groups")
    p.add_argument("--churn-ms", type=int, default=500, help="one leave + one join in the big group this often")
    p.add_argument("--big-interval-ms", type=int, default=2000, help="heartbeat interval of the big group")
    p.add_argument("--assignment-interval-ms", type=int, default=1000,
                   help="the big group's consumer.assignment.interval.ms (KIP-1263 batching; 1000 = Kafka's default, "
                   "0 = recompute on every change)")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--streams", type=int, default=64, help="ConsumerGroupHeartbeatStream streams to multiplex on")
    p.add_argument("--unary", action="store_true", help="unary ConsumerGroupHeartbeat calls instead of streams")
    p.add_argument("--quick", action="store_true", help="1,000 members, 5 s phases")
    args = p.parse_args(argv)
    if args.quick:
        args.members, args.groups, args.seconds, args.big = 1000, 10, 5.0, 300
    rows = []
    for offload in (True, False):
        port = free_port()
        print(f"offload={'on' if offload else 'off'}: starting the coordinator on :{port}", flush=True)
        server = start_server(port, args, offload)
        try:
            rows.append((offload, asyncio.run(run_case(port, args, offload))))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    print()
    transport = "unary calls" if args.unary else f"{args.streams} heartbeat streams"
    print(f"transport: {transport}; {args.members} members in {args.groups} groups at a target of "
          f"{args.rate:,.0f} heartbeats/s; rebalancing group: {args.big} members, "
          f"one leaves + one joins every {args.churn_ms} ms, assignment interval {args.assignment_interval_ms} ms")
    header = (f"{'offload':<8} {'phase':<12} {'hb/s':>8} {'+big hb/s':>10} {'p50 ms':>8} {'p99 ms':>8} "
              f"{'p99/quiet':>10} {'churn':>6} {'errors':>6}")
    print("hb/s: heartbeats/s of the 50 measured groups (latency columns are theirs); +big: the rebalancing group's")
    print(header)
    print("-" * len(header))
    for offload, r in rows:
        name = "on" if offload else "off"
        print(f"{name:<8} {'quiet':<12} {r['quiet_rate']:>8,.0f} {'':>10} {r['quiet_p50']:>8.2f} "
              f"{r['quiet_p99']:>8.2f} {'':>10} {'':>6} {'':>6}")
        print(f"{name:<8} {'rebalancing':<12} {r['busy_rate']:>8,.0f} {r['big_rate']:>10,.0f} {r['busy_p50']:>8.2f} "
              f"{r['busy_p99']:>8.2f} {r['busy_p99'] / r['quiet_p99']:>10.2f} {int(r['churn']):>6} "
              f"{int(r['errors']):>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
