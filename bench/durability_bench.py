"""Durability figures: commits/s with fsync on (group commit) and start-up replay time, with/without snapshot.

    python -m bench.durability_bench [--groups 10000] [--offsets 1000000] [--history 2] [--quick] [--replay-only]

1. OffsetCommit over real gRPC against `groupcoord serve --state-dir` with `groupcoord.log.fsync=always`
   (every acknowledged commit is fsynced; concurrent commits share an fsync) and `never`, 64 concurrent
   committers, 1 partition per commit.
2. Start-up: a state dir holding `--groups` consumer groups (one member each) and `--offsets` committed
   offsets, each committed `--history` times (the log holds the history), loaded into a fresh shard;
   then the same state after a snapshot (the snapshot holds only the latest records). Issue 15 asks for
   10,000 groups and 1,000,000 offsets from a snapshot within 3 s. Wall and CPU seconds are both printed:
   on a shared machine the CPU time of the loading process is the fair figure.
3. The event loop's CPU per durable append: `--appends` operations appended at once and awaited, as a flood
   of commits does. The writer thread settles a whole group commit with one callback on the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from groupcoord.coordinator.core import records as r
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.core.snapshot import snapshot_records
from groupcoord.coordinator.runtime.log import FileLog
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def commit_load(port: int, seconds: float, concurrency: int) -> tuple[float, float]:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    await channel.channel_ready()
    stub = pb_grpc.GroupCoordinatorStub(channel)
    done = 0
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def worker(i: int) -> None:
        nonlocal done
        n = 0
        while time.perf_counter() < stop:
            n += 1
            req = pb.OffsetCommitRequest(group_id=f"g{i}", generation_id_or_member_epoch=-1, topics=[
                pb.OffsetCommitRequestTopic(name="orders", partitions=[
                    pb.OffsetCommitRequestPartition(partition_index=i % 12, committed_offset=n)])])
            t0 = time.perf_counter()
            resp = await stub.OffsetCommit(req, timeout=30)
            latencies.append((time.perf_counter() - t0) * 1000)
            assert resp.topics[0].partitions[0].error_code == 0, resp
            done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - t0
    await channel.close()
    latencies.sort()
    return done / elapsed, latencies[int(0.99 * (len(latencies) - 1))]


def commits_per_second(fsync: str, seconds: float) -> tuple[float, float]:
    state = Path(tempfile.mkdtemp(prefix="groupcoord-bench-"))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "groupcoord", "--log-level", "WARNING", "serve", "--listen",
                             f"127.0.0.1:{port}", "--state-dir", str(state), "--topic", "orders:12",
                             "--set", f"groupcoord.log.fsync={fsync}"])
    try:
        return asyncio.run(commit_load(port, seconds, 64))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        shutil.rmtree(state, ignore_errors=True)


def kafka_commits_per_second(bootstrap: str, seconds: float, partitions: int = 6,
                             server_tree: str | None = None) -> tuple[float, float]:
    """The same load against `serve --state-topic` on the Kafka cluster at `bootstrap` (a fresh topic each run);
    `server_tree` runs the server from another checkout (to compare with an earlier version)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if "orders" not in admin.list_topics(timeout=10).topics:  # commits name it; metadata comes from Kafka
        admin.create_topics([NewTopic("orders", 12)])["orders"].result(timeout=30)
    port = free_port()
    topic = f"bench-state-{port}"
    env = {**os.environ, **({"PYTHONPATH": server_tree} if server_tree else {})}
    proc = subprocess.Popen([sys.executable, "-m", "groupcoord", "--log-level", "WARNING", "serve", "--listen",
                             f"127.0.0.1:{port}", "--bootstrap-servers", bootstrap, "--state-topic", topic,
                             "--state-partitions", str(partitions), "--state-session-timeout-ms", "6000"],
                            cwd=server_tree, env=env)
    try:
        asyncio.run(wait_until_serving(port, [f"g{i}" for i in range(64)]))
        return asyncio.run(commit_load(port, seconds, 64))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


async def wait_until_serving(port: int, groups: list[str], timeout_s: float = 120.0) -> None:
    """Until a commit for each group is accepted (the instance owns and has loaded every state partition)."""
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.GroupCoordinatorStub(channel)
    deadline = time.monotonic() + timeout_s
    pending = list(groups)
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the instance did not serve groups {pending[:3]} within {timeout_s} s")
        try:
            resp = await stub.OffsetCommit(pb.OffsetCommitRequest(group_id=pending[0], generation_id_or_member_epoch=-1,
                topics=[pb.OffsetCommitRequestTopic(name="orders", partitions=[
                    pb.OffsetCommitRequestPartition(partition_index=0, committed_offset=0)])]), timeout=5)
            if resp.topics[0].partitions[0].error_code == 0:
                pending.pop(0)
                continue
        except grpc.aio.AioRpcError:
            pass
        await asyncio.sleep(0.1)
    await channel.close()


def build_state_dir(path: Path, groups: int, offsets: int, history: int) -> int:
    log = FileLog(path, fsync="never")
    log.load(lambda rec: None)
    batch: list[object] = []
    written = 0
    per_group = max(1, offsets // groups)
    for g in range(groups):
        gid = f"group-{g}"
        batch += [r.ConsumerGroupMetadata(gid, 2, 0),
                  r.ConsumerGroupMemberMetadata(gid, f"m-{g}", None, None, "bench", "", ("orders",), None, None, 30000),
                  r.ConsumerGroupCurrentMemberAssignment(gid, f"m-{g}", 2, 1, "STABLE", {}, {})]
    for round_ in range(history):
        for i in range(offsets):
            g = i // per_group % groups
            batch.append(r.OffsetCommit(f"group-{g}", f"t{i % per_group // 1000}", i % 1000, round_ * 10 + i, -1, "",
                                        1_700_000_000_000))
            if len(batch) >= 20000:
                log.append_sync(batch)
                written += len(batch)
                batch.clear()
                print(f"  writing history: {written:,} records", end="\r", flush=True)
    log.append_sync(batch)
    written += len(batch)
    log.close()
    print(f"  wrote {written:,} records{' ' * 20}", flush=True)
    return written


def load_seconds(path: Path) -> tuple[float, float, int, int]:
    """(wall s, CPU s, snapshot records, log records) of loading `path` into a fresh shard."""
    shard = GroupCoordinatorShard(BrokerConfig.from_mapping({}), lambda: "unused")
    log = FileLog(path)
    t0, c0 = time.perf_counter(), time.process_time()
    report = log.load(shard.replay)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    log.close()
    return elapsed, cpu, report.snapshot_records, report.log_records


def snapshot(path: Path) -> None:
    shard = GroupCoordinatorShard(BrokerConfig.from_mapping({}), lambda: "unused")
    log = FileLog(path, fsync="never")
    log.load(shard.replay)
    generation = log.rotate()
    log.write_snapshot(generation, snapshot_records(shard))
    log.close()


async def append_burst(path: Path, fsync: str, appends: int) -> tuple[float, float, int]:
    """`appends` operations of one record each, appended together from the event loop and awaited: the loop
    thread's CPU per durable append (microseconds), the wall ms, and the writer's batches (group commits)."""
    log = FileLog(path, fsync)
    log.load(lambda rec: None)
    record = [r.OffsetCommit("g", "t", 0, 1, -1, "", 1)]

    async def one() -> None:
        await log.append(record)

    try:
        await asyncio.gather(*(one() for _ in range(200)))  # warm
        batches = log.batches
        wall, cpu = time.perf_counter(), time.thread_time()
        await asyncio.gather(*(one() for _ in range(appends)))
        return (time.thread_time() - cpu) * 1e6 / appends, (time.perf_counter() - wall) * 1000, log.batches - batches
    finally:
        log.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--groups", type=int, default=10_000)
    p.add_argument("--offsets", type=int, default=1_000_000)
    p.add_argument("--history", type=int, default=2, help="times each offset was committed before start-up")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--appends", type=int, default=20_000, help="appends in the burst of the loop-CPU rows")
    p.add_argument("--quick", action="store_true", help="1,000 groups, 100,000 offsets, 3 s")
    p.add_argument("--replay-only", action="store_true", help="only the start-up rows (no gRPC commits)")
    p.add_argument("--bootstrap-servers", help="also measure commits/s with --state-topic on this Kafka cluster "
                   "(e.g. one from `python -m groupcoord.kafka_broker`)")
    p.add_argument("--server-tree", help="with --bootstrap-servers: also run that case's server from this checkout")
    args = p.parse_args(argv)
    if args.quick:
        args.groups, args.offsets, args.seconds = 1000, 100_000, 3.0
    rows: list[tuple[str, str]] = []
    if args.bootstrap_servers:
        for tree in (None, args.server_tree) if args.server_tree else (None,):
            print(f"commits over gRPC, --state-topic on {args.bootstrap_servers} ({tree or 'this tree'}) ...",
                  flush=True)
            rate, p99 = kafka_commits_per_second(args.bootstrap_servers, args.seconds, server_tree=tree)
            rows.append((f"OffsetCommit/s over gRPC, 64 concurrent, --state-topic ({tree or 'this tree'})",
                         f"{rate:,.0f}/s (p99 {p99:.1f} ms)"))
    for fsync in () if args.replay_only else ("always", "never"):
        print(f"commits over gRPC, fsync={fsync} ...", flush=True)
        rate, p99 = commits_per_second(fsync, args.seconds)
        rows.append((f"OffsetCommit/s over gRPC, 64 concurrent, fsync={fsync}", f"{rate:,.0f}/s (p99 {p99:.1f} ms)"))
    for fsync in ("always", "never"):
        with tempfile.TemporaryDirectory(prefix="groupcoord-append-") as d:
            per, wall, batches = asyncio.run(append_burst(Path(d), fsync, args.appends))
        rows.append((f"{args.appends:,} appends at once from the event loop, fsync={fsync}",
                     f"{per:.1f} us of loop CPU each, {wall:.0f} ms in all, {batches} group commits"))
    path = Path(tempfile.mkdtemp(prefix="groupcoord-replay-"))
    try:
        print(f"building a state dir: {args.groups:,} groups, {args.offsets:,} offsets x {args.history} ...",
              flush=True)
        build_state_dir(path, args.groups, args.offsets, args.history)
        size = sum(f.stat().st_size for f in path.iterdir())
        seconds, cpu, snap, logged = load_seconds(path)
        rows.append((f"start-up replay, log only ({logged:,} records, {size / 1e6:.0f} MB)",
                     f"{seconds:.1f} s wall, {cpu:.1f} s CPU"))
        t0 = time.perf_counter()
        snapshot(path)
        snap_s = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in path.iterdir())
        seconds, cpu, snap, logged = load_seconds(path)
        rows.append((f"start-up replay, snapshot ({snap:,} records, {size / 1e6:.0f} MB; written in {snap_s:.1f} s)",
                     f"{seconds:.1f} s wall, {cpu:.1f} s CPU"))
    finally:
        shutil.rmtree(path, ignore_errors=True)
    width = max(len(a) for a, _ in rows)
    print()
    print(f"{'case':<{width}}  result")
    print("-" * (width + 30))
    for a, b in rows:
        print(f"{a:<{width}}  {b}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
