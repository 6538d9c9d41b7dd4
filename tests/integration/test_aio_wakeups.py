"""`coalesce_wakeups`: grpc.aio's completion reader runs a batch per wake-up, and no completion is lost."""

from __future__ import annotations

import asyncio

import grpc

from groupcoord.coordinator.runtime.aio_wakeups import coalesce_wakeups


async def _echo_many(streams: int, messages: int, timeout: float) -> tuple[int, int]:
    async def echo(requests: object, context: grpc.aio.ServicerContext) -> None:
        while (m := await context.read()) is not grpc.aio.EOF:
            await context.write(m)

    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "t.Echo", {"Chat": grpc.stream_stream_rpc_method_handler(echo)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    wrapped = coalesce_wakeups()
    assert coalesce_wakeups() == wrapped  # a second call (another server on this loop) finds it wrapped
    answered = 0
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            chat = channel.stream_stream("/t.Echo/Chat")

            async def one(k: int) -> None:
                nonlocal answered
                call = chat()
                for i in range(messages):
                    payload = f"{k}-{i}".encode()
                    await call.write(payload)
                    assert await call.read() == payload
                    answered += 1
                await call.done_writing()

            await asyncio.wait_for(asyncio.gather(*(one(k) for k in range(streams))), timeout=timeout)
    finally:
        await server.stop(0)
    return wrapped, answered


def test_every_message_is_answered_when_wakeups_are_batched() -> None:
    wrapped, answered = asyncio.run(_echo_many(streams=64, messages=100, timeout=120))
    assert wrapped == 1  # the grpc version in use has the reader this wraps
    assert answered == 6_400


def test_a_lone_completion_is_run_at_once() -> None:
    """One stream, one message at a time: every wake-up has a single completion, which must run then (if it
    waited for the next wake-up, this would stall: nothing else is in flight)."""
    wrapped, answered = asyncio.run(_echo_many(streams=1, messages=200, timeout=60))
    assert (wrapped, answered) == (1, 200)


def test_a_loop_without_a_selector_is_left_alone() -> None:
    class NoSelector:
        pass

    assert coalesce_wakeups(NoSelector()) == 0  # type: ignore[arg-type]
