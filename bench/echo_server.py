"""The control of bench.heartbeat_cost: a bare gRPC server answering groupcoord's heartbeat RPCs with canned replies.

No groupcoord code runs: what it costs per heartbeat is the transport's floor (grpcio, its event loop or
thread pool, protobuf parsing and serialization) on this machine. A join (epoch 0) gets epoch 1 and ten
partitions, so a load generator's members reach a stable state; every other heartbeat gets one prebuilt
reply.

    python -m bench.echo_server --port 50052 [--sync] [--option grpc.server.max_pending_requests=5000]

`--sync` serves with grpcio's thread-pool server instead of grpc.aio (issue 30 step 4), `--threads` sizing its
pool; `--option` passes a channel argument as `groupcoord serve` does its own; `--uvloop` runs grpc.aio on
uvloop's event loop (uvloop must be importable: it is not one of the project's dependencies);
`--acceptors N` serves through N acceptor processes in front of one worker (`bench/acceptor_echo.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent import futures
from typing import Any

import grpc

from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

TOPIC_ID = "0123456789abcdef0123456789abcdef"
JOINED = pb.ConsumerGroupHeartbeatResponse(
    member_epoch=1, heartbeat_interval_ms=5000, assignment=pb.ConsumerGroupHeartbeatResponse.Assignment(
        topic_partitions=[pb.TopicPartitions(topic_id=TOPIC_ID, topic_name="bench", partitions=list(range(10)))]))
STEADY = pb.ConsumerGroupHeartbeatResponse(member_epoch=1, heartbeat_interval_ms=5000)


def reply(request: pb.ConsumerGroupHeartbeatRequest) -> pb.ConsumerGroupHeartbeatResponse:
    return JOINED if request.member_epoch == 0 else STEADY


def batch_reply(batch: pb.ConsumerGroupHeartbeatBatchRequest) -> pb.ConsumerGroupHeartbeatBatchResponse:
    return pb.ConsumerGroupHeartbeatBatchResponse(responses=[reply(r) for r in batch.heartbeats])


class AioEcho(pb_grpc.GroupCoordinatorServicer):
    async def ConsumerGroupHeartbeat(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's name
        return reply(request)

    async def ConsumerGroupHeartbeatStream(self, request_iterator: AsyncIterator[Any],  # noqa: N802
                                           context: Any) -> AsyncIterator[Any]:
        async for request in request_iterator:
            yield reply(request)

    async def ConsumerGroupHeartbeatBatchStream(self, request_iterator: AsyncIterator[Any],  # noqa: N802
                                                context: Any) -> AsyncIterator[Any]:
        async for batch in request_iterator:
            yield batch_reply(batch)


class SyncEcho(pb_grpc.GroupCoordinatorServicer):
    def ConsumerGroupHeartbeat(self, request: Any, context: Any) -> Any:  # noqa: N802
        return reply(request)

    def ConsumerGroupHeartbeatStream(self, request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:  # noqa: N802
        for request in request_iterator:
            yield reply(request)

    def ConsumerGroupHeartbeatBatchStream(self, request_iterator: Iterator[Any],  # noqa: N802
                                          context: Any) -> Iterator[Any]:
        for batch in request_iterator:
            yield batch_reply(batch)


def parse_option(text: str) -> tuple[str, Any]:
    key, _, value = text.partition("=")
    return key, int(value) if value.lstrip("-").isdigit() else value


async def serve_aio(port: int, options: list[tuple[str, Any]]) -> None:
    server = grpc.aio.server(options=list({"grpc.so_reuseport": 0, **dict(options)}.items()))
    pb_grpc.add_GroupCoordinatorServicer_to_server(AioEcho(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print(f"echo (grpc.aio) serving on 127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(0)


def serve_sync(port: int, threads: int, options: list[tuple[str, Any]]) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=threads),
                         options=list({"grpc.so_reuseport": 0, **dict(options)}.items()))
    pb_grpc.add_GroupCoordinatorServicer_to_server(SyncEcho(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print(f"echo (grpc sync, {threads} threads) serving on 127.0.0.1:{port}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop(0)


def serve_processes(argv: list[str], processes: int) -> None:
    """`processes` copies of this server on one port with SO_REUSEPORT: the kernel spreads the connections
    over them (issue 30 step 4, several acceptor processes). Stops them on SIGTERM / SIGINT."""
    children = [subprocess.Popen([sys.executable, "-m", "bench.echo_server", *argv, "--option", "grpc.so_reuseport=1"])
                for _ in range(processes)]
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    for child in children:
        child.terminate()
    for child in children:
        child.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=50052)
    p.add_argument("--sync", action="store_true", help="grpcio's thread-pool server instead of grpc.aio")
    p.add_argument("--threads", type=int, default=64,
                   help="--sync: the pool's threads (default 64; a stream holds one for its life)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a gRPC channel argument")
    p.add_argument("--processes", type=int, default=1, help="this many server processes on the port (SO_REUSEPORT)")
    p.add_argument("--uvloop", action="store_true", help="grpc.aio on uvloop's event loop")
    p.add_argument("--acceptors", type=int, default=0,
                   help="N acceptor processes (SO_REUSEPORT) forwarding to one worker process")
    args = p.parse_args(argv)
    if args.acceptors:
        from bench.acceptor_echo import serve
        serve(args.port, args.acceptors, args.option)
        return 0
    if args.processes > 1:
        given = sys.argv[1:] if argv is None else argv
        serve_processes([a for i, a in enumerate(given) if a != "--processes" and given[i - 1:i] != ["--processes"]],
                        args.processes)
        return 0
    options = [parse_option(o) for o in args.option]
    if args.sync:
        serve_sync(args.port, args.threads, options)
    elif args.uvloop:
        import uvloop  # type: ignore[import-not-found]  # installed by hand for the bench (see the docstring)
        uvloop.run(serve_aio(args.port, options))
    else:
        asyncio.run(serve_aio(args.port, options))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
