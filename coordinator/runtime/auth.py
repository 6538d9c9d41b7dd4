"""Who is calling: TLS server credentials, the certificate principal, and bearer tokens.

A client certificate (mTLS, `--tls-client-ca`) names its principal as `User:` + the subject's CN, as Kafka's
default principal builder does for SSL. Deployments without client certificates use tokens
(`--auth-tokens FILE`, a TOML file)::

    [tokens]
    "3f1c...long random string..." = "User:alice"

sent as gRPC metadata `authorization: Bearer <token>`. Tokens are looked up by their SHA-256 digest and the
digest compared with `hmac.compare_digest`, so the time a lookup takes does not depend on how much of a
guess was right. A valid token names the principal even on an mTLS connection; a wrong one is refused
(UNAUTHENTICATED) rather than falling back to the certificate.
"""

from __future__ import annotations

import hashlib
import hmac
import ssl
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

TOKEN_METADATA_KEY = "authorization"
_BEARER = "bearer "


class AuthConfigError(ValueError):
    """A TLS or token file that cannot be used; the message names the file."""


@dataclass(frozen=True, slots=True)
class TlsOptions:
    cert_chain: bytes
    private_key: bytes
    client_ca: bytes | None = None  # set: client certificates are required and verified against it

    @classmethod
    def from_files(cls, cert: Path, key: Path, client_ca: Path | None = None) -> TlsOptions:
        """Read and check the files: grpcio takes unusable PEM without a word and then fails to listen, which
        `serve` could only report as a port it cannot bind; here each flag gets its own line instead."""
        options = cls(_read(cert, "--tls-cert"), _read(key, "--tls-key"),
                      _read(client_ca, "--tls-client-ca") if client_ca is not None else None)
        if b"-----BEGIN CERTIFICATE-----" not in options.cert_chain:
            raise AuthConfigError("--tls-cert: no PEM certificate in it")
        if b"PRIVATE KEY-----" not in options.private_key:
            raise AuthConfigError("--tls-key: no PEM private key in it")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:  # an empty password: an encrypted key is refused rather than prompted for
            context.load_cert_chain(cert, key, password="")
        except ssl.SSLError as e:
            raise AuthConfigError(f"--tls-cert and --tls-key do not make a usable pair ({e.reason or e})") from None
        if options.client_ca is not None:
            try:
                context.load_verify_locations(cadata=options.client_ca.decode("ascii", errors="replace"))
            except (ssl.SSLError, ValueError) as e:
                reason = getattr(e, "reason", None) or "no PEM certificate in it"
                raise AuthConfigError(f"--tls-client-ca: not a usable PEM CA certificate ({reason})") from None
        return options

    def server_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials([(self.private_key, self.cert_chain)], root_certificates=self.client_ca,
                                           require_client_auth=self.client_ca is not None)


def _read(path: Path, flag: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise AuthConfigError(f"{flag}: cannot read {path}: {e.strerror}") from None


class TokenStore:
    """token -> principal, kept as SHA-256 digests (the tokens themselves are not held in memory)."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self._by_digest = {hashlib.sha256(t.encode()).digest(): p for t, p in tokens.items()}

    def __len__(self) -> int:
        return len(self._by_digest)

    @classmethod
    def load(cls, path: Path) -> TokenStore:
        try:
            data = tomllib.loads(path.read_text())
        except OSError as e:
            raise AuthConfigError(f"--auth-tokens: cannot read {path}: {e.strerror}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise AuthConfigError(f"--auth-tokens: {path} is not valid TOML: {e}") from None
        tokens = data.get("tokens")
        if not isinstance(tokens, dict) or not tokens:
            raise AuthConfigError(f"--auth-tokens: {path} needs a [tokens] table of \"TOKEN\" = \"User:NAME\"")
        for token, principal in tokens.items():
            if not isinstance(principal, str) or not principal.startswith("User:") or len(principal) <= 5:
                raise AuthConfigError(f"--auth-tokens: {path}: every principal must look like User:NAME")
            if len(token) < 16:
                raise AuthConfigError(f"--auth-tokens: {path}: a token of {len(token)} characters is too short to "
                                      "resist guessing (at least 16; use e.g. `openssl rand -hex 32`)")
        return cls(tokens)

    def principal(self, token: str) -> str | None:
        digest = hashlib.sha256(token.encode()).digest()
        for known, principal in self._by_digest.items():  # every entry compared: no early exit to time
            if hmac.compare_digest(known, digest):
                return principal
        return None


class Unauthenticated(Exception):
    """The caller presented no usable credentials; answered with gRPC UNAUTHENTICATED."""


def authenticate(context: Any, tokens: TokenStore | None) -> str:
    """The caller's principal: a bearer token's, else the client certificate's `User:<CN>`."""
    if tokens is not None:
        for key, value in context.invocation_metadata() or ():
            if key == TOKEN_METADATA_KEY:
                if not isinstance(value, str) or not value.lower().startswith(_BEARER):
                    raise Unauthenticated("the authorization metadata must be `Bearer <token>`")
                principal = tokens.principal(value[len(_BEARER):].strip())
                if principal is None:
                    raise Unauthenticated("unknown token")
                return principal
    names = context.auth_context().get("x509_common_name") if context.auth_context() else None
    if names:
        return "User:" + names[0].decode(errors="replace")
    raise Unauthenticated("no credentials: send a client certificate or `authorization: Bearer <token>`")
