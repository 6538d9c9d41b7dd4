"""A driver frozen past its session (SIGSTOP of its whole process tree) publishes nothing the group gave away.

Drivers a and b share a topic while a producer writes to it. Right after a has written a batch, and before
that batch is committed (a sleeps in that window), a's driver, JVM, reader and workers are all stopped. The
coordinator expires a's session, b takes every partition over and resumes from a's last commit. Then a is
resumed: its commit for the batch it wrote is refused (a is no longer a member with that epoch), so that
batch's output is discarded, and a rejoins. In what was published: every produced record once, none twice.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from groupcoord.clients.group_member import GroupMember
from groupcoord.clients.spark_driver import DriverProcess, batch_ranges, coverage
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.demo_processes import SkewedProducer
from groupcoord.embedded_kafka import EmbeddedKafka

from .conftest import COORDINATOR_CONFIG, LaunchDriver, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

TOPIC = "paused"
PARTITIONS = 4
GROUP = "pausing"
DRIVER_ARGS = ("--sink", "rows", "--starting-offsets", "earliest", "--trigger-ms", "300",
               "--max-offsets-per-trigger", "4000")
WINDOW_MS = 2000  # a sleeps this long after writing a batch, before the batch counts as done


def _owns(driver: DriverProcess) -> set[str]:
    return set(driver.status().get("assignment", []))


def _ends(kafka: EmbeddedKafka) -> dict[tuple[str, int], tuple[int, int]]:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    ends = admin.list_offsets({TopicPartition(TOPIC, p): OffsetSpec.latest() for p in range(PARTITIONS)})
    return {(tp.topic, tp.partition): (0, f.result(timeout=10).offset) for tp, f in ends.items()}


def test_a_driver_paused_past_its_session_publishes_no_record_twice_and_loses_none(
        kafka: EmbeddedKafka, coordinator: ServerThread, launch_driver: LaunchDriver) -> None:
    started = time.monotonic()
    kafka.create_topic(TOPIC, PARTITIONS)
    producer = SkewedProducer(kafka.bootstrap_servers, TOPIC, PARTITIONS, rate=200, keys=10).start()
    try:
        a = launch_driver("a", GROUP, TOPIC, *DRIVER_ARGS, "--batch-delay-ms", str(WINDOW_MS))
        b = launch_driver("b", GROUP, TOPIC, *DRIVER_ARGS)
        wait_until(lambda: all(_owns(d) and d.progress().get("nonempty_batches", 0) > 0 for d in (a, b)), 180,
                   "drivers a and b to share the topic and write batches", (a, b))

        seen = a.progress().get("nonempty_batches", 0)
        wait_until(lambda: a.progress().get("nonempty_batches", 0) > seen, 60, "a to write another batch", (a, b))
        a_epoch = a.status().get("member_epoch")
        paused_at = time.monotonic()
        frozen = a.pause()  # inside a's window: its batch is written, not yet committed
        try:
            b_records = b.progress().get("records", 0)
            wait_until(lambda: len(_owns(b)) == PARTITIONS and b.progress().get("records", 0) > b_records, 60,
                       "b to take every partition over and process records", (b,))
        finally:
            a.resume(frozen)
        paused_s = time.monotonic() - paused_at
        producer.stop()  # a short backlog: the catch-up after a's rejoin stays quick under load
        a_batches = a.progress().get("batches", 0)
        wait_until(lambda: bool(_owns(a)) and a.status().get("member_epoch") != a_epoch
                   and a.progress().get("batches", 0) > a_batches + 1, 90,
                   "a to rejoin after its resume and run batches again", (a, b))
    finally:
        producer.stop()

    produced = _ends(kafka)
    watcher = GroupMember(coordinator.address, GROUP, [TOPIC])
    try:
        wait_until(lambda: all(watcher.fetch_offsets(produced).get(tp, -1) >= end
                               for tp, (_, end) in produced.items()), 120, "every record to be committed", (a, b))
    finally:
        watcher.close()
    stops = [threading.Thread(target=d.terminate) for d in (a, b)]
    for t in stops:
        t.start()
    for t in stops:
        t.join(90)
    assert a.proc is not None and a.proc.returncode == 0 and b.proc is not None and b.proc.returncode == 0

    a_status = a.status()
    cov = coverage(batch_ranges([a.output, b.output]), produced)
    session_s = COORDINATOR_CONFIG["group.consumer.session.timeout.ms"] / 1000
    print(f"\nproduced {cov.produced}, published {cov.processed}, missing {cov.missing}, duplicates "
          f"{cov.duplicates}; a paused {paused_s:.1f} s (session timeout {session_s:.1f} s); "
          f"a discarded {a_status.get('discarded_files')} staged batch(es); test took "
          f"{time.monotonic() - started:.0f} s")
    assert paused_s > session_s
    assert cov.produced > 0
    assert cov.missing == 0, cov.gaps
    assert cov.duplicates == 0, cov.duplicate_batches
    assert a_status.get("discarded_files", 0) >= 1  # the batch written before the pause was never published
