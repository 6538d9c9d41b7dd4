"""How a client reaches a coordinator that serves TLS and asks who is calling.

One value, `Credentials`, carries the TLS trust root (`tls_ca`), an optional client certificate and key
(mTLS: the coordinator's principal is `User:` + the certificate's CN) and an optional bearer token (sent as
gRPC metadata `authorization: Bearer <token>` on every call). Every client builds its channels with
`channel()`, so they all take the same options. The token may come from the environment
variable `GROUPCOORD_TOKEN`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

TOKEN_ENV = "GROUPCOORD_TOKEN"
ChannelOptions = Sequence[tuple[str, Any]]


@dataclass(frozen=True, slots=True)
class Credentials:
    tls: bool = False
    tls_ca: bytes | None = None  # None with tls=True: the system's trust roots
    tls_cert: bytes | None = None
    tls_key: bytes | None = None
    token: str | None = None

    @classmethod
    def from_files(cls, tls_ca: str | Path | None = None, tls_cert: str | Path | None = None,
                   tls_key: str | Path | None = None, token: str | None = None,
                   token_from_env: bool = True) -> Credentials:
        """TLS is on when any TLS file is given; a token falls back to $GROUPCOORD_TOKEN."""
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("a client certificate needs its key: give both --tls-cert and --tls-key")
        if token is None and token_from_env:
            token = os.environ.get(TOKEN_ENV) or None

        def read(path: str | Path | None) -> bytes | None:
            return Path(path).read_bytes() if path is not None else None

        return cls(tls=any(p is not None for p in (tls_ca, tls_cert)), tls_ca=read(tls_ca),
                   tls_cert=read(tls_cert), tls_key=read(tls_key), token=token)

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()

    def _ssl(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.tls_ca, private_key=self.tls_key,
                                            certificate_chain=self.tls_cert)

    def channel(self, target: str, options: ChannelOptions = ()) -> grpc.Channel:
        channel = (grpc.secure_channel(target, self._ssl(), options=list(options)) if self.tls
                   else grpc.insecure_channel(target, options=list(options)))
        if self.token:
            return grpc.intercept_channel(channel, _Metadata(self.metadata()))
        return channel


NO_CREDENTIALS = Credentials()


class _CallDetails:
    """grpc.ClientCallDetails with more metadata (the sync API's details are a namedtuple-like class)."""

    def __init__(self, details: Any, extra: tuple[tuple[str, str], ...]) -> None:
        self.method = details.method
        self.timeout = details.timeout
        self.metadata = tuple(details.metadata or ()) + extra
        self.credentials = details.credentials
        self.wait_for_ready = getattr(details, "wait_for_ready", None)
        self.compression = getattr(details, "compression", None)


class _Metadata(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    def __init__(self, extra: tuple[tuple[str, str], ...]) -> None:
        self.extra = extra

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(_CallDetails(details, self.extra), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(_CallDetails(details, self.extra), request)

    def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(_CallDetails(details, self.extra), requests)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(_CallDetails(details, self.extra), requests)
