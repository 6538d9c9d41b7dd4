"""The web view: a static page, its JSON API and /metrics, served on the runtime's own event loop.

Why a small HTTP server of our own: it runs on the asyncio loop that feeds the shard, so each JSON answer is
built between two operations without a lock or a thread hop (the shard is not thread-safe), and it adds no
dependency. It speaks just enough HTTP/1.1: GET only, one request per connection, a bounded request head,
a read deadline. Live updates are long polls: `?wait=V` holds the answer until the runtime's change version
moves past V (an operation wrote records) or `LONG_POLL_S` passes, whichever is first.

Protection (README "Security"): it binds loopback unless told otherwise, and refuses Host headers that are not
loopback names while bound there (a DNS-rebinding page cannot read it). With authorization on, the API needs
`Authorization: Bearer <token>` from the `--auth-tokens` file and shows only the groups the token's principal
may DESCRIBE (configs: DESCRIBE_CONFIGS; member hosts: an explicit DESCRIBE, as DescribeGroups). With TLS on it
serves HTTPS with the same certificate. The page and /metrics (counts only, no group or member ids) are open.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import ssl
import tempfile
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from groupcoord.coordinator.runtime.acl import Authorizer
from groupcoord.coordinator.runtime.auth import TlsOptions, TokenStore
from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime
from groupcoord.coordinator.runtime.timeline import ChangeFeed, RebalanceTimeline
from groupcoord.coordinator.runtime.web_api import DETAIL_ROWS, group_detail, groups_page

log = logging.getLogger("groupcoord.web")

LONG_POLL_S = 10.0
HEAD_MAX_BYTES = 16 * 1024
READ_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 256  # open at once (long polls hold theirs); past it a request is answered 503 at once
_STATIC_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
_SECURITY_HEADERS = (
    ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
)
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
            421: "Misdirected Request", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
            503: "Service Unavailable"}


def _static_files() -> dict[str, tuple[bytes, str]]:
    """The page's files, shipped as package data (no build step): URL path -> (bytes, content type)."""
    root = resources.files(__package__ or "groupcoord.coordinator.runtime").joinpath("web_static")
    out: dict[str, tuple[bytes, str]] = {}
    for entry in root.iterdir():
        ctype = _STATIC_TYPES.get(Path(entry.name).suffix)
        if ctype is not None:
            out["/static/" + entry.name] = (entry.read_bytes(), ctype)
    out["/"] = out["/static/index.html"]
    return out


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _ssl_context(tls: TlsOptions) -> ssl.SSLContext:
    """The gRPC listener's certificate, for HTTPS. `ssl` loads only from files: the PEM bytes go to a private
    temporary directory for the call and are removed at once."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory(prefix="groupcoord-web-") as d:
        cert, key = Path(d, "cert.pem"), Path(d, "key.pem")
        for path, data in ((cert, tls.cert_chain), (key, tls.private_key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        context.load_cert_chain(cert, key)
    return context


class _Reply(Exception):
    """Ends a request early with a status and a JSON error body."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


class WebView:
    def __init__(self, runtime: CoordinatorRuntime, registry: CollectorRegistry | None, host: str = "127.0.0.1",
                 port: int = 0, *, tokens: TokenStore | None = None, authorizer: Authorizer | None = None,
                 tls: TlsOptions | None = None) -> None:
        if authorizer is not None and tokens is None:
            raise ValueError("the web view authenticates with bearer tokens: with an ACL file, --http-port needs "
                             "--auth-tokens")
        self.runtime = runtime
        self.registry = registry
        self.host = host
        self.port = port
        self.tokens = tokens
        self.authorizer = authorizer
        self.tls = tls
        self.timeline = RebalanceTimeline(runtime.shard)
        self.feed = ChangeFeed()
        self._files = _static_files()
        self._server: asyncio.Server | None = None
        self._loopback_only = _is_loopback(host)
        self._handlers: set[asyncio.Task[Any]] = set()

    async def start(self) -> int:
        self.runtime.observers.append(self._observe)
        try:
            self._server = await asyncio.start_server(
                self._handle, self.host, self.port, limit=HEAD_MAX_BYTES,
                ssl=_ssl_context(self.tls) if self.tls is not None else None)
        except OSError as e:
            raise OSError(f"cannot serve the web view on {self.host}:{self.port}: {e.strerror}") from None
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        for task in list(self._handlers):  # long polls in flight end now rather than at their timeout
            task.cancel()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        with contextlib.suppress(ValueError):
            self.runtime.observers.remove(self._observe)

    def _observe(self, cause: str, records: list[Any], now: int) -> None:
        self.timeline.observe(cause, records, now)
        self.feed.bump()

    # --- HTTP ---------------------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            if len(self._handlers) > MAX_CONNECTIONS:
                await self._send(writer, 503, *_json({"error": "too many connections; retry"}))
                return
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except (asyncio.LimitOverrunError, ValueError):
                await self._send(writer, 431, *_json({"error": "request head too large"}))
                return
            except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
                return
            try:
                status, body, ctype, extra = await self._route(head)
            except _Reply as r:
                status, (body, ctype), extra = r.status, _json({"error": str(r)}), r.headers
            except Exception as e:  # a bug: this request gets a 500, the server goes on
                log.exception("web view request failed")
                status, (body, ctype), extra = 500, _json({"error": f"internal error: {type(e).__name__}"}), ()
            await self._send(writer, status, body, ctype, extra)
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _send(self, writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str,
                    extra: tuple[tuple[str, str], ...] = ()) -> None:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", f"Content-Type: {ctype}",
                 f"Content-Length: {len(body)}", "Connection: close", "Cache-Control: no-store"]
        lines += [f"{k}: {v}" for k, v in _SECURITY_HEADERS + extra]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()

    async def _route(self, head: bytes) -> tuple[int, bytes, str, tuple[tuple[str, str], ...]]:
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        parts = request_line.split(" ")
        if len(parts) != 3:
            raise _Reply(400, "malformed request line")
        method, target, _version = parts
        headers: dict[str, str] = {}
        for line in header_lines:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        if method != "GET":
            raise _Reply(405, "only GET", (("Allow", "GET"),))
        if self._loopback_only and not _is_loopback(_host_name(headers.get("host", ""))):
            raise _Reply(421, "bound to loopback: use a loopback address or localhost")
        url = urlsplit(target)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        static = self._files.get(url.path)
        if static is not None:
            return 200, static[0], static[1], ()
        if url.path == "/metrics":
            if self.registry is None:
                raise _Reply(404, "no metrics")
            return 200, generate_latest(self.registry), CONTENT_TYPE_LATEST, ()
        if not url.path.startswith("/api/"):
            raise _Reply(404, "not found")
        principal = self._authenticate(headers.get("authorization"))
        if not self.runtime.loaded:
            raise _Reply(503, "the coordinator is loading its state; retry")
        if "wait" in query:
            await self.feed.wait_past(_int(query, "wait", -1), LONG_POLL_S)
        started = time.perf_counter()
        if url.path == "/api/groups":
            data = groups_page(self.runtime.shard, offset=_int(query, "offset", 0), limit=_int(query, "limit", 50),
                               query=query.get("q", "")[:256], state=query.get("state", "")[:64],
                               group_type=query.get("type", "")[:64], visible=self._visible(principal))
        elif url.path == "/api/group":
            gid = query.get("id", "")
            visible = self._visible(principal)
            detail = None if visible is not None and not visible(gid) else group_detail(
                self.runtime.shard, self.timeline, gid, self._may(principal, "DESCRIBE_CONFIGS", gid),
                _int(query, "rows", DETAIL_ROWS))
            if detail is None:
                raise _Reply(404, "no such group (or not visible to you)")
            if not self._may(principal, "DESCRIBE", gid, implied=False):
                for m in detail["member_list"]:
                    m["client_host"] = ""
            data = detail
        else:
            raise _Reply(404, "not found")
        data["version"] = self.feed.version
        data["built_ms"] = round((time.perf_counter() - started) * 1000, 2)
        body, ctype = _json(data)
        return 200, body, ctype, ()

    def _authenticate(self, authorization: str | None) -> str | None:
        if self.tokens is None:
            return None
        challenge = (("WWW-Authenticate", "Bearer"),)
        if not authorization or not authorization.lower().startswith("bearer "):
            raise _Reply(401, "send Authorization: Bearer <token> (a token of --auth-tokens)", challenge)
        principal = self.tokens.principal(authorization[7:].strip())
        if principal is None:
            raise _Reply(401, "unknown token", challenge)
        return principal

    def _visible(self, principal: str | None) -> Callable[[str], bool] | None:
        authorizer = self.authorizer
        if authorizer is None or principal is None:
            return None
        return lambda gid: authorizer.allowed(principal, "DESCRIBE", gid)

    def _may(self, principal: str | None, operation: str, gid: str, implied: bool = True) -> bool:
        if self.authorizer is None or principal is None:
            return True
        return self.authorizer.allowed(principal, operation, gid, implied)


def _host_name(host: str) -> str:
    """The name of a Host header value (`name:port`, `[v6]:port`)."""
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _int(query: dict[str, str], name: str, default: int) -> int:
    try:
        return int(query.get(name, default))
    except ValueError:
        raise _Reply(400, f"{name} must be an integer") from None


def _json(data: Any) -> tuple[bytes, str]:
    return json.dumps(data, separators=(",", ":")).encode(), "application/json"
