"""A clean leave (SIGTERM) of a Kafka-backed instance hands its groups over while it still answers.

Found by `bench/kafka_takeover.py` (and the rolling restarts of `groupcoord faults --mode kafka`): after SIGTERM an
instance first stopped its gRPC server, waiting out the grace period for in-flight calls (a heartbeat stream never
ends by itself, so all of it), and only then left the coordinators' group. For those seconds its groups were
served by no one: it refused every call, and no other instance had the partitions yet. A clean leave was
slower than a kill -9 with a short session timeout.

The rule: leave the coordinators' group first and keep answering (NOT_COORDINATOR: the client asks FindCoordinator
and goes to the new owner) until another instance owns the partitions (loading them: 14, or serving them), then
stop serving.
"""

from __future__ import annotations

import signal
from pathlib import Path

import grpc
import pytest

from groupcoord.kafka_broker import KafkaBroker
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.realkafka.test_split_brain import PARTITIONS, free_port, owner_port, serve, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def answers(address: str, group_id: str) -> int | None:
    """OffsetFetch's error code at `address`; None when the instance does not answer at all."""
    try:
        with grpc.insecure_channel(address) as channel:
            resp = pb_grpc.GroupCoordinatorStub(channel).OffsetFetch(
                pb.OffsetFetchRequest(group_id=group_id, member_epoch=-1), timeout=2)
    except grpc.RpcError:
        return None
    return int(resp.error_code)


def test_an_instance_stopping_hands_its_groups_over_before_it_stops_answering(
        kafka_broker: KafkaBroker, unique: str, tmp_path: Path) -> None:
    kafka_broker.create_topic(unique, PARTITIONS, config={"cleanup.policy": "compact"})
    ports = [free_port(), free_port()]
    procs = [serve(kafka_broker.bootstrap_servers, unique, port, tmp_path / f"instance{i}.log")
             for i, port in enumerate(ports)]
    addresses = [f"127.0.0.1:{p}" for p in ports]
    try:
        wait_for(lambda: all(any(owner_port(addresses, f"g{n}") == p for n in range(40)) for p in ports),
                 "both instances serve groups")
        group = next(f"g{n}" for n in range(40) if owner_port(addresses, f"g{n}") == ports[0])
        procs[0].send_signal(signal.SIGTERM)
        handed_over_while_answering = False
        while procs[0].poll() is None and not handed_over_while_answering:
            leaving = answers(addresses[0], group)
            taken = answers(addresses[1], group) in (0, 14)  # the other instance serves it, or is loading it
            handed_over_while_answering = leaving is not None and leaving != 0 and taken
        assert handed_over_while_answering, "the group was served by the other instance while the leaving one answered"
        wait_for(lambda: answers(addresses[1], group) == 0, "the other instance serves the group")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
