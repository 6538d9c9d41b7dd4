"""A prototype of issue 30 step 4's acceptors: several gRPC acceptor processes on one port (SO_REUSEPORT) in
front of one owning worker process, which alone would run the coordinator's core.

Each acceptor is a grpc.aio server that does not decode: it hands each request's bytes, with an id, over one
Unix socket to the worker and answers with the bytes the worker sends back for that id. The worker here is the
echo control's: it decodes the request and answers a prebuilt reply (`bench/echo_server.py`'s), so what the
bench measures is the transport's floor with the work spread over processes, plus the hop. Unary and
bidirectional-stream ConsumerGroupHeartbeat are served (a batch stream is not).

    python -m bench.echo_server --port 50052 --acceptors 2
"""

from __future__ import annotations

import asyncio
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator
from typing import Any

import grpc

from groupcoord.wire.v1 import coordinator_pb2 as pb

HEADER = struct.Struct("!IQ")  # payload length, request id
SERVICE = pb.DESCRIPTOR.services_by_name["GroupCoordinator"].full_name


# --- the worker: decodes, answers -------------------------------------------------------------------------------
async def worker(path: str) -> None:
    joined = pb.ConsumerGroupHeartbeatResponse(
        member_epoch=1, heartbeat_interval_ms=5000, assignment=pb.ConsumerGroupHeartbeatResponse.Assignment(
            topic_partitions=[pb.TopicPartitions(topic_id="0123456789abcdef0123456789abcdef", topic_name="bench",
                                                 partitions=list(range(10)))])).SerializeToString()
    steady = pb.ConsumerGroupHeartbeatResponse(member_epoch=1, heartbeat_interval_ms=5000).SerializeToString()
    decode = pb.ConsumerGroupHeartbeatRequest.FromString

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size, rid = HEADER.unpack(await reader.readexactly(HEADER.size))
                answer = joined if decode(await reader.readexactly(size)).member_epoch == 0 else steady
                writer.write(HEADER.pack(len(answer), rid) + answer)
        except asyncio.IncompleteReadError:
            writer.close()

    server = await asyncio.start_unix_server(connection, path)
    async with server:
        await server.serve_forever()


# --- an acceptor: gRPC in, bytes to the worker ------------------------------------------------------------------
class Forwarder:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.waiting: dict[int, asyncio.Future[bytes]] = {}
        self.next_id = 0

    async def read_answers(self) -> None:
        reader, waiting = self.reader, self.waiting
        while True:
            size, rid = HEADER.unpack(await reader.readexactly(HEADER.size))
            answer = await reader.readexactly(size)
            future = waiting.pop(rid, None)
            if future is not None and not future.done():
                future.set_result(answer)

    def ask(self, request: bytes) -> asyncio.Future[bytes]:
        self.next_id += 1
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = future
        self.writer.write(HEADER.pack(len(request), self.next_id) + request)
        return future


async def acceptor(port: int, path: str, options: list[tuple[str, Any]]) -> None:
    reader, writer = await asyncio.open_unix_connection(path)
    forward = Forwarder(reader, writer)
    answers = asyncio.ensure_future(forward.read_answers())

    async def unary(request: bytes, context: Any) -> bytes:
        return await forward.ask(request)

    async def stream(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        async for request in requests:
            yield await forward.ask(request)

    handlers = {
        "ConsumerGroupHeartbeat": grpc.unary_unary_rpc_method_handler(unary),
        "ConsumerGroupHeartbeatStream": grpc.stream_stream_rpc_method_handler(stream),
    }
    server = grpc.aio.server(options=list({**dict(options), "grpc.so_reuseport": 1}.items()))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    answers.cancel()
    await server.stop(0)


def serve(port: int, acceptors: int, options: list[str]) -> None:
    """The worker and `acceptors` acceptor processes; stops them on SIGTERM / SIGINT."""
    path = os.path.join(tempfile.mkdtemp(prefix="acceptor-echo-"), "worker.sock")
    base = [sys.executable, "-m", "bench.acceptor_echo", "--path", path]
    children = [subprocess.Popen([*base, "--worker"])]
    while not os.path.exists(path):
        threading.Event().wait(0.05)
    children += [subprocess.Popen([*base, "--port", str(port), *(a for o in options for a in ("--option", o))])
                 for _ in range(acceptors)]
    print(f"echo ({acceptors} acceptor processes, one worker) serving on 127.0.0.1:{port}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    for child in reversed(children):
        child.terminate()
    for child in children:
        child.wait()


def main() -> int:
    import argparse

    from bench.echo_server import parse_option
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--path", required=True)
    p.add_argument("--worker", action="store_true")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--option", action="append", default=[])
    args = p.parse_args()
    if args.worker:
        asyncio.run(worker(args.path))
    else:
        asyncio.run(acceptor(args.port, args.path, [parse_option(o) for o in args.option]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
