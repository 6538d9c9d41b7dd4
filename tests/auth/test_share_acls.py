"""The share-group RPCs behind mTLS and ACLs: READ on the group for heartbeat/acquire/acknowledge, DESCRIBE for
DescribeShareGroupOffsets, and a share member joined by one principal cannot be driven by another."""

from __future__ import annotations

from pathlib import Path

from groupcoord.wire.v1 import share_pb2 as spb
from groupcoord.wire.v1 import share_pb2_grpc as spb_grpc
from tests.auth.conftest import Pki, StartServer, write_acls

GROUP_AUTHORIZATION_FAILED = 30
UNKNOWN_MEMBER_ID = 25


def _join(s: spb_grpc.ShareGroupCoordinatorStub, group: str, member: str = "m1") -> spb.ShareGroupHeartbeatResponse:
    req = spb.ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0)
    req.subscribed_topic_names.values.append("orders")
    resp: spb.ShareGroupHeartbeatResponse = s.ShareGroupHeartbeat(req, timeout=10)
    return resp


def test_share_rpcs_need_read_and_a_member_belongs_to_its_principal(
        pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "READ", "PREFIXED:q-", "ALLOW"), ("User:bob", "READ", "PREFIXED:q-", "ALLOW"))
    srv = start_secured(tls=pki.tls(), acl_file=acls)
    target = f"localhost:{srv.server.port}"
    alice = spb_grpc.ShareGroupCoordinatorStub(pki.client("alice").channel(target))
    bob = spb_grpc.ShareGroupCoordinatorStub(pki.client("bob").channel(target))
    assert _join(alice, "other").error_code == GROUP_AUTHORIZATION_FAILED
    joined = _join(alice, "q-jobs")
    assert joined.error_code == 0 and joined.member_epoch > 0
    denied = alice.ShareAcquire(spb.ShareAcquireRequest(group_id="other", member_id="m1", max_records=1), timeout=10)
    assert denied.error_code == GROUP_AUTHORIZATION_FAILED
    hijack = bob.ShareAcquire(spb.ShareAcquireRequest(group_id="q-jobs", member_id="m1", max_records=1), timeout=10)
    assert hijack.error_code == UNKNOWN_MEMBER_ID  # alice's member: bob may READ the group, not drive her member
    assert alice.DescribeShareGroupOffsets(spb.DescribeShareGroupOffsetsRequest(group_id="q-jobs"),
                                           timeout=10).error_code == 0  # READ implies DESCRIBE
    assert alice.DescribeShareGroupOffsets(spb.DescribeShareGroupOffsetsRequest(group_id="other"),
                                           timeout=10).error_code == GROUP_AUTHORIZATION_FAILED
