"""StreamsGroupHeartbeat needs READ on the group and StreamsGroupDescribe DESCRIBE (READ implies it), as in
Kafka; a principal without them gets GROUP_AUTHORIZATION_FAILED in-band."""

from __future__ import annotations

from pathlib import Path

from groupcoord.wire.v1 import streams_pb2 as spb
from groupcoord.wire.v1 import streams_pb2_grpc as spb_grpc
from tests.auth.conftest import Pki, StartServer, write_acls

GROUP_AUTHORIZATION_FAILED = 30


def join(stub: spb_grpc.StreamsGroupCoordinatorStub, group: str) -> spb.StreamsGroupHeartbeatResponse:
    req = spb.StreamsGroupHeartbeatRequest(group_id=group, member_id="m", member_epoch=0, process_id="p",
                                           rebalance_timeout_ms=1000)
    req.topology.epoch = 1
    req.topology.subtopologies.add(subtopology_id="0", source_topics=["orders"])
    req.active_tasks.SetInParent()
    req.standby_tasks.SetInParent()
    req.warmup_tasks.SetInParent()
    return stub.StreamsGroupHeartbeat(req, timeout=10)


def test_streams_heartbeat_needs_read_and_describe_needs_describe(
        pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "READ", "PREFIXED:orders-", "ALLOW"))
    srv = start_secured(tls=pki.tls(), acl_file=acls)
    target = f"localhost:{srv.server.port}"
    alice = spb_grpc.StreamsGroupCoordinatorStub(pki.client("alice").channel(target))
    bob = spb_grpc.StreamsGroupCoordinatorStub(pki.client("bob").channel(target))
    assert join(bob, "orders-app").error_code == GROUP_AUTHORIZATION_FAILED
    assert join(alice, "billing").error_code == GROUP_AUTHORIZATION_FAILED
    served = join(alice, "orders-app")
    assert served.error_code == 0 and served.member_epoch == 1
    described = alice.StreamsGroupDescribe(spb.StreamsGroupDescribeRequest(group_ids=["orders-app", "billing"]),
                                           timeout=10)
    assert [g.error_code for g in described.groups] == [0, GROUP_AUTHORIZATION_FAILED]
    assert bob.StreamsGroupDescribe(spb.StreamsGroupDescribeRequest(group_ids=["orders-app"]),
                                    timeout=10).groups[0].error_code == GROUP_AUTHORIZATION_FAILED


def test_a_streams_member_joined_by_one_principal_cannot_be_used_by_another(
        pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:*", "READ", "PREFIXED:orders-", "ALLOW"))
    srv = start_secured(tls=pki.tls(), acl_file=acls)
    target = f"localhost:{srv.server.port}"
    alice = spb_grpc.StreamsGroupCoordinatorStub(pki.client("alice").channel(target))
    bob = spb_grpc.StreamsGroupCoordinatorStub(pki.client("bob").channel(target))
    assert join(alice, "orders-app").error_code == 0
    stolen = bob.StreamsGroupHeartbeat(spb.StreamsGroupHeartbeatRequest(
        group_id="orders-app", member_id="m", member_epoch=-1), timeout=10)
    assert stolen.error_code == 25  # UNKNOWN_MEMBER_ID: as if the member did not exist
    assert join(bob, "orders-app").error_code == 25
    left = alice.StreamsGroupHeartbeat(spb.StreamsGroupHeartbeatRequest(
        group_id="orders-app", member_id="m", member_epoch=-1), timeout=10)
    assert left.error_code == 0
