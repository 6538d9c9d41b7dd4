"""The compiled front end (`serve --front-end native`, native/frontend) on loopback, driven by grpcio clients:
the same answers as the grpcio server, call for call, the errors included."""

from __future__ import annotations

import asyncio
import queue
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from groupcoord.clients.group_member import GroupMember
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.runtime.auth import TokenStore
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.integration.conftest import start_server

HEARTBEAT = "/groupcoord.v1.GroupCoordinator/ConsumerGroupHeartbeat"
ORDERS = 24


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, ServerThread]]:
    both = {name: start_server({"orders": ORDERS}, front_end=name) for name in ("grpcio", "native")}
    try:
        yield both
    finally:
        for s in both.values():
            s.stop()


def join(group_id: str) -> pb.ConsumerGroupHeartbeatRequest:
    return pb.ConsumerGroupHeartbeatRequest(group_id=group_id, member_epoch=0, rebalance_timeout_ms=30_000,
                                            subscribed_topic_names=pb.StringList(values=["orders"]),
                                            server_assignor="uniform")


def to_stable(call: Callable[[pb.ConsumerGroupHeartbeatRequest], pb.ConsumerGroupHeartbeatResponse],
              group_id: str, members: int) -> list[tuple[str, int, frozenset[int]]]:
    """Join `members` members, then heartbeat each with what it owns until no answer changes and every
    partition is owned: (member id, epoch, owned partitions)."""
    state = []
    for _ in range(members):
        answer = call(join(group_id))
        assert answer.error_code == 0, answer
        state.append([answer.member_id, answer.member_epoch, answer])
    deadline, quiet = time.monotonic() + 20, 0
    while time.monotonic() < deadline:
        changed = 0
        for member in state:
            request = pb.ConsumerGroupHeartbeatRequest(group_id=group_id, member_id=member[0], member_epoch=member[1])
            if member[2].HasField("assignment"):
                request.topic_partitions.SetInParent()
                for tp in member[2].assignment.topic_partitions:
                    request.topic_partitions.topics.add(topic_id=tp.topic_id, partitions=tp.partitions)
            answer = call(request)
            assert answer.error_code == 0, answer
            if answer.member_epoch != member[1] or answer.HasField("assignment"):
                changed += 1
                if answer.HasField("assignment"):
                    member[2] = answer
            member[1] = answer.member_epoch
        owned = [(m, e, frozenset(p for tp in a.assignment.topic_partitions for p in tp.partitions))
                 for m, e, a in state]
        quiet = quiet + 1 if not changed and sum(len(parts) for _, _, parts in owned) == ORDERS else 0
        if quiet == 3:  # three rounds apart by more than the assignment interval (100 ms): nothing pending
            return owned
        time.sleep(0.15)
    raise AssertionError("the members did not reach a stable assignment")


def test_members_join_reach_a_stable_assignment_and_steady_heartbeats_are_answered_as_on_grpcio(
        servers: dict[str, ServerThread]) -> None:
    steady: dict[str, list[tuple[int, bool, bool, int, bool]]] = {}
    for name, server in servers.items():
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.GroupCoordinatorStub(channel)
            members = to_stable(lambda r, stub=stub: stub.ConsumerGroupHeartbeat(r, timeout=10), "stable", 3)
            owned = [p for _, _, parts in members for p in parts]
            assert sorted(owned) == list(range(ORDERS)), name  # every partition, each once
            sent = [(m, e) for m, e, _ in members for _ in range(5)]
            answers = [stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
                group_id="stable", member_id=m, member_epoch=e), timeout=10) for m, e in sent]
            # the epochs themselves depend on when the assignor ran: what must match is that each is kept
            steady[name] = [(a.error_code, a.member_id == m, a.member_epoch == e, a.heartbeat_interval_ms,
                             a.HasField("assignment")) for a, (m, e) in zip(answers, sent, strict=True)]
    assert steady["native"] == steady["grpcio"]
    assert set(steady["native"]) == {(0, True, True, 100, False)}


def outcome(call: Callable[[], Any]) -> tuple[str, int | None]:
    """(the call's gRPC status, the answer's Kafka error code)."""
    try:
        answer = call()
    except grpc.RpcError as e:
        return e.code().name, None
    return "OK", getattr(answer, "error_code", None)


def test_errors_carry_the_same_kafka_error_codes_and_grpc_statuses_as_on_grpcio(
        servers: dict[str, ServerThread]) -> None:
    seen: dict[str, dict[str, tuple[str, int | None]]] = {}
    for name, server in servers.items():
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.GroupCoordinatorStub(channel)
            member = stub.ConsumerGroupHeartbeat(join("errors"), timeout=10)
            raw = channel.unary_unary(HEARTBEAT, request_serializer=lambda b: b, response_deserializer=lambda b: b)
            unknown = channel.unary_unary("/groupcoord.v1.GroupCoordinator/NoSuchMethod",
                                          request_serializer=lambda b: b, response_deserializer=lambda b: b)
            heartbeat = stub.ConsumerGroupHeartbeat
            seen[name] = {
                "fenced epoch": outcome(lambda h=heartbeat, m=member: h(pb.ConsumerGroupHeartbeatRequest(
                    group_id="errors", member_id=m.member_id, member_epoch=m.member_epoch + 7), timeout=10)),
                "unknown member": outcome(lambda h=heartbeat: h(pb.ConsumerGroupHeartbeatRequest(
                    group_id="errors", member_id="nobody", member_epoch=3), timeout=10)),
                "group id too long": outcome(lambda h=heartbeat: h(pb.ConsumerGroupHeartbeatRequest(
                    group_id="g" * 100_000, member_id="x", member_epoch=1), timeout=10)),
                "no subscription on join": outcome(lambda h=heartbeat: h(pb.ConsumerGroupHeartbeatRequest(
                    group_id="errors", member_epoch=0), timeout=10)),
                "malformed bytes": outcome(lambda r=raw: r(b"\xff\xff\xff\xff\x0f garbage", timeout=10)),
                "over socket.request.max.bytes": outcome(lambda r=raw: r(b"\x0a" + b"\xff" * 5 + b"\x01"
                                                                        + b"x" * 105 * 1024 * 1024, timeout=30)),
                "unknown method": outcome(lambda u=unknown: u(b"", timeout=10)),
                "offset fetch of a missing group": outcome(lambda stub=stub: stub.OffsetFetch(
                    pb.OffsetFetchRequest(group_id="missing"), timeout=10)),
            }
    assert seen["native"] == seen["grpcio"]
    assert seen["native"]["fenced epoch"] == ("OK", int(Errors.FENCED_MEMBER_EPOCH))
    assert seen["native"]["unknown member"] == ("OK", int(Errors.UNKNOWN_MEMBER_ID))
    assert seen["native"]["malformed bytes"] == ("INVALID_ARGUMENT", None)
    assert seen["native"]["over socket.request.max.bytes"] == ("RESOURCE_EXHAUSTED", None)
    assert seen["native"]["unknown method"] == ("UNIMPLEMENTED", None)


def test_the_heartbeat_streams_answer_each_message_in_order(servers: dict[str, ServerThread]) -> None:
    with grpc.insecure_channel(servers["native"].address) as channel:
        stub = pb_grpc.GroupCoordinatorStub(channel)
        first = next(stub.ConsumerGroupHeartbeatStream(iter([join("streamed-join")]), timeout=10))
        assert first.error_code == 0 and first.member_epoch > 0
        [(member_id, epoch, _)] = to_stable(lambda r: stub.ConsumerGroupHeartbeat(r, timeout=10), "streamed", 1)
        steady = pb.ConsumerGroupHeartbeatRequest(group_id="streamed", member_id=member_id, member_epoch=epoch)
        stale = pb.ConsumerGroupHeartbeatRequest(group_id="streamed", member_id=member_id, member_epoch=epoch + 5)
        answers = list(stub.ConsumerGroupHeartbeatStream(iter([steady] * 50 + [stale]), timeout=10))
        assert [a.error_code for a in answers] == [0] * 50 + [int(Errors.FENCED_MEMBER_EPOCH)]
        batches = list(stub.ConsumerGroupHeartbeatBatchStream(iter(
            [pb.ConsumerGroupHeartbeatBatchRequest(heartbeats=[join("batched")] * 3)]), timeout=10))
        assert [a.error_code for b in batches for a in b.responses] == [0, 0, 0]
        with pytest.raises(grpc.RpcError) as bad:
            raw = channel.stream_stream("/groupcoord.v1.GroupCoordinator/ConsumerGroupHeartbeatStream",
                                        request_serializer=lambda b: b, response_deserializer=lambda b: b)
            list(raw(iter([b"\xff\xff\xff\xff\x0f"]), timeout=10))
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_burst_of_2000_concurrent_joins_is_answered_in_full(servers: dict[str, ServerThread]) -> None:
    async def burst() -> Counter[str]:
        channels = [grpc.aio.insecure_channel(servers["native"].address) for _ in range(8)]
        stubs = [pb_grpc.GroupCoordinatorStub(c) for c in channels]
        outcomes: Counter[str] = Counter()

        async def one(i: int) -> None:
            try:
                answer = await stubs[i % 8].ConsumerGroupHeartbeat(join(f"burst-{i % 20}"), timeout=60)
                outcomes["answered" if answer.error_code == 0 else f"error {answer.error_code}"] += 1
            except grpc.aio.AioRpcError as e:
                outcomes[e.code().name] += 1
        try:
            await asyncio.gather(*(one(i) for i in range(2000)))
        finally:
            for c in channels:
                await c.close()
        return outcomes

    assert asyncio.run(burst()) == Counter({"answered": 2000})


def test_health_reflection_and_a_real_member_are_served(servers: dict[str, ServerThread]) -> None:
    listed = {}
    for name, server in servers.items():
        with grpc.insecure_channel(server.address) as channel:
            status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert status.status == health_pb2.HealthCheckResponse.SERVING
            replies = list(reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10))
            listed[name] = sorted(s.name for r in replies for s in r.list_services_response.service)
    assert "groupcoord.v1.GroupCoordinator" in listed["grpcio"]
    assert listed["native"] == listed["grpcio"]
    address = servers["native"].address
    member = GroupMember(address, "real-member", ["orders"], heartbeat_stream=False)
    try:
        member.start()
        deadline = time.monotonic() + 20
        while len(member.assignment()) != ORDERS and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(member.assignment()) == ORDERS
    finally:
        member.close()


def admitted(call: Callable[[], Any], within_s: float = 5) -> bool:
    """The call is answered once the slot held before is released (the server sees the stream end soon after
    the client does)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            return bool(call().error_code == 0)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_beyond_max_concurrent_requests_a_call_is_refused_with_resource_exhausted_as_on_grpcio() -> None:
    for name in ("grpcio", "native"):
        server = start_server({"orders": 4}, front_end=name, **{"groupcoord.max.concurrent.requests": 1})
        held: queue.Queue[pb.ConsumerGroupHeartbeatRequest | None] = queue.Queue()
        try:
            with grpc.insecure_channel(server.address) as channel:
                stub = pb_grpc.GroupCoordinatorStub(channel)
                replies = stub.ConsumerGroupHeartbeatStream(iter(held.get, None), timeout=30)
                held.put(join("holder"))
                assert next(replies).error_code == 0, name  # the stream holds the one slot
                with pytest.raises(grpc.RpcError) as refused:
                    stub.ConsumerGroupHeartbeat(join("refused"), timeout=10)
                assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, name
                held.put(None)
                assert list(replies) == []
                assert admitted(lambda stub=stub: stub.ConsumerGroupHeartbeat(join("admitted"), timeout=10)), name
        finally:
            server.stop()


def test_auto_serves_through_the_native_front_end_with_tokens_too() -> None:
    """The default (`auto`) is the native front end wherever it is built: it serves bearer tokens (as TLS and
    ACLs, tests/auth on both front ends) as grpcio does."""
    chosen = {}
    for name, extra in (("plain", {}), ("tokens", {"tokens": TokenStore({"t" * 32: "User:a"})})):
        options = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping({}),
                                metadata_source=StaticMetadataSource({"orders": 1}), **extra)
        assert options.front_end == "auto"
        with ServerThread(options) as server:
            chosen[name] = server.server.front_end
            with grpc.insecure_channel(server.address) as channel:
                answer = pb_grpc.GroupCoordinatorStub(channel).ConsumerGroupHeartbeat(
                    join("auto"), metadata=(("authorization", "Bearer " + "t" * 32),), timeout=10)
            assert answer.error_code == 0, answer
    assert chosen == {"plain": "native", "tokens": "native"}
