"""The one request pipeline of every RPC of every service (GroupCoordinator, ShareGroupCoordinator,
StreamsGroupCoordinator).

Theory of operation. `Pipeline.add(server, servicer, service)` registers each method of the service's
descriptor with gRPC through the public handler constructors. A call then goes, in this order, through:
1. the transport's limits (socket.request.max.bytes, set on the server) and decoding: bytes that are not a valid
   message are answered INVALID_ARGUMENT with one rate-limited log line, not a traceback and UNKNOWN;
2. authentication, once per call (the messages of a stream share it): with ACLs on, the bearer token's or the
   client certificate's principal, else UNAUTHENTICATED. The principal travels in the call's `Caller`;
3. the handler, a servicer method marked `@rpc(operation, response)`: authorization of the request's group
   as Kafka's KafkaApis asks it (GROUP_AUTHORIZATION_FAILED in-band), then the handler's own field limits and
   translation, and `Service.submit`, which refuses in-band while the state loads, after the log failed, or
   for a group another instance owns (the router);
4. one mapping from exceptions to Kafka error codes (`kafka_error`), answered in the RPC's response type by
   `refusal`, which fills the same fields for every RPC.
RPCs over many groups (`per_group=True`) authorize each id through `Caller.may` and answer per group. A stream
RPC (`@stream`) runs each message through a unary RPC's handler, so each is authorized and mapped on its own.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message_factory import GetMessageClass

from groupcoord.coordinator.core import limits
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.runtime.acl import Authorizer
from groupcoord.coordinator.runtime.auth import TokenStore, Unauthenticated, authenticate
from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime

log = logging.getLogger("groupcoord.service")
T = TypeVar("T")
Handler = Callable[[Any, Any, "Caller"], Awaitable[Any]]
READ, DESCRIBE, DELETE = "READ", "DESCRIBE", "DELETE"
DESCRIBE_CONFIGS, ALTER_CONFIGS = "DESCRIBE_CONFIGS", "ALTER_CONFIGS"


def echo(value: str) -> str:
    """An id echoed in a response field: as sent when within the limits, else only its first characters."""
    return value if len(value) <= limits.ID_MAX_CHARS else value[:limits.ECHO_MAX_CHARS]


def denied(operation: str, group_id: str) -> str:
    return f"Not authorized to {operation} group {echo(group_id)!r}."


class Caller:
    """Who is calling, authenticated once for the call. Without ACLs there is no principal and `may` allows all."""

    __slots__ = ("context", "principal", "authorizer")

    def __init__(self, context: Any, principal: str | None = None, authorizer: Authorizer | None = None) -> None:
        self.context = context
        self.principal = principal
        self.authorizer = authorizer

    @property
    def secured(self) -> bool:
        return self.authorizer is not None

    def may(self, operation: str, group_id: str, implied: bool = True) -> bool:
        """Kafka's rule for `operation` on the group; `implied=False`: only an ACL naming it (or ALL) counts."""
        authorizer = self.authorizer
        return authorizer is None or authorizer.allowed(self.principal or "", operation, group_id, implied)

    def peer(self) -> str:
        return str(self.context.peer())

    def metadata(self) -> Sequence[tuple[str, Any]]:
        return self.context.invocation_metadata() or ()


def kafka_error(name: str, e: Exception) -> tuple[Errors, str]:
    """The one mapping from an exception to the Kafka error a client gets: a CoordinatorError carries its own
    (a limit, a refusal, NOT_COORDINATOR from a fenced write, a write refused as too large); anything else is a
    bug, logged with its traceback and answered UNKNOWN_SERVER_ERROR."""
    if isinstance(e, CoordinatorError):
        return e.code, e.message
    log.exception("%s failed", name)
    return Errors.UNKNOWN_SERVER_ERROR, f"internal error: {type(e).__name__}: {limits.shorten(str(e))}"


def refusal(response_type: Any, request: Any, code: Errors, message: str) -> Any:
    """The answer to a request refused as a whole, built alike for every RPC: the error code and message where
    the response has them; a member's echoed member_id and member_epoch (generation_id -1, Kafka's unknown
    generation); and for a request over many ids (`group_ids`, `keys`), one entry per id, each with the error."""
    out = response_type()
    fields = out.DESCRIPTOR.fields_by_name
    if "error_code" in fields:
        out.error_code, out.error_message = int(code), message
    if "member_id" in fields and hasattr(request, "member_id"):
        out.member_id = echo(request.member_id)
    if "member_epoch" in fields and hasattr(request, "member_epoch"):
        out.member_epoch = request.member_epoch
    if "generation_id" in fields:
        out.generation_id = -1
    ids = getattr(request, "group_ids", None) or getattr(request, "keys", None)
    if ids is not None:
        [entries] = [f for f in out.DESCRIPTOR.fields if f.label == f.LABEL_REPEATED]
        key = "group_id" if "group_id" in entries.message_type.fields_by_name else "key"
        for gid in ids[:limits.ADMIN_MAX_GROUP_IDS]:
            entry = getattr(out, entries.name).add(error_code=int(code), error_message=message, **{key: echo(gid)})
            if "node_id" in entry.DESCRIPTOR.fields_by_name:
                entry.node_id = -1
    return out


@dataclass(frozen=True, slots=True)
class RpcSpec:
    """What `@rpc` declares: the ACL operation on the group (None: none), the response type (None: a stream),
    and whether the handler authorizes each of many group ids itself. `each`: a stream that answers each
    message, in order, with this unary RPC of the same servicer (`@stream_of`)."""

    operation: str | None
    response: Any
    per_group: bool = False
    each: str | None = None


def rpc(operation: str | None, response: Any, *, per_group: bool = False,
        refuse: Callable[[Any, Errors, str], Any] | None = None) -> Callable[[Handler], Handler]:
    """Marks a unary handler `(self, request, caller)` and runs it behind authorization and the error mapping.
    `refuse(request, code, message)`: a refusal echoing more of the request than `refusal` does."""
    spec = RpcSpec(operation, response, per_group)
    build = refuse or functools.partial(refusal, response)
    checked = operation if not per_group else None

    def wrap(handler: Handler) -> Handler:
        name = handler.__name__

        @functools.wraps(handler)
        async def run(self: Any, request: Any, caller: Caller) -> Any:
            if checked is not None and caller.authorizer is not None and not caller.may(checked, request.group_id):
                return build(request, Errors.GROUP_AUTHORIZATION_FAILED, denied(checked, request.group_id))
            try:
                return await handler(self, request, caller)
            except grpc.aio.AbortError:
                raise
            except Exception as e:
                return build(request, *kafka_error(name, e))

        run.__rpc__ = spec  # type: ignore[attr-defined]
        return run
    return wrap


def stream(handler: Callable[[Any, AsyncIterator[Any], Caller], AsyncIterator[Any]]) -> Any:
    """Marks a stream handler `(self, requests, caller)`: each message goes through a unary `@rpc` handler."""
    handler.__rpc__ = RpcSpec(None, None)  # type: ignore[attr-defined]
    return handler


def stream_of(unary: str) -> Callable[[Any], Any]:
    """Marks a stream handler whose whole work is `yield await self.<unary>(request, caller)` for each message:
    the pipeline then serves it as one loop over the messages, without the handler's own async generator (and
    the malformed-message filter's) in between, a generator layer less per message on the heartbeat path. The
    handler's body stays what a direct caller runs."""
    def mark(handler: Callable[[Any, AsyncIterator[Any], Caller], AsyncIterator[Any]]) -> Any:
        handler.__rpc__ = RpcSpec(None, None, each=unary)  # type: ignore[attr-defined]
        return handler
    return mark


class Service:
    """What every servicer shares: the runtime, and the submission of operations with the runtime's refusals."""

    def __init__(self, runtime: CoordinatorRuntime) -> None:
        self.runtime = runtime
        self.shard = runtime.shard

    def _admit(self, group_ids: Iterable[str]) -> None:
        runtime = self.runtime
        if not runtime.loaded:
            raise CoordinatorError(Errors.COORDINATOR_LOAD_IN_PROGRESS, "The coordinator is loading its state; retry.")
        if runtime.failed is not None:
            raise CoordinatorError(Errors.COORDINATOR_NOT_AVAILABLE,
                                   f"The coordinator's record log failed ({runtime.failed}); it must be restarted.")
        router = runtime.router
        if router is not None:
            for group_id in group_ids:
                refused = router(group_id)
                if refused is not None:
                    raise CoordinatorError(*refused)

    async def submit(self, name: str, fn: Callable[[int], Any], *group_ids: str) -> Any:
        """Queue `fn` on the runtime for the groups `group_ids` and return its response; raises CoordinatorError
        when it cannot run here (loading, a failed log, another instance's group) or was refused."""
        runtime = self.runtime
        if not runtime.loaded or runtime.failed is not None or runtime.router is not None:
            self._admit(group_ids)  # refuses, or asks the router; a loaded, healthy, sole instance takes it
        return await runtime.submit(name, fn, group_ids)

    def submit_steady(self, name: str, fn: Callable[[int], Any], group_id: str) -> Any | None:
        """`CoordinatorRuntime.run_steady` where `submit` would run the operation (loaded, the group served
        here): its response, or None when the caller must `submit` the full operation."""
        runtime = self.runtime
        if not runtime.loaded or (runtime.router is not None and runtime.router(group_id) is not None):
            return None
        return runtime.run_steady(name, fn)

    async def submit_parkable(self, name: str, fn: Callable[[int, int], Any], group_id: str) -> Any:
        """`submit` for JoinGroup/SyncGroup, which may park at the coordinator until other members arrive."""
        self._admit((group_id,))
        return await self.runtime.submit_parkable(name, fn, group_id)

    async def submit_each(self, name: str, ids: list[str], fn: Callable[[list[str], int], Any],
                          invalid: Callable[[str, Errors, str], T], convert: Callable[[Any], list[T]], target: Any,
                          caller: Caller, operation: str) -> None:
        """A request over many group ids, as one queued operation per `ADMIN_CHUNK_GROUP_IDS` ids with a yield to
        the loop between chunks, so that no single request holds the event loop for long (Kafka gives no
        snapshot across groups either). Over `ADMIN_MAX_GROUP_IDS` ids, the whole request is refused; an id the
        caller may not `operation` gets GROUP_AUTHORIZATION_FAILED, one over the length limit INVALID_GROUP_ID, one
        another instance owns the router's refusal (NOT_COORDINATOR), each on its own; a chunk that cannot run
        gets its error for each of its ids. Results go into the
        response's repeated field `target` chunk by chunk, in the order of `ids`."""
        if len(ids) > limits.ADMIN_MAX_GROUP_IDS:
            message = f"{len(ids)} group ids in one request; at most {limits.ADMIN_MAX_GROUP_IDS} are accepted."
            target.extend(invalid(echo(g), Errors.INVALID_REQUEST, message) for g in ids)
            return
        step = limits.ADMIN_CHUNK_GROUP_IDS
        router = self.runtime.router
        for start in range(0, len(ids), step):
            if start:
                await asyncio.sleep(0)
            entries: list[T | None] = []  # None: the id's result comes from the operation
            runnable: list[str] = []
            for g in ids[start:start + step]:
                refused = (
                    (Errors.GROUP_AUTHORIZATION_FAILED, denied(operation, g)) if not caller.may(operation, g) else
                    (Errors.INVALID_GROUP_ID, f"group_id of {len(g)} characters is longer than "
                                              f"{limits.ID_MAX_CHARS}.") if len(g) > limits.ID_MAX_CHARS else
                    router(g) if router is not None else None)
                entries.append(invalid(echo(g), *refused) if refused is not None else None)
                if refused is None:
                    runnable.append(g)
            results: list[T] = []
            if runnable:
                try:
                    results = convert(await self.submit(name, functools.partial(fn, runnable), *runnable))
                except Exception as e:
                    code, message = kafka_error(name, e)
                    results = [invalid(g, code, message) for g in runnable]
            it = iter(results)
            target.extend(next(it) if entry is None else entry for entry in entries)


@dataclass(frozen=True, slots=True)
class Malformed:
    reason: str


@dataclass(slots=True)
class RateLimitedLog:
    """At most one line per `interval_s`; the next line says how many were suppressed in between."""

    interval_s: float = 10.0
    clock: Callable[[], float] = time.monotonic
    _last: float = field(default=-1e18)
    _suppressed: int = 0

    def warning(self, message: str, *args: Any) -> None:
        now = self.clock()
        if now - self._last < self.interval_s:
            self._suppressed += 1
            return
        suffix = f" ({self._suppressed} more since the last report)" if self._suppressed else ""
        self._last, self._suppressed = now, 0
        log.warning(message + suffix, *args)


class Pipeline:
    """Registers servicers on a grpc.aio server, every RPC through the same steps (the module's docstring).
    `authorizer` None: no authentication and no ACLs, as without `--acl-file`."""

    def __init__(self, authorizer: Authorizer | None = None, tokens: TokenStore | None = None,
                 limiter: RateLimitedLog | None = None) -> None:
        self.authorizer = authorizer
        self.tokens = tokens
        self.limiter = limiter or RateLimitedLog()

    def add(self, server: grpc.aio.Server, servicer: Any, service: ServiceDescriptor) -> None:
        handlers = {m.name: self._handler(servicer, m) for m in service.methods}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
        server.add_registered_method_handlers(service.full_name, handlers)

    def caller(self, context: Any) -> Caller:
        """The call's Caller; raises Unauthenticated (with ACLs on) when it presents no usable credentials."""
        if self.authorizer is None:
            return Caller(context)
        return Caller(context, authenticate(context, self.tokens), self.authorizer)

    def _handler(self, servicer: Any, method: MethodDescriptor) -> grpc.RpcMethodHandler:
        run = getattr(servicer, method.name, None)
        spec: RpcSpec | None = getattr(run, "__rpc__", None)
        where = f"{type(servicer).__name__}.{method.name}"
        if run is None or spec is None:
            raise TypeError(f"{where} is not marked @rpc or @stream: every RPC goes through the pipeline")
        request_type, response_type = GetMessageClass(method.input_type), GetMessageClass(method.output_type)
        if spec.response is not None and spec.response is not response_type:
            raise TypeError(f"{where} declares {spec.response.__name__}; the service answers {method.output_type.name}")
        decode = self._decoder(method.name, request_type.FromString)
        encode = response_type.SerializeToString
        name, caller_of, malformed = method.name, self.caller, self._malformed
        if method.client_streaming and method.server_streaming and spec.each is not None:
            each = getattr(servicer, spec.each)
            if getattr(each, "__rpc__", None) is None or each.__rpc__.response is None:
                raise TypeError(f"{where}: @stream_of({spec.each!r}) names no unary @rpc of the servicer")

            async def each_message(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
                try:
                    caller = caller_of(context)
                except Unauthenticated as e:
                    await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(e))
                async for request in requests:
                    if isinstance(request, Malformed):
                        await malformed(name, request, context)
                    yield await each(request, caller)
            return grpc.stream_stream_rpc_method_handler(each_message, decode, encode)
        if method.client_streaming and method.server_streaming and spec.response is None:
            async def messages(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
                async for request in requests:
                    if isinstance(request, Malformed):
                        await malformed(name, request, context)
                    yield request

            async def streamed(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
                try:
                    caller = caller_of(context)
                except Unauthenticated as e:
                    await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(e))
                async for response in run(messages(requests, context), caller):
                    yield response
            return grpc.stream_stream_rpc_method_handler(streamed, decode, encode)
        if not method.client_streaming and not method.server_streaming and spec.response is not None:
            async def unary(request: Any, context: Any) -> Any:
                if isinstance(request, Malformed):
                    await malformed(name, request, context)
                try:
                    caller = caller_of(context)
                except Unauthenticated as e:
                    await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(e))
                return await run(request, caller)
            return grpc.unary_unary_rpc_method_handler(unary, decode, encode)
        raise TypeError(f"{where}: the pipeline serves unary and bidirectional-stream RPCs marked as such")

    @staticmethod
    def _decoder(method: str, decode: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
        """gRPC calls the deserializer outside the handler and answers its DecodeError with a traceback and
        UNKNOWN: bad bytes become a `Malformed` marker instead, answered by the handler."""
        def safe(data: bytes) -> Any:
            try:
                return decode(data)
            except Exception as e:  # DecodeError, or anything a bad buffer makes the parser raise
                return Malformed(f"{method}: {type(e).__name__}")
        return safe

    async def _malformed(self, method: str, bad: Malformed, context: Any) -> None:
        self.limiter.warning("malformed request from %s: %s", context.peer(), bad.reason)
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed {method} request: not a valid message")
