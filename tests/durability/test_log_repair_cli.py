"""Real processes: a corrupt log keeps `groupcoord serve` from starting (one line naming file and offset) until
an operator runs `groupcoord log repair --yes`; an oversized classic group is refused and a later
acknowledged commit survives kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import grpc
import pytest

from groupcoord.coordinator.runtime import record_codec
from groupcoord.coordinator.runtime.log import FileLog
from groupcoord.coordinator.runtime.log_frames import frame
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.durability.test_kill9 import free_port, wait_serving
from tests.durability.test_log_damage import commit, groupcoord, write_ops


def serve_args(port: int, state_dir: Path) -> list[str]:
    return [sys.executable, "-m", "groupcoord", "--log-level", "WARNING", "serve", "--listen",
            f"127.0.0.1:{port}", "--state-dir", str(state_dir), "--topic", "orders:12"]


def fetch(port: int, group: str) -> dict[int, int]:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        resp = pb_grpc.GroupCoordinatorStub(channel).OffsetFetch(
            pb.OffsetFetchRequest(group_id=group, member_epoch=-1), timeout=10)
    return {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}


@pytest.mark.timeout(120)
def test_a_flipped_byte_mid_log_keeps_serve_down_until_log_repair_yes_truncates_it(tmp_path: Path) -> None:
    ops = [[commit(i)] for i in range(100)]
    path = write_ops(tmp_path, ops)
    start = sum(len(frame(record_codec.encode_operation(op))) for op in ops[:50])
    data = bytearray(path.read_bytes())
    data[start + 20] ^= 0x01
    path.write_bytes(bytes(data))

    port = free_port()
    done = subprocess.run(serve_args(port, tmp_path), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]  # one line, no traceback
    assert str(path) in done.stderr and f"byte {start}" in done.stderr
    assert path.read_bytes() == bytes(data)

    check = groupcoord("log", "check", str(tmp_path))
    assert check.returncode == 1
    assert f"CORRUPT at byte {start} (checksum mismatch" in check.stdout
    assert "a repair would truncate 00000001.log at byte" in check.stdout
    assert "50 intact frames, 50 records" not in check.stdout  # the damaged one is not intact: 49 follow it
    assert "49 intact frames, 49 records" in check.stdout

    asked = groupcoord("log", "repair", str(tmp_path))
    assert asked.returncode == 1 and "nothing changed: pass --yes" in asked.stdout
    assert path.read_bytes() == bytes(data)

    repaired = groupcoord("log", "repair", str(tmp_path), "--yes")
    assert repaired.returncode == 0, repaired.stderr
    assert f"truncated 00000001.log at byte {start}: dropped {len(data) - start} bytes, 49 intact frames, " \
        "49 records" in repaired.stdout
    assert path.stat().st_size == start
    assert groupcoord("log", "check", str(tmp_path)).returncode == 0

    proc = subprocess.Popen(serve_args(port, tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_serving(port)
        assert fetch(port, "g") == {p: max(i for i in range(50) if i % 12 == p) for p in range(12)}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def describe(port: int, group: str) -> pb.DescribedGroup:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        return pb_grpc.GroupCoordinatorStub(channel).DescribeGroups(
            pb.DescribeGroupsRequest(group_ids=[group]), timeout=10).groups[0]


def join(stub: pb_grpc.GroupCoordinatorStub, metadata: bytes, results: list[int]) -> None:
    request = pb.JoinGroupRequest(group_id="huge", session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                                  protocol_type="consumer",
                                  protocols=[pb.JoinGroupRequestProtocol(name="range", metadata=metadata)])
    try:
        resp = stub.JoinGroup(request, timeout=60)
        if resp.error_code == 79:  # MEMBER_ID_REQUIRED (KIP-394): join again with the id
            request.member_id = resp.member_id
            resp = stub.JoinGroup(request, timeout=60)
        results.append(resp.error_code)
    except grpc.RpcError as e:
        results.append(-1000 - e.code().value[0])


@pytest.mark.timeout(300)
def test_an_oversized_classic_group_is_refused_and_a_later_commit_survives_kill_9(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(serve_args(port, tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_serving(port)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}",
                                        options=[("grpc.max_send_message_length", 8 << 20)])
        stub = pb_grpc.GroupCoordinatorStub(channel)
        metadata = os.urandom(3_600_000)
        results: list[int] = []
        threads = [threading.Thread(target=join, args=(stub, metadata, results)) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        # 3.6 MB of metadata per member is over message.max.bytes, so every join is refused at the edge with
        # INVALID_REQUEST before anything is written (the log's own refusal of an operation too large to read
        # back is tested with a small frame limit in test_oversized_rollback.py).
        assert results == [42] * 20
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            resp = pb_grpc.GroupCoordinatorStub(ch).OffsetCommit(pb.OffsetCommitRequest(
                group_id="after", generation_id_or_member_epoch=-1, topics=[pb.OffsetCommitRequestTopic(
                    name="orders", partitions=[pb.OffsetCommitRequestPartition(partition_index=3, committed_offset=77,
                                                                               committed_leader_epoch=-1)])]),
                timeout=10)
        assert resp.topics[0].partitions[0].error_code == 0
        before = describe(port, "huge")
        assert len(before.members) == 0  # the refused join left nothing behind: memory is what the log holds
        channel.close()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        log = FileLog(tmp_path)
        assert log.load(lambda rec: None).truncated_bytes == 0
        log.close()
        proc = subprocess.Popen(serve_args(port, tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_serving(port)
        assert fetch(port, "after") == {3: 77}
        after = describe(port, "huge")
        assert (after.group_state, after.group_epoch, len(after.members)) == (
            before.group_state, before.group_epoch, 0)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
