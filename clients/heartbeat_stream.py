"""ConsumerGroupHeartbeatStream for a synchronous client, with a deadline per heartbeat like a unary call.

One stream carries every heartbeat of a member (no per-call setup on the coordinator: about half the server
CPU of a unary call). A request is written, and its response awaited for at most `timeout`; the coordinator
answers a stream's requests one at a time, in order. When the wait runs out, or the stream fails, the stream
is cancelled and never used again, so a late response can never be taken for the answer to a later request;
the caller sees a `grpc.RpcError` with the code a unary call would have had (DEADLINE_EXCEEDED, UNAVAILABLE,
...) and the next heartbeat opens a new stream.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import grpc

from groupcoord.wire.v1 import coordinator_pb2 as pb


class StreamRpcError(grpc.RpcError):
    """A failed heartbeat on the stream, shaped like the error of a failed unary call."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class HeartbeatStream:
    def __init__(self, stub: Any) -> None:
        self.stub = stub  # the route's stub: a new route means a new stream
        self._requests: queue.Queue[pb.ConsumerGroupHeartbeatRequest | None] = queue.Queue()
        self._responses: queue.Queue[Any] = queue.Queue()
        self._call = stub.ConsumerGroupHeartbeatStream(iter(self._requests.get, None))
        self.broken = False
        threading.Thread(target=self._read, name="groupcoord-heartbeat-stream", daemon=True).start()

    def _read(self) -> None:
        try:
            for response in self._call:
                self._responses.put(response)
            self._responses.put(StreamRpcError(grpc.StatusCode.UNAVAILABLE, "the coordinator ended the stream"))
        except grpc.RpcError as e:
            self._responses.put(e)

    def call(self, request: pb.ConsumerGroupHeartbeatRequest, timeout: float) -> pb.ConsumerGroupHeartbeatResponse:
        if self.broken:
            raise StreamRpcError(grpc.StatusCode.CANCELLED, "the heartbeat stream was closed")
        self._requests.put(request)
        try:
            item = self._responses.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise StreamRpcError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                 f"no heartbeat response within {timeout:.3f} s") from None
        if isinstance(item, pb.ConsumerGroupHeartbeatResponse):
            return item
        self.close()
        if isinstance(item, grpc.RpcError):
            raise item
        raise StreamRpcError(grpc.StatusCode.UNKNOWN, "unexpected item on the heartbeat stream")

    def close(self) -> None:
        self.broken = True
        self._requests.put(None)
        self._call.cancel()
