"""A hostile regex must not stall anyone else: the real server on loopback, one group heartbeating steadily
while another client subscribes with patterns that backtrack catastrophically in a backtracking engine.

RE2 makes each match linear and the resolution runs off the event loop, so the steady group's heartbeats,
the hostile requests themselves and the health check all answer promptly. The bound (2 s) is generous on
purpose: this is not a latency benchmark, it catches a loop blocked for seconds (it was 15 s per pattern).
"""

from __future__ import annotations

import threading
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.integration.conftest import start_server

BOUND_S = 2.0
LONG_NAME = "a" * 14
HOSTILE = ["(.?.?.?)*X", "(.?.?.?.?)*Y", "(a|aa)*Z", "(a*)*b", "((a+)+)+c"]


def join(stub: pb_grpc.GroupCoordinatorStub, group: str, **subscription: object) -> pb.ConsumerGroupHeartbeatResponse:
    request = pb.ConsumerGroupHeartbeatRequest(group_id=group, member_epoch=0, rebalance_timeout_ms=5000,
                                               topic_partitions=pb.TopicPartitionsList())
    if "names" in subscription:
        request.subscribed_topic_names.values.extend(subscription["names"])  # type: ignore[arg-type]
    else:
        request.subscribed_topic_regex = str(subscription["regex"])
    response: pb.ConsumerGroupHeartbeatResponse = stub.ConsumerGroupHeartbeat(request, timeout=10)
    assert response.error_code == 0, response.error_message
    return response


class SteadyMember(threading.Thread):
    """Heartbeats every 50 ms and records each round trip (seconds) and any error."""

    def __init__(self, stub: pb_grpc.GroupCoordinatorStub) -> None:
        super().__init__(daemon=True)
        self.stub = stub
        first = join(stub, "steady", names=["orders"])
        self.member_id, self.epoch = first.member_id, first.member_epoch
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            request = pb.ConsumerGroupHeartbeatRequest(group_id="steady", member_id=self.member_id,
                                                       member_epoch=self.epoch)
            started = time.perf_counter()
            try:
                r = self.stub.ConsumerGroupHeartbeat(request, timeout=30)
            except grpc.RpcError as e:
                self.errors.append(str(e.code()))
                continue
            self.latencies.append(time.perf_counter() - started)
            if r.error_code:
                self.errors.append(f"{r.error_code}: {r.error_message}")
            else:
                self.epoch = r.member_epoch
            self.stop_event.wait(0.05)


def test_hostile_regex_does_not_delay_another_groups_heartbeats() -> None:
    server = start_server({LONG_NAME: 1, "orders": 6, "ordersX": 2})
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.GroupCoordinatorStub(channel)
            health = health_pb2_grpc.HealthStub(channel)
            steady = SteadyMember(stub)
            steady.start()
            time.sleep(0.3)  # some heartbeats before the attack, for the baseline
            request_times: list[float] = []
            for i, pattern in enumerate(HOSTILE):
                started = time.perf_counter()
                join(stub, f"hostile-{i}", regex=pattern)
                request_times.append(time.perf_counter() - started)
                started = time.perf_counter()
                health.Check(health_pb2.HealthCheckRequest(service=""), timeout=30)
                request_times.append(time.perf_counter() - started)
            for _ in range(20):  # expensive for RE2 to reject (a large program); a repeat costs nothing
                started = time.perf_counter()
                r = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
                    group_id="hostile-invalid", member_epoch=0, rebalance_timeout_ms=5000,
                    subscribed_topic_regex="\\pL{500}", topic_partitions=pb.TopicPartitionsList()), timeout=10)
                request_times.append(time.perf_counter() - started)
                assert r.error_code == 128  # INVALID_REGULAR_EXPRESSION
            # A member subscribed only by regex gets its partitions once the background resolution lands.
            regex_member = join(stub, "by-regex", regex="orders.*")
            deadline = time.monotonic() + 20
            assigned: set[str] = set()
            member_id, epoch = regex_member.member_id, regex_member.member_epoch
            while time.monotonic() < deadline and assigned != {"orders", "ordersX"}:
                time.sleep(0.1)
                r = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
                    group_id="by-regex", member_id=member_id, member_epoch=epoch,
                    topic_partitions=pb.TopicPartitionsList()), timeout=10)
                assert r.error_code == 0, r.error_message
                epoch = r.member_epoch
                if r.HasField("assignment"):
                    assigned = {tp.topic_name for tp in r.assignment.topic_partitions if tp.partitions}
            assert assigned == {"orders", "ordersX"}
            time.sleep(0.3)
            steady.stop_event.set()
            steady.join(timeout=30)
        latencies = sorted(steady.latencies)
        p99 = latencies[int(len(latencies) * 0.99) - 1]
        print(f"steady heartbeats: n={len(latencies)} p50={latencies[len(latencies) // 2] * 1000:.1f} ms "
              f"p99={p99 * 1000:.1f} ms max={latencies[-1] * 1000:.1f} ms; "
              f"hostile requests and health checks max={max(request_times) * 1000:.1f} ms")
        assert steady.errors == []  # never fenced, never refused
        assert len(latencies) >= 10
        assert max(latencies) < BOUND_S
        assert max(request_times) < BOUND_S
    finally:
        server.stop()
