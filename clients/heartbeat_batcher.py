"""Many members' heartbeats on one ConsumerGroupHeartbeatBatchStream, for an asyncio process that hosts many
members (an application with many consumers, a proxy, a load generator).

gRPC's cost is per message, about 0.1-0.3 ms of CPU on each side, several times what the coordinator spends on
a heartbeat. `HeartbeatBatcher` sends the heartbeats that are ready as one message:
- one batch is in flight on the stream at a time; the heartbeats that arrive meanwhile go in the next message,
  at most `BATCH_MAX_HEARTBEATS` in each (the coordinator answers a bigger one with INVALID_REQUEST), and
  its answers are read until there is one per heartbeat (they come in several messages when they would
  exceed the coordinator's response size limit);
- nothing waits for a batch to fill by default: on an idle stream a lone heartbeat goes at once, and under
  load the batches grow with the round trip;
- `linger_ms` (as Kafka's producer `linger.ms`) waits that long before each message, for fewer, bigger
  messages at the cost of that much latency.

As `HeartbeatStream` does for one member, a heartbeat keeps its own deadline. When a deadline passes, or the
stream fails, the stream is abandoned: every heartbeat waiting on it fails with the gRPC error a unary call
would have raised, and the next heartbeat opens a new stream. A late answer can never be taken for a later
request's.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import grpc

from groupcoord.clients.heartbeat_stream import StreamRpcError
from groupcoord.wire.v1 import coordinator_pb2 as pb

BATCH_MAX_HEARTBEATS = 1_000  # the coordinator's limit per message (proto: ConsumerGroupHeartbeatBatchStream)

_Waiting = tuple[pb.ConsumerGroupHeartbeatRequest, "asyncio.Future[pb.ConsumerGroupHeartbeatResponse]"]


class _BatchStream:
    """One stream and the heartbeats waiting for it; abandoned for good at its first failure."""

    def __init__(self, call: Any, linger_s: float, batcher: HeartbeatBatcher) -> None:
        self.call = call
        self.linger_s = linger_s
        self.batcher = batcher
        self.pending: list[_Waiting] = []
        self.in_flight: list[_Waiting] = []
        self.sending = False
        self.error: grpc.RpcError | None = None

    def enqueue(self, request: pb.ConsumerGroupHeartbeatRequest) -> asyncio.Future[pb.ConsumerGroupHeartbeatResponse]:
        future: asyncio.Future[pb.ConsumerGroupHeartbeatResponse] = asyncio.get_running_loop().create_future()
        self.pending.append((request, future))
        if not self.sending:
            self.sending = True
            asyncio.ensure_future(self._send())
        return future

    async def _send(self) -> None:
        try:
            while self.pending and self.error is None:
                if self.linger_s:
                    await asyncio.sleep(self.linger_s)
                self.in_flight = self.pending[:BATCH_MAX_HEARTBEATS]
                del self.pending[:BATCH_MAX_HEARTBEATS]
                batch = pb.ConsumerGroupHeartbeatBatchRequest(heartbeats=[r for r, _ in self.in_flight])
                await self.call.write(batch)
                answered = 0  # the answers may come in several messages (a response's size limit)
                while answered < len(self.in_flight):
                    answer = await self.call.read()
                    if answer is grpc.aio.EOF:
                        raise StreamRpcError(grpc.StatusCode.UNAVAILABLE, "the coordinator ended the heartbeat stream")
                    if answered + len(answer.responses) > len(self.in_flight):
                        raise StreamRpcError(grpc.StatusCode.INTERNAL, f"more answers than the {len(self.in_flight)} "
                                                                       "heartbeats sent")
                    for (_, future), response in zip(self.in_flight[answered:], answer.responses, strict=False):
                        if not future.done():
                            future.set_result(response)
                    answered += len(answer.responses)
                self.batcher.messages += 1
                self.batcher.heartbeats += len(self.in_flight)
                self.in_flight = []
        except grpc.RpcError as e:
            self.abandon(e)
        except asyncio.CancelledError:  # the call was cancelled under a pending write or read: abandoned
            self.abandon(StreamRpcError(grpc.StatusCode.CANCELLED, "the heartbeat stream was abandoned"))
        finally:
            self.sending = False

    def abandon(self, error: grpc.RpcError) -> None:
        """Fail every heartbeat waiting on this stream with `error` (the first one given) and cancel it."""
        if self.error is None:
            self.error = error
        for _, future in [*self.in_flight, *self.pending]:
            if not future.done():
                future.set_exception(self.error)
        self.in_flight, self.pending = [], []
        self.call.cancel()


class HeartbeatBatcher:
    """`await heartbeat(request, timeout)` from any number of tasks; see the module's docstring."""

    def __init__(self, stub: Any, linger_ms: float = 0.0) -> None:
        self.stub = stub
        self.linger_s = linger_ms / 1000
        self._stream: _BatchStream | None = None
        self.messages = 0  # batch messages answered, and the heartbeats they carried
        self.heartbeats = 0

    async def heartbeat(self, request: pb.ConsumerGroupHeartbeatRequest,
                        timeout: float) -> pb.ConsumerGroupHeartbeatResponse:
        stream = self._stream
        if stream is None or stream.error is not None:
            stream = self._stream = _BatchStream(self.stub.ConsumerGroupHeartbeatBatchStream(), self.linger_s, self)
        try:
            return await asyncio.wait_for(stream.enqueue(request), timeout)
        except TimeoutError:  # the wait cancelled this heartbeat's future; the stream fails all the others
            stream.abandon(StreamRpcError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                          f"no heartbeat response within {timeout:.3f} s"))
            assert stream.error is not None
            raise stream.error from None  # a failure that came first, or the deadline

    async def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None and stream.error is None:
            with contextlib.suppress(grpc.RpcError, asyncio.InvalidStateError):
                await stream.call.done_writing()
