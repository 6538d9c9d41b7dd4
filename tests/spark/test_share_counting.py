"""Issue 13's counting test: three Spark drivers share a 2-partition topic as a share group (queue semantics),
and one is killed with kill -9 in the middle of the stream.

Every produced record must be processed; the only records processed twice are ones the killed driver had
acquired and never acknowledged, whose locks expired with it and which another driver then received (delivery
count 2 or more); every driver did work. With ``staging.dir`` (the driver's default) the published output holds
every record exactly once: the killed driver's last batch was staged, never acknowledged, never published.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import pyarrow.parquet as pq
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from groupcoord.clients.spark_driver import DriverProcess
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.demo_processes import SkewedProducer
from groupcoord.embedded_kafka import EmbeddedKafka
from groupcoord.wire.v1 import share_pb2 as spb
from groupcoord.wire.v1 import share_pb2_grpc as spb_grpc

from .conftest import LaunchDriver, wait_until
from .share_helpers import set_group_configs, share_coordinator

pytestmark = [pytest.mark.spark, pytest.mark.timeout(420)]

TOPIC = "queue"
PARTITIONS = 2
GROUP = "queue-workers"
LOCK_MS = 3000
CRASH_WINDOW_MS = 5000  # driver a sleeps this long between writing a batch and finishing it
DRIVER_ARGS = ("--group-type", "share", "--sink", "rows", "--trigger-ms", "500", "--max-offsets-per-trigger", "300")
RATE = 60  # records/s: three drivers keep up with it, so the stream ends soon after the kill

Record = tuple[int, int]  # (partition, offset)


@pytest.fixture(scope="module")
def coordinator(kafka: EmbeddedKafka) -> Iterator[ServerThread]:
    with share_coordinator(kafka, group_share_record_lock_duration_ms=LOCK_MS) as server:
        yield server


def _ends(kafka: EmbeddedKafka) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    ends = admin.list_offsets({TopicPartition(TOPIC, p): OffsetSpec.latest() for p in range(PARTITIONS)})
    return {tp.partition: f.result(timeout=10).offset for tp, f in ends.items()}


def _share_start_offsets(address: str) -> dict[int, int]:
    """Each share-partition's start offset: everything below it is acknowledged (or archived)."""
    with grpc.insecure_channel(address) as channel:
        resp = spb_grpc.ShareGroupCoordinatorStub(channel).DescribeShareGroupOffsets(
            spb.DescribeShareGroupOffsetsRequest(group_id=GROUP), timeout=10)
    return {p.partition: p.start_offset for p in resp.partitions if p.topic_name == TOPIC}


def _rows(files: list[Path]) -> list[Record]:
    out: list[Record] = []
    for f in files:
        t = pq.read_table(f, columns=["partition", "offset"])
        out += list(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist(), strict=True))
    return out


def _published(d: DriverProcess) -> list[Record]:
    return _rows(sorted(f for f in (d.output / "batches").glob("*.parquet") if not f.name.startswith(".")))


def _staged(d: DriverProcess) -> list[Record]:
    return _rows(sorted(f for f in (d.output / "staging").glob("*/*.parquet") if not f.name.startswith(".")))


def _history(d: DriverProcess) -> list[dict]:
    """The driver's acquisitions file; a line cut by kill -9 is ignored."""
    out = []
    path = d.output / "acquisitions.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def _offsets(history: list[dict], event: str, min_count: int = 1) -> set[Record]:
    return {(p, o) for h in history if h["event"] == event for _t, p, a, b, c in h["ranges"] if c >= min_count
            for o in range(a, b + 1)}


def test_three_drivers_share_two_partitions_and_a_killed_drivers_records_come_back_once_its_locks_expire(
        kafka: EmbeddedKafka, coordinator: ServerThread, launch_driver: LaunchDriver) -> None:
    t0 = time.monotonic()
    kafka.create_topic(TOPIC, PARTITIONS)
    set_group_configs(coordinator.address, GROUP, share_auto_offset_reset="earliest")
    a = launch_driver("a", GROUP, TOPIC, *DRIVER_ARGS, "--batch-delay-ms", str(CRASH_WINDOW_MS))
    b = launch_driver("b", GROUP, TOPIC, *DRIVER_ARGS)
    c = launch_driver("c", GROUP, TOPIC, *DRIVER_ARGS)
    drivers = (a, b, c)
    wait_until(lambda: all(d.progress().get("state") == "running" for d in drivers), 300,
               "the three drivers' queries to start", drivers)
    producer = SkewedProducer(kafka.bootstrap_servers, TOPIC, PARTITIONS, rate=RATE, keys=20).start()
    try:
        wait_until(lambda: all(d.progress().get("records", 0) > 0 for d in drivers), 300,
                   "all three drivers to process records", drivers)
        # a has written a batch and sleeps before it counts as done (and is acknowledged): kill -9 it there.
        seen = a.progress().get("nonempty_batches", 0)
        wait_until(lambda: a.progress().get("nonempty_batches", 0) > seen, 60, "a to write another batch", drivers)
        a.kill()
        killed_at = time.monotonic()
        wait_until(lambda: time.monotonic() - killed_at > 2 * LOCK_MS / 1000, 30, "the stream to go on", (b, c))
    finally:
        producer.stop()
    ends = _ends(kafka)
    wait_until(lambda: all(_share_start_offsets(coordinator.address).get(p, -1) >= ends[p] for p in ends), 120,
               "b and c to acknowledge every record", (b, c))
    assert b.terminate() == 0 and c.terminate() == 0
    runtime = time.monotonic() - t0

    produced = {(p, o) for p, end in ends.items() for o in range(end)}
    published = {d.name: _published(d) for d in drivers}
    a_staged = _staged(a)  # a's last batch: processed, never acknowledged, never published
    processed = Counter([r for rows in published.values() for r in rows] + a_staged)
    duplicates = {r for r, n in processed.items() if n > 1}
    histories = {d.name: _history(d) for d in drivers}
    a_unacknowledged = _offsets(histories["a"], "acquired") - _offsets(histories["a"], "accepted")
    redelivered = _offsets(histories["b"], "acquired", 2) | _offsets(histories["c"], "acquired", 2)
    per_driver = {d.name: d.progress().get("records", 0) for d in drivers}
    print(f"\nproduced {len(produced)}, processed {sum(processed.values())} ({len(processed)} distinct), "
          f"duplicates {len(duplicates)} (a's unacknowledged ranges at the kill: {len(a_unacknowledged)} records, "
          f"redelivered to b/c: {len(a_unacknowledged & redelivered)}), published "
          f"{sum(len(r) for r in published.values())}; per driver {per_driver}; runtime {runtime:.0f} s")

    assert produced and set(processed) == produced, sorted(produced - set(processed))[:20]
    assert a_staged and set(a_staged) <= a_unacknowledged  # a was killed inside its window
    assert duplicates <= a_unacknowledged, sorted(duplicates - a_unacknowledged)[:20]
    assert duplicates == set(a_staged)  # nothing else was processed twice
    assert duplicates <= redelivered  # another driver got them after a's locks expired (delivery count >= 2)
    assert a_unacknowledged <= redelivered  # every record a held came back
    published_copies = Counter(r for rows in published.values() for r in rows)
    assert set(published_copies) == produced and max(published_copies.values()) == 1  # published exactly once
    assert all(n > 0 for n in per_driver.values()), per_driver
