"""A 1,000-member classic group rebalancing over real gRPC on loopback: how long until it is Stable again.

    python -m bench.classic_rebalance_bench [--members 1000] [--partitions 4000] [--quick]

Starts `groupcoord serve` as a subprocess (its own core) and drives the members from this process with
grpc.aio: real JoinGroup/SyncGroup/Heartbeat RPCs, subscriptions and assignments in the consumer embedded
protocol, the leader running the assignor from `assignors/`. For each assignor (cooperative-sticky, range):

- form:      `--members` new members join a new group (MEMBER_ID_REQUIRED round trip, then JoinGroup; the
             coordinator waits group.initial.rebalance.delay.ms, included in the time), leader assigns, all sync.
- +1 member: one member joins the Stable group; the others learn it from a heartbeat (sent at once, not
             after a heartbeat interval: the figure is the coordinator's, not the clients' polling) and rejoin.
             Eager (range) members rejoin owning nothing; cooperative members keep their partitions, and those
             that must give some up revoke them and rejoin, which starts the follow-up rebalance (KIP-429) that
             hands them on; its time is included ("rounds" counts the join/sync rounds).

Phases: "join" is from the first JoinGroup of a round to its last response, "assign" the leader's decode +
assignor + encode, "sync" from the SyncGroups to the last response; "total" is wall time to Stable.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import grpc

from groupcoord.assignors.classic import ClassicSubscription, get_classic_assignor
from groupcoord.clients.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

TOPIC = "bench"
SESSION_MS = 60_000
REBALANCE_MS = 120_000
MEMBERS_PER_CHANNEL = 50
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Member:
    stub: Any
    member_id: str = ""
    generation: int = -1
    owned: tuple[tuple[str, int], ...] = ()


@dataclass
class Timing:
    join_s: float = 0.0
    assign_s: float = 0.0
    sync_s: float = 0.0
    rounds: int = 0
    moved: int = 0
    errors: dict[str, int] = field(default_factory=dict)


class Group:
    def __init__(self, group_id: str, assignor: str, partitions: int) -> None:
        self.group_id = group_id
        self.assignor = assignor
        self.partitions = partitions
        self.cooperative = assignor == "cooperative-sticky"

    def _protocols(self, m: Member) -> list[pb.JoinGroupRequestProtocol]:
        owned = m.owned if self.cooperative else ()
        sub = Subscription((TOPIC,), None, owned, m.generation if self.cooperative else -1)
        return [pb.JoinGroupRequestProtocol(name=self.assignor, metadata=encode_subscription(sub))]

    async def join(self, m: Member) -> pb.JoinGroupResponse:
        while True:
            resp = await m.stub.JoinGroup(pb.JoinGroupRequest(
                group_id=self.group_id, member_id=m.member_id, protocol_type="consumer",
                session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS, protocols=self._protocols(m)),
                timeout=REBALANCE_MS / 1000 + 30)
            if resp.error_code == MEMBER_ID_REQUIRED:
                m.member_id = resp.member_id
                continue
            if resp.error_code:
                raise RuntimeError(f"JoinGroup failed: {resp.error_code} {resp.error_message}")
            m.member_id, m.generation = resp.member_id, resp.generation_id
            return resp

    def assign(self, leader: pb.JoinGroupResponse) -> dict[str, bytes]:
        subs = {}
        for jm in leader.members:
            s = decode_subscription(jm.metadata)
            subs[jm.member_id] = ClassicSubscription(s.topics, s.owned_partitions, s.generation)
        result = get_classic_assignor(self.assignor).assign({TOPIC: self.partitions}, subs)
        return {mid: encode_assignment(Assignment(tuple(tps))) for mid, tps in result.items()}

    async def sync(self, m: Member, assignments: dict[str, bytes] | None) -> bool:
        """SyncGroup; applies the assignment; True if the member revoked partitions (it must rejoin)."""
        req = pb.SyncGroupRequest(group_id=self.group_id, generation_id=m.generation, member_id=m.member_id)
        for mid, data in (assignments or {}).items():
            req.assignments.add(member_id=mid, assignment=data)
        resp = await m.stub.SyncGroup(req, timeout=REBALANCE_MS / 1000 + 30)
        if resp.error_code:
            raise RuntimeError(f"SyncGroup failed: {resp.error_code} {resp.error_message}")
        new = decode_assignment(resp.assignment).partitions
        revoked = bool(set(m.owned) - set(new))
        m.owned = new
        return revoked

    async def _rejoin_when_told(self, m: Member, timing: Timing) -> pb.JoinGroupResponse:
        """A member that did not cause the rebalance: it heartbeats (here back to back, not at an interval)
        until the coordinator answers REBALANCE_IN_PROGRESS, then rejoins."""
        while True:
            hb = await m.stub.Heartbeat(pb.HeartbeatRequest(group_id=self.group_id, generation_id=m.generation,
                                                            member_id=m.member_id), timeout=30)
            if hb.error_code == REBALANCE_IN_PROGRESS:
                break
            if hb.error_code:
                timing.errors[f"heartbeat {hb.error_code}"] = timing.errors.get(f"heartbeat {hb.error_code}", 0) + 1
            await asyncio.sleep(0.005)
        if not self.cooperative:
            m.owned = ()  # eager: revoke everything before rejoining
        return await self.join(m)

    async def round(self, joiners: list[Member], everyone: list[Member], timing: Timing) -> list[Member]:
        """One join/sync round: `joiners` rejoin at once, the rest when a heartbeat tells them to.
        Returns the members that revoked partitions (cooperative: they start the follow-up round)."""
        t0 = time.perf_counter()
        first = {id(m) for m in joiners}
        responses = await asyncio.gather(*(self.join(m) for m in joiners),
                                         *(self._rejoin_when_told(m, timing) for m in everyone if id(m) not in first))
        timing.join_s += time.perf_counter() - t0
        leader = next(r for r in responses if r.leader == r.member_id)
        t1 = time.perf_counter()
        assignments = self.assign(leader)
        timing.assign_s += time.perf_counter() - t1
        t2 = time.perf_counter()
        revoked = await asyncio.gather(*(self.sync(m, assignments if m.member_id == leader.member_id else None)
                                         for m in everyone))
        timing.sync_s += time.perf_counter() - t2
        timing.rounds += 1
        return [m for m, r in zip(everyone, revoked, strict=True) if r]

    async def rebalance(self, joiners: list[Member], everyone: list[Member]) -> tuple[float, Timing]:
        timing = Timing()
        owner_before = {tp: id(m) for m in everyone for tp in m.owned}
        t0 = time.perf_counter()
        revoking = await self.round(joiners, everyone, timing)
        while revoking:  # KIP-429 follow-up: revokers rejoin at once, the others when their heartbeat says so
            revoking = await self.round(revoking, everyone, timing)
        elapsed = time.perf_counter() - t0
        owner_after = {tp: id(m) for m in everyone for tp in m.owned}
        timing.moved = sum(1 for tp, owner in owner_before.items() if owner_after.get(tp) != owner)
        return elapsed, timing


async def run_case(port: int, members: int, partitions: int, assignor: str) -> list[tuple[str, float, Timing]]:
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(max(1, -(-(members + 1) // MEMBERS_PER_CHANNEL)))]
    for ch in channels:
        await ch.channel_ready()
    stubs = [pb_grpc.GroupCoordinatorStub(ch) for ch in channels]
    group = Group(f"bench-{assignor}", assignor, partitions)
    everyone = [Member(stubs[i % len(stubs)]) for i in range(members)]
    out = []
    total, timing = await group.rebalance(everyone, everyone)
    assert sum(len(m.owned) for m in everyone) == partitions
    out.append(("form", total, timing))
    newcomer = Member(stubs[members % len(stubs)])
    everyone.append(newcomer)
    total, timing = await group.rebalance([newcomer], everyone)
    owned = [tp for m in everyone for tp in m.owned]
    assert len(owned) == len(set(owned)) == partitions, "a partition is owned twice or not at all"
    out.append(("+1 member", total, timing))
    for ch in channels:
        await ch.close()
    return out


def start_server(port: int, partitions: int, initial_delay_ms: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "groupcoord", "--log-level", "WARNING", "serve", "--listen", f"127.0.0.1:{port}",
           "--set", f"group.initial.rebalance.delay.ms={initial_delay_ms}", "--topic", f"{TOPIC}:{partitions}"]
    log = open(f"/tmp/groupcoord-classic-bench-{port}.log", "w")  # noqa: SIM115
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=int, default=1000)
    p.add_argument("--partitions", type=int, default=4000)
    p.add_argument("--initial-delay-ms", type=int, default=500, help="group.initial.rebalance.delay.ms")
    p.add_argument("--assignors", default="cooperative-sticky,range")
    p.add_argument("--quick", action="store_true", help="200 members, 800 partitions")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the table: join, assign and sync time per row")
    args = p.parse_args(argv)
    if args.quick:
        args.members, args.partitions = 200, 800
    rows: list[tuple[str, str, float, Timing]] = []
    for assignor in args.assignors.split(","):
        port = free_port()
        print(f"{assignor}: starting the coordinator on :{port}", flush=True)
        server = start_server(port, args.partitions, args.initial_delay_ms)
        try:
            for scenario, total, timing in asyncio.run(run_case(port, args.members, args.partitions, assignor)):
                rows.append((assignor, scenario, total, timing))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    print()
    print(f"classic group of {args.members:,} members, {args.partitions:,} partitions, real gRPC on loopback; "
          f"group.initial.rebalance.delay.ms={args.initial_delay_ms} (in 'form' only)")
    header = (f"{'assignor':<19} {'scenario':<10} {'rounds':>6} {'join ms':>9} {'assign ms':>9} {'sync ms':>9} "
              f"{'total ms':>9} {'moved':>6} {'errors':>6}")
    print(header)
    print("-" * len(header))
    for assignor, scenario, total, t in rows:
        print(f"{assignor:<19} {scenario:<10} {t.rounds:>6} {t.join_s * 1000:>9.0f} {t.assign_s * 1000:>9.0f} "
              f"{t.sync_s * 1000:>9.0f} {total * 1000:>9.0f} {t.moved:>6} {sum(t.errors.values()):>6}")
    if args.plot:
        from groupcoord import plots

        plots.bench_phases([(f"{assignor} | {scenario}", {"join": t.join_s * 1000, "assign": t.assign_s * 1000,
                                                          "sync": t.sync_s * 1000})
                            for assignor, scenario, _, t in rows],
                           f"Classic rebalance, {args.members:,} members x {args.partitions:,} partitions "
                           "(real gRPC)", args.plot)
        print(f"plot written to {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
