"""Streams groups over real gRPC on loopback: StreamsGroupHeartbeat, StreamsGroupDescribe, and the offset
RPCs of a streams group's members."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import grpc
import pytest

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from groupcoord.wire.v1 import streams_pb2 as spb
from groupcoord.wire.v1 import streams_pb2_grpc as spb_grpc
from tests.integration.conftest import start_server

STREAMS_FAST = {
    "group.streams.min.heartbeat.interval.ms": 20,  # below Kafka's start-up bounds, as tests/integration's FAST
    "group.streams.min.session.timeout.ms": 300,
    "group.streams.heartbeat.interval.ms": 100,
    "group.streams.session.timeout.ms": 1500,
    "group.streams.initial.rebalance.delay.ms": 200,
    "group.streams.assignment.interval.ms": 100,
}
STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID = int(Errors.STALE_MEMBER_EPOCH), int(Errors.UNKNOWN_MEMBER_ID)
TOPICS = {"lines": 4, "app-words-repartition": 4, "app-counts-changelog": 4}


def wait_until(cond: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def topology(epoch: int = 1) -> spb.StreamsTopology:
    return spb.StreamsTopology(epoch=epoch, subtopologies=[
        spb.StreamsSubtopology(subtopology_id="0", source_topics=["lines"],
                               repartition_sink_topics=["app-words-repartition"]),
        spb.StreamsSubtopology(subtopology_id="1",
                               repartition_source_topics=[spb.StreamsTopicInfo(name="app-words-repartition",
                                                                               partitions=4)],
                               state_changelog_topics=[spb.StreamsTopicInfo(name="app-counts-changelog")]),
    ])


@pytest.fixture
def server() -> Iterator[ServerThread]:
    srv = start_server(TOPICS, **STREAMS_FAST)
    try:
        yield srv
    finally:
        srv.stop()


class Member:
    """A minimal streams member: joins, then heartbeats reporting what it owns (it releases at once)."""

    def __init__(self, stub: spb_grpc.StreamsGroupCoordinatorStub, member_id: str, process: str) -> None:
        self.stub, self.member_id, self.process = stub, member_id, process
        self.epoch = 0
        self.active: list[spb.StreamsTaskIds] = []

    def beat(self) -> spb.StreamsGroupHeartbeatResponse:
        req = spb.StreamsGroupHeartbeatRequest(group_id="app", member_id=self.member_id, member_epoch=self.epoch)
        req.active_tasks.tasks.extend(self.active)
        req.standby_tasks.SetInParent()
        req.warmup_tasks.SetInParent()
        if self.epoch == 0:
            req.topology.CopyFrom(topology())
            req.process_id = self.process
            req.rebalance_timeout_ms = 5000
        resp = self.stub.StreamsGroupHeartbeat(req, timeout=10)
        assert resp.error_code == 0, resp.error_message
        self.epoch = resp.member_epoch
        if resp.HasField("active_tasks"):
            self.active = list(resp.active_tasks.tasks)
        return resp

    def tasks(self) -> set[tuple[str, int]]:
        return {(t.subtopology_id, p) for t in self.active for p in t.partitions}


def test_two_members_share_every_task_and_describe_shows_them(server: ServerThread) -> None:
    with grpc.insecure_channel(server.address) as channel:
        stub = spb_grpc.StreamsGroupCoordinatorStub(channel)
        a, b = Member(stub, "a", "pa"), Member(stub, "b", "pb")
        first = a.beat()
        assert first.member_epoch == 1 and first.heartbeat_interval_ms == 100
        b.beat()
        all_tasks = {(s, p) for s in "01" for p in range(4)}

        def settled() -> bool:
            a.beat()
            b.beat()
            return a.tasks() | b.tasks() == all_tasks and not a.tasks() & b.tasks() and a.epoch == b.epoch > 1

        wait_until(settled, what="both members running all tasks")
        desc = stub.StreamsGroupDescribe(spb.StreamsGroupDescribeRequest(group_ids=["app", "nope"]), timeout=10)
        group, missing = desc.groups
        assert group.group_state == "Stable" and group.topology.epoch == 1
        assert [m.member_id for m in group.members] == ["a", "b"]
        described = {(t.subtopology_id, p) for m in group.members for t in m.active_tasks for p in t.partitions}
        assert described == all_tasks
        assert missing.error_code == 69 and missing.group_state == "Dead"
        req = spb.StreamsGroupHeartbeatRequest(group_id="app", member_id="a", member_epoch=a.epoch,
                                               user_endpoint=spb.StreamsEndpoint(host="host-a", port=7001))
        iq = stub.StreamsGroupHeartbeat(req, timeout=10)
        assert iq.error_code == 0 and iq.HasField("partitions_by_user_endpoint")
        (endpoint,) = iq.partitions_by_user_endpoint.items
        assert (endpoint.user_endpoint.host, endpoint.user_endpoint.port) == ("host-a", 7001)
        served = {(t.topic, p) for t in endpoint.active_partitions for p in t.partitions}
        assert served == {(("lines", "app-words-repartition")[int(s)], p) for s, p in a.tasks()}


def test_missing_internal_topic_is_reported_in_the_heartbeat(server: ServerThread) -> None:
    with grpc.insecure_channel(server.address) as channel:
        stub = spb_grpc.StreamsGroupCoordinatorStub(channel)
        req = spb.StreamsGroupHeartbeatRequest(group_id="other", member_id="m", member_epoch=0, process_id="p",
                                               rebalance_timeout_ms=1000)
        req.topology.CopyFrom(topology())
        req.topology.subtopologies[1].state_changelog_topics[0].name = "absent-changelog"
        req.active_tasks.SetInParent()
        req.standby_tasks.SetInParent()
        req.warmup_tasks.SetInParent()
        resp = stub.StreamsGroupHeartbeat(req, timeout=10)
        assert resp.error_code == 0 and resp.member_epoch == 1
        assert [s.status_code for s in resp.status.items] == [3]
        assert "absent-changelog" in resp.status.items[0].status_detail

        def created() -> bool:  # the coordinator creates it (in the static metadata here) and the group is ready
            req.ClearField("topology")
            req.member_epoch = resp.member_epoch
            again = stub.StreamsGroupHeartbeat(req, timeout=10)
            assert again.error_code == 0, again.error_message
            return not again.status.items

        wait_until(created, what="the missing changelog topic to be created")
        assert server.server.runtime.topic_creator.created == ["absent-changelog"]  # type: ignore[union-attr]


def test_a_restarted_coordinator_reloads_the_streams_group_from_its_log(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from groupcoord.coordinator.core.config import BrokerConfig
    from groupcoord.coordinator.runtime.server import ServerOptions
    from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
    from tests.integration.conftest import FAST

    def start() -> ServerThread:
        options = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping({**FAST, **STREAMS_FAST}),
                                metadata_source=StaticMetadataSource(TOPICS), metadata_poll_s=0.2,
                                state_dir=tmp_path)
        return ServerThread(options).start()

    srv = start()
    try:
        with grpc.insecure_channel(srv.address) as channel:
            a = Member(spb_grpc.StreamsGroupCoordinatorStub(channel), "a", "pa")
            a.beat()
            wait_until(lambda: bool(a.beat()) and len(a.tasks()) == 8, what="a runs every task")
            before = spb_grpc.StreamsGroupCoordinatorStub(channel).StreamsGroupDescribe(
                spb.StreamsGroupDescribeRequest(group_ids=["app"]), timeout=10).groups[0]
    finally:
        srv.stop()
    srv = start()
    try:
        with grpc.insecure_channel(srv.address) as channel:
            after = spb_grpc.StreamsGroupCoordinatorStub(channel).StreamsGroupDescribe(
                spb.StreamsGroupDescribeRequest(group_ids=["app"]), timeout=10).groups[0]
            assert after == before
    finally:
        srv.stop()


@pytest.fixture
def long_sessions() -> Iterator[ServerThread]:
    """Members outlive the CLI's start-up (seconds on a loaded machine) without heartbeating."""
    srv = start_server(TOPICS, **{**STREAMS_FAST, "group.streams.session.timeout.ms": 60_000})
    try:
        yield srv
    finally:
        srv.stop()


def test_list_and_describe_groups_and_the_cli_show_streams_groups(long_sessions: ServerThread) -> None:
    import subprocess
    import sys

    server = long_sessions

    from groupcoord.wire.v1 import coordinator_pb2 as pb
    from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

    with grpc.insecure_channel(server.address) as channel:
        stub = spb_grpc.StreamsGroupCoordinatorStub(channel)
        a, b = Member(stub, "a", "pa"), Member(stub, "b", "pb")
        a.beat()
        b.beat()
        wait_until(lambda: bool(a.beat()) and bool(b.beat()) and len(a.tasks()) + len(b.tasks()) == 8
                   and a.epoch == b.epoch > 1, what="both members running")
        admin = pb_grpc.GroupCoordinatorStub(channel)
        listed = admin.ListGroups(pb.ListGroupsRequest(types_filter=["streams"]), timeout=10)
        assert [(g.group_id, g.group_type) for g in listed.groups] == [("app", "streams")]
        described = admin.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["app"]), timeout=10).groups[0]
        assert described.group_type == "streams" and [m.member_id for m in described.members] == ["a", "b"]
        active = {(t.topic_id, p) for m in described.members for t in m.assignment for p in t.partitions}
        assert active == a.tasks() | b.tasks()
        deleted = admin.DeleteGroups(pb.DeleteGroupsRequest(group_ids=["app"]), timeout=10).results[0]
        assert deleted.error_code == 68  # NON_EMPTY_GROUP
    out = subprocess.run([sys.executable, "-m", "groupcoord", "groups", "describe", "app",
                          "--server", server.address], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "type=streams" in out.stdout and "subtopology 1: sources=app-words-repartition" in out.stdout
    assert "changelogs=app-counts-changelog" in out.stdout
    assert "MEMBER" in out.stdout and "STANDBY" in out.stdout and "pa" in out.stdout
    listed_out = subprocess.run([sys.executable, "-m", "groupcoord", "groups", "list", "--type", "streams",
                                 "--server", server.address], capture_output=True, text=True, timeout=60)
    assert listed_out.returncode == 0, listed_out.stderr
    assert listed_out.stdout.split("\n")[1].split() == ["app", "streams", "Stable"]


def _commit(stub: pb_grpc.GroupCoordinatorStub, member: str, epoch: int, offset: int) -> list[int]:
    req = pb.OffsetCommitRequest(group_id="app", member_id=member, generation_id_or_member_epoch=epoch)
    req.topics.add(name="lines").partitions.add(partition_index=0, committed_offset=offset, committed_leader_epoch=-1)
    resp = stub.OffsetCommit(req, timeout=10)
    return [p.error_code for t in resp.topics for p in t.partitions]


def test_offset_commit_and_fetch_over_grpc_are_checked_against_the_streams_member_epoch(server: ServerThread) -> None:
    with grpc.insecure_channel(server.address) as channel:
        a = Member(spb_grpc.StreamsGroupCoordinatorStub(channel), "a", "pa")
        a.beat()
        stub = pb_grpc.GroupCoordinatorStub(channel)
        assert _commit(stub, "a", a.epoch, 5) == [0]
        assert _commit(stub, "a", a.epoch + 1, 6) == [STALE_MEMBER_EPOCH]
        assert _commit(stub, "ghost", a.epoch, 6) == [UNKNOWN_MEMBER_ID]
        assert _commit(stub, "", -1, 6) == [UNKNOWN_MEMBER_ID], "epoch -1 commits need an empty group"
        fetched = stub.OffsetFetch(pb.OffsetFetchRequest(group_id="app", member_id="a", member_epoch=a.epoch),
                                   timeout=10)
        assert fetched.error_code == 0
        assert [(t.name, p.committed_offset) for t in fetched.topics for p in t.partitions] == [("lines", 5)]
        stale = stub.OffsetFetch(pb.OffsetFetchRequest(group_id="app", member_id="a", member_epoch=a.epoch - 1),
                                 timeout=10)
        assert stale.error_code == STALE_MEMBER_EPOCH
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "groupcoord", "groups", "describe", "app", "--server",
                          server.address], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = [line.split()[:4] for line in out.stdout.splitlines() if line.startswith("app ")]
    assert rows == [["app", "lines", "0", "5"]], out.stdout  # the committed offsets, after the task table


def test_altered_streams_group_configs_reach_the_next_heartbeat_and_describe(server: ServerThread) -> None:
    """AlterGroupConfigs / DescribeGroupConfigs over gRPC: the group's streams.heartbeat.interval.ms is what
    its next StreamsGroupHeartbeat answers; a value outside the broker's bounds is INVALID_CONFIG."""
    with grpc.insecure_channel(server.address) as channel:
        stub, admin = spb_grpc.StreamsGroupCoordinatorStub(channel), pb_grpc.GroupCoordinatorStub(channel)
        a = Member(stub, "a", "pa")
        assert a.beat().heartbeat_interval_ms == 100

        def alter(name: str, value: str) -> pb.AlterGroupConfigsResponse:
            req = pb.AlterGroupConfigsRequest(group_id="app", configs=[pb.AlterableConfig(name=name, value=value)])
            resp: pb.AlterGroupConfigsResponse = admin.AlterGroupConfigs(req, timeout=10)
            return resp

        assert alter("streams.heartbeat.interval.ms", "250").error_code == 0
        assert a.beat().heartbeat_interval_ms == 250
        refused = alter("streams.heartbeat.interval.ms", "15001")  # group.streams.max.heartbeat.interval.ms
        assert refused.error_code == int(Errors.INVALID_CONFIG) and "15000" in refused.error_message
        refused = alter("streams.num.standby.replicas", "3")  # group.streams.max.standby.replicas
        assert refused.error_code == int(Errors.INVALID_CONFIG)
        described = admin.DescribeGroupConfigs(pb.DescribeGroupConfigsRequest(group_ids=["app"]), timeout=10)
        entries = {e.name: (e.value, e.is_default) for e in described.results[0].configs}
        assert entries["streams.heartbeat.interval.ms"] == ("250", False)
        assert entries["streams.num.standby.replicas"][1] and entries["streams.session.timeout.ms"][1]
