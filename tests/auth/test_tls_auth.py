"""TLS, mTLS and tokens against a real coordinator over loopback, with real certificates: who is refused, who
gets GROUP_AUTHORIZATION_FAILED (30), who is served, and that probes still reach health."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from groupcoord.clients.credentials import Credentials
from groupcoord.wire.v1 import coordinator_pb2 as pb
from tests.auth.conftest import Pki, StartServer, rpc_error, stub, write_acls

GROUP_AUTHORIZATION_FAILED = 30
TOKEN_ALICE = "alice-token-0123456789abcdef"
TOKEN_BOB = "bob-token-0123456789abcdef"


def join(s: object, group: str = "orders-app") -> pb.ConsumerGroupHeartbeatResponse:
    return s.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(  # type: ignore[attr-defined, no-any-return]
        group_id=group, member_epoch=0, rebalance_timeout_ms=5000,
        subscribed_topic_names=pb.StringList(values=["orders"]), topic_partitions=pb.TopicPartitionsList()),
        timeout=10)


def test_client_without_certificate_is_refused_by_mtls(pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "ALL", "LITERAL:*", "ALLOW"))
    srv = start_secured(tls=pki.tls(), acl_file=acls)
    no_cert = Credentials.from_files(pki.path("ca.pem"), token_from_env=False)
    assert rpc_error(lambda: join(stub(srv, no_cert))) is grpc.StatusCode.UNAVAILABLE
    untrusted = Credentials.from_files(pki.path("ca.pem"), pki.path("other/alice.pem"), pki.path("other/alice.key"),
                                       token_from_env=False)
    assert rpc_error(lambda: join(stub(srv, untrusted))) is grpc.StatusCode.UNAVAILABLE
    plaintext = Credentials()
    assert rpc_error(lambda: join(stub(srv, plaintext))) is grpc.StatusCode.UNAVAILABLE


def test_an_x509_v1_client_certificate_is_served_by_grpcio_only(
        pki: Pki, start_secured: StartServer, tmp_path: Path, front_end: str, caplog: pytest.LogCaptureFixture) -> None:
    """rustls (the native front end's TLS) takes X.509 v3 certificates only, as RFC 5280 asks of a certificate
    with extensions; BoringSSL (grpcio's) also takes v1 ones. The one difference between the two, pinned, and
    the native front end's log says why it refused."""
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:carol", "ALL", "LITERAL:*", "ALLOW"))
    srv = start_secured(tls=pki.tls(), acl_file=acls)
    carol = stub(srv, pki.client("carol-v1"))
    if front_end == "grpcio":
        assert join(carol).error_code == 0
    else:
        with caplog.at_level(logging.INFO, logger="groupcoord.native"):
            assert rpc_error(lambda: join(carol)) is grpc.StatusCode.UNAVAILABLE
            deadline = time.monotonic() + 5
            while not any("UnsupportedCertVersion" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline, caplog.text
                time.sleep(0.05)
        assert "TLS handshake from ipv4:127.0.0.1:" in caplog.text


def test_certificate_principal_without_acl_gets_group_authorization_failed(
        pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "READ", "PREFIXED:orders-", "ALLOW"))
    srv = start_secured(tls=pki.tls(), acl_file=acls)
    assert join(stub(srv, pki.client("bob"))).error_code == GROUP_AUTHORIZATION_FAILED
    alice = stub(srv, pki.client("alice"))
    assert join(alice, "billing").error_code == GROUP_AUTHORIZATION_FAILED  # outside her prefix
    served = join(alice)
    assert served.error_code == 0 and served.member_id and served.member_epoch > 0
    # READ implies DESCRIBE (Kafka): she may describe and fetch; DELETE and ALTER_CONFIGS were never granted
    described = alice.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["orders-app", "billing"]), timeout=10)
    assert [g.error_code for g in described.groups] == [0, GROUP_AUTHORIZATION_FAILED]
    assert alice.OffsetFetch(pb.OffsetFetchRequest(group_id="orders-app"), timeout=10).error_code == 0
    deleted = alice.DeleteGroups(pb.DeleteGroupsRequest(group_ids=["orders-app"]), timeout=10)
    assert deleted.results[0].error_code == GROUP_AUTHORIZATION_FAILED
    offsets_deleted = alice.OffsetDelete(pb.OffsetDeleteRequest(group_id="orders-app", topics=[
        pb.OffsetDeleteRequestTopic(name="orders", partition_indexes=[0])]), timeout=10)
    assert offsets_deleted.error_code == GROUP_AUTHORIZATION_FAILED
    altered = alice.AlterGroupConfigs(pb.AlterGroupConfigsRequest(
        group_id="orders-app", configs=[pb.AlterableConfig(name="consumer.session.timeout.ms", value="3000")]),
        timeout=10)
    assert altered.error_code == GROUP_AUTHORIZATION_FAILED


def test_list_groups_shows_only_describable_groups_and_hosts_only_to_explicit_describe(
        pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "READ", "LITERAL:a-group", "ALLOW"),
               ("User:alice", "READ", "LITERAL:b-group", "ALLOW"),
               ("User:bob", "DESCRIBE", "LITERAL:a-group", "ALLOW"))
    srv = start_secured(tls=pki.tls(), acl_file=acls)
    alice, bob = stub(srv, pki.client("alice")), stub(srv, pki.client("bob"))
    assert join(alice, "a-group").error_code == 0 and join(alice, "b-group").error_code == 0
    listed = bob.ListGroups(pb.ListGroupsRequest(), timeout=10)
    assert [g.group_id for g in listed.groups] == ["a-group"]
    as_bob = bob.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["a-group"]), timeout=10).groups[0]
    as_alice = alice.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["a-group"]), timeout=10).groups[0]
    assert as_bob.members[0].client_host  # DESCRIBE granted by name: hosts shown
    assert as_alice.members[0].member_id and not as_alice.members[0].client_host  # READ only: hosts hidden


def test_deny_wins_over_allow(pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:*", "ALL", "LITERAL:*", "ALLOW"), ("User:bob", "READ", "PREFIXED:secret", "DENY"))
    srv = start_secured(tls=pki.tls(), acl_file=acls)
    assert join(stub(srv, pki.client("bob")), "secret-app").error_code == GROUP_AUTHORIZATION_FAILED
    assert join(stub(srv, pki.client("alice")), "secret-app").error_code == 0


def test_acl_file_is_reloaded_and_a_bad_file_keeps_the_previous_acls(
        pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "READ", "LITERAL:orders-app", "ALLOW"))
    srv = start_secured(tls=pki.tls(), acl_file=acls)
    bob = stub(srv, pki.client("bob"))
    assert join(bob).error_code == GROUP_AUTHORIZATION_FAILED
    write_acls(acls, ("User:alice", "READ", "LITERAL:orders-app", "ALLOW"),
               ("User:bob", "READ", "LITERAL:orders-app", "ALLOW"))
    deadline = time.monotonic() + 20
    while join(bob).error_code != 0:
        assert time.monotonic() < deadline, "the ACL file change was not picked up"
        time.sleep(0.1)
    acls.write_text("[[acl]]\nprincipal = 'User:bob'\noperation = 'FLY'\n")  # invalid: kept out
    watcher = srv.server.acl_watcher
    assert watcher is not None
    deadline = time.monotonic() + 20
    while watcher._stamp != watcher._stat():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(0.3)
    assert join(bob).error_code == 0
    assert len(srv.server.authorizer.acls) == 2  # type: ignore[union-attr]


def test_token_mode_refuses_missing_and_wrong_tokens_and_serves_the_right_one(
        start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "READ", "LITERAL:orders-app", "ALLOW"))
    srv = start_secured(tokens={TOKEN_ALICE: "User:alice", TOKEN_BOB: "User:bob"}, acl_file=acls)
    assert rpc_error(lambda: join(stub(srv, Credentials()))) is grpc.StatusCode.UNAUTHENTICATED
    wrong = Credentials(token="alice-token-0123456789abcdeX")
    assert rpc_error(lambda: join(stub(srv, wrong))) is grpc.StatusCode.UNAUTHENTICATED
    assert join(stub(srv, Credentials(token=TOKEN_BOB))).error_code == GROUP_AUTHORIZATION_FAILED
    assert join(stub(srv, Credentials(token=TOKEN_ALICE))).error_code == 0


def test_tokens_over_tls_without_client_certificates(pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "READ", "LITERAL:orders-app", "ALLOW"))
    srv = start_secured(tls=pki.tls(require_client_certs=False), tokens={TOKEN_ALICE: "User:alice"}, acl_file=acls)
    creds = Credentials.from_files(pki.path("ca.pem"), token=TOKEN_ALICE)
    assert join(stub(srv, creds)).error_code == 0
    no_token = Credentials.from_files(pki.path("ca.pem"), token_from_env=False)
    assert rpc_error(lambda: join(stub(srv, no_token))) is grpc.StatusCode.UNAUTHENTICATED
    wrong = Credentials.from_files(pki.path("ca.pem"), token="alice-token-0123456789abcdeX")
    assert rpc_error(lambda: join(stub(srv, wrong))) is grpc.StatusCode.UNAUTHENTICATED
    plaintext = Credentials(token=TOKEN_ALICE)  # a TLS port answers no plaintext client, token or not
    assert rpc_error(lambda: join(stub(srv, plaintext))) is grpc.StatusCode.UNAVAILABLE


def test_health_is_reachable_without_credentials(pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls)
    token_srv = start_secured(tokens={TOKEN_ALICE: "User:alice"}, acl_file=acls)
    with grpc.insecure_channel(token_srv.address) as channel:
        status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status
        assert status == health_pb2.HealthCheckResponse.SERVING
    mtls_srv = start_secured(tls=pki.tls(), acl_file=acls, health_port=0)
    assert mtls_srv.server.health_port
    with grpc.insecure_channel(f"127.0.0.1:{mtls_srv.server.health_port}") as channel:
        status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status
        assert status == health_pb2.HealthCheckResponse.SERVING
        refused = rpc_error(lambda: join(pb_stub(channel)))
        assert refused is grpc.StatusCode.UNIMPLEMENTED  # the health port serves health only


def pb_stub(channel: grpc.Channel) -> object:
    from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

    return pb_grpc.GroupCoordinatorStub(channel)


def test_heartbeat_stream_carries_the_token_and_is_authorized_per_message(
        start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "READ", "LITERAL:orders-app", "ALLOW"))
    srv = start_secured(tokens={TOKEN_ALICE: "User:alice"}, acl_file=acls)
    s = stub(srv, Credentials(token=TOKEN_ALICE))
    requests = [pb.ConsumerGroupHeartbeatRequest(
        group_id=group, member_epoch=0, rebalance_timeout_ms=5000,
        subscribed_topic_names=pb.StringList(values=["orders"]), topic_partitions=pb.TopicPartitionsList())
        for group in ("orders-app", "other-app")]
    answers = list(s.ConsumerGroupHeartbeatStream(iter(requests), timeout=10))
    assert [a.error_code for a in answers] == [0, GROUP_AUTHORIZATION_FAILED]
    anonymous = stub(srv, Credentials())
    assert rpc_error(lambda: list(anonymous.ConsumerGroupHeartbeatStream(iter(requests), timeout=10))) \
        is grpc.StatusCode.UNAUTHENTICATED


def test_heartbeat_batch_stream_is_authorized_per_heartbeat(start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "READ", "LITERAL:orders-app", "ALLOW"))
    srv = start_secured(tokens={TOKEN_ALICE: "User:alice"}, acl_file=acls)
    s = stub(srv, Credentials(token=TOKEN_ALICE))
    batch = pb.ConsumerGroupHeartbeatBatchRequest(heartbeats=[pb.ConsumerGroupHeartbeatRequest(
        group_id=group, member_epoch=0, rebalance_timeout_ms=5000,
        subscribed_topic_names=pb.StringList(values=["orders"]), topic_partitions=pb.TopicPartitionsList())
        for group in ("other-app", "orders-app", "other-app")])
    [answer] = list(s.ConsumerGroupHeartbeatBatchStream(iter([batch]), timeout=10))
    assert [a.error_code for a in answer.responses] == [GROUP_AUTHORIZATION_FAILED, 0, GROUP_AUTHORIZATION_FAILED]
    anonymous = stub(srv, Credentials())
    assert rpc_error(lambda: list(anonymous.ConsumerGroupHeartbeatBatchStream(iter([batch]), timeout=10))) \
        is grpc.StatusCode.UNAUTHENTICATED
