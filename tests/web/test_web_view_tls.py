"""The web view with TLS on: HTTPS with the gRPC listener's certificate; with client certificates and ACLs but no
tokens, `serve` refuses --http-port (the web view authenticates with tokens only)."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.web.conftest import REPO, free_port, serve, stop

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def self_signed(d: Path) -> tuple[Path, Path]:
    cert, key = d / "server.pem", d / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


def test_with_tls_the_web_view_serves_https_with_the_grpc_certificate(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    served = serve("--topic", "orders:1", "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        assert served.http.startswith("https://")
        context = ssl.create_default_context(cafile=str(cert))
        with urllib.request.urlopen(served.http + "/api/groups", context=context, timeout=10) as r:
            assert json.loads(r.read())["total"] == 0
        plain = served.http.replace("https://", "http://")
        try:
            urllib.request.urlopen(plain + "/api/groups", timeout=10)
            raise AssertionError("plaintext HTTP must not be answered on the HTTPS port")
        except (OSError, ValueError):
            pass
    finally:
        stop(served)


def test_serve_refuses_the_web_view_with_acls_but_no_tokens(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    acls = tmp_path / "acls.toml"
    acls.write_text("")
    done = subprocess.run([sys.executable, "-m", "groupcoord", "serve", "--listen", f"127.0.0.1:{free_port()}",
                           "--http-port", str(free_port()), "--tls-cert", str(cert), "--tls-key", str(key),
                           "--tls-client-ca", str(cert), "--acl-file", str(acls)],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2
    assert "--http-port with --acl-file needs --auth-tokens" in done.stderr
