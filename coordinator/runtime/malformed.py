"""Malformed request bytes: INVALID_ARGUMENT and one rate-limited log line, not a traceback and UNKNOWN.

grpc.aio calls the request deserializer outside the servicer; a `DecodeError` there is logged with a full
traceback and answered with UNKNOWN. `guard_deserializers` wraps each method's deserializer so that bad bytes
become a `Malformed` marker, and each behaviour so that the marker is answered with INVALID_ARGUMENT before
the servicer sees it. A client sending garbage in a loop costs one log line per `interval_s`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

log = logging.getLogger("groupcoord.server")


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


class _Capture:
    """Stands in for the server while the generated `add_..._to_server` registers its handlers."""

    def __init__(self) -> None:
        self.registered: list[tuple[str, dict[str, grpc.RpcMethodHandler]]] = []

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, name: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        self.registered.append((name, handlers))


def _deserializer(method: str, decode: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def safe(data: bytes) -> Any:
        try:
            return decode(data)
        except Exception as e:  # DecodeError, or anything a bad buffer makes the parser raise
            return Malformed(f"{method}: {type(e).__name__}")
    return safe


def _guard(method: str, handler: Any, limiter: RateLimitedLog) -> Any:
    async def refuse(bad: Malformed, context: grpc.aio.ServicerContext) -> None:
        limiter.warning("malformed request from %s: %s", context.peer(), bad.reason)
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed {method} request: not a valid message")

    decode = _deserializer(method, handler.request_deserializer)
    if handler.unary_unary is not None:
        behaviour = handler.unary_unary

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if isinstance(request, Malformed):
                await refuse(request, context)
            return await behaviour(request, context)
        return handler._replace(request_deserializer=decode, unary_unary=unary)
    if handler.stream_stream is not None:
        streaming = handler.stream_stream

        async def checked(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async for request in requests:
                if isinstance(request, Malformed):
                    await refuse(request, context)
                yield request

        async def stream(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async for response in streaming(checked(requests, context), context):
                yield response
        return handler._replace(request_deserializer=decode, stream_stream=stream)
    return handler  # unary-stream / stream-unary: none in our service


def add_guarded(add_to_server: Callable[[Any, Any], None], servicer: Any, server: grpc.aio.Server,
                limiter: RateLimitedLog | None = None) -> None:
    """`add_to_server(servicer, server)` (a generated `add_..._to_server`), with every method guarded."""
    capture = _Capture()
    add_to_server(servicer, capture)
    limiter = limiter or RateLimitedLog()
    for name, handlers in capture.registered:
        guarded = {method: _guard(method, h, limiter) for method, h in handlers.items()}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, guarded),))
        server.add_registered_method_handlers(name, guarded)
