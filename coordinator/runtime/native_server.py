"""The compiled gRPC front end (`groupcoord serve --front-end native`): tonic serves HTTP/2 and gRPC's framing
on a thread of its own (native/frontend, Rust, module `groupcoord_frontend`); the calls run here, through the
same request pipeline and servicers as on grpcio.

Theory of operation. `NativeServer` stands where `grpc.aio.server()` stands in `CoordinatorServer.start`: the
pipeline, health and reflection register their method handlers on it as on grpc.aio, and it serves exactly
those RPCs. tonic hands the calls over in batches: the first call of an empty queue writes an eventfd this
event loop watches; `_on_ready` takes every call waiting with one `drain()` and runs each through its
registered handler: the handler's own deserializer (the pipeline's, which turns bad bytes into
INVALID_ARGUMENT), the handler coroutine, its serializer. A handler that finishes without waiting (a steady
heartbeat) is run to the end right there, with no task; one that waits (an operation writing records) goes on
in a task. Every answer of a pass of the loop goes back to tonic in one `complete()`. grpc.aio's per-call cost
(a task, a completion queue round trip, metadata objects) is what this leaves out.

TLS (`add_tls_port`) is rustls in the front end, from the same PEM files as grpcio's credentials; with a client
CA, a client without a certificate that chains to it fails the handshake (UNAVAILABLE, as on grpcio). Each call
over TLS carries its connection's auth context in grpcio's shape, so `authenticate` (auth.py) reads the client
certificate's CN, bearer tokens and ACLs the same way on both front ends. Client-streaming RPCs are not served
(the API has none).
"""

from __future__ import annotations

import asyncio
import logging
import types
from collections import deque
from collections.abc import AsyncIterator, Callable, Generator, Sequence
from typing import Any

import grpc

from groupcoord.coordinator.runtime.auth import AuthConfigError, TlsOptions

log = logging.getLogger("groupcoord.native")

INSTALL_HINT = ("the native front end is not installed: `pip install ./native/frontend` (Rust's cargo builds it; "
                "`make demo` and `make test` do it)")


# The fields of a drained event; a build from older sources hands over fewer (before TLS: no auth context).
EVENT_FIELDS = 7


def load_frontend() -> Any:
    try:
        import groupcoord_frontend
    except ImportError:
        raise RuntimeError(INSTALL_HINT) from None
    if getattr(groupcoord_frontend, "EVENT_FIELDS", None) != EVENT_FIELDS:
        raise RuntimeError("the native front end was built from older sources: reinstall it "
                           "(`pip install ./native/frontend`)")
    return groupcoord_frontend


def choose_front_end(requested: str, tls: TlsOptions | None = None) -> tuple[str, str]:
    """Who serves gRPC, and why: `auto` (the default) is the native front end wherever it is built, grpcio on a
    machine without the build; `grpcio` and `native` are taken as asked. Both serve TLS, client certificates,
    bearer tokens and ACLs alike, with one difference: rustls refuses X.509 v1 client certificates (what
    `openssl x509 -req` makes without extensions, as our own make-certs.sh did), which grpcio accepts. So where
    client certificates are required, `auto` stays on grpcio: a deployment's clients keep working across an
    upgrade, and `--front-end native` is the choice of one whose certificates are v3."""
    if requested == "grpcio":
        return "grpcio", "asked for"
    if requested == "native":
        load_frontend()
        return "native", "asked for"
    if requested != "auto":
        raise ValueError(f"front end {requested!r}: auto, grpcio or native")
    if tls is not None and tls.client_ca is not None:  # client certificates are required
        return "grpcio", ("client certificates are required: grpcio also accepts X.509 v1 ones; "
                          "--front-end native serves v3 certificates")
    try:
        load_frontend()
    except RuntimeError as e:
        return "grpcio", str(e)
    return "native", "the default"


# grpcio's auth context of a plaintext call (a TLS call's comes from the front end, native/frontend/src/tls.rs)
_PLAINTEXT_AUTH = (("transport_security_type", b"insecure"), ("security_level", b"TSI_SECURITY_NONE"))


class NativeContext:
    """The part of grpc.aio's ServicerContext the pipeline and the health and reflection servicers use."""

    __slots__ = ("_peer", "_metadata", "_auth", "code", "details", "writes")

    def __init__(self, peer: str, metadata: tuple[tuple[str, Any], ...] | None,
                 auth: dict[str, list[bytes]] | None = None) -> None:
        self._peer = peer
        self._metadata = metadata
        self._auth = auth  # None: plaintext
        self.code: grpc.StatusCode | None = None
        self.details = ""
        self.writes: Callable[[Any], None] | None = None  # a server stream's `write`

    def peer(self) -> str:
        return self._peer

    def invocation_metadata(self) -> tuple[tuple[str, Any], ...]:
        return self._metadata or ()

    def auth_context(self) -> dict[str, list[bytes]]:
        """As grpcio's: over TLS `transport_security_type` ssl and, with a client certificate, its subject's
        `x509_common_name` (the principal, auth.py); on plaintext `insecure`. A new dict per call, as grpcio's."""
        if self._auth is None:
            return {key: [value] for key, value in _PLAINTEXT_AUTH}
        return {key: list(values) for key, values in self._auth.items()}

    def peer_identities(self) -> list[bytes] | None:
        return (self._auth or {}).get("x509_common_name")

    def peer_identity_key(self) -> str | None:
        return "x509_common_name" if self.peer_identities() else None

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Any = ()) -> None:
        self.code, self.details = code, details
        raise grpc.aio.AbortError()

    async def write(self, message: Any) -> None:
        assert self.writes is not None, "write() is for server streams"
        self.writes(message)


@types.coroutine
def _resume(coro: Any, yielded: Any) -> Generator[Any, Any, Any]:
    """Goes on with a coroutine already started outside a task: what it waits for is passed up to the task
    running this, what the task sends or throws is passed down (as `yield from` would)."""
    while True:
        try:
            sent = yield yielded
        except BaseException as e:
            try:
                yielded = coro.throw(e)
            except StopIteration as done:
                return done.value
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as done:
                return done.value


class _Inbox:
    """A bidirectional stream's requests, as the async iterator its handler reads."""

    __slots__ = ("items", "waiter", "closed")

    def __init__(self) -> None:
        self.items: deque[Any] = deque()
        self.waiter: asyncio.Future[None] | None = None
        self.closed = False

    def put(self, item: Any) -> None:
        self.items.append(item)
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __aiter__(self) -> _Inbox:
        return self

    async def __anext__(self) -> Any:
        while not self.items:
            if self.closed:
                raise StopAsyncIteration
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
            self.waiter = None
        return self.items.popleft()


# The events `drain()` hands over (native/frontend/src/calls.rs names them the same).
UNARY, STREAM_OPEN, STREAM_MESSAGE, STREAM_HALF_CLOSE, STREAM_CANCEL, TLS_REFUSED = range(6)
# An RPC's shape, in the table built at start.
UNARY_RPC, SERVER_STREAMING_RPC, BIDIRECTIONAL_RPC = range(3)
OK = 0
MESSAGE = -1  # a stream's message, not its end


def _code(code: grpc.StatusCode | None, default: grpc.StatusCode = grpc.StatusCode.UNKNOWN) -> int:
    return int((code or default).value[0])


Answer = tuple[int, bytes | None, int, str | None]  # (call, reply bytes, status code or MESSAGE, details)


def _unary_answer(call: int, encode: Callable[[Any], bytes], response: Any, context: NativeContext) -> Answer:
    """A unary call's reply, whether it finished at once (inline) or in a task."""
    try:
        return call, encode(response), OK, None
    except Exception as e:
        return _unary_failure(call, e, context, "encoding the response", f"cannot encode the response: {e}")


def _unary_failure(call: int, error: Exception, context: NativeContext, what: str,
                   details: str | None = None) -> Answer:
    """A unary call that raised: an abort answers its code and details (as grpc.aio does); anything else is a
    bug, logged, and answered UNKNOWN without the exception's text."""
    if isinstance(error, grpc.aio.AbortError):
        return call, None, _code(context.code), context.details
    log.error("%s failed", what, exc_info=error)
    return call, None, _code(None), details or f"Unexpected {type(error).__name__}"


class NativeServer:
    """The subset of `grpc.aio.Server` that `CoordinatorServer` drives, served by the compiled front end."""

    def __init__(self, max_receive_bytes: int, max_send_bytes: int, max_concurrent_calls: int = 0,
                 max_concurrent_streams: int = 0) -> None:
        """The transport's bounds, as on grpcio: socket.request.max.bytes, groupcoord.response.max.bytes,
        groupcoord.max.concurrent.requests (beyond it a call is refused with RESOURCE_EXHAUSTED; 0: none) and
        groupcoord.grpc.max.concurrent.streams (per connection; 0: none). queued.max.requests has nothing to
        size here: tonic refuses no call for want of a queue, every call waits in the front end's queue."""
        self._module = load_frontend()
        self._limits = (max_receive_bytes, max_send_bytes, max_concurrent_calls or 0, max_concurrent_streams or 0)
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}
        self._frontend: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._table: list[tuple[int, Any, Any, Any, Any]] = []  # per method index: kind and handler parts
        self._answers: list[Answer] = []
        self._flush_scheduled = False
        self._streams: dict[int, tuple[_Inbox | None, asyncio.Task[None]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopped: asyncio.Event | None = None
        self._refusal_logged_at = float("-inf")
        self._refusals_unlogged = 0

    # --- registration, as on grpc.aio ---------------------------------------------------------------------
    def add_generic_rpc_handlers(self, handlers: Sequence[Any]) -> None:
        for handler in handlers:
            methods = getattr(handler, "_method_handlers", None)
            if methods is None:
                raise TypeError(f"the native front end serves handlers by method name, not {type(handler).__name__}")
            self._handlers.update(methods)

    def add_registered_method_handlers(self, service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        self._handlers.update({f"/{service}/{name}": h for name, h in handlers.items()})

    def add_insecure_port(self, address: str) -> int:
        return self._listen(address, None)

    def add_tls_port(self, address: str, tls: TlsOptions) -> int:
        """TLS from the PEM files themselves (grpc.ServerCredentials cannot be read back); a file that is not
        usable PEM raises AuthConfigError, naming its flag."""
        return self._listen(address, tls)

    def _listen(self, address: str, tls: TlsOptions | None) -> int:
        if self._frontend is not None:
            raise RuntimeError("the native front end listens on one address")
        pem = {} if tls is None else {"tls_cert_chain": tls.cert_chain, "tls_key": tls.private_key,
                                      "tls_client_ca": tls.client_ca}
        try:
            self._frontend = self._module.Frontend(address, *self._limits, **pem)
        except OSError:
            return 0  # as grpc.aio's bind failure: CoordinatorServer says which address
        except ValueError as e:
            raise AuthConfigError(str(e)) from None
        return int(self._frontend.port)

    # --- serving ------------------------------------------------------------------------------------------
    def differences_from_build(self) -> list[str]:
        """Where groupcoord's registered RPCs and the front end's table of proto/ (compiled by its build.rs)
        differ: a build older or newer than proto/."""
        built = {path: (client, server) for path, client, server in self._module.PROTO_METHODS}
        ours = {path: (h.request_streaming, h.response_streaming) for path, h in self._handlers.items()
                if path.startswith("/groupcoord.")}
        return sorted(path for path in built.keys() | ours.keys() if built.get(path) != ours.get(path))

    async def start(self) -> None:
        if self._frontend is None:
            raise RuntimeError("add_insecure_port first")
        differences = self.differences_from_build()
        if differences:
            raise RuntimeError(f"the native front end was built from another proto/ (it differs on "
                               f"{', '.join(differences)}): reinstall it (`pip install ./native/frontend`)")
        methods = []
        for path, h in self._handlers.items():
            if h.request_streaming and not h.response_streaming:
                raise ValueError(f"{path}: the native front end serves no client-streaming RPC")
            methods.append((path, h.request_streaming, h.response_streaming))
            behaviour = (h.unary_unary or h.unary_stream or h.stream_stream)
            shape = (UNARY_RPC if not h.response_streaming else
                     SERVER_STREAMING_RPC if not h.request_streaming else BIDIRECTIONAL_RPC)
            self._table.append((shape,
                                behaviour, h.request_deserializer or (lambda b: b),
                                h.response_serializer or (lambda m: m), path))
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._loop.add_reader(self._frontend.fileno(), self._on_ready)
        self._frontend.start(methods)

    async def stop(self, grace: float | None) -> None:
        frontend, loop = self._frontend, self._loop
        if frontend is None or loop is None:
            return
        frontend.shutdown(float(grace or 0))
        deadline = loop.time() + float(grace or 0) + 5
        while not frontend.stopped() and loop.time() < deadline:
            await asyncio.sleep(0.01)
        loop.remove_reader(frontend.fileno())
        for task in [*self._tasks, *(t for _, t in self._streams.values())]:
            task.cancel()
        frontend.join()
        assert self._stopped is not None
        self._stopped.set()

    async def wait_for_termination(self) -> None:
        assert self._stopped is not None
        await self._stopped.wait()

    # --- one batch ----------------------------------------------------------------------------------------
    def _on_ready(self) -> None:
        table, answers = self._table, self._answers
        for kind, call, method, payload, metadata, peer, auth in self._frontend.drain():
            if kind == UNARY:
                _, behaviour, decode, encode, _ = table[method]
                context = NativeContext(peer, metadata, auth)
                try:
                    coro = behaviour(decode(payload), context)
                    yielded = coro.send(None)
                except StopIteration as done:
                    answers.append(_unary_answer(call, encode, done.value, context))
                    continue
                except Exception as e:
                    answers.append(_unary_failure(call, e, context, table[method][4]))
                    continue
                self._spawn(self._finish_unary(call, _resume(coro, yielded), encode, context, table[method][4]))
            elif kind == STREAM_OPEN:
                self._open_stream(call, table[method], payload, NativeContext(peer, metadata, auth))
            elif kind == STREAM_MESSAGE:
                stream = self._streams.get(call)
                if stream is not None and stream[0] is not None:
                    stream[0].put(table[method][2](payload))
            elif kind == STREAM_HALF_CLOSE:
                stream = self._streams.get(call)
                if stream is not None and stream[0] is not None:
                    stream[0].close()
            elif kind == TLS_REFUSED:
                self._log_refusal(peer, payload)
            elif kind == STREAM_CANCEL:
                stream = self._streams.pop(call, None)
                if stream is not None:
                    stream[1].cancel()
        self._flush()

    def _log_refusal(self, peer: str, reason: bytes) -> None:
        """One line per refused TLS handshake (grpcio's core logs them too), at most one a second: the rest
        are counted into the next line, so a client retrying in a loop does not flood the log."""
        assert self._loop is not None
        now = self._loop.time()
        if now - self._refusal_logged_at < 1.0:
            self._refusals_unlogged += 1
            return
        more = f" (and {self._refusals_unlogged} more since the last line)" if self._refusals_unlogged else ""
        log.info("TLS handshake from %s refused: %s%s", peer, reason.decode(errors="replace"), more)
        self._refusal_logged_at, self._refusals_unlogged = now, 0

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        assert self._loop is not None
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _answer(self, item: Answer) -> None:
        """An answer from a task: sent with the others of this pass of the loop."""
        self._answers.append(item)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._answers:
            answers, self._answers = self._answers, []
            self._frontend.complete(answers)

    async def _finish_unary(self, call: int, rest: Any, encode: Callable[[Any], bytes], context: NativeContext,
                            path: str) -> None:
        try:
            response = await rest
        except asyncio.CancelledError:
            self._answer((call, None, _code(grpc.StatusCode.UNAVAILABLE), "the coordinator is stopping"))
            raise
        except Exception as e:
            self._answer(_unary_failure(call, e, context, path))
        else:
            self._answer(_unary_answer(call, encode, response, context))

    def _open_stream(self, call: int, entry: tuple[int, Any, Any, Any, Any], payload: bytes | None,
                     context: NativeContext) -> None:
        kind, behaviour, decode, encode, _ = entry
        inbox = _Inbox() if kind == BIDIRECTIONAL_RPC else None
        context.writes = lambda message: self._answer((call, encode(message), MESSAGE, None))
        task = self._spawn(self._run_stream(call, behaviour, inbox if inbox is not None else decode(payload),
                                            encode, context))
        self._streams[call] = (inbox, task)

    async def _run_stream(self, call: int, behaviour: Any, requests: Any, encode: Callable[[Any], bytes],
                          context: NativeContext) -> None:
        answer = self._answer
        try:
            out = behaviour(requests, context)
            if isinstance(out, AsyncIterator):
                async for message in out:
                    answer((call, encode(message), MESSAGE, None))
            else:
                await out  # writes with context.write
            answer((call, None, _code(context.code, grpc.StatusCode.OK), context.details or None))
        except grpc.aio.AbortError:
            answer((call, None, _code(context.code), context.details))
        except asyncio.CancelledError:
            answer((call, None, _code(grpc.StatusCode.CANCELLED), "cancelled"))
        except Exception as e:
            log.exception("a stream failed")
            answer((call, None, _code(None), f"Unexpected {type(e).__name__}"))
        finally:
            self._streams.pop(call, None)
