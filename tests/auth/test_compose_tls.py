"""The compose file's TLS profile: its command parses with the CLI, its ACL file loads, its probe needs no cert."""

from __future__ import annotations

from pathlib import Path

from groupcoord.cli import build_parser
from groupcoord.coordinator.runtime.acl import Authorizer, load_acls
from tests.deploy.files import REPO, argv, bind_mounts, host_port, service


def test_compose_tls_coordinator_serves_mtls_with_acls_and_a_plaintext_health_port() -> None:
    svc = service("groupcoord-tls")
    command = argv(svc["command"])
    args = build_parser().parse_args(command)
    assert args.cmd == "serve" and args.tls_cert and args.tls_key and args.tls_client_ca and args.acl_file
    mounts = {target: source for source, target in bind_mounts(svc)}
    source = mounts["/etc/groupcoord/tls"]
    assert source == REPO / "deploy" / "tls" and (source / "make-certs.sh").exists()
    acls = load_acls(Path(str(args.acl_file).replace("/etc/groupcoord/tls", str(source))))
    assert Authorizer(acls).allowed("User:alice", "READ", "demo")
    probe = argv(svc["healthcheck"]["test"])
    assert probe[1:4] == ["python", "-m", "groupcoord.healthcheck"]
    assert host_port(probe[probe.index("--address") + 1])[1] == args.health_port
    assert host_port(args.listen)[0] == "0.0.0.0"
