"""The loopback TCP proxy passes, swallows, delays and drops bytes as told."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from groupcoord.faults.tcp_proxy import TcpProxy


@pytest.fixture()
def echo_server() -> Iterator[str]:
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    server.close()


def _echo(conn: socket.socket) -> None:
    with conn, contextlib.suppress(OSError):
        while data := conn.recv(4096):
            conn.sendall(data)


def _roundtrip(address: str, payload: bytes, timeout: float) -> bytes | None:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(payload)
        try:
            return sock.recv(4096)
        except (TimeoutError, ConnectionResetError):
            return None


def test_proxy_forwards_then_goes_silent_then_forwards_again(echo_server: str) -> None:
    with TcpProxy(echo_server) as proxy:
        assert _roundtrip(proxy.address, b"ping", 2) == b"ping"
        proxy.silence()
        assert _roundtrip(proxy.address, b"ping", 0.5) is None
        assert proxy.bytes_swallowed >= 4
        proxy.forward()
        assert _roundtrip(proxy.address, b"pong", 2) == b"pong"


def test_proxy_delay_holds_bytes_back(echo_server: str) -> None:
    with TcpProxy(echo_server) as proxy:
        proxy.delay(0.3)
        started = time.monotonic()
        assert _roundtrip(proxy.address, b"x", 3) == b"x"
        assert time.monotonic() - started >= 0.3


def test_proxy_drop_resets_open_connections(echo_server: str) -> None:
    with TcpProxy(echo_server) as proxy:
        host, _, port = proxy.address.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=2) as sock:
            sock.sendall(b"a")
            assert sock.recv(10) == b"a"
            proxy.drop()
            time.sleep(0.1)
            with pytest.raises(OSError):
                sock.sendall(b"b" * 100000)
                sock.recv(10) or (_ for _ in ()).throw(ConnectionResetError())


def test_proxy_refuses_non_loopback_upstream() -> None:
    with pytest.raises(ValueError, match="loopback"):
        TcpProxy("8.8.8.8:53")


def test_proxy_retarget_resets_open_connections_and_sends_new_ones_to_the_new_upstream(echo_server: str) -> None:
    other = socket.create_server(("127.0.0.1", 0))
    other.settimeout(3)
    with other, TcpProxy(echo_server) as proxy:
        host, _, port = proxy.address.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=2) as sock:
            sock.sendall(b"a")
            assert sock.recv(10) == b"a"
            proxy.retarget(f"127.0.0.1:{other.getsockname()[1]}")
            with pytest.raises(OSError):
                sock.sendall(b"b" * 100000)
                sock.recv(10) or (_ for _ in ()).throw(ConnectionResetError())
        with socket.create_connection((host, int(port)), timeout=2):
            conn, _ = other.accept()  # the new connection reached the new upstream
            conn.close()
