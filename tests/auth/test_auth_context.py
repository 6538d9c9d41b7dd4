"""What a handler reads of its caller's TLS session is the same on both front ends: the native front end's
`context.auth_context()` is grpcio's (the keys it gives, with grpcio's values) on plaintext, on TLS and on mTLS,
so `authenticate` (auth.py) finds the client certificate's CN where grpcio puts it."""

from __future__ import annotations

import ast
from typing import Any

import grpc
import pytest

from groupcoord.coordinator.runtime.server import ServerThread
from tests.auth.conftest import FRONT_ENDS, Pki, StartServer

PROBE = "/authcontext.Probe/AuthContext"


def _probe(runtime: Any, server: Any) -> None:
    """An extra RPC answering with the caller's auth context and peer identity (repr of Python values)."""
    async def auth_context(request: bytes, context: Any) -> bytes:
        return repr((context.auth_context(), context.peer_identities(), context.peer_identity_key())).encode()

    handler = grpc.unary_unary_rpc_method_handler(auth_context)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("authcontext.Probe",
                                                                          {"AuthContext": handler}),))


def _ask(srv: ServerThread, pki: Pki, mode: str) -> tuple[dict[str, list[Any]], Any, Any]:
    if mode == "plaintext":
        channel = grpc.insecure_channel(srv.address)
    else:
        cert = ((pki.path("alice.key").read_bytes(), pki.path("alice.pem").read_bytes()) if mode == "mtls"
                else (None, None))
        channel = grpc.secure_channel(f"localhost:{srv.server.port}", grpc.ssl_channel_credentials(
            pki.path("ca.pem").read_bytes(), *cert))
    with channel:
        answer = channel.unary_unary(PROBE)(b"", timeout=10)
    return ast.literal_eval(answer.decode())  # type: ignore[no-any-return]


@pytest.mark.parametrize("front_end", ["both"])  # one run starts a server on each
@pytest.mark.parametrize("mode", ["plaintext", "tls", "mtls"])
def test_native_auth_context_is_grpcios(pki: Pki, start_secured: StartServer, mode: str) -> None:
    tls = None if mode == "plaintext" else pki.tls(require_client_certs=mode == "mtls")
    seen = {}
    for name in FRONT_ENDS:
        srv = start_secured(tls=tls, extensions=[_probe], front_end=name)
        seen[name] = _ask(srv, pki, mode)
    (grpcio_context, *grpcio_identity), (native_context, *native_identity) = seen["grpcio"], seen["native"]
    assert native_context == {key: grpcio_context[key] for key in native_context}
    assert native_identity == grpcio_identity
    assert {"transport_security_type", "security_level"} <= native_context.keys()
    if mode == "mtls":
        assert native_context["x509_common_name"] == [b"alice"]
        assert native_identity == [[b"alice"], "x509_common_name"]
    else:
        assert "x509_common_name" not in grpcio_context and native_identity == [None, None]
