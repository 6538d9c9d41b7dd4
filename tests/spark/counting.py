"""The exactly-once counting scenario, shared by the local-mode test (test_exactly_once.py) and the standalone
cluster test (test_standalone_cluster.py): the same drivers, the same faults, the same checks.

Two Spark driver processes share a topic through the coordinator while a producer writes to it; one driver
leaves cleanly (SIGTERM) while a third starts, and then one crashes (SIGKILL of its whole process tree) in
the middle of the stream, between writing a batch and committing it. Every produced record must be published
once: the crashed driver's last batch was staged but never committed, so it was never published, and the
driver that took its partitions over re-read it from the last commit.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from groupcoord.clients.spark_driver import Coverage, DriverProcess, batch_ranges, coverage
from groupcoord.demo_processes import SkewedProducer
from groupcoord.embedded_kafka import EmbeddedKafka
from groupcoord.kafka_broker import KafkaBroker

from .conftest import LaunchDriver, wait_until

TOPIC = "counted"
PARTITIONS = 6
GROUP = "counting"
CRASH_WINDOW_MS = 3000  # driver a sleeps this long between writing a batch and finishing it
DRIVER_ARGS = ("--sink", "rows", "--starting-offsets", "earliest", "--trigger-ms", "500",
               "--max-offsets-per-trigger", "4000")


@dataclass(frozen=True, slots=True)
class Counted:
    coverage: Coverage
    crashed_batch: int  # records of a's last batch: staged, never published
    per_driver: dict[str, int]  # records each driver processed
    seconds: float  # from the first driver's launch to the last commit


def _end_offsets(kafka: EmbeddedKafka | KafkaBroker, topic: str) -> dict[tuple[str, int], tuple[int, int]]:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    ends = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)})
    return {(tp.topic, tp.partition): (0, f.result(timeout=10).offset) for tp, f in ends.items()}


def _owns(driver: DriverProcess) -> set[str]:
    return set(driver.status().get("assignment", []))


def _rows(outputs: list[Path]) -> list[tuple[str, str, int, int]]:
    """(driver, batch file, partition, offset) of every record written."""
    out = []
    for output in outputs:
        for path in sorted((output / "batches").glob("*.parquet")):
            table = pq.read_table(path, columns=["partition", "offset"])
            out += [(output.name, path.name, p, o) for p, o in zip(table.column("partition").to_pylist(),
                                                                  table.column("offset").to_pylist(), strict=True)]
    return out


def count_through_a_clean_leave_and_a_crash(kafka: EmbeddedKafka | KafkaBroker, launch_driver: LaunchDriver,
                                            *driver_args: str, start_timeout_s: float = 240,
                                            prestart_c: bool = False) -> Counted:
    """Run the scenario (extra `driver_args` go to every driver, e.g. ``--master spark://...``) and check it.

    `prestart_c`: c starts its Spark with a and b and waits (``--wait-for``) to join the group until b is
    asked to leave, so its Spark start-up is not in the test's time; it joins at the same moment either way."""
    run = uuid.uuid4().hex[:8]  # the real broker serves the whole session
    topic, group = f"{TOPIC}-{run}", f"{GROUP}-{run}"
    kafka.create_topic(topic, PARTITIONS)
    started = time.monotonic()
    args = (*DRIVER_ARGS, *driver_args)
    producer = SkewedProducer(kafka.bootstrap_servers, topic, PARTITIONS, rate=600, keys=20).start()
    try:
        a = launch_driver("a", group, topic, *args, "--batch-delay-ms", str(CRASH_WINDOW_MS))
        b = launch_driver("b", group, topic, *args)
        go = a.output.parent / f"c-go-{run}"
        c = launch_driver("c", group, topic, *args, "--wait-for", str(go)) if prestart_c else None
        wait_until(lambda: all(_owns(d) and d.progress().get("records", 0) > 0 for d in (a, b)), start_timeout_s,
                   "drivers a and b to share the topic and process records", (a, b))

        # b leaves cleanly while c starts: a takes b's partitions, then gives some to c (cooperatively).
        if c is not None:
            wait_until(lambda: c is not None and c.progress().get("state") == "waiting", start_timeout_s,
                       "c's Spark to start", (c,))
        leaving = threading.Thread(target=b.terminate, name="stop-b")
        leaving.start()
        if c is None:
            c = launch_driver("c", group, topic, *args)
        else:
            go.write_text("go\n")
        leaving.join(90)
        assert b.proc is not None and b.proc.returncode == 0, "b did not stop cleanly"
        assert b.progress().get("state") == "stopped"
        wait_until(lambda: bool(_owns(a)) and bool(_owns(c)) and c.progress().get("records", 0) > 0,
                   start_timeout_s, "drivers a and c to share the topic and process records", (a, c))

        # a crashes mid-stream: it has written a batch and sleeps before the batch counts as done (and would be
        # committed); it is killed in that window, so its last batch is written but not committed.
        seen = a.progress().get("nonempty_batches", 0)
        wait_until(lambda: a.progress().get("nonempty_batches", 0) > seen, 60, "a to write another batch", (a, c))
        a.kill()
        wait_until(lambda: len(_owns(c)) == PARTITIONS, 60, "c to own every partition after a's session timed out",
                   (c,))
    finally:
        producer.stop()

    produced = _end_offsets(kafka, topic)
    wait_until(lambda: all(c.status().get("committed", {}).get(f"{t}:{p}", -1) >= end
                           for (t, p), (_, end) in produced.items()), 240, "c to commit every record", (c,))
    seconds = time.monotonic() - started
    assert c.terminate() == 0

    outputs = [a.output, b.output, c.output]
    cov = coverage(batch_ranges(outputs), produced)
    copies = Counter((p, o) for _, _, p, o in _rows(outputs))
    staged = [f for f in (a.output / "staging").glob("*/*.parquet") if not f.name.startswith(".")]
    a_last = {(p, o) for f in staged for p, o in zip(*pq.read_table(f, columns=["partition", "offset"])
                                                     .to_pydict().values(), strict=True)}
    per_driver = {d.name: int(d.progress().get("records", 0)) for d in (a, b, c)}
    print(f"\nproduced {cov.produced}, published {cov.processed}, missing {cov.missing}, "
          f"duplicates {cov.duplicates} (a's last batch, staged and never published: {len(a_last)} records); "
          f"per driver {per_driver}; {seconds:.0f} s")

    assert cov.produced > 0 and cov.missing == 0, cov.gaps
    assert cov.duplicates == 0, cov.duplicate_batches
    assert len(copies) == cov.produced  # nothing outside what was produced
    # a was killed inside its window: its last batch was written (staged), never published, and re-read by c
    assert a_last and all(copies[r] == 1 for r in a_last)
    assert all(n > 0 for n in per_driver.values())
    return Counted(cov, len(a_last), per_driver, seconds)
