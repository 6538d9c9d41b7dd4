"""The directory of the Kafka-backed mode: which instance owns which state partition, for FindCoordinator.

Each owner claims its partitions in the coordinators' group (`ownership_lease`): an offset per partition whose
metadata is its advertised `host:port`. This reads those claims back, periodically, with OffsetFetch by a consumer
of that group that never subscribes (so never joins). An entry can be stale for a moment after a move: a client
that reaches an instance no longer owning the group gets NOT_COORDINATOR and asks again. (librdkafka's mock
cluster implements neither DescribeGroups nor ConsumerGroupDescribe, so members' client ids and assignments
cannot be described there.)

Not `AdminClient.list_consumer_group_offsets`: in librdkafka (2.16.1 here) a NOT_COORDINATOR or
COORDINATOR_LOAD_IN_PROGRESS answer to the admin OffsetFetch dereferences the consumer-group handle an admin client
does not have and the process dies with SIGSEGV (rd_kafka_cgrp_op <- rd_kafka_handle_OffsetFetch <-
rd_kafka_ListConsumerGroupOffsetsResponse_parse; librdkafka issue 5040). A real broker answers so whenever the
group's coordinator is loading or moving; a consumer handles it by finding the coordinator.
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import Consumer, TopicPartition

from groupcoord.coordinator.runtime.kafka_state_options import KafkaStateOptions, format_host_port, parse_host_port

log = logging.getLogger("groupcoord.sharding")


class OwnershipDirectory:
    def __init__(self, options: KafkaStateOptions) -> None:
        self.options = options
        self.advertised = ("", 0)  # this instance's address, set when it starts
        # Replaced whole by the reading thread: partition -> (host, port) of the owner that claimed it.
        self.entries: dict[int, tuple[str, int]] = {}

    def _reader(self, role: str) -> Consumer:
        o = self.options
        return Consumer({"bootstrap.servers": o.bootstrap_servers, **o.client_config,
                         "group.id": o.coordinators_group, "enable.auto.commit": False,
                         "client.id": f"{format_host_port(*self.advertised)}-{role}"})

    def run(self, stopping: threading.Event) -> None:
        """Read the claims every `directory_refresh_ms` until `stopping` is set (a thread of its own)."""
        reader = self._reader("directory")
        partitions = [TopicPartition(self.options.topic, p) for p in range(self.options.partitions)]
        interval = self.options.directory_refresh_ms / 1000
        try:
            while True:
                try:
                    committed: list[TopicPartition] | None = reader.committed(partitions, timeout=max(interval, 5.0))
                except Exception as e:
                    log.warning("reading the coordinators' directory failed: %s", e)
                    committed = None
                if committed is not None:
                    self.entries = parse(committed)
                if stopping.wait(interval):
                    return
        finally:
            reader.close()

    def wait_claimed_elsewhere(self, partitions: list[int], timeout_s: float) -> bool:
        """Wait (up to `timeout_s`) until another instance has claimed each of `partitions`, so a leaving instance
        keeps answering NOT_COORDINATOR (clients ask FindCoordinator again) until someone else owns its groups,
        instead of refusing calls while no one does. Blocking."""
        if not partitions:
            return True
        reader = self._reader("leaving")
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                try:
                    committed = reader.committed([TopicPartition(self.options.topic, p) for p in partitions],
                                                 timeout=max(0.1, min(5.0, deadline - time.monotonic())))
                except Exception as e:  # noqa: BLE001 - a leaving instance only waits less
                    log.debug("reading the directory while leaving failed: %s", e)
                    committed = []
                owners = parse(committed)
                if all(owners.get(p, self.advertised) != self.advertised for p in partitions):
                    return True
                time.sleep(0.1)
            return False
        finally:
            reader.close()


def parse(committed: list[TopicPartition]) -> dict[int, tuple[str, int]]:
    directory: dict[int, tuple[str, int]] = {}
    for tp in committed:
        if tp.offset >= 0 and tp.metadata:
            try:
                directory[tp.partition] = parse_host_port(tp.metadata)
            except ValueError:
                log.warning("directory entry for partition %d is not HOST:PORT: %r", tp.partition, tp.metadata)
    return directory
