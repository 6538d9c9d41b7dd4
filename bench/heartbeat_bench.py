"""Heartbeats over real gRPC: throughput and latency, quiet vs a 1,000-member group rebalancing, offload on/off.

    python -m bench.heartbeat_bench [--members 5000] [--groups 50] [--rate 3000] [--seconds 10]

For each offload setting it starts `groupcoord serve` as a subprocess (its own core), and a load process
(this one) with `--members` members spread over `--groups` groups, all joined and reconciled, heartbeating
open-loop at `--rate` per second in total. Phase "quiet" measures latency as is; phase "steady" adds a
`--big`-member group on another topic that heartbeats without changing; phase "rebalancing" makes its
membership churn continuously (one member leaves and one joins every `--churn-ms`), with that group's
assignment interval at `--assignment-interval-ms` (default 1000, Kafka's; 0 recomputes on every change).
Phases "silent", "steady" and "rebalancing" alternate `--rounds` times; in "silent" the big group stays joined
and sends nothing, which measures the quiet baseline again beside the others (the machine's own latency
drifts between runs and over minutes by as much as the effect measured).
The big group runs in a process of its own, as another application would (`--big-same-process`: in this
one's event loop, where its client work delays the measured groups' responses). `--pin 1` gives the
coordinator and its background workers a core of their own and the load processes the others, standing for
separate machines: without it, on 2 cores, the load processes' own CPU (as much as the coordinator's) is
scheduled against the coordinator's.
Latency is measured per RPC on the client. Targets (2 cores): >= 3,000 heartbeats/s, p99 <= 25 ms, and
with offload on the other groups' p99 within 2x of the quiet p99. "p99/steady" separates what the
rebalancing costs the others from what the big group's heartbeats alone cost them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import multiprocessing
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

from groupcoord.clients.heartbeat_batcher import HeartbeatBatcher
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(n: int) -> int:
    """A base port with n consecutive free ports (serve --workers n listens on base..base+n-1)."""
    for _ in range(200):
        base = free_port()
        ok = base + n <= 65535
        for k in range(1, n if ok else 0):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", base + k))
                except OSError:
                    ok = False
        if ok:
            return base
    raise RuntimeError(f"no {n} consecutive free ports")


@dataclass
class Member:
    group_id: str
    topic: str
    member_id: str = ""
    epoch: int = 0
    owned: dict[str, list[int]] = field(default_factory=dict)
    sent_owned: dict[str, list[int]] | None = None
    alive: bool = True
    port: int = 0  # the coordinator (worker) FindCoordinator named for the group; 0: the load's only one
    steady: Any = None  # the request of a steady heartbeat at (member_id, epoch), reused while they hold
    stream: Any = None  # the transport chosen for this member (fixed, so computed once)


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


class BatchStreamWorker:
    """The product's `HeartbeatBatcher` (one ConsumerGroupHeartbeatBatchStream) as a transport of the load."""

    def __init__(self, stub: pb_grpc.GroupCoordinatorStub, linger_ms: float) -> None:
        self.batcher = HeartbeatBatcher(stub, linger_ms)

    async def __call__(self, req: pb.ConsumerGroupHeartbeatRequest, timeout: float) -> Any:
        return await self.batcher.heartbeat(req, timeout)

    async def close(self) -> None:
        await self.batcher.close()


class Load:
    def __init__(self, stub: pb_grpc.GroupCoordinatorStub, streams: int,
                 others: dict[int, pb_grpc.GroupCoordinatorStub] | None = None, batch: bool = False,
                 linger_ms: float = 0.0) -> None:
        self.stub = stub

        def worker(s: pb_grpc.GroupCoordinatorStub) -> Any:
            return BatchStreamWorker(s, linger_ms) if batch else StreamWorker(s)

        self.workers: list[Any] = [worker(stub) for _ in range(streams)]
        # --workers: each worker's own stub and streams, picked by the member's port
        self.by_port = {port: (s, [worker(s) for _ in range(streams)]) for port, s in (others or {}).items()}
        self.served: dict[int, int] = {}  # heartbeats answered while recording, per port
        self.latencies: list[float] = []
        self.recording = False
        self.errors = 0
        self.rpc_errors: dict[str, int] = {}
        self.done_at: list[float] = []  # completion times of successful heartbeats while recording

    def transport(self, m: Member) -> Any:
        if m.stream is None:
            stub, workers = self.by_port[m.port] if m.port else (self.stub, self.workers)
            m.stream = workers[hash((m.group_id, id(m))) % len(workers)] if workers else stub.ConsumerGroupHeartbeat
        return m.stream

    def all_streams(self) -> list[StreamWorker]:
        return [*self.workers, *(w for _, ws in self.by_port.values() for w in ws)]

    def request(self, m: Member) -> pb.ConsumerGroupHeartbeatRequest:
        steady = m.steady
        if steady is not None and m.owned == m.sent_owned and steady.member_id == m.member_id \
                and steady.member_epoch == m.epoch:
            return steady  # between rebalances every heartbeat is the same message
        req = pb.ConsumerGroupHeartbeatRequest(group_id=m.group_id, member_id=m.member_id, member_epoch=m.epoch)
        if m.epoch == 0:
            req.rebalance_timeout_ms = 30000
            req.subscribed_topic_names.values.append(m.topic)
            req.topic_partitions.SetInParent()
        elif m.owned != m.sent_owned:
            req.topic_partitions.SetInParent()
            for tid, ps in sorted(m.owned.items()):
                req.topic_partitions.topics.add(topic_id=tid, partitions=ps)
        else:
            m.steady = req
        return req

    async def heartbeat(self, m: Member, record: bool = True) -> None:
        req = self.request(m)
        started = time.perf_counter()
        try:
            resp = await self.transport(m)(req, timeout=30)
        except grpc.aio.AioRpcError as e:
            self.rpc_errors[e.code().name] = self.rpc_errors.get(e.code().name, 0) + 1
            return
        if self.recording:
            done = time.perf_counter()
            self.done_at.append(done)
            self.served[m.port] = self.served.get(m.port, 0) + 1
            if record:
                self.latencies.append((done - started) * 1000)
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


def batch_counts(load: Load) -> tuple[int, int]:
    """(messages, heartbeats) the load's batch streams have sent so far; (0, 0) without --batch."""
    streams = [w for w in load.all_streams() if isinstance(w, BatchStreamWorker)]
    return sum(w.batcher.messages for w in streams), sum(w.batcher.heartbeats for w in streams)


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

    start = 0.0

    async def one(i: int, m: Member) -> None:
        nonlocal sent
        # Each member keeps its own slot in the period, on the clock: a first step delayed by the loop must not
        # move the slot, or the members delayed together heartbeat together in every period after, a burst
        # the schedule never asked for.
        next_at = start + period * i / len(members)
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
        while not stop.is_set():
            await load.heartbeat(m)
            sent += 1
            next_at += period
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

    tasks = [asyncio.create_task(one(i, m)) for i, m in enumerate(members)]
    # The schedule starts once the tasks exist, a little ahead: their first steps (thousands) take a while.
    start = time.perf_counter() + 0.1
    await asyncio.gather(*tasks)
    return sent


async def churn_loop(load: Load, big: list[Member], churn_ms: int, stop: asyncio.Event, rng: random.Random,
                     big_interval_s: float) -> int:
    """The big group: members heartbeat every `big_interval_s` like real clients, and at once when they have
    revoked partitions to report; one leaves and one joins every churn_ms, so its target assignment is
    recomputed continuously."""
    changes = 0

    async def member_loop(m: Member, first_after: float) -> None:
        # Each member keeps its own phase in the interval, as clients that joined at different moments do;
        # all heartbeating at the phase's start would send the whole group's heartbeats in one burst, again
        # every interval (the jitter spreads them only slowly), and measure that burst instead of the rate.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), first_after)
        while not stop.is_set() and m.alive:
            try:
                await load.heartbeat(m, record=False)
            except (grpc.aio.AioRpcError, asyncio.CancelledError):
                return
            if m.owned != m.sent_owned:
                continue  # report the revocation at once, as a Kafka client does
            await asyncio.sleep(big_interval_s * (0.9 + 0.2 * rng.random()))

    tasks = [asyncio.create_task(member_loop(m, big_interval_s * rng.random())) for m in list(big)]
    while not stop.is_set():
        if churn_ms <= 0:  # no churn: the big group only heartbeats
            await stop.wait()
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), churn_ms / 1000)
        if stop.is_set():
            break
        victim = big.pop(rng.randrange(len(big)))
        victim.alive = False
        with contextlib.suppress(grpc.aio.AioRpcError):
            await load.stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
                group_id=victim.group_id, member_id=victim.member_id, member_epoch=-1), timeout=30)
        newcomer = Member(victim.group_id, victim.topic)
        big.append(newcomer)
        tasks.append(asyncio.create_task(member_loop(newcomer, 0.0)))
        changes += 1
    await asyncio.gather(*tasks, return_exceptions=True)  # loops end on `stop` (cancelling would kill streams)
    return changes


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()  # noqa: SIM115
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The processes `pid` started (from any of its threads); none when it is gone."""
    try:
        return [int(c) for t in os.listdir(f"/proc/{pid}/task")
                for c in open(f"/proc/{pid}/task/{t}/children").read().split()]  # noqa: SIM115
    except OSError:
        return []


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (the coordinator's forkserver and its background workers)."""
    return [d for c in children(pid) for d in (c, *descendants(c))]


def cpu_by_process(coordinators: list[int], big_pid: int | None) -> dict[str, float]:
    """CPU seconds so far: the coordinator process(es), their background processes, this load generator, and
    the rebalancing group's process."""
    def total(ps: list[int]) -> float:
        out = 0.0
        for p in ps:
            with contextlib.suppress(OSError, IndexError):
                out += cpu_seconds(p)
        return out

    own = resource.getrusage(resource.RUSAGE_SELF)
    return {"coordinator": total(coordinators),
            "background": total([d for c in coordinators for d in descendants(c) if d not in coordinators]),
            "load generator": own.ru_utime + own.ru_stime,
            "big group": total([big_pid]) if big_pid else 0.0}


def worker_pids(server: subprocess.Popen[bytes], base: int, workers: int) -> dict[int, int]:
    """port -> pid of the coordinator process serving it (the server itself, or the supervisor's workers)."""
    if workers == 1:
        return {base: server.pid}
    out: dict[int, int] = {}
    for pid in children(server.pid):
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")  # noqa: SIM115
        if b"--worker-index" in argv:
            out[base + int(argv[argv.index(b"--worker-index") + 1])] = pid
    return out


async def run_case(port: int, args: argparse.Namespace, pids: dict[int, int]) -> dict[str, Any]:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    await channel.channel_ready()
    stub = pb_grpc.GroupCoordinatorStub(channel)
    per_group = args.members // args.groups
    members = [Member(f"group-{g}", f"t{g}") for g in range(args.groups) for _ in range(per_group)]
    port_of: dict[str, int] = {}
    others: dict[int, pb_grpc.GroupCoordinatorStub] = {}
    if args.workers > 1:  # as a client does: ask FindCoordinator where each group lives, then go there
        found = await stub.FindCoordinator(pb.FindCoordinatorRequest(
            keys=[f"group-{g}" for g in range(args.groups)] + ["big"]), timeout=30)
        port_of = {c.key: c.port for c in found.coordinators}
        for p in sorted(set(port_of.values())):
            ch = grpc.aio.insecure_channel(f"127.0.0.1:{p}")
            await ch.channel_ready()
            others[p] = pb_grpc.GroupCoordinatorStub(ch)
        for m in members:
            m.port = port_of[m.group_id]
    load = Load(stub, 0 if args.unary else args.streams, others, batch=args.batch, linger_ms=args.linger_ms)
    print(f"  joining {len(members)} members in {args.groups} groups ...", flush=True)
    await reconcile(load, members)
    out: dict[str, Any] = {}

    # Quiet.
    stop = asyncio.Event()
    if load.errors or load.rpc_errors:
        print(f"  while joining: {load.errors} heartbeats answered with an error, RPC errors {load.rpc_errors}",
              flush=True)
    load.errors, load.rpc_errors = 0, {}
    load.latencies, load.done_at, load.recording, load.served = [], [], True, {}
    t0 = time.perf_counter()
    batched0 = batch_counts(load)
    gen0 = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = {p: cpu_seconds(pid) for p, pid in pids.items()}
    task = asyncio.create_task(steady_loop(load, members, args.rate, stop))
    await asyncio.sleep(args.seconds)
    stop.set()
    await task
    wall = time.perf_counter() - t0
    gen1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu1 = {p: cpu_seconds(pid) for p, pid in pids.items()}
    load.recording = False
    served = {p or port: n for p, n in load.served.items()}
    batched1 = batch_counts(load)
    out.update(batch_mean=(batched1[1] - batched0[1]) / max(1, batched1[0] - batched0[0]) if args.batch else 1.0)
    out.update(quiet_errors=load.errors + sum(load.rpc_errors.values()))
    out.update(quiet_rate=window_rate(load.done_at, t0, args), quiet_p50=pct(load.latencies, 0.5),
               quiet_p99=pct(load.latencies, 0.99), quiet_load=os.getloadavg()[0],
               gen_cores=(gen1.ru_utime + gen1.ru_stime - gen0.ru_utime - gen0.ru_stime) / wall,
               workers=[(p, (cpu1[p] - cpu0[p]) / wall, served.get(p, 0),
                         (cpu1[p] - cpu0[p]) * 1e6 / max(1, served.get(p, 0))) for p in sorted(pids)])
    if args.big <= 0:
        for w in load.all_streams():
            await w.close()
        await channel.close()
        return out

    # Rebalancing: the big group churns while the others heartbeat.
    print(f"  joining the {args.big}-member rebalancing group ...", flush=True)
    big_port = port_of.get("big", port)
    big: BigGroup = BigGroupProcess(big_port, args) if not args.big_same_process else BigGroupTasks(big_port, args)
    if not await big.join():  # "off" at interval 0: every join runs the assignor on the event loop
        print(f"  the {args.big}-member group did not settle within {args.join_timeout:.0f} s: no rebalancing phase",
              flush=True)
        for w in load.all_streams():
            await w.close()
        await big.close()
        await channel.close()
        return out

    async def phase(churn_ms: int) -> dict[str, Any]:
        stop = asyncio.Event()
        load.latencies, load.done_at, load.recording = [], [], True
        big_result = asyncio.create_task(big.phase(churn_ms, args.seconds))
        task = asyncio.create_task(steady_loop(load, members, args.rate, stop))
        t0 = time.perf_counter()
        cpu0 = cpu_by_process(list(pids.values()), big.pid)
        await asyncio.sleep(args.seconds)
        cpu1 = cpu_by_process(list(pids.values()), big.pid)
        wall = time.perf_counter() - t0
        stop.set()
        await task
        load.recording = False
        result = await big_result
        return {"rate": window_rate(load.done_at, t0, args), "big_rate": result["big_rate"],
                "p50": pct(load.latencies, 0.5), "p99": pct(load.latencies, 0.99), "load": os.getloadavg()[0],
                "churn": result["churn"], "big_errors": result["errors"],
                "cores": {k: (cpu1[k] - cpu0[k]) / wall for k in cpu0}, "latencies": load.latencies}

    def pooled(results: list[dict[str, Any]]) -> dict[str, Any]:
        """Rounds of one phase as one: latencies pooled, rates and cores averaged, counts added."""
        latencies = [x for r in results for x in r["latencies"]]
        n = len(results)
        return {"rate": sum(r["rate"] for r in results) / n, "big_rate": sum(r["big_rate"] for r in results) / n,
                "p50": pct(latencies, 0.5), "p99": pct(latencies, 0.99), "load": results[-1]["load"],
                "churn": sum(r["churn"] for r in results), "big_errors": sum(r["big_errors"] for r in results),
                "cores": {k: sum(r["cores"][k] for r in results) / n for k in results[0]["cores"]}}

    # Settle, unmeasured: right after the join many of the big group's members are still reconciling (each
    # heartbeats again at once while it has partitions to report), which made the first steady phase a
    # catch-up burst above the group's rate.
    settle_s = 2 * args.big_interval_ms / 1000
    print(f"  settling: the big group heartbeats for {settle_s:.0f} s, unmeasured ...", flush=True)
    await big.phase(0, settle_s)

    # Silent, steady and rebalancing phases alternate `--rounds` times, so a drift in the machine's own load
    # (another tenant, the load average of the phases before) falls on all alike.
    silents, steadies, busies = [], [], []
    for k in range(args.rounds):
        if not args.no_silent:  # the big group joined but silent: the quiet baseline, measured beside the others
            print(f"  silent ({k + 1}/{args.rounds}): the big group stays joined and sends nothing ...", flush=True)
            silents.append(await phase(SILENT))
        if not args.no_steady:  # the big group present and heartbeating, not changing: the baseline for isolation
            print(f"  steady ({k + 1}/{args.rounds}): the big group heartbeats without churn ...", flush=True)
            steadies.append(await phase(0))
        print(f"  rebalancing ({k + 1}/{args.rounds}): one leaves and one joins every {args.churn_ms} ms ...",
              flush=True)
        busies.append(await phase(args.churn_ms))
    if silents:
        silent = pooled(silents)
        out.update(silent_rate=silent["rate"], silent_p50=silent["p50"], silent_p99=silent["p99"],
                   silent_load=silent["load"], silent_cores=silent["cores"])
    if steadies:
        steady = pooled(steadies)
        out.update(steady_rate=steady["rate"], steady_big_rate=steady["big_rate"], steady_p50=steady["p50"],
                   steady_p99=steady["p99"], steady_load=steady["load"], steady_cores=steady["cores"])
    busy = pooled(busies)
    for w in load.all_streams():
        await w.close()
    await big.close()
    out.update(busy_rate=busy["rate"], big_rate=busy["big_rate"], busy_p50=busy["p50"], busy_p99=busy["p99"],
               busy_load=busy["load"], churn=busy["churn"], busy_cores=busy["cores"],
               errors=load.errors + sum(load.rpc_errors.values()) + busy["big_errors"])
    if load.rpc_errors:
        print(f"  rpc errors: {load.rpc_errors}", flush=True)
    await channel.close()
    return out


SILENT = -1  # a phase's churn_ms for "the big group stays joined and sends nothing"


class BigGroup(Protocol):
    """The rebalancing group: joins, then runs phases (heartbeating, churning when churn_ms > 0, silent when it
    is `SILENT`)."""

    pid: int | None  # its own process, if it has one

    async def join(self) -> bool: ...

    async def phase(self, churn_ms: int, seconds: float) -> dict[str, float]: ...

    async def close(self) -> None: ...


class BigGroupTasks:
    """The big group's members as tasks of this load generator's event loop: its own connection and streams,
    so its bursts do not queue on the measured groups' streams, but its client work shares their loop."""

    def __init__(self, port: int, args: argparse.Namespace) -> None:
        self.port, self.args = port, args
        self.pid: int | None = None  # this process's event loop
        self.rng = random.Random(1)
        self.channel: grpc.aio.Channel | None = None
        self.load: Load | None = None
        self.members = [Member("big", "big") for _ in range(args.big)]

    async def join(self) -> bool:
        args = self.args
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{self.port}")
        stub = pb_grpc.GroupCoordinatorStub(self.channel)
        await stub.AlterGroupConfigs(pb.AlterGroupConfigsRequest(group_id="big", configs=[
            pb.AlterableConfig(name="consumer.assignment.interval.ms", value=str(args.assignment_interval_ms))]))
        self.load = Load(stub, 0 if args.unary else (args.streams if args.batch else 16), batch=args.batch,
                         linger_ms=args.linger_ms)
        try:
            await asyncio.wait_for(reconcile(self.load, self.members, rounds=4), timeout=args.join_timeout)
        except TimeoutError:
            return False
        return True

    async def phase(self, churn_ms: int, seconds: float) -> dict[str, float]:
        assert self.load is not None
        if churn_ms == SILENT:
            await asyncio.sleep(seconds)
            return {"big_rate": 0.0, "churn": 0, "errors": 0}
        stop = asyncio.Event()
        self.load.done_at, self.load.recording, self.load.errors, self.load.rpc_errors = [], True, 0, {}
        churn = asyncio.create_task(churn_loop(self.load, self.members, churn_ms, stop, self.rng,
                                               self.args.big_interval_ms / 1000))
        t0 = time.perf_counter()
        await asyncio.sleep(seconds)
        stop.set()
        changes = await churn
        self.load.recording = False
        return {"big_rate": window_rate(self.load.done_at, t0, self.args), "churn": changes,
                "errors": self.load.errors + sum(self.load.rpc_errors.values())}

    async def close(self) -> None:
        if self.load is not None:
            for w in self.load.workers:
                await w.close()
        if self.channel is not None:
            await self.channel.close()


def _big_group_main(conn: Any, port: int, args: argparse.Namespace) -> None:
    """The rebalancing group's own process: commands and results over `conn`."""
    gc.set_threshold(50_000, 50, 100)
    if args.big_niceness:
        os.nice(args.big_niceness)
    if args.big_idle:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))

    async def serve() -> None:
        big = BigGroupTasks(port, args)
        conn.send(await big.join())
        loop = asyncio.get_running_loop()
        while True:
            command = await loop.run_in_executor(None, conn.recv)
            if command[0] == "phase":
                conn.send(await big.phase(command[1], command[2]))
            else:
                await big.close()
                conn.send(None)
                return

    asyncio.run(serve())


class BigGroupProcess:
    """The rebalancing group in a process of its own, as another application would be: its client work
    (1,800 heartbeats/s, the reconciliations) does not delay the measured groups' responses in this event
    loop. It still shares the machine's cores with the coordinator and this load generator."""

    def __init__(self, port: int, args: argparse.Namespace) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_big_group_main, args=(child, port, args), daemon=True)
        self.process.start()
        self.pid: int | None = self.process.pid

    async def _call(self, command: tuple[Any, ...] | None) -> Any:
        loop = asyncio.get_running_loop()
        if command is not None:
            self.conn.send(command)
        return await loop.run_in_executor(None, self.conn.recv)

    async def join(self) -> bool:
        return bool(await self._call(None))

    async def phase(self, churn_ms: int, seconds: float) -> dict[str, float]:
        return dict(await self._call(("phase", churn_ms, seconds)))

    async def close(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(EOFError, BrokenPipeError, OSError):
                await self._call(("close",))
        self.process.join(timeout=30)


CASES = {"process": (True, "process"), "thread": (True, "thread"), "off": (False, "thread")}


def start_server(port: int, args: argparse.Namespace, case: str) -> subprocess.Popen[bytes]:
    offload, executor = CASES[case]
    cmd = [sys.executable, "-m", "groupcoord", "--log-level", "INFO", "serve", "--listen", f"127.0.0.1:{port}",
           "--workers", str(args.workers), "--set", f"group.coordinator.background.executor={executor}",
           "--set", f"group.consumer.assignor.offload.enable={'true' if offload else 'false'}",
           "--set", "group.consumer.session.timeout.ms=60000", "--set", "group.consumer.max.session.timeout.ms=60000",
           "--topic", f"big:{args.big_partitions}"]
    if args.background_niceness is not None:
        cmd += ["--set", f"group.coordinator.background.niceness={args.background_niceness}"]
    if args.no_background_idle:
        cmd += ["--set", "group.coordinator.background.idle.scheduling=false"]
    for g in range(args.groups):
        cmd += ["--topic", f"t{g}:{args.partitions}"]
    log = open(f"/tmp/groupcoord-bench-{port}.log", "w")  # noqa: SIM115
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    if args.coordinator_cores:  # set at once, before the server (busy importing) starts a thread or a worker
        os.sched_setaffinity(server.pid, args.coordinator_cores)
    return server


def pin_load(args: argparse.Namespace) -> None:
    """`--pin N`: the first N cores go to the coordinator (`args.coordinator_cores`; its background workers
    inherit them), and this load generator (with the big group's process, spawned from it) to the rest, so the
    coordinator's cores stand for a host of its own and the clients for other machines. 0: no pinning."""
    allowed = sorted(os.sched_getaffinity(0))
    args.coordinator_cores = set(allowed[:args.pin]) if args.pin > 0 else set()
    if args.coordinator_cores:
        if args.pin >= len(allowed):
            raise SystemExit(f"--pin {args.pin} leaves the load no core: this machine gives {len(allowed)}")
        os.sched_setaffinity(0, set(allowed[args.pin:]))


def main(argv: list[str] | None = None) -> int:
    gc.set_threshold(50_000, 50, 100)  # keep the load generator's own GC pauses out of the latencies
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=int, default=5000)
    p.add_argument("--groups", type=int, default=50)
    p.add_argument("--partitions", type=int, default=200, help="partitions of each small group's topic")
    p.add_argument("--big", type=int, default=1000, help="members of the rebalancing group")
    p.add_argument("--big-partitions", type=int, default=4000)
    p.add_argument("--rate", type=float, default=3000.0, help="target heartbeats/s of the small groups")
    p.add_argument("--churn-ms", type=int, default=500,
                   help="one leave + one join in the big group this often (0: none, the group only heartbeats)")
    p.add_argument("--big-interval-ms", type=int, default=2000, help="heartbeat interval of the big group")
    p.add_argument("--assignment-interval-ms", type=int, default=1000,
                   help="the big group's consumer.assignment.interval.ms (KIP-1263 batching; 1000 = Kafka's default, "
                   "0 = recompute on every change)")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=1,
                   help="alternate the steady and rebalancing phases this many times (each --seconds long); "
                        "latencies pooled per phase")
    p.add_argument("--no-silent", action="store_true",
                   help="skip the silent phase (the big group joined but sending nothing: the quiet baseline "
                        "measured in every round, beside the others)")
    p.add_argument("--no-steady", action="store_true",
                   help="skip the steady phase (the big group heartbeating without churn, the isolation baseline)")
    p.add_argument("--join-timeout", type=float, default=180.0,
                   help="give up on the rebalancing phase if its group has not settled after this many seconds")
    p.add_argument("--streams", type=int, default=64, help="ConsumerGroupHeartbeatStream streams to multiplex on")
    p.add_argument("--unary", action="store_true", help="unary ConsumerGroupHeartbeat calls instead of streams")
    p.add_argument("--batch", action="store_true",
                   help="ConsumerGroupHeartbeatBatchStream: each stream sends the heartbeats ready as one message")
    p.add_argument("--linger-ms", type=float, default=0.0,
                   help="with --batch: wait this long before each message, for bigger batches (Kafka's linger.ms)")
    p.add_argument("--big-niceness", type=int, default=0,
                   help="run the rebalancing group's own process this much below normal CPU priority (its clients "
                        "stand for another application's machines; niced, their CPU here is taken from what the "
                        "coordinator and the measured load leave)")
    p.add_argument("--big-idle", action="store_true",
                   help="run the rebalancing group's own process under SCHED_IDLE: with --pin it shares the load "
                        "generator's cores, and the measured clients then answer at once instead of waiting for "
                        "its time slice (its heartbeat rate is still shown, as +big hb/s)")
    p.add_argument("--background-niceness", type=int, default=None,
                   help="the coordinator's group.coordinator.background.niceness (default: the coordinator's)")
    p.add_argument("--no-background-idle", action="store_true",
                   help="group.coordinator.background.idle.scheduling=false: worker processes only niced, not "
                        "SCHED_IDLE")
    p.add_argument("--big-same-process", action="store_true",
                   help="run the rebalancing group's members in this load generator's event loop (the default "
                        "is a process of their own, as another application)")
    p.add_argument("--pin", type=int, default=0, metavar="N",
                   help="run the coordinator (with its background workers) on N cores of its own and the load "
                        "processes on the others, as on separate machines (default 0: no pinning, all share)")
    p.add_argument("--quick", action="store_true", help="1,000 members, 5 s phases")
    p.add_argument("--cases", default="process,thread,off",
                   help="comma-separated: process (offload to worker processes), thread (offload to threads), "
                   "off (assignor on the event loop)")
    p.add_argument("--workers", type=int, default=1, help="serve --workers N; the load routes by FindCoordinator")
    args = p.parse_args(argv)
    pin_load(args)
    if args.quick:
        args.members, args.groups, args.seconds, args.big = 1000, 10, 5.0, 300
    rows = []
    for case in args.cases.split(","):
        port = free_port() if args.workers == 1 else free_ports(args.workers)
        print(f"{case}: starting the coordinator on :{port} ({args.workers} worker(s))", flush=True)
        server = start_server(port, args, case)
        try:
            pids: dict[int, int] = {}
            deadline = time.monotonic() + 30
            while len(pids) < args.workers and time.monotonic() < deadline:
                time.sleep(0.2)
                pids = worker_pids(server, port, args.workers)
            rows.append((case, asyncio.run(run_case(port, args, pids))))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
    print()
    transport = "unary calls" if args.unary else f"{args.streams} heartbeat {'batch ' if args.batch else ''}streams"
    if args.batch:
        transport += " (quiet phase: " + ", ".join(f"{name} {r['batch_mean']:.1f}" for name, r in rows) \
            + " heartbeats per message)"
    print(f"transport: {transport}; {args.members} members in {args.groups} groups at a target of "
          f"{args.rate:,.0f} heartbeats/s; rebalancing group: {args.big} members, "
          f"one leaves + one joins every {args.churn_ms} ms, assignment interval {args.assignment_interval_ms} ms")
    header = (f"{'offload':<8} {'phase':<12} {'hb/s':>8} {'+big hb/s':>10} {'p50 ms':>8} {'p99 ms':>8} "
              f"{'p99/quiet':>10} {'churn':>6} {'errors':>6} {'load1':>6}")
    print("hb/s: heartbeats/s of the 50 measured groups (latency columns are theirs); +big: the rebalancing group's")
    print(header)
    print("-" * len(header))
    for name, r in rows:
        print(f"{name:<8} {'quiet':<12} {r['quiet_rate']:>8,.0f} {'':>10} {r['quiet_p50']:>8.2f} "
              f"{r['quiet_p99']:>8.2f} {'':>10} {'':>6} {r['quiet_errors']:>6} {r['quiet_load']:>6.1f}")
        if "silent_rate" in r:
            print(f"{name:<8} {'silent':<12} {r['silent_rate']:>8,.0f} {0:>10,.0f} "
                  f"{r['silent_p50']:>8.2f} {r['silent_p99']:>8.2f} {r['silent_p99'] / r['quiet_p99']:>10.2f} "
                  f"{'':>6} {'':>6} {r['silent_load']:>6.1f}")
        if "steady_rate" in r:
            print(f"{name:<8} {'steady':<12} {r['steady_rate']:>8,.0f} {r['steady_big_rate']:>10,.0f} "
                  f"{r['steady_p50']:>8.2f} {r['steady_p99']:>8.2f} {r['steady_p99'] / r['quiet_p99']:>10.2f} "
                  f"{'':>6} {'':>6} {r['steady_load']:>6.1f}")
        if "busy_rate" in r:
            print(f"{name:<8} {'rebalancing':<12} {r['busy_rate']:>8,.0f} {r['big_rate']:>10,.0f} "
                  f"{r['busy_p50']:>8.2f} {r['busy_p99']:>8.2f} {r['busy_p99'] / r['quiet_p99']:>10.2f} "
                  f"{int(r['churn']):>6} {int(r['errors']):>6} {r['busy_load']:>6.1f}"
                  + (f"   p99/silent {r['busy_p99'] / r['silent_p99']:.2f}" if "silent_p99" in r else "")
                  + (f"   p99/steady {r['busy_p99'] / r['steady_p99']:.2f}" if "steady_p99" in r else ""))
    if any("busy_cores" in r for _, r in rows):
        print()
        print("CPU by phase, in cores (CPU seconds per wall second): the coordinator process(es), their background "
              "worker processes, this load generator, the rebalancing group's own process")
        print(f"{'offload':<8} {'phase':<12} {'coordinator':>12} {'background':>11} {'load gen':>9} {'big group':>10}")
        for name, r in rows:
            for phase, key in (("silent", "silent_cores"), ("steady", "steady_cores"), ("rebalancing", "busy_cores")):
                if key in r:
                    c = r[key]
                    print(f"{name:<8} {phase:<12} {c['coordinator']:>12.2f} {c['background']:>11.2f} "
                          f"{c['load generator']:>9.2f} {c['big group']:>10.2f}")
    print()
    print(f"CPU in the quiet phase ({args.workers} worker(s)); cores = CPU seconds per wall second; load1 = the "
          "machine's 1-minute load average then")
    print(f"{'case':<8} {'process':<16} {'cores':>6} {'hb/s':>8} {'CPU us/hb':>10} {'load1':>6}")
    for name, r in rows:
        total = sum(n for _, _, n, _ in r["workers"])
        rate = total / args.seconds
        print(f"{name:<8} {'load generator':<16} {r['gen_cores']:>6.2f} {rate:>8,.0f} "
              f"{r['gen_cores'] * 1e6 / max(rate, 1):>10.0f} {r['quiet_load']:>6.1f}")
        for port, cores, n, us in r["workers"]:
            print(f"{name:<8} {f'worker :{port}':<16} {cores:>6.2f} {n / args.seconds:>8,.0f} {us:>10.0f} "
                  f"{r['quiet_load']:>6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
