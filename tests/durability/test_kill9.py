"""kill -9 under load: every acknowledged commit survives, members resume, the log passes its checksum."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest

from groupcoord.clients.group_member import GroupMember, GroupMemberClosedError
from groupcoord.coordinator.runtime.log import FileLog
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

RESTARTS = 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(port: int, state_dir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "groupcoord", "--log-level", "WARNING", "serve", "--listen", f"127.0.0.1:{port}",
         "--state-dir", str(state_dir), "--topic", "orders:12",
         "--set", "group.consumer.min.heartbeat.interval.ms=20", "--set", "group.consumer.heartbeat.interval.ms=100",
         "--set", "group.consumer.min.session.timeout.ms=1000", "--set", "group.consumer.session.timeout.ms=10000",
         "--set", "group.consumer.assignment.interval.ms=0", "--set", "groupcoord.log.snapshot.records=500"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_serving(port: int) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.GroupCoordinatorStub(channel)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            resp = stub.ListGroups(pb.ListGroupsRequest(), timeout=1)
            if resp.error_code == 0:
                channel.close()
                return
        except grpc.RpcError:
            pass
        time.sleep(0.05)
    raise AssertionError("coordinator did not come up")


def describe(port: int) -> pb.DescribedGroup:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        return pb_grpc.GroupCoordinatorStub(channel).DescribeGroups(
            pb.DescribeGroupsRequest(group_ids=["durable"]), timeout=5).groups[0]


@pytest.mark.timeout(600)
def test_kill_dash_nine_twenty_times_loses_no_acknowledged_commit_and_static_members_resume(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    port = free_port()
    proc = start(port, state_dir)
    wait_serving(port)
    members = [GroupMember(f"127.0.0.1:{port}", "durable", ["orders"], instance_id=f"host-{i}", rpc_timeout_s=2)
               for i in range(3)]
    for m in members:
        m.start()
    deadline = time.monotonic() + 20
    while not (sum(len(m.assignment()) for m in members) == 12 and all(m.assignment() for m in members)):
        assert time.monotonic() < deadline, "members did not converge"
        time.sleep(0.05)

    acked: dict[tuple[str, int], int] = {}
    acked_lock = threading.Lock()
    stop = threading.Event()
    counter = iter(range(1, 10**9))

    def committer(m: GroupMember) -> None:
        while not stop.is_set():
            parts = sorted(m.assignment())
            if not parts:
                time.sleep(0.01)
                continue
            offsets = {tp: next(counter) for tp in parts}
            try:
                errors = m.commit_offsets(offsets)
            except grpc.RpcError:
                time.sleep(0.02)
                continue
            except GroupMemberClosedError:  # the test's end closed the member under this commit
                return
            with acked_lock:
                for tp, code in errors.items():
                    if code == 0:
                        acked[tp] = max(acked.get(tp, 0), offsets[tp])

    threads = [threading.Thread(target=committer, args=(m,), daemon=True) for m in members]
    for t in threads:
        t.start()
    rng = random.Random(11)
    epoch_before = describe(port).group_epoch
    assignments_before = {m.instance_id: m.assignment() for m in members}
    try:
        for _ in range(RESTARTS):
            time.sleep(rng.uniform(0.2, 0.6))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            with acked_lock:
                must_have = dict(acked)
            proc = start(port, state_dir)
            wait_serving(port)
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                fetched = pb_grpc.GroupCoordinatorStub(channel).OffsetFetch(
                    pb.OffsetFetchRequest(group_id="durable", member_epoch=-1), timeout=5)
            got = {(t.name, p.partition_index): p.committed_offset for t in fetched.topics for p in t.partitions}
            lost = {tp: off for tp, off in must_have.items() if got.get(tp, -1) < off}
            assert not lost, f"acknowledged commits lost after kill -9: {lost}"
        stop.set()
        for t in threads:
            t.join(timeout=10)
        # Static members kept their partitions and the group never rebalanced.
        deadline = time.monotonic() + 10
        while {m.instance_id: m.assignment() for m in members} != assignments_before:
            assert time.monotonic() < deadline, "members did not resume their assignments"
            time.sleep(0.05)
        assert describe(port).group_epoch == epoch_before
        assert len(acked) == 12
    finally:
        stop.set()
        for m in members:
            m.close(leave=False)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    # The log passes its checksum: a load after the last kill finds no torn or corrupt frame beyond a
    # possibly torn last append.
    report = FileLog(state_dir).load(lambda rec: None)
    assert report.log_records + report.snapshot_records > 0
