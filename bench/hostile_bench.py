"""Hostile clients: how long the largest legal requests hold the event loop, and what they and the worst
regexes do to another group's heartbeats.

    python -m bench.hostile_bench [--seconds 10] [--regex-topic-chars 13] [--quick]

Part 1, loop hold: a coordinator in this process with a probe task on its event loop (sleep 1 ms, record the
overshoot). Each largest legal request (at the documented limits, see README "Limits") is sent `--repeat`
times, pre-serialized; its loop hold is the probe's worst overshoot while it ran (median over the repeats, so
that one scheduling hiccup of a loaded machine does not count as the request's).

Part 2, victim heartbeats: `groupcoord serve` as a subprocess; one member of a victim group heartbeats every
`--interval-ms` and its latency is recorded, while an attacker process sends in a loop:
  - phase "quiet": nothing;
  - phase "large requests": the largest legal requests of part 1, round robin;
  - phase "regex": joins subscribing with catastrophic-backtracking regexes (each one new, so no cache helps)
    against topics of `--regex-topic-chars` characters. Fast only when regexes are resolved in linear time
    off the request path; with Python `re` on the loop a single one stalls everything.
Target (issue 10): the victim's p99 under 100 ms on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.limits import (
    ADMIN_MAX_GROUP_IDS,
    ID_MAX_CHARS,
    OFFSETS_MAX_PARTITIONS,
    OWNED_MAX_PARTITIONS,
    SUBSCRIPTION_MAX_TOPICS,
    TOPIC_NAME_MAX_CHARS,
)
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

SERVICE = "/groupcoord.v1.GroupCoordinator/"
MESSAGE_MAX_BYTES = 1048588
HOSTILE_REGEXES = ["(.?.?.?)*X", "(a*)*b", "(a|a)*b", "(a+)+$X", "((a|aa)*)*c", "(.*a){12}X"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- the largest legal requests --------------------------------------------------------------------------
def large_requests() -> list[tuple[str, str, bytes]]:
    """(label, method, serialized request) at the documented limits, each under socket.request.max.bytes."""
    ids = [f"{i:0{ID_MAX_CHARS}d}" for i in range(ADMIN_MAX_GROUP_IDS)]
    commit = pb.OffsetCommitRequest(group_id="hostile-offsets", generation_id_or_member_epoch=-1, topics=[
        pb.OffsetCommitRequestTopic(name=f"t{t:03d}", partitions=[
            pb.OffsetCommitRequestPartition(partition_index=p, committed_offset=p, committed_metadata="m" * 64)
            for p in range(OFFSETS_MAX_PARTITIONS // 100)]) for t in range(100)])
    topics = [f"{i:0{TOPIC_NAME_MAX_CHARS}d}" for i in range(SUBSCRIPTION_MAX_TOPICS)]
    subscribe = pb.ConsumerGroupHeartbeatRequest(
        group_id="hostile-subscription", member_id="big", member_epoch=0, rebalance_timeout_ms=60_000,
        subscribed_topic_names=pb.StringList(values=topics), topic_partitions=pb.TopicPartitionsList())
    owned = pb.ConsumerGroupHeartbeatRequest(
        group_id="hostile-subscription", member_id="big", member_epoch=1, topic_partitions=pb.TopicPartitionsList(
            topics=[pb.TopicPartitions(topic_id=f"id{t}", partitions=list(range(OWNED_MAX_PARTITIONS // 100)))
                    for t in range(100)]))
    leave = pb.ConsumerGroupHeartbeatRequest(group_id="hostile-subscription", member_id="big", member_epoch=-1)
    return [
        (f"DescribeGroupConfigs {ADMIN_MAX_GROUP_IDS:,} ids of 255 chars", "DescribeGroupConfigs",
         pb.DescribeGroupConfigsRequest(group_ids=ids).SerializeToString()),
        (f"DescribeGroups {ADMIN_MAX_GROUP_IDS:,} ids of 255 chars", "DescribeGroups",
         pb.DescribeGroupsRequest(group_ids=ids).SerializeToString()),
        (f"DescribeGroups max classic group x {ADMIN_MAX_GROUP_IDS:,}", "DescribeGroups",
         pb.DescribeGroupsRequest(group_ids=["hostile-classic"] * ADMIN_MAX_GROUP_IDS).SerializeToString()),
        (f"DeleteGroups {ADMIN_MAX_GROUP_IDS:,} ids of 255 chars", "DeleteGroups",
         pb.DeleteGroupsRequest(group_ids=ids).SerializeToString()),
        (f"OffsetCommit {OFFSETS_MAX_PARTITIONS:,} partitions", "OffsetCommit", commit.SerializeToString()),
        (f"OffsetFetch {OFFSETS_MAX_PARTITIONS:,} partitions", "OffsetFetch",
         pb.OffsetFetchRequest(group_id="hostile-offsets").SerializeToString()),
        (f"Heartbeat join, {SUBSCRIPTION_MAX_TOPICS:,} topics", "ConsumerGroupHeartbeat",
         subscribe.SerializeToString()),
        (f"Heartbeat {OWNED_MAX_PARTITIONS:,} owned partitions", "ConsumerGroupHeartbeat", owned.SerializeToString()),
        ("Heartbeat leave of that member", "ConsumerGroupHeartbeat", leave.SerializeToString()),
        ("JoinGroup 1 MB metadata (rejoin, leader)", "JoinGroup", b""),  # filled in by ClassicAttacker
        ("ListGroups", "ListGroups", pb.ListGroupsRequest().SerializeToString()),
    ]


class Raw:
    """Calls with pre-serialized requests and unparsed responses: the client does almost no work."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address, options=[
            ("grpc.max_receive_message_length", 256 * 1024 * 1024),
            ("grpc.max_send_message_length", 256 * 1024 * 1024)])
        self._calls: dict[str, Any] = {}

    def __call__(self, method: str, data: bytes, timeout: float = 120) -> bytes:
        call = self._calls.get(method)
        if call is None:
            call = self._calls[method] = self.channel.unary_unary(
                SERVICE + method, request_serializer=lambda b: b, response_deserializer=lambda b: b)
        return call(data, timeout=timeout)  # type: ignore[no-any-return]


class ClassicAttacker:
    """A one-member classic group whose metadata fills message.max.bytes; each call rejoins as leader."""

    def __init__(self, stub: pb_grpc.GroupCoordinatorStub) -> None:
        self.stub = stub
        self.metadata = b"m" * (MESSAGE_MAX_BYTES - 64)
        first = stub.JoinGroup(self._join(""), timeout=60)
        self.member_id = first.member_id
        self.rejoin()

    def _join(self, member_id: str) -> pb.JoinGroupRequest:
        return pb.JoinGroupRequest(group_id="hostile-classic", member_id=member_id, session_timeout_ms=60_000,
                                   rebalance_timeout_ms=60_000, protocol_type="consumer",
                                   protocols=[pb.JoinGroupRequestProtocol(name="range", metadata=self.metadata)])

    def rejoin(self) -> None:
        joined = self.stub.JoinGroup(self._join(self.member_id), timeout=60)
        self.stub.SyncGroup(pb.SyncGroupRequest(
            group_id="hostile-classic", generation_id=joined.generation_id, member_id=self.member_id,
            assignments=[pb.SyncGroupRequestAssignment(member_id=self.member_id, assignment=b"a" * 1000)]),
            timeout=60)

    def serialized_join(self) -> bytes:
        return self._join(self.member_id).SerializeToString()


# --- part 1: loop hold ------------------------------------------------------------------------------------
@dataclass
class Probe:
    samples: list[tuple[float, float]]  # (end time, overshoot s)
    running: bool = True

    async def run(self) -> None:
        while self.running:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            end = time.perf_counter()
            self.samples.append((end, end - t - 0.001))

    def worst(self, start: float, end: float) -> float:
        return max((lag for t, lag in self.samples if start <= t <= end + 0.01), default=0.0)


def loop_hold(repeat: int) -> list[tuple[str, float, float, int]]:
    from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
    from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource

    options = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping({
        "group.initial.rebalance.delay.ms": 0}), metadata_source=StaticMetadataSource({"orders": 12}))
    srv = ServerThread(options).start()
    probe = Probe([])
    loop = srv._loop
    future = asyncio.run_coroutine_threadsafe(probe.run(), loop)
    rows = []
    try:
        raw = Raw(srv.address)
        classic = ClassicAttacker(pb_grpc.GroupCoordinatorStub(raw.channel))
        time.sleep(0.5)
        idle = probe.worst(time.perf_counter() - 0.4, time.perf_counter())
        rows.append(("(idle loop, for reference)", idle * 1000, 0.0, 0))
        for label, method, data in large_requests():
            if method == "JoinGroup":
                data = classic.serialized_join()
            holds, calls = [], []
            size = 0
            for _ in range(repeat):
                start = time.perf_counter()
                size = len(raw(method, data))
                end = time.perf_counter()
                if method == "JoinGroup":
                    classic.rejoin()  # complete the rebalance the rejoin started
                time.sleep(0.05)
                holds.append(probe.worst(start, end))
                calls.append(end - start)
            rows.append((label, pct(holds, 0.5) * 1000, pct(calls, 0.5) * 1000, size))
    finally:
        probe.running = False
        future.result(timeout=10)
        srv.stop()
    return rows


# --- part 2: victim heartbeats under attack -----------------------------------------------------------------
def attacker(address: str, phase: str, stop: Any, count: Any, regex_chars: int) -> None:
    raw = Raw(address)
    stub = pb_grpc.GroupCoordinatorStub(raw.channel)
    if phase == "large":
        classic = ClassicAttacker(stub)
        requests = [(m, d) for _, m, d in large_requests() if m != "JoinGroup"]
        i = 0
        while not stop.is_set():
            method, data = requests[i % len(requests)]
            if i % (len(requests) + 1) == len(requests):
                raw("JoinGroup", classic.serialized_join())
                classic.rejoin()
            else:
                raw(method, data)
            i += 1
            count.value += 1
    elif phase == "regex":
        i = 0
        while not stop.is_set():
            pattern = f"{HOSTILE_REGEXES[i % len(HOSTILE_REGEXES)]}|zz{i}"  # new every time: no cache helps
            stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
                group_id=f"hostile-regex-{i}", member_id=f"r{i}", member_epoch=0, rebalance_timeout_ms=60_000,
                subscribed_topic_regex=pattern, topic_partitions=pb.TopicPartitionsList()), timeout=300)
            i += 1
            count.value += 1


def victim(address: str, seconds: float, interval_s: float) -> tuple[list[float], int]:
    stub = pb_grpc.GroupCoordinatorStub(grpc.insecure_channel(address))
    resp = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
        group_id="victim", member_epoch=0, rebalance_timeout_ms=60_000,
        subscribed_topic_names=pb.StringList(values=["orders"]), topic_partitions=pb.TopicPartitionsList()),
        timeout=300)
    member_id, epoch, errors = resp.member_id, resp.member_epoch, 0
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        start = time.perf_counter()
        resp = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
            group_id="victim", member_id=member_id, member_epoch=epoch), timeout=300)
        latencies.append(time.perf_counter() - start)
        if resp.error_code:
            errors += 1
        else:
            epoch = resp.member_epoch
        time.sleep(interval_s)
    return latencies, errors


def run_phase(phase: str, seconds: float, interval_s: float, regex_chars: int) -> tuple[list[float], int, int]:
    port = free_port()
    topics = ["--topic", "orders:12"] + [
        arg for i in range(8) for arg in ("--topic", f"{'a' * (regex_chars - 2)}{i:02d}:1")]
    server = subprocess.Popen(
        [sys.executable, "-m", "groupcoord", "--log-level", "WARNING", "serve", "--listen", f"127.0.0.1:{port}",
         "--set", "group.initial.rebalance.delay.ms=0", "--set", "group.consumer.session.timeout.ms=60000",
         "--set", "group.consumer.max.session.timeout.ms=60000", *topics],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    try:
        grpc.channel_ready_future(grpc.insecure_channel(address)).result(timeout=60)
        time.sleep(0.5)
        ctx = multiprocessing.get_context("spawn")
        stop, count = ctx.Event(), ctx.Value("l", 0)
        proc = None
        if phase != "quiet":
            proc = ctx.Process(target=attacker, args=(address, phase, stop, count, regex_chars), daemon=True)
            proc.start()
            time.sleep(1.0)
        latencies, errors = victim(address, seconds, interval_s)
        stop.set()
        if proc is not None:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
        return latencies, errors, int(count.value)
    finally:
        server.kill()
        server.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=10.0, help="victim heartbeats per phase")
    p.add_argument("--interval-ms", type=float, default=20.0, help="victim heartbeat interval")
    p.add_argument("--repeat", type=int, default=5, help="part 1: sends of each large request")
    p.add_argument("--regex-topic-chars", type=int, default=13,
                   help="length of the topic names the regexes backtrack on (issue 10: 14 chars cost 15 s)")
    p.add_argument("--quick", action="store_true", help="3 s phases, 2 repeats")
    p.add_argument("--skip", action="append", default=[], choices=["hold", "quiet", "large", "regex"])
    args = p.parse_args(argv)
    if args.quick:
        args.seconds, args.repeat = 3.0, 3
    if "hold" not in args.skip:
        print("Part 1: event-loop hold of the largest legal requests (in-process server, 1 ms probe)", flush=True)
        rows = loop_hold(args.repeat)
        print(f"  {'request':<46} {'loop hold ms':>12} {'call p50 ms':>12} {'response bytes':>15}")
        for label, hold, call, size in rows:
            print(f"  {label:<46} {hold:>12.1f} {call:>12.1f} {size:>15,}")
    phases: list[tuple[str, Callable[[], tuple[list[float], int, int]]]] = []
    interval_s = args.interval_ms / 1000
    for phase in ("quiet", "large", "regex"):
        if phase not in args.skip:
            phases.append((phase, lambda phase=phase: run_phase(phase, args.seconds, interval_s,  # type: ignore[misc]
                                                                args.regex_topic_chars)))
    if phases:
        print(f"\nPart 2: victim group heartbeat latency while an attacker sends ({args.seconds:.0f} s per phase)",
              flush=True)
        print(f"  {'phase':<16} {'heartbeats':>10} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'errors':>6} "
              f"{'attacker requests':>17}")
    for phase, run in phases:
        latencies, errors, attacks = run()
        print(f"  {phase:<16} {len(latencies):>10} {pct(latencies, 0.5) * 1000:>8.1f} "
              f"{pct(latencies, 0.99) * 1000:>8.1f} {max(latencies, default=0) * 1000:>8.1f} {errors:>6} "
              f"{attacks:>17}", flush=True)
    print("\nTarget: victim p99 < 100 ms. The regex phase depends on how regexes are resolved (RE2 off the "
          "request path is issue 10's core work).")
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "hostile-bench"
    raise SystemExit(main())
