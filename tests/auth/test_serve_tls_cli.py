"""`groupcoord serve` with mTLS and ACLs as an operator runs it, and the admin CLI with its credentials."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.auth.conftest import Pki, write_acls
from tests.integration.test_serve_cli import free_port, run_cli


def test_serve_with_mtls_acls_and_health_port_then_cli_with_and_without_certificates(
        pki: Pki, tmp_path: Path, front_end: str) -> None:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "DESCRIBE", "LITERAL:*", "ALLOW"))
    port, health_port = free_port(), free_port()
    proc = subprocess.Popen([sys.executable, "-m", "groupcoord", "serve", "--listen", f"127.0.0.1:{port}",
                             "--topic", "orders:4", "--tls-cert", str(pki.path("server.pem")),
                             "--tls-key", str(pki.path("server.key")), "--tls-client-ca", str(pki.path("ca.pem")),
                             "--acl-file", str(acls), "--health-port", str(health_port), "--front-end", front_end],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{health_port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            deadline = time.monotonic() + 20
            while health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status \
                    != health_pb2.HealthCheckResponse.SERVING:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        server = ["--server", f"localhost:{port}"]
        as_alice = ["--tls-ca", str(pki.path("ca.pem")), "--tls-cert", str(pki.path("alice.pem")),
                    "--tls-key", str(pki.path("alice.key"))]
        listed = run_cli("groups", "list", *server, *as_alice)
        assert listed.returncode == 0, listed.stderr
        no_cert = run_cli("groups", "list", *server, "--tls-ca", str(pki.path("ca.pem")))
        assert no_cert.returncode == 1 and "cannot reach" in no_cert.stderr
        as_bob = ["--tls-ca", str(pki.path("ca.pem")), "--tls-cert", str(pki.path("bob.pem")),
                  "--tls-key", str(pki.path("bob.key"))]
        described = run_cli("groups", "describe", "some-group", *server, *as_bob)
        assert described.returncode == 1 and "error 30: Not authorized to DESCRIBE" in described.stdout
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_serve_refuses_auth_without_acls_and_warns_about_tokens_over_plaintext(tmp_path: Path, front_end: str) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[tokens]\n"0123456789abcdef0123" = "User:alice"\n')
    no_acls = run_cli("serve", "--listen", f"127.0.0.1:{free_port()}", "--auth-tokens", str(tokens))
    assert no_acls.returncode == 2 and "--acl-file" in no_acls.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[[acl]]\nprincipal = 'User:a'\noperation = 'FLY'\nresource_name = 'g'\n")
    bad_acls = run_cli("serve", "--listen", f"127.0.0.1:{free_port()}", "--auth-tokens", str(tokens),
                       "--acl-file", str(bad))
    assert bad_acls.returncode == 2 and "FLY" in bad_acls.stderr
    acls = tmp_path / "acls.toml"
    write_acls(acls)
    proc = subprocess.Popen([sys.executable, "-m", "groupcoord", "serve", "--listen", f"127.0.0.1:{free_port()}",
                             "--auth-tokens", str(tokens), "--acl-file", str(acls), "--front-end", front_end],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "serving on" in line:
                break
        assert any("tokens over plaintext" in line for line in lines), lines
        served_by = "the native front end" if front_end == "native" else "grpcio"
        assert any(f"gRPC served by {served_by}" in line for line in lines), lines
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize(("files", "line"), [
    ({"--tls-cert": "junk"}, "groupcoord: --tls-cert: no PEM certificate in it"),
    ({"--tls-key": "junk"}, "groupcoord: --tls-key: no PEM private key in it"),
    ({"--tls-key": "alice.key"}, "groupcoord: --tls-cert and --tls-key do not make a usable pair"),
    ({"--tls-client-ca": "junk"}, "groupcoord: --tls-client-ca: not a usable PEM CA certificate"),
])
def test_an_unusable_tls_file_is_refused_at_start_in_one_line_naming_its_flag(
        pki: Pki, tmp_path: Path, front_end: str, files: dict[str, str], line: str) -> None:
    """grpcio takes unusable PEM silently and then fails to listen ("cannot listen ...: the address is in use"):
    each file is checked first, on both front ends."""
    (tmp_path / "junk").write_text("not PEM\n")
    chosen = {"--tls-cert": "server.pem", "--tls-key": "server.key", **files}
    args = [arg for flag, name in chosen.items()
            for arg in (flag, str(tmp_path / name if name == "junk" else pki.path(name)))]
    if "--tls-client-ca" in chosen:  # client certificates say who calls; an ACL file must say what they may do
        write_acls(tmp_path / "acls.toml")
        args += ["--acl-file", str(tmp_path / "acls.toml")]
    result = run_cli("serve", "--listen", f"127.0.0.1:{free_port()}", "--front-end", front_end, *args)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    (said,) = [out for out in result.stderr.splitlines() if out.startswith("groupcoord:")]
    assert said.startswith(line), said
