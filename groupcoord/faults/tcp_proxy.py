"""A TCP proxy on loopback that can go silent, delay or drop connections on command.

Why: the safety promises (a member cut off from the coordinator releases its partitions before anyone else
can get them) are only believable when tested against a real network fault. A proxy between one client
and the coordinator lets a test cut *that* client off while every other client keeps talking directly.

Modes:
- ``forward``: bytes pass both ways.
- ``silent``: connections stay open but every byte in either direction is swallowed, as when a
  network path dies without a reset (the worst case: the client sees no error, only silence).
- ``delay``: bytes pass after ``delay_s`` seconds.
- ``drop``: every open connection is reset and new ones are closed at once.

``retarget`` changes the upstream: open connections are reset (their client reconnects, to the new one).
The Kafka-backed fault suite points each member's proxy at whichever instance coordinates its group.

Only loopback addresses are accepted as the upstream target.
"""

from __future__ import annotations

import contextlib
import ipaddress
import select
import socket
import threading
import time
from typing import Literal

Mode = Literal["forward", "silent", "delay", "drop"]
_CHUNK = 65536


def _require_loopback(host: str) -> None:
    try:
        addr = ipaddress.ip_address(socket.gethostbyname(host))
    except (OSError, ValueError) as exc:
        raise ValueError(f"upstream host {host!r} does not resolve") from exc
    if not addr.is_loopback:
        raise ValueError(f"upstream {host!r} is not a loopback address; the proxy only targets loopback")


class TcpProxy:
    """Listens on 127.0.0.1:<port> and forwards to ``upstream`` ("host:port"), under a switchable fault."""

    def __init__(self, upstream: str, listen_port: int = 0) -> None:
        host, _, port = upstream.rpartition(":")
        _require_loopback(host)
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", listen_port))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._mode: Mode = "forward"
        self._delay_s = 0.0
        self._lock = threading.Lock()
        self._conns: list[tuple[socket.socket, socket.socket]] = []
        self._stopped = threading.Event()
        self._accept_thread = threading.Thread(target=self._accept_loop, name="tcp-proxy-accept", daemon=True)
        self.bytes_forwarded = 0
        self.bytes_swallowed = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def mode(self) -> Mode:
        return self._mode

    def start(self) -> TcpProxy:
        self._accept_thread.start()
        return self

    def set_mode(self, mode: Mode, delay_s: float = 0.0) -> None:
        """Switch the fault; ``drop`` also resets every open connection now."""
        with self._lock:
            self._mode = mode
            self._delay_s = delay_s
            conns = list(self._conns) if mode == "drop" else []
            if mode == "drop":
                self._conns.clear()
        for pair in conns:
            for sock in pair:
                _reset(sock)

    @property
    def upstream(self) -> str:
        return f"{self._upstream[0]}:{self._upstream[1]}"

    def retarget(self, upstream: str) -> None:
        """Forward new connections to `upstream` (loopback) and reset the open ones, which went elsewhere."""
        host, _, port = upstream.rpartition(":")
        _require_loopback(host)
        with self._lock:
            self._upstream = (host, int(port))
            conns, self._conns = list(self._conns), []
        for pair in conns:
            for sock in pair:
                _reset(sock)

    def forward(self) -> None:
        self.set_mode("forward")

    def silence(self) -> None:
        self.set_mode("silent")

    def delay(self, seconds: float) -> None:
        self.set_mode("delay", seconds)

    def drop(self) -> None:
        self.set_mode("drop")

    def close(self) -> None:
        self._stopped.set()
        self._listener.close()
        with self._lock:
            conns, self._conns = list(self._conns), []
        for pair in conns:
            for sock in pair:
                _reset(sock)
        if self._accept_thread.is_alive():
            self._accept_thread.join(timeout=2)

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._mode == "drop":
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self._upstream, timeout=2)  # read once: retarget swaps it
            except OSError:
                _reset(client)
                continue
            for sock in (client, upstream):
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._conns.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True, name="tcp-proxy-pump").start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        try:
            while not self._stopped.is_set():
                try:
                    readable, _, _ = select.select([a, b], [], [], 0.2)
                except (OSError, ValueError):
                    return
                for src in readable:
                    try:
                        data = src.recv(_CHUNK)
                    except OSError:
                        return
                    if not data:
                        return
                    mode, delay_s = self._mode, self._delay_s
                    if mode in ("silent", "drop"):
                        self.bytes_swallowed += len(data)
                        continue
                    if mode == "delay" and delay_s > 0:
                        time.sleep(delay_s)
                    try:
                        peers[src].sendall(data)
                    except OSError:
                        return
                    self.bytes_forwarded += len(data)
        finally:
            with self._lock:
                if (a, b) in self._conns:
                    self._conns.remove((a, b))
            _reset(a)
            _reset(b)


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0) so the peer sees the connection die at once."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    with contextlib.suppress(OSError):
        sock.close()
