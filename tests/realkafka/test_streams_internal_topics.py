"""Streams internal topics on a real Kafka 4.4 broker: the coordinator (real gRPC, metadata from Kafka) creates a
group's missing repartition and changelog topics with the partition counts the topology implies, and the
group leaves NotReady once the metadata shows them; an existing one with another count keeps it NotReady with
Kafka's status detail."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import grpc
import pytest

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.kafka_metadata import KafkaMetadataSource
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.topic_creation import KafkaTopicCreator
from groupcoord.kafka_broker import KafkaBroker
from groupcoord.wire.v1 import streams_pb2 as spb
from groupcoord.wire.v1 import streams_pb2_grpc as spb_grpc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MISSING_INTERNAL_TOPICS, INCORRECTLY_PARTITIONED_TOPICS = 3, 2


def wait_until(cond: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def coordinator(kafka_broker: KafkaBroker) -> Iterator[Callable[[], tuple[ServerThread, KafkaMetadataSource]]]:
    """Starts the coordinator with metadata from the broker, once the test has made its topics (so the first
    heartbeat already sees them)."""
    started: list[tuple[ServerThread, KafkaMetadataSource]] = []

    def start() -> tuple[ServerThread, KafkaMetadataSource]:
        source = KafkaMetadataSource(kafka_broker.bootstrap_servers, refresh_interval_s=0.2, request_timeout_s=10)
        assert source.refresh_now()
        source.start()
        config = BrokerConfig.from_mapping({"group.streams.min.heartbeat.interval.ms": 100,
                                            "group.streams.min.session.timeout.ms": 1000,
                                            "group.streams.heartbeat.interval.ms": 200,
                                            "group.streams.session.timeout.ms": 5000,
                                            "group.streams.initial.rebalance.delay.ms": 0,
                                            "group.streams.assignment.interval.ms": 0})
        creator = KafkaTopicCreator(kafka_broker.bootstrap_servers, on_created=source.refresh_now)
        options = ServerOptions(listen="127.0.0.1:0", config=config, metadata_source=source, metadata_poll_s=0.2,
                                topic_creator=creator)
        started.append((ServerThread(options).start(), source))
        return started[-1]

    yield start
    for srv, source in started:
        srv.stop()
        source.stop()


def word_count(app: str, changelog_configs: dict[str, str] | None = None) -> spb.StreamsTopology:
    """lines -> (repartition, count unset) -> count store (changelog, count unset)."""
    changelog = spb.StreamsTopicInfo(name=f"{app}-counts-changelog", topic_configs=[
        spb.StreamsKeyValue(key=k, value=v) for k, v in (changelog_configs or {}).items()])
    return spb.StreamsTopology(epoch=1, subtopologies=[
        spb.StreamsSubtopology(subtopology_id="0", source_topics=[f"{app}-lines"],
                               repartition_sink_topics=[f"{app}-words-repartition"]),
        spb.StreamsSubtopology(subtopology_id="1",
                               repartition_source_topics=[spb.StreamsTopicInfo(name=f"{app}-words-repartition")],
                               state_changelog_topics=[changelog]),
    ])


class Member:
    def __init__(self, address: str, app: str, changelog_configs: dict[str, str] | None = None) -> None:
        self.channel = grpc.insecure_channel(address)
        self.stub = spb_grpc.StreamsGroupCoordinatorStub(self.channel)
        self.app, self.epoch, self.active = app, 0, 0
        self.changelog_configs = changelog_configs

    def beat(self) -> spb.StreamsGroupHeartbeatResponse:
        req = spb.StreamsGroupHeartbeatRequest(group_id=self.app, member_id="m1", member_epoch=self.epoch)
        req.active_tasks.SetInParent()
        req.standby_tasks.SetInParent()
        req.warmup_tasks.SetInParent()
        if self.epoch == 0:
            req.topology.CopyFrom(word_count(self.app, self.changelog_configs))
            req.process_id, req.rebalance_timeout_ms = "p1", 5000
        resp = self.stub.StreamsGroupHeartbeat(req, timeout=10)
        assert resp.error_code == 0, resp.error_message
        self.epoch = resp.member_epoch
        if resp.HasField("active_tasks"):
            self.active = sum(len(t.partitions) for t in resp.active_tasks.tasks)
        return resp

    def state(self) -> str:
        out = self.stub.StreamsGroupDescribe(spb.StreamsGroupDescribeRequest(group_ids=[self.app]), timeout=10)
        return out.groups[0].group_state


def test_missing_internal_topics_are_created_with_the_topologys_counts_and_the_group_becomes_ready(
        kafka_broker: KafkaBroker, unique: str,
        coordinator: Callable[[], tuple[ServerThread, KafkaMetadataSource]]) -> None:
    kafka_broker.create_topic(f"{unique}-lines", 3)
    srv, source = coordinator()
    member = Member(srv.address, unique)
    try:
        first = member.beat()
        assert [s.status_code for s in first.status.items] == [MISSING_INTERNAL_TOPICS]
        assert first.status.items[0].status_detail == (
            f"Internal topics are missing: {unique}-counts-changelog, {unique}-words-repartition")
        assert member.state() == "NotReady"

        def ready() -> bool:
            resp = member.beat()
            return not resp.status.items and member.active == 6

        wait_until(ready, what="the internal topics to exist and the 6 tasks to be assigned")
        image = source.snapshot()
        assert image.by_name[f"{unique}-words-repartition"].partition_count == 3, "from the source topic"
        assert image.by_name[f"{unique}-counts-changelog"].partition_count == 3, "one per task"
        wait_until(lambda: member.beat() is not None and member.state() == "Stable", what="Stable")
    finally:
        member.channel.close()


def test_an_existing_internal_topic_with_another_count_keeps_the_group_not_ready(
        kafka_broker: KafkaBroker, unique: str,
        coordinator: Callable[[], tuple[ServerThread, KafkaMetadataSource]]) -> None:
    kafka_broker.create_topic(f"{unique}-lines", 3)
    kafka_broker.create_topic(f"{unique}-counts-changelog", 2)
    srv, source = coordinator()
    member = Member(srv.address, unique)
    try:
        for _ in range(5):  # it stays so: nothing is created or assigned while a topic is wrong
            resp = member.beat()
            assert [(s.status_code, s.status_detail) for s in resp.status.items] == [(
                INCORRECTLY_PARTITIONED_TOPICS,
                f"Existing topic {unique}-counts-changelog has different number of partitions: expected 3, found 2")]
            assert member.state() == "NotReady" and member.active == 0
            time.sleep(0.3)
        assert f"{unique}-words-repartition" not in source.snapshot().by_name
    finally:
        member.channel.close()


def test_an_internal_topic_the_broker_refuses_to_create_is_named_in_the_missing_internal_topics_status(
        kafka_broker: KafkaBroker, unique: str,
        coordinator: Callable[[], tuple[ServerThread, KafkaMetadataSource]]) -> None:
    """The broker refuses the changelog's invalid config; the next heartbeats' MISSING_INTERNAL_TOPICS detail
    says so, as Kafka's KafkaApis appends AutoTopicCreationManager's cached creation errors to it ("; Creation
    failed: <topic> (<error>)."), while the repartition topic is created."""
    kafka_broker.create_topic(f"{unique}-lines", 3)
    srv, source = coordinator()
    member = Member(srv.address, unique, changelog_configs={"cleanup.policy": "bogus"})
    details: list[str] = []
    try:
        def refusal_reported() -> bool:
            resp = member.beat()
            details[:] = [s.status_detail for s in resp.status.items if s.status_code == MISSING_INTERNAL_TOPICS]
            # once the repartition topic exists, only the refused changelog is missing
            return bool(details) and details[0].startswith(f"Internal topics are missing: {unique}-counts-changelog;")

        wait_until(refusal_reported, what="the creation failure in the status")
        (detail,) = details
        assert detail.startswith(f"Internal topics are missing: {unique}-counts-changelog; Creation failed: "
                                 f"{unique}-counts-changelog ("), detail
        assert "bogus" in detail and detail.endswith(")."), detail
        assert member.state() == "NotReady" and member.active == 0
        assert f"{unique}-words-repartition" in source.snapshot().by_name
    finally:
        member.channel.close()
