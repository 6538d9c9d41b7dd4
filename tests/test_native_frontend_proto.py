"""The native front end's method table is compiled from proto/ by its build.rs (protox): the installed build
serves exactly the RPCs, with the streaming kinds, of the generated Python modules. A build older than proto/
fails here (and `serve --front-end native` refuses to start with it)."""

from __future__ import annotations

import groupcoord_frontend
import pytest

from groupcoord.coordinator.runtime.auth import TlsOptions
from groupcoord.coordinator.runtime.native_server import choose_front_end
from groupcoord.wire.v1 import coordinator_pb2, share_pb2, streams_pb2


def test_the_installed_front_end_serves_every_rpc_of_proto_with_its_streaming_kind() -> None:
    expected = {(f"/{service.full_name}/{m.name}", m.client_streaming, m.server_streaming)
                for module in (coordinator_pb2, share_pb2, streams_pb2)
                for service in module.DESCRIPTOR.services_by_name.values() for m in service.methods}
    assert set(groupcoord_frontend.PROTO_METHODS) == expected
    assert len(groupcoord_frontend.PROTO_METHODS) == len(expected)


def test_a_build_from_older_sources_is_not_served_and_auto_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build from before the auth context (six fields per drained event) would fail on every call: it is
    refused as a missing build is, and `auto` falls back to grpcio saying so."""
    monkeypatch.delattr(groupcoord_frontend, "EVENT_FIELDS")
    with pytest.raises(RuntimeError, match="built from older sources"):
        choose_front_end("native")
    chosen, why = choose_front_end("auto")
    assert chosen == "grpcio" and "built from older sources" in why


def test_auto_stays_on_grpcio_where_client_certificates_are_required() -> None:
    """rustls refuses X.509 v1 client certificates, which grpcio accepts: `auto` must not switch a deployment's
    mTLS clients to a front end that refuses them; asked for, native serves client certificates."""
    mtls = TlsOptions(b"chain", b"key", client_ca=b"ca")
    chosen, why = choose_front_end("auto", mtls)
    assert chosen == "grpcio" and "v1" in why
    assert choose_front_end("auto", TlsOptions(b"chain", b"key"))[0] == "native"
    assert choose_front_end("native", mtls)[0] == "native"
