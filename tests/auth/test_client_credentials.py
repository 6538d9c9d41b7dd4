"""Every client reaches a secured coordinator with the same `Credentials`: GroupMember over mTLS,
ClassicGroupMember with a bearer token over TLS, LeaderElection over mTLS; without them, they get nowhere."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from groupcoord.clients.classic_member import ClassicGroupMember
from groupcoord.clients.credentials import Credentials
from groupcoord.clients.group_member import GroupMember
from groupcoord.clients.leader_election import LeaderElection
from tests.auth.conftest import Pki, StartServer, write_acls

CLASSIC_FAST = {"group.min.session.timeout.ms": 100, "group.initial.rebalance.delay.ms": 300}
TIMING: dict[str, Any] = {"session_timeout_ms": 1500, "heartbeat_interval_ms": 100, "rebalance_timeout_ms": 5000}
TOKEN = "carol-token-0123456789abcdef"


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_group_member_joins_over_mtls_and_commits(pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "READ", "LITERAL:app", "ALLOW"))
    srv = start_secured(tls=pki.tls(), acl_file=acls)
    target = f"localhost:{srv.server.port}"
    member = GroupMember(target, "app", ["orders"], credentials=pki.client("alice"), rpc_timeout_s=5).start()
    try:
        wait_until(lambda: len(member.assignment()) == 6, "alice's member to own the 6 partitions")
        assert set(member.commit_offsets({("orders", 0): 5}).values()) == {0}
    finally:
        member.close()
    errors: list[object] = []
    bob = GroupMember(target, "app", ["orders"], credentials=pki.client("bob"), rpc_timeout_s=5,
                      on_fatal_error=errors.append).start()
    try:
        wait_until(lambda: bool(errors), "bob's member to be refused")
        assert getattr(errors[0], "code", None) == 30 and not bob.assignment()
    finally:
        bob.close(leave=False)


def test_classic_member_uses_a_bearer_token_over_tls(pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:carol", "READ", "PREFIXED:classic-", "ALLOW"))
    srv = start_secured(tls=pki.tls(require_client_certs=False), tokens={TOKEN: "User:carol"}, acl_file=acls,
                        config=CLASSIC_FAST)
    creds = Credentials.from_files(pki.path("ca.pem"), token=TOKEN)
    member = ClassicGroupMember(f"localhost:{srv.server.port}", "classic-app", ["orders"],
                                partitions={"orders": 6}, credentials=creds, **TIMING).start()
    try:
        wait_until(lambda: len(member.assignment()) == 6, "the classic member to own the 6 partitions")
    finally:
        member.close()


def test_leader_election_is_elected_over_mtls(pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "READ", "LITERAL:writers", "ALLOW"))
    srv = start_secured(tls=pki.tls(), acl_file=acls, config=CLASSIC_FAST)
    elected: list[int] = []
    node = LeaderElection(f"localhost:{srv.server.port}", "writers", "node-1", on_elected=elected.append,
                          credentials=pki.client("alice"), **TIMING).start()
    try:
        wait_until(lambda: node.is_writer() and bool(elected), "node-1 to be elected")
    finally:
        node.close()


def test_credentials_take_the_token_from_the_environment(monkeypatch: pytest.MonkeyPatch, pki: Pki) -> None:
    monkeypatch.setenv("GROUPCOORD_TOKEN", TOKEN)
    assert Credentials.from_files().metadata() == (("authorization", f"Bearer {TOKEN}"),)
    assert Credentials.from_files(token_from_env=False).metadata() == ()
    assert Credentials.from_files(pki.path("ca.pem")).tls
