"""Real certificates, made per test session with the `openssl` command line, and a coordinator serving them."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from groupcoord.clients.credentials import Credentials
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.auth import TlsOptions, TokenStore
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.integration.conftest import FAST


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@dataclass(frozen=True)
class Pki:
    dir: Path

    def path(self, name: str) -> Path:
        return self.dir / name

    def client(self, cn: str) -> Credentials:
        return Credentials.from_files(self.path("ca.pem"), self.path(f"{cn}.pem"), self.path(f"{cn}.key"),
                                      token_from_env=False)

    def tls(self, require_client_certs: bool = True) -> TlsOptions:
        return TlsOptions.from_files(self.path("server.pem"), self.path("server.key"),
                                     self.path("ca.pem") if require_client_certs else None)


# X.509 v3 (`openssl x509 -req` without extensions makes v1, which rustls, the native front end's TLS, refuses)
CLIENT_EXT = "extendedKeyUsage=clientAuth\n"


def _issue(d: Path, name: str, subject: str, ext: str | None = None) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-subj", subject,
             "-out", f"{name}.csr", cwd=d)
    extra = ["-extfile", f"{name}.ext"] if ext else []
    if ext:
        (d / f"{name}.ext").write_text(ext)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-out", f"{name}.pem", *extra, cwd=d)


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=groupcoord-test-ca", cwd=d)
    _issue(d, "server", "/CN=localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for cn in ("alice", "bob"):
        _issue(d, cn, f"/O=test/CN={cn}", CLIENT_EXT)
    _issue(d, "carol-v1", "/CN=carol")  # X.509 v1: no extensions
    # a certificate from a CA the server does not trust
    other = d / "other"
    other.mkdir()
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=other-ca", cwd=other)
    _issue(other, "alice", "/CN=alice", CLIENT_EXT)
    return Pki(d)


def write_acls(path: Path, *entries: tuple[str, str, str, str]) -> None:
    """(principal, operation, pattern_type:resource_name, permission) per entry."""
    lines = []
    for principal, operation, resource, permission in entries:
        pattern, name = resource.split(":", 1)
        lines.append(f'[[acl]]\nprincipal = "{principal}"\noperation = "{operation}"\nresource_type = "GROUP"\n'
                     f'pattern_type = "{pattern}"\nresource_name = "{name}"\npermission = "{permission}"\n')
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines))
    tmp.replace(path)


StartServer = Callable[..., ServerThread]

FRONT_ENDS = ("grpcio", "native")


@pytest.fixture(params=FRONT_ENDS)
def front_end(request: pytest.FixtureRequest) -> str:
    """Every test of a secured server runs on both front ends: they must authenticate and authorize alike."""
    return str(request.param)


@pytest.fixture
def start_secured(tmp_path: Path, front_end: str) -> Iterator[StartServer]:
    started: list[ServerThread] = []

    def start(tls: TlsOptions | None = None, tokens: dict[str, str] | None = None,
              acl_file: Path | None = None, config: dict[str, Any] | None = None, **options: Any) -> ServerThread:
        options.setdefault("front_end", front_end)
        opts = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping({**FAST, **(config or {})}),
                             metadata_source=StaticMetadataSource({"orders": 6}), metadata_poll_s=0.2,
                             tls=tls, tokens=TokenStore(tokens) if tokens else None, acl_file=acl_file,
                             acl_reload_interval_s=0.1, **options)
        srv = ServerThread(opts).start()
        assert srv.server.front_end == options["front_end"]
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


def stub(srv: ServerThread, credentials: Credentials) -> Any:
    target = f"localhost:{srv.server.port}" if credentials.tls else srv.address
    return pb_grpc.GroupCoordinatorStub(credentials.channel(target))


def rpc_error(call: Callable[[], Any]) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code()  # type: ignore[attr-defined, no-any-return]
