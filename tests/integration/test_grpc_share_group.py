"""Share groups over real gRPC on loopback, with the file log: locks and delivery state survive a restart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.metadata import topic_id_for_name
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from groupcoord.wire.v1 import share_pb2 as spb
from groupcoord.wire.v1 import share_pb2_grpc as spb_grpc

CONFIG = {"group.share.assignor.offload.enable": "false", "group.share.assignment.interval.ms": "0",
          "group.share.min.record.lock.duration.ms": "1000", "group.share.max.record.lock.duration.ms": "3600000",
          "group.share.record.lock.duration.ms": "3600000"}
JOBS = topic_id_for_name("jobs")


def _server(state_dir: Path) -> ServerThread:
    return ServerThread(ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping(CONFIG),
                                      metadata_source=StaticMetadataSource({"jobs": 1}), state_dir=state_dir))


def _acquire(stub: spb_grpc.ShareGroupCoordinatorStub, member: str, n: int) -> spb.ShareAcquireResponse:
    req = spb.ShareAcquireRequest(group_id="q", member_id=member, max_records=n)
    req.partitions.add(topic_id=JOBS, partition=0, log_start_offset=0, log_end_offset=1000)
    resp: spb.ShareAcquireResponse = stub.ShareAcquire(req, timeout=10)
    return resp


def test_share_state_and_locks_are_replayed_from_the_file_log(tmp_path: Path) -> None:
    with _server(tmp_path) as server, grpc.insecure_channel(server.address) as channel:
        admin = pb_grpc.GroupCoordinatorStub(channel)
        assert admin.AlterGroupConfigs(pb.AlterGroupConfigsRequest(group_id="q", configs=[
            pb.AlterableConfig(name="share.auto.offset.reset", value="earliest")]), timeout=10).error_code == 0
        stub = spb_grpc.ShareGroupCoordinatorStub(channel)
        join = spb.ShareGroupHeartbeatRequest(group_id="q", member_id="a", member_epoch=0)
        join.subscribed_topic_names.values.append("jobs")
        joined = stub.ShareGroupHeartbeat(join, timeout=10)
        assert joined.error_code == 0 and joined.has_assignment
        assert [(t.topic_name, list(t.partitions)) for t in joined.assignment] == [("jobs", [0])]
        got = _acquire(stub, "a", 100).partitions[0]
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got.acquired_records] == [(0, 99, 1)]
        ack = spb.ShareAcknowledgeRequest(group_id="q", member_id="a")
        ack.batches.add(topic_id=JOBS, partition=0, first_offset=0, last_offset=49, acknowledge_type=1)
        assert [r.error_code for r in stub.ShareAcknowledge(ack, timeout=10).results] == [0]
        described = admin.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["q"]), timeout=10).groups[0]
        assert (described.group_type, described.group_state, len(described.members)) == ("share", "STABLE", 1)
        listed = admin.ListGroups(pb.ListGroupsRequest(), timeout=10).groups
        assert [(g.group_id, g.group_type) for g in listed] == [("q", "share")]
        offsets = stub.DescribeShareGroupOffsets(spb.DescribeShareGroupOffsetsRequest(group_id="q"), timeout=10)
        assert [(p.topic_name, p.start_offset, p.end_offset, p.in_flight, p.acquired, p.available)
                for p in offsets.partitions] == [("jobs", 50, 100, 50, 50, 0)]
        cli = subprocess.run([sys.executable, "-m", "groupcoord", "groups", "describe", "q", "--server",
                              server.address], capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        header, row = cli.stdout.strip().splitlines()[-2:]
        assert header.split() == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "END-OFFSET", "IN-FLIGHT",
                                  "ACQUIRED", "AVAILABLE"]
        assert row.split() == ["q", "jobs", "0", "50", "100", "50", "50", "0"]

    with _server(tmp_path) as server, grpc.insecure_channel(server.address) as channel:
        stub = spb_grpc.ShareGroupCoordinatorStub(channel)
        again = _acquire(stub, "a", 100).partitions[0]  # 50..99 are still locked to "a": new offsets follow
        assert [(r.first_offset, r.last_offset) for r in again.acquired_records] == [(100, 199)]
        ack = spb.ShareAcknowledgeRequest(group_id="q", member_id="a")
        ack.batches.add(topic_id=JOBS, partition=0, first_offset=50, last_offset=199, acknowledge_type=1)
        assert [r.error_code for r in stub.ShareAcknowledge(ack, timeout=10).results] == [0]
        assert again.start_offset == 50


def test_oversized_share_requests_are_refused_in_band(tmp_path: Path) -> None:
    with _server(tmp_path) as server, grpc.insecure_channel(server.address) as channel:
        stub = spb_grpc.ShareGroupCoordinatorStub(channel)
        long_id = "x" * 5000
        req = spb.ShareAcquireRequest(group_id="q", member_id="a", max_records=1)
        req.partitions.add(topic_id=long_id, partition=0, log_end_offset=1)
        resp = stub.ShareAcquire(req, timeout=10)
        assert resp.error_code == 42 and long_id not in resp.error_message  # INVALID_REQUEST, not echoed
        ack = spb.ShareAcknowledgeRequest(group_id="q", member_id="a")
        ack.batches.add(topic_id=long_id, partition=0, first_offset=0, last_offset=0, acknowledge_type=1)
        assert stub.ShareAcknowledge(ack, timeout=10).error_code == 42
        bad_group = stub.ShareGroupHeartbeat(spb.ShareGroupHeartbeatRequest(group_id=long_id, member_epoch=0),
                                             timeout=10)
        assert bad_group.error_code == 24 and long_id not in bad_group.error_message  # INVALID_GROUP_ID
