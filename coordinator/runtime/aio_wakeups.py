"""One event-loop wake-up per batch of gRPC completions instead of one per completion.

grpc.aio runs the C-core completion queue on a poller thread. For every completed operation (each message
read or written) that thread writes one byte to a socket pair the event loop watches, and the loop's reader,
`PollerCompletionQueue._handle_events`, reads one byte and then runs every completion queued so far. With N
completions queued, the first wake-up runs all N and the N - 1 that follow find nothing to do; each still
costs an epoll round, a callback and a `recv` syscall. A heartbeat is two completions on each side (its read
and its write), so at thousands per second these empty wake-ups are a large part of the CPU per heartbeat.

`coalesce_wakeups` wraps that reader: it reads the bytes pending but one, then lets grpc's handler read the
last one and run the queue. No wake-up is lost: the poller queues a completion before it writes its byte,
so every byte read here belongs to a completion already queued, and the handler runs those. Bytes written
after the peek stay in the socket and wake the loop again. (grpcio 1.85's handler also copes with an empty
socket; leaving it one byte keeps this right for a handler that does not.)

It relies on grpc.aio internals (the reader registered on a selector event loop), so it checks what it
finds and changes nothing when they differ (another grpc version, or a loop without `_selector` such as
uvloop); the caller gets the number of readers it wrapped.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
from collections.abc import Callable
from typing import Any

log = logging.getLogger("groupcoord.aio")

_PEEK_BYTES = 65536


def _batched(sock: socket.socket, handle: Callable[[], Any]) -> Callable[[], None]:
    peek = sock.recv

    def wake() -> None:
        try:
            pending = len(peek(_PEEK_BYTES, socket.MSG_PEEK))
            if pending > 1:
                sock.recv(pending - 1)
            handle()
        except BlockingIOError:  # another loop bound to the same poller took the bytes and runs the queue
            pass

    wake._batched = True  # type: ignore[attr-defined]
    return wake


def coalesce_wakeups(loop: asyncio.AbstractEventLoop | None = None) -> int:
    """Wrap grpc.aio's completion-queue reader(s) on `loop` (default: the running loop); call it once gRPC
    is in use on that loop (a server started, or a channel connected). Returns how many are wrapped now."""
    loop = loop or asyncio.get_running_loop()
    selector = getattr(loop, "_selector", None)
    if selector is None:
        return 0
    wrapped = 0
    for key in list(selector.get_map().values()):
        reader = key.data[0] if isinstance(key.data, tuple) else None
        callback = getattr(reader, "_callback", None)
        if getattr(callback, "_batched", False):  # wrapped already (another server on this loop)
            wrapped += 1
            continue
        if not isinstance(callback, functools.partial) or not isinstance(key.fileobj, socket.socket):
            continue
        func = callback.func
        if getattr(func, "__name__", "") != "_handle_events" or \
                type(getattr(func, "__self__", None)).__name__ != "PollerCompletionQueue":
            continue
        loop.remove_reader(key.fileobj)
        loop.add_reader(key.fileobj, _batched(key.fileobj, callback))
        wrapped += 1
    if not wrapped:
        log.debug("grpc.aio completion reader not found on %r: wake-ups stay one per completion", loop)
    return wrapped
