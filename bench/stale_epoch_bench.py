"""Stable GroupMembers under fast churn against a slow coordinator: how often are they fenced (110)?

    python -m bench.stale_epoch_bench [--seconds 30] [--stable 4] [--churners 6] [--partitions 50000]

Starts `groupcoord serve` (heartbeats 100 ms, sessions 5 s, assignment on every change, offload off, so each
target computation over `--partitions` holds the coordinator's loop; `--throttle` stops it for that share of
every 50 ms, as a loaded machine would: heartbeat answers then take 0.3-1 s), `--stable` members that stay,
and `--churners` threads that each join a member, keep it 50-500 ms and close it. Every stable member's
heartbeats are traced: (request epoch, owned partitions sent, answer epoch or error). It prints, per stable
member, the heartbeats given up (no answer within the client's deadline), the FENCED_MEMBER_EPOCH answers,
each with the heartbeats before it, and how often it gave up its partitions (on_lost). No member loses its
connection here: each fencing comes from answers the coordinator gave but the client did not wait for.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import grpc

from groupcoord.clients.group_member import FENCED_MEMBER_EPOCH, GroupMember
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

Trace = tuple[float, int, int | None, str, str]  # (sent, request epoch, owned sent, answer epoch or error, msg)


class TracedMember(GroupMember):
    """A GroupMember that records each heartbeat it sends and what came back (observation only)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, on_lost=self._count_lost, **kw)
        self.trace: list[Trace] = []
        self.lost = 0  # on_lost calls: partitions given up (lease run out, or fenced)

    def _count_lost(self, tps: frozenset[tuple[str, int]]) -> None:
        self.lost += 1

    def _send_heartbeat(self, route: Any, req: pb.ConsumerGroupHeartbeatRequest) -> Any:
        sent = time.monotonic()
        owned = sum(len(t.partitions) for t in req.topic_partitions.topics) \
            if req.HasField("topic_partitions") else None
        try:
            resp = super()._send_heartbeat(route, req)
        except grpc.RpcError as e:
            self.trace.append((sent, req.member_epoch, owned, e.code().name, ""))
            raise
        answer = str(resp.member_epoch) if resp.error_code == 0 else f"error {resp.error_code}"
        self.trace.append((sent, req.member_epoch, owned, answer, resp.error_message[:80]))
        return resp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(port: int, partitions: int) -> subprocess.Popen[bytes]:
    settings = {"group.consumer.heartbeat.interval.ms": 100, "group.consumer.min.heartbeat.interval.ms": 20,
                "group.consumer.session.timeout.ms": 5000, "group.consumer.min.session.timeout.ms": 300,
                "group.consumer.assignment.interval.ms": 0, "group.consumer.assignor.offload.enable": "false"}
    args = [sys.executable, "-m", "groupcoord", "--log-level", "WARNING", "serve", "--listen", f"127.0.0.1:{port}",
            "--topic", f"orders:{partitions}"]
    for k, v in settings.items():
        args += ["--set", f"{k}={v}"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            try:
                pb_grpc.GroupCoordinatorStub(ch).ListGroups(pb.ListGroupsRequest(), timeout=1)
                return proc
            except grpc.RpcError:
                time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the coordinator did not come up")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.stale_epoch_bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--stable", type=int, default=4)
    p.add_argument("--churners", type=int, default=6)
    p.add_argument("--partitions", type=int, default=50_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--throttle", type=float, default=0.5,
                   help="share of each 50 ms the coordinator is stopped (SIGSTOP), as on a loaded machine (0.5)")
    p.add_argument("--quick", action="store_true", help="10 s")
    args = p.parse_args(argv)
    seconds = 10.0 if args.quick else args.seconds
    rng = random.Random(args.seed)
    port = free_port()
    address = f"127.0.0.1:{port}"
    proc = serve(port, args.partitions)
    try:
        stable = [TracedMember(address, "g", ["orders"], rpc_timeout_s=3) for _ in range(args.stable)]
        for m in stable:
            m.start()
        for m in stable:
            m.wait_joined(30)
        end = time.monotonic() + seconds
        cycles = [0]

        def churn() -> None:
            while time.monotonic() < end:
                m = GroupMember(address, "g", ["orders"], rpc_timeout_s=3).start()
                m.wait_joined(10)
                time.sleep(rng.uniform(0.05, 0.5))
                m.close()
                cycles[0] += 1
                time.sleep(rng.uniform(0.0, 0.3))

        def throttle() -> None:  # the coordinator gets 1 - throttle of the CPU it could have
            while time.monotonic() < end:
                time.sleep(0.05 * (1 - args.throttle))
                os.kill(proc.pid, signal.SIGSTOP)
                time.sleep(0.05 * args.throttle)
                os.kill(proc.pid, signal.SIGCONT)

        threads = [threading.Thread(target=churn) for _ in range(args.churners)]
        if args.throttle > 0:
            threads.append(threading.Thread(target=throttle))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for m in stable:
            m.close()
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()
    print(f"{seconds:.0f} s, {args.stable} stable members, {args.churners} churners ({cycles[0]} joins and leaves), "
          f"{args.partitions} partitions")
    print(f"{'member':>6} {'heartbeats':>10} {'given up':>9} {'fenced (110)':>12} {'on_lost':>8}")
    total_fenced = 0
    for i, m in enumerate(stable):
        fenced = [k for k, e in enumerate(m.trace) if e[3] == f"error {FENCED_MEMBER_EPOCH}"]
        given_up = len([e for e in m.trace if e[3] == "DEADLINE_EXCEEDED"])
        total_fenced += len(fenced)
        print(f"{i:>6} {len(m.trace):>10} {given_up:>9} {len(fenced):>12} {m.lost:>8}")
        for k in fenced:
            for sent, epoch, owned, answer, msg in m.trace[max(0, k - 4):k + 1]:
                sent_owned = "-" if owned is None else owned
                print(f"       {sent - m.trace[k][0]:+6.2f} s epoch {epoch:>4} owned {sent_owned:>6} -> {answer} {msg}")
    print(f"fenced in total: {total_fenced}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
