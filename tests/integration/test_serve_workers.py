"""`groupcoord serve --workers 2`: two coordinator processes split the groups by state partition; FindCoordinator
routes a member to the owner; a worker killed with SIGKILL is restarted and reloads its groups from its own
state directory."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from groupcoord.clients.group_member import GroupMember
from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

PARTITIONS = 50  # --state-partitions' default


def two_free_ports() -> int:
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1])
        if base >= 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", base + 1))
            except OSError:
                continue
        return base
    raise AssertionError("no two consecutive free ports")


def group_of_worker(worker: int, prefix: str) -> str:
    return next(g for g in (f"{prefix}-{i}" for i in range(1000)) if state_partition(g, PARTITIONS) % 2 == worker)


def wait_for(check: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = check()
        except grpc.RpcError:
            got = None
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def serving(port: int) -> bool:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        status = health_pb2_grpc.HealthStub(ch).Check(
            health_pb2.HealthCheckRequest(service="groupcoord.v1.GroupCoordinator"), timeout=2).status
        return bool(status == health_pb2.HealthCheckResponse.SERVING)


def worker_pid(parent: int, index: int) -> int | None:
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    for pid in children:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:
            continue
        if b"--worker-index" in argv and argv[argv.index(b"--worker-index") + 1] == str(index).encode():
            return int(pid)
    return None


def describe(port: int, group_id: str) -> pb.DescribedGroup:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        return pb_grpc.GroupCoordinatorStub(ch).DescribeGroups(pb.DescribeGroupsRequest(group_ids=[group_id]),
                                                               timeout=5).groups[0]


def test_two_workers_split_groups_route_members_and_restart_a_killed_worker(tmp_path: Path) -> None:
    base = two_free_ports()
    proc = subprocess.Popen(
        [sys.executable, "-m", "groupcoord", "serve", "--workers", "2", "--listen", f"127.0.0.1:{base}",
         "--state-dir", str(tmp_path / "state"), "--topic", "orders:8",
         "--set", "group.consumer.min.heartbeat.interval.ms=50", "--set", "group.consumer.heartbeat.interval.ms=200",
         "--set", "group.consumer.min.session.timeout.ms=1000",
         "--set", "group.consumer.session.timeout.ms=30000"],
        stdout=(tmp_path / "serve.out").open("w"), stderr=subprocess.STDOUT)
    members: list[GroupMember] = []
    try:
        wait_for(lambda: serving(base) and serving(base + 1), what="both workers serving")
        groups = {0: group_of_worker(0, "g"), 1: group_of_worker(1, "g")}

        # FindCoordinator on either worker names the owner's port
        for port in (base, base + 1):
            with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
                found = pb_grpc.GroupCoordinatorStub(ch).FindCoordinator(
                    pb.FindCoordinatorRequest(keys=[groups[0], groups[1]]), timeout=5)
            assert [(c.error_code, c.port) for c in found.coordinators] == [(0, base), (0, base + 1)]

        # a heartbeat batch is routed heartbeat by heartbeat: the other worker's group is NOT_COORDINATOR
        batch = pb.ConsumerGroupHeartbeatBatchRequest(heartbeats=[pb.ConsumerGroupHeartbeatRequest(
            group_id=group_of_worker(worker, "batch"), member_epoch=0, rebalance_timeout_ms=5000,
            subscribed_topic_names=pb.StringList(values=["orders"]), topic_partitions=pb.TopicPartitionsList())
            for worker in (1, 0)])
        with grpc.insecure_channel(f"127.0.0.1:{base}") as ch:
            [answer] = pb_grpc.GroupCoordinatorStub(ch).ConsumerGroupHeartbeatBatchStream(iter([batch]), timeout=10)
        assert [a.error_code for a in answer.responses] == [16, 0]

        # a member told only of worker 0 reaches the owner of its group through NOT_COORDINATOR + FindCoordinator
        for worker in (0, 1):
            m = GroupMember(f"127.0.0.1:{base}", groups[worker], ["orders"], rpc_timeout_s=5.0).start()
            members.append(m)
        for m in members:
            assert m.wait_joined(timeout=60)
            wait_for(lambda m=m: len(m.assignment()) == 8, what="member assigned every partition")
        for worker in (0, 1):
            owner, other = describe(base + worker, groups[worker]), describe(base + 1 - worker, groups[worker])
            assert owner.error_code == 0 and len(owner.members) == 1
            assert other.error_code == 16  # NOT_COORDINATOR: the group lives on one worker only
        member_id = describe(base + 1, groups[1]).members[0].member_id
        assert (tmp_path / "state" / "worker-0").is_dir() and (tmp_path / "state" / "worker-1").is_dir()

        # kill -9 worker 1: the supervisor restarts it, and it reloads group 1 from state-dir/worker-1
        victim = wait_for(lambda: worker_pid(proc.pid, 1), what="worker 1's pid")
        os.kill(victim, signal.SIGKILL)
        restarted = wait_for(lambda: (pid := worker_pid(proc.pid, 1)) not in (None, victim) and pid,
                             what="worker 1 restarted")
        assert restarted != victim
        wait_for(lambda: serving(base + 1), what="worker 1 serving again")
        reloaded = describe(base + 1, groups[1])
        assert reloaded.error_code == 0 and member_id in [m.member_id for m in reloaded.members]
        assert proc.poll() is None and serving(base)  # worker 0 was not disturbed
        assert members[1].wait_joined(timeout=60)
    finally:
        for m in members:
            m.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    out = (tmp_path / "serve.out").read_text()
    assert proc.returncode == 0, out
    assert "supervising 2 workers" in out


def test_workers_refuse_a_state_dir_written_with_another_layout(tmp_path: Path) -> None:
    (tmp_path / "workers.json").write_text('{"workers": 3, "partitions": 50}\n')
    result = subprocess.run([sys.executable, "-m", "groupcoord", "serve", "--workers", "2", "--listen",
                             f"127.0.0.1:{two_free_ports()}", "--state-dir", str(tmp_path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--workers 3" in result.stderr
