"""`groupcoord groups describe | reset-offsets | delete-offsets` against a real coordinator over gRPC and the
embedded Kafka: Kafka's columns, lag from the cluster, Kafka's refusals, --json everywhere."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from groupcoord import cli
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.embedded_kafka import EmbeddedKafka
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.integration.conftest import start_server

RECORDS = {0: 10, 1: 7, 2: 3, 3: 0}  # records produced per partition of "orders"
AUDIT_RECORDS = {0: 4, 1: 2}


@pytest.fixture(scope="module")
def kafka() -> Iterator[EmbeddedKafka]:
    with EmbeddedKafka(brokers=1) as k:
        k.create_topic("orders", 4)
        k.create_topic("audit", 2)
        producer = Producer({"bootstrap.servers": k.bootstrap_servers})
        for topic, counts in (("orders", RECORDS), ("audit", AUDIT_RECORDS)):
            for p, n in counts.items():
                for i in range(n):
                    producer.produce(topic, value=f"{i}".encode(), partition=p)
        assert producer.flush(30) == 0
        yield k


@pytest.fixture
def server() -> Iterator[ServerThread]:
    srv = start_server({"orders": 4, "audit": 2}, **{"group.consumer.session.timeout.ms": 30_000})
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def stub(server: ServerThread) -> Iterator[pb_grpc.GroupCoordinatorStub]:
    import grpc

    with grpc.insecure_channel(server.address) as channel:
        yield pb_grpc.GroupCoordinatorStub(channel)


def groups(capsys: pytest.CaptureFixture[str], server: ServerThread, *args: str) -> tuple[int, str, str]:
    rc = cli.main(["groups", *args, "--server", server.address])
    out = capsys.readouterr()
    return rc, out.out, out.err


def join(stub: pb_grpc.GroupCoordinatorStub, group: str, member: str, topics: list[str]) -> Any:
    """Join, then heartbeat (owning what was given) until the group is Stable: the member owns its target."""
    resp = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=5000,
        subscribed_topic_names=pb.StringList(values=topics), topic_partitions=pb.TopicPartitionsList()), timeout=10)
    owned = pb.TopicPartitionsList()
    deadline = time.monotonic() + 20
    while True:
        assert resp.error_code == 0, resp.error_message
        if resp.HasField("assignment"):
            owned = pb.TopicPartitionsList(topics=list(resp.assignment.topic_partitions))
        state = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=[group]), timeout=10).groups[0].group_state
        if state == "STABLE":
            return resp
        assert time.monotonic() < deadline, state
        time.sleep(0.05)
        resp = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=resp.member_epoch, topic_partitions=owned), timeout=10)


def leave(stub: pb_grpc.GroupCoordinatorStub, group: str, member: str) -> None:
    resp = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=-1), timeout=10)
    assert resp.error_code == 0, resp.error_message


def commit(stub: pb_grpc.GroupCoordinatorStub, group: str, offsets: dict[tuple[str, int], int],
           member: str = "", epoch: int = -1) -> None:
    req = pb.OffsetCommitRequest(group_id=group, member_id=member, generation_id_or_member_epoch=epoch)
    for (topic, p), o in offsets.items():
        req.topics.add(name=topic).partitions.add(partition_index=p, committed_offset=o, committed_leader_epoch=-1)
    resp = stub.OffsetCommit(req, timeout=10)
    assert not resp.error_code and all(not p.error_code for t in resp.topics for p in t.partitions), resp


def committed(stub: pb_grpc.GroupCoordinatorStub, group: str) -> dict[tuple[str, int], int]:
    resp = stub.OffsetFetch(pb.OffsetFetchRequest(group_id=group, member_epoch=-1), timeout=10)
    return {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions
            if p.committed_offset >= 0}


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines() if line.strip()]


def test_describe_offsets_shows_kafkas_columns_with_log_end_offset_and_lag_from_the_cluster(
        capsys: pytest.CaptureFixture[str], server: ServerThread, stub: pb_grpc.GroupCoordinatorStub,
        kafka: EmbeddedKafka) -> None:
    resp = join(stub, "g", "m1", ["orders"])
    commit(stub, "g", {("orders", 0): 4, ("orders", 1): 7}, "m1", resp.member_epoch)
    rc, out, _ = groups(capsys, server, "describe", "g", "--bootstrap-server", kafka.bootstrap_servers)
    assert rc == 0
    table = rows(out)
    assert table[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                        "HOST", "CLIENT-ID"]
    by_partition = {int(r[2]): r for r in table[1:]}
    assert by_partition[0][:7] == ["g", "orders", "0", "4", "10", "6", "m1"]
    assert by_partition[1][3:6] == ["7", "7", "0"]
    assert by_partition[2][3:6] == ["-", "3", "-"]  # owned, nothing committed: Kafka's "-"
    rc, out, _ = groups(capsys, server, "describe", "g")  # no cluster: end offsets and lag unknown
    assert rc == 0 and {tuple(r[3:6]) for r in rows(out)[1:]} >= {("4", "-", "-")}
    rc, out, _ = groups(capsys, server, "describe", "g", "--json", "--bootstrap-server", kafka.bootstrap_servers)
    data = json.loads(out)
    first = next(r for r in data["rows"] if r["partition"] == 0)
    assert (first["current_offset"], first["log_end_offset"], first["lag"], first["consumer_id"]) == (4, 10, 6, "m1")


def test_describe_members_and_state_have_kafkas_columns_plain_and_verbose(
        capsys: pytest.CaptureFixture[str], server: ServerThread, stub: pb_grpc.GroupCoordinatorStub) -> None:
    join(stub, "g", "m1", ["orders"])
    rc, out, _ = groups(capsys, server, "describe", "g", "--members")
    assert rc == 0 and rows(out)[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    assert rows(out)[1][0:2] == ["g", "m1"] and rows(out)[1][-1] == "4"
    rc, out, _ = groups(capsys, server, "describe", "g", "--members", "--verbose")
    assert rows(out)[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                            "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    epoch, current, target_epoch, target = rows(out)[1][-4:]
    assert (current, target) == ("orders:0,1,2,3", "orders:0,1,2,3") and epoch == target_epoch
    rc, out, _ = groups(capsys, server, "describe", "g", "--state")
    assert out.strip().splitlines()[0].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE",
                                                   "#MEMBERS"]
    assert "Stable" in out and out.strip().endswith("1")
    rc, out, _ = groups(capsys, server, "describe", "g", "--state", "--verbose")
    assert out.strip().splitlines()[0].split()[-3:] == ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    rc, out, _ = groups(capsys, server, "describe", "g", "--state", "--json")
    assert json.loads(out)["rows"][0]["state"] == "Stable"
    rc, out, _ = groups(capsys, server, "describe", "nobody")
    assert rc == 1 and "Consumer group 'nobody' does not exist." in out


def test_reset_offsets_is_refused_while_the_group_has_members_with_kafkas_message(
        capsys: pytest.CaptureFixture[str], server: ServerThread, stub: pb_grpc.GroupCoordinatorStub,
        kafka: EmbeddedKafka) -> None:
    join(stub, "g", "m1", ["orders"])
    rc, out, err = groups(capsys, server, "reset-offsets", "g", "--all-topics", "--to-latest", "--execute",
                          "--bootstrap-server", kafka.bootstrap_servers)
    assert rc == 1 and out == ""
    assert err.strip() == ("groupcoord: Assignments can only be reset if the group 'g' is inactive, but the "
                           "current state is Stable.")


def test_reset_offsets_dry_run_changes_nothing_and_execute_commits_each_strategy(
        capsys: pytest.CaptureFixture[str], server: ServerThread, stub: pb_grpc.GroupCoordinatorStub,
        kafka: EmbeddedKafka) -> None:
    resp = join(stub, "g", "m1", ["orders"])
    commit(stub, "g", {("orders", 0): 5, ("orders", 1): 5}, "m1", resp.member_epoch)
    leave(stub, "g", "m1")
    bootstrap = ["--bootstrap-server", kafka.bootstrap_servers]
    rc, out, _ = groups(capsys, server, "reset-offsets", "g", "--topic", "orders", "--to-latest", *bootstrap)
    assert rc == 0 and "--execute option is missing" in out
    assert rows(out.split("\n\n", 1)[1])[0] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert [r[3] for r in rows(out.split("\n\n", 1)[1])[1:]] == ["10", "7", "3", "0"]
    assert committed(stub, "g") == {("orders", 0): 5, ("orders", 1): 5}  # dry run: nothing committed

    groups(capsys, server, "reset-offsets", "g", "--topic", "orders:0,1", "--to-earliest", "--execute", *bootstrap)
    assert committed(stub, "g") == {("orders", 0): 0, ("orders", 1): 0}
    rc, out, err = groups(capsys, server, "reset-offsets", "g", "--all-topics", "--shift-by", "8", "--execute",
                          *bootstrap)
    assert rc == 0, (out, err)
    assert committed(stub, "g") == {("orders", 0): 8, ("orders", 1): 7}  # clamped to the log end, as Kafka does
    groups(capsys, server, "reset-offsets", "g", "--topic", "orders:0", "--to-offset", "2", "--execute")
    assert committed(stub, "g")[("orders", 0)] == 2
    rc, out, _ = groups(capsys, server, "reset-offsets", "g", "--topic", "orders", "--to-latest", "--execute",
                        "--json", *bootstrap)
    assert rc == 0 and json.loads(out)["executed"] is True
    assert committed(stub, "g") == {("orders", 0): 10, ("orders", 1): 7, ("orders", 2): 3, ("orders", 3): 0}
    # --to-datetime: tests/realkafka/test_admin_reset_to_datetime.py (the mock cluster has no time index)


def test_reset_offsets_errors_are_one_line(capsys: pytest.CaptureFixture[str], server: ServerThread) -> None:
    for args, expected in [
        (["--topic", "orders", "--to-earliest"], "--bootstrap-server"),
        (["--to-offset", "3"], "--all-topics"),
        (["--topic", "orders:x", "--to-offset", "3"], "TOPIC:PARTITION"),
        (["--topic", "orders:0", "--to-datetime", "yesterday", "--bootstrap-server", "127.0.0.1:1"],
         "--to-datetime"),
    ]:
        rc, out, err = groups(capsys, server, "reset-offsets", "g", *args)
        assert rc == 1 and expected in err and len(err.strip().splitlines()) == 1, (args, err)


def test_delete_offsets_refuses_subscribed_topics_with_86_and_deletes_the_others(
        capsys: pytest.CaptureFixture[str], server: ServerThread, stub: pb_grpc.GroupCoordinatorStub) -> None:
    resp = join(stub, "g", "m1", ["orders"])
    commit(stub, "g", {("orders", 0): 1, ("orders", 1): 2}, "m1", resp.member_epoch)
    raw = stub.OffsetDelete(pb.OffsetDeleteRequest(group_id="g", topics=[
        pb.OffsetDeleteRequestTopic(name="orders", partition_indexes=[0])]), timeout=10)
    assert raw.error_code == 0 and raw.topics[0].partitions[0].error_code == 86  # GROUP_SUBSCRIBED_TO_TOPIC
    rc, out, _ = groups(capsys, server, "delete-offsets", "g", "--topic", "orders")
    assert rc == 1 and rows(out)[1] == ["TOPIC", "PARTITION", "STATUS"]
    assert committed(stub, "g") == {("orders", 0): 1, ("orders", 1): 2}
    leave(stub, "g", "m1")  # an empty group subscribes to nothing: its offsets may go
    rc, out, _ = groups(capsys, server, "delete-offsets", "g", "--topic", "orders:1", "--json")
    assert rc == 0 and json.loads(out)["partitions"] == [
        {"topic": "orders", "partition": 1, "error_code": 0, "status": "Successful"}]
    assert committed(stub, "g") == {("orders", 0): 1}
    rc, out, _ = groups(capsys, server, "delete-offsets", "nobody", "--topic", "orders:0")
    assert rc == 1 and out.strip() == "Error: Group 'nobody' does not exist."


def test_delete_offsets_of_a_topic_the_group_no_longer_reads_while_members_stay(
        capsys: pytest.CaptureFixture[str], server: ServerThread, stub: pb_grpc.GroupCoordinatorStub) -> None:
    commit(stub, "g", {("audit", 0): 3})  # committed from outside while the group was empty
    join(stub, "g", "m1", ["orders"])
    rc, out, _ = groups(capsys, server, "delete-offsets", "g", "--topic", "audit")
    assert rc == 0 and "Request succeed for deleting offsets from group g." in out
    assert committed(stub, "g") == {}


def test_an_unreachable_kafka_cluster_is_one_line(capsys: pytest.CaptureFixture[str], server: ServerThread,
                                                  stub: pb_grpc.GroupCoordinatorStub) -> None:
    join(stub, "g", "m1", ["orders"])
    rc, out, err = groups(capsys, server, "describe", "g", "--bootstrap-server", "127.0.0.1:1", "--timeout", "300")
    assert rc == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("groupcoord: cannot read offsets from Kafka at 127.0.0.1:1: ")
    assert len(lines[0]) > len("groupcoord: cannot read offsets from Kafka at 127.0.0.1:1: ") + 5  # says why


def test_a_classic_group_shows_its_decoded_assignment_and_keeps_its_offsets_while_it_has_members(
        capsys: pytest.CaptureFixture[str]) -> None:
    from groupcoord.clients.consumer_protocol import Assignment, Subscription, encode_assignment, encode_subscription

    srv = start_server({"orders": 4}, **{"group.initial.rebalance.delay.ms": 0})
    try:
        import grpc

        with grpc.insecure_channel(srv.address) as channel:
            s = pb_grpc.GroupCoordinatorStub(channel)
            join_req = pb.JoinGroupRequest(group_id="c", session_timeout_ms=30_000, rebalance_timeout_ms=10_000,
                                           protocol_type="consumer", protocols=[pb.JoinGroupRequestProtocol(
                                               name="range", metadata=encode_subscription(Subscription(("orders",))))])
            first = s.JoinGroup(join_req, timeout=10)
            assert first.error_code == 79  # MEMBER_ID_REQUIRED
            join_req.member_id = first.member_id
            joined = s.JoinGroup(join_req, timeout=30)
            assert joined.error_code == 0, joined.error_message
            synced = s.SyncGroup(pb.SyncGroupRequest(
                group_id="c", generation_id=joined.generation_id, member_id=joined.member_id, assignments=[
                    pb.SyncGroupRequestAssignment(member_id=joined.member_id,
                                                  assignment=encode_assignment(Assignment((("orders", 1),
                                                                                           ("orders", 0)))))]),
                timeout=10)
            assert synced.error_code == 0, synced.error_message
            commit(s, "c", {("orders", 0): 3}, joined.member_id, joined.generation_id)
            rc = cli.main(["groups", "describe", "c", "--members", "--verbose", "--server", srv.address])
            table = rows(capsys.readouterr().out)
            assert rc == 0 and table[0][-2:] == ["#PARTITIONS", "ASSIGNMENT"]
            assert table[1][1] == joined.member_id and table[1][-2:] == ["2", "orders:0,1"]
            rc = cli.main(["groups", "delete-offsets", "c", "--topic", "orders", "--server", srv.address])
            assert rc == 1 and "Error: The group is subscribed to the topic." in capsys.readouterr().out
            assert committed(s, "c") == {("orders", 0): 3}
    finally:
        srv.stop()
