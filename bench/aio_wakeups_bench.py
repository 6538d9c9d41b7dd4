"""What batching grpc.aio's completion wake-ups buys the coordinator: the measurement behind removing it.

    python -m bench.aio_wakeups_bench [--rate 3000] [--members 1000] [--seconds 8] [--rounds 3]

Starts two coordinators as subprocesses, identical but for the wake-ups: A batches them, B does not. One load
process joins `--members` members to each (spread over `--groups` groups, every member acknowledging its
assignment), then drives heartbeats over `--streams` ConsumerGroupHeartbeatStream streams, open-loop at
`--rate` per second, to one coordinator at a time in the order A B B A, `--rounds` times: the two cases are
measured interleaved in one run, so drift of the machine (shared, 2 cores) falls on both. Per phase: the
coordinator's CPU (user + system, from /proc) per heartbeat, and the heartbeats' latency as the client sees it.
The load process does not batch its own wake-ups in either case.

The batching (`coalesce_wakeups`, here only) was in `serve` until issue 26: grpc.aio's poller thread writes one
byte per completed operation to a socket pair the loop watches, and its reader,
`PollerCompletionQueue._handle_events`, reads one byte and then runs every completion queued so far, so N
queued completions cost N wake-ups of which N - 1 find nothing to do. The wrapper read the pending bytes but
one before calling grpc's reader. It patched grpc.aio internals (the reader registered on the loop's
`_selector`). Measured here (grpcio 1.85.3, 2 cores shared with other work, 1,000 members, 64 streams), it saved
4-7% of the coordinator's CPU per heartbeat at 3,000 heartbeats/s (three runs), nothing at 6,000 (-0.5%) and
nothing at 1,500 (+2.5%), with no consistent gain in latency: not worth patching private internals in
production. Re-run this bench to measure it again on another grpc version or machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

TICK_S = 0.005


def _batched(sock: socket.socket, handle: Callable[[], Any]) -> Callable[[], None]:
    def wake() -> None:
        try:
            pending = len(sock.recv(65536, socket.MSG_PEEK))
            if pending > 1:
                sock.recv(pending - 1)
            handle()
        except BlockingIOError:
            pass
    return wake


def coalesce_wakeups() -> int:
    """Wrap grpc.aio's completion-queue reader on the running loop (private internals: case A only)."""
    loop = asyncio.get_running_loop()
    selector = getattr(loop, "_selector", None)
    wrapped = 0
    for key in list(selector.get_map().values()) if selector is not None else ():
        callback = getattr(key.data[0] if isinstance(key.data, tuple) else None, "_callback", None)
        if isinstance(callback, functools.partial) and isinstance(key.fileobj, socket.socket) and \
                getattr(callback.func, "__name__", "") == "_handle_events":
            loop.remove_reader(key.fileobj)
            loop.add_reader(key.fileobj, _batched(key.fileobj, callback))
            wrapped += 1
    return wrapped


def serve(port: int, coalesce: bool, groups: int) -> None:
    """The coordinator of one case (a subprocess of the bench), tuned as `groupcoord serve` tunes its process."""
    from groupcoord.cli_serve import tune_serving_process
    from groupcoord.coordinator.core.config import BrokerConfig
    from groupcoord.coordinator.runtime import server
    from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource

    config = BrokerConfig.from_mapping({"group.consumer.session.timeout.ms": 60000,
                                        "group.consumer.max.session.timeout.ms": 60000})
    options = server.ServerOptions(listen=f"127.0.0.1:{port}", config=config,
                                   metadata_source=StaticMetadataSource({f"t{g}": 50 for g in range(groups)}))

    async def main() -> None:
        srv = server.CoordinatorServer(options)
        tune_serving_process()
        await srv.start()
        wrapped = coalesce_wakeups() if coalesce else 0
        print(f"serving coalesce={coalesce} wrapped={wrapped}", flush=True)
        await srv.wait()

    asyncio.run(main())


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Member:
    group_id: str
    member_id: str = ""
    epoch: int = 0
    owned: list[pb.TopicPartitions] = field(default_factory=list)

    def request(self) -> pb.ConsumerGroupHeartbeatRequest:
        return pb.ConsumerGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                                member_epoch=self.epoch,
                                                topic_partitions=pb.TopicPartitionsList(topics=self.owned))

    def update(self, resp: pb.ConsumerGroupHeartbeatResponse) -> bool:
        if resp.error_code:
            return False
        self.epoch = resp.member_epoch
        if resp.HasField("assignment"):
            self.owned = list(resp.assignment.topic_partitions)
        return True


@dataclass
class Phase:
    case: str
    sent: int = 0
    answered: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    cpu: float = 0.0


class Target:
    def __init__(self, name: str, port: int, args: argparse.Namespace) -> None:
        self.name, self.port, self.args = name, port, args
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.stub = pb_grpc.GroupCoordinatorStub(self.channel)
        self.members = [Member(f"g{k % args.groups}") for k in range(args.members)]
        self.calls: list[Any] = []
        self.pending: list[list[tuple[Member, float]]] = []
        self.phase: Phase | None = None

    async def join(self) -> None:
        for m in self.members:
            req = m.request()
            req.subscribed_topic_names.values.append(f"t{m.group_id[1:]}")
            req.rebalance_timeout_ms = 60000
            resp = await self.stub.ConsumerGroupHeartbeat(req, timeout=30)
            m.member_id = resp.member_id
            m.update(resp)
        for _ in range(3):  # acknowledge what the assignor gave out
            for m in self.members:
                m.update(await self.stub.ConsumerGroupHeartbeat(m.request(), timeout=30))
            await asyncio.sleep(0.5)

    async def open_streams(self) -> None:
        for _ in range(self.args.streams):
            call = self.stub.ConsumerGroupHeartbeatStream()
            queue: list[tuple[Member, float]] = []
            self.calls.append(call)
            self.pending.append(queue)
            asyncio.ensure_future(self._read(call, queue))

    async def _read(self, call: Any, queue: list[tuple[Member, float]]) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError):
            await self._answers(call, queue)

    async def _answers(self, call: Any, queue: list[tuple[Member, float]]) -> None:
        async for resp in call:
            member, sent = queue.pop(0)
            phase = self.phase
            if phase is None:
                continue
            phase.answered += 1
            phase.latencies.append(time.perf_counter() - sent)
            if not member.update(resp):
                phase.errors += 1

    async def send(self, k: int) -> None:
        member = self.members[k % len(self.members)]
        stream = k % len(self.calls)
        self.pending[stream].append((member, time.perf_counter()))
        await self.calls[stream].write(member.request())


async def run_phase(target: Target, pid: int, phase: Phase, args: argparse.Namespace, counter: list[int]) -> None:
    target.phase = phase
    per_tick = args.rate * TICK_S
    start = time.perf_counter()
    cpu0 = cpu_seconds(pid)
    owed = 0.0
    next_tick = start
    while time.perf_counter() - start < args.seconds:
        owed += per_tick
        while owed >= 1:
            owed -= 1
            counter[0] += 1
            phase.sent += 1
            await target.send(counter[0])
        next_tick += TICK_S
        await asyncio.sleep(max(0.0, next_tick - time.perf_counter()))
    await asyncio.sleep(0.5)  # the stragglers' answers
    phase.cpu = cpu_seconds(pid) - cpu0
    target.phase = None


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000 if s else float("nan")


async def load(args: argparse.Namespace, servers: dict[str, tuple[int, int]]) -> list[Phase]:
    targets = {name: Target(name, port, args) for name, (port, _) in servers.items()}
    for t in targets.values():
        await t.join()
        await t.open_streams()
    phases: list[Phase] = []
    counter = [0]
    order = ["A", "B", "B", "A"] * args.rounds
    for case in order:
        phase = Phase(case)
        await run_phase(targets[case], servers[case][1], phase, args, counter)
        phases.append(phase)
        print(f"  {case}: {phase.answered} answered, {phase.errors} errors, "
              f"{phase.cpu / max(1, phase.answered) * 1e6:.1f} us CPU/heartbeat, p50 {pct(phase.latencies, .5):.2f} ms,"
              f" p99 {pct(phase.latencies, .99):.2f} ms", flush=True)
    for t in targets.values():
        for call in t.calls:
            await call.done_writing()
        await t.channel.close()
    return phases


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    p.add_argument("--coalesce", choices=("on", "off"), help=argparse.SUPPRESS)
    p.add_argument("--rate", type=float, default=3000.0)
    p.add_argument("--members", type=int, default=1000)
    p.add_argument("--groups", type=int, default=20)
    p.add_argument("--streams", type=int, default=64)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    if args.serve:
        serve(args.serve, args.coalesce == "on", args.groups)
        return 0
    from bench.heartbeat_bench import free_port

    procs: dict[str, subprocess.Popen[bytes]] = {}
    servers: dict[str, tuple[int, int]] = {}
    try:
        for name, coalesce in (("A", "on"), ("B", "off")):
            port = free_port()
            procs[name] = subprocess.Popen([sys.executable, "-m", "bench.aio_wakeups_bench", "--serve", str(port),
                                            "--coalesce", coalesce, "--groups", str(args.groups)],
                                           stdout=subprocess.PIPE)
            assert procs[name].stdout is not None
            print(f"{name}: {procs[name].stdout.readline().decode().strip()}", flush=True)
            servers[name] = (port, procs[name].pid)
        phases = asyncio.run(load(args, servers))
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait(timeout=30)
    print(f"\n{args.members} members, {args.rate:.0f} heartbeats/s over {args.streams} streams, "
          f"{args.seconds:.0f} s phases, A B B A x {args.rounds} (interleaved); os.cpu_count()={os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'case':<26}{'us CPU/hb (median)':>20}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}")
    for name, label in (("A", "A: wake-ups batched"), ("B", "B: one per completion")):
        mine = [ph for ph in phases if ph.case == name]
        per_hb = statistics.median(ph.cpu / max(1, ph.answered) * 1e6 for ph in mine)
        lat = [x for ph in mine for x in ph.latencies]
        print(f"{label:<26}{per_hb:>20.1f}{pct(lat, .5):>10.2f}{pct(lat, .99):>10.2f}"
              f"{sum(ph.errors for ph in mine):>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
