"""The demo's share-group act: more Spark drivers than partitions, all busy (KIP-932 queue semantics).

Three drivers (``python -m groupcoord.clients.spark_driver --group-type share``) read one 2-partition topic as the share
group ``demo-queue``: the coordinator hands each driver offset ranges under acquisition locks, a batch's ranges
are acknowledged once Spark has processed it, and its output is published then. The drivers start their Spark
while the consumer-group act's drivers stop and its summary is drawn (``--wait-for``), then join together. It
prints, per driver, the records it processed from each partition, and the total: produced, processed, missing
and duplicates, counted from the published Parquet rows.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["SHARE_SECONDS", "SHARE_SETTINGS", "ShareAct"]

TOPIC = "jobs"
PARTITIONS = 2
GROUP = "demo-queue"
DRIVERS = ("s1", "s2", "s3")
SHARE_SECONDS = 8.0  # how long the act produces once every driver is busy

# Coordinator settings for the act (`groupcoord serve --set`): quick joins; locks renewed while a batch runs.
SHARE_SETTINGS: dict[str, Any] = {
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 500,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.session.timeout.ms": 10000,
    "group.share.assignment.interval.ms": 500,
    "group.share.min.record.lock.duration.ms": 5000,
    "group.share.record.lock.duration.ms": 10000,
}


class ShareAct:
    """`prepare()` starts the drivers' Spark (they wait to join); `run()` plays the act and prints it."""

    def __init__(self, kafka: Any, coordinator: str, output: Path, say: Callable[[str], None],
                 out: Callable[[str], None], rate: float = 400.0, seconds: float = SHARE_SECONDS) -> None:
        self.kafka = kafka
        self.coordinator = coordinator
        self.output = output / "share"
        self.say = say
        self.out = out
        self.rate = rate
        self.seconds = seconds
        self.go = self.output / "go"
        self.drivers: dict[str, Any] = {}

    def prepare(self, driver_memory: str, spark_args: tuple[str, ...] = ()) -> ShareAct:
        """`spark_args` go to every driver last (e.g. ``--master spark://... --cores-max 1``)."""
        from groupcoord.clients.spark_driver import DriverProcess

        self.kafka.create_topic(TOPIC, PARTITIONS)
        self.output.mkdir(parents=True, exist_ok=True)
        _set_group_config(self.coordinator, GROUP, "share.auto.offset.reset", "earliest")
        for name in DRIVERS:
            self.drivers[name] = DriverProcess(name, self.output / name, [
                "--coordinator", self.coordinator, "--group", GROUP, "--group-type", "share", "--topic", TOPIC,
                "--bootstrap-servers", self.kafka.bootstrap_servers, "--sink", "rows", "--trigger-ms", "500",
                "--max-offsets-per-trigger", "500", "--batch-delay-ms", "300", "--master", "local[1]",
                "--driver-memory", driver_memory, "--wait-for", str(self.go), *spark_args]).start()
        return self

    def run(self, start_timeout_s: float, catch_up_s: float = 60.0) -> dict[str, Any]:
        from groupcoord.demo_processes import SkewedProducer

        self.say(f"share-group act: {len(DRIVERS)} Spark drivers on a {PARTITIONS}-partition topic {TOPIC} as share "
                 f"group {GROUP} (group.type=share): more drivers than partitions")
        self._wait(start_timeout_s, lambda: all(d.progress().get("state") == "waiting" for d in self.drivers.values()),
                   "the share drivers' Spark to start")
        producer = SkewedProducer(self.kafka.bootstrap_servers, TOPIC, PARTITIONS, self.rate, skew=0.0,
                                  value_bytes=32).start()
        self.go.write_text("go\n")
        try:
            self._wait(start_timeout_s, lambda: all(d.progress().get("records", 0) > 0
                                                    for d in self.drivers.values()),
                       "every share driver to process records")
            self.say(f"every driver is processing; producing {self.rate:.0f} records/s for {self.seconds:.0f} s more")
            time.sleep(self.seconds)
        finally:
            producer.stop()
        ends = _end_offsets(self.kafka.bootstrap_servers)
        self._wait(catch_up_s, lambda: all(_start_offsets(self.coordinator).get(p, -1) >= e
                                           for p, e in ends.items()),
                   "the share drivers to acknowledge every record")
        for d in self.drivers.values():
            d.terminate(60)
        return self._summary(ends)

    def stop(self) -> None:
        for d in self.drivers.values():
            with contextlib.suppress(Exception):
                d.terminate(30)

    def _wait(self, seconds: float, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + seconds
        while not done():
            for name, d in self.drivers.items():
                if not d.alive() and d.progress().get("state") not in ("stopped", "draining"):
                    raise RuntimeError(f"share driver {name} exited unexpectedly; see {d.output / 'driver.log'}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {seconds:.0f} s waiting for {what}")
            time.sleep(0.25)

    def _summary(self, ends: dict[int, int]) -> dict[str, Any]:
        import pyarrow.parquet as pq

        rows: dict[str, list[tuple[int, int]]] = {}
        for name, d in self.drivers.items():
            rows[name] = []
            for f in sorted((d.output / "batches").glob("*.parquet")):
                if not f.name.startswith("."):
                    t = pq.read_table(f, columns=["partition", "offset"])
                    rows[name] += list(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist(),
                                           strict=True))
        copies = Counter(r for rs in rows.values() for r in rs)
        produced = {(p, o) for p, e in ends.items() for o in range(e)}
        missing = len(produced - set(copies))
        duplicates = sum(n - 1 for n in copies.values())
        self.out("    DRIVER  RECORDS  " + "  ".join(f"P{p}".ljust(6) for p in range(PARTITIONS)) + "  BATCHES")
        for name, rs in rows.items():
            per_p = Counter(p for p, _ in rs)
            batches = self.drivers[name].progress().get("nonempty_batches", 0)
            self.out(f"    {name:<6}  {len(rs):<7}  " + "  ".join(str(per_p.get(p, 0)).ljust(6)
                                                             for p in range(PARTITIONS)) + f"  {batches}")
        self.out(f"    share group: records produced {len(produced)}, processed {sum(copies.values())}, "
                 f"missing {missing}, duplicates {duplicates}; every driver busy: "
                 f"{all(len(rs) > 0 for rs in rows.values())}")
        return {"produced": len(produced), "missing": missing, "duplicates": duplicates,
                "per_driver": {n: len(rs) for n, rs in rows.items()}}


def _set_group_config(address: str, group: str, name: str, value: str) -> None:
    import grpc

    from groupcoord.wire.v1 import coordinator_pb2 as pb
    from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

    with grpc.insecure_channel(address) as channel:
        req = pb.AlterGroupConfigsRequest(group_id=group)
        req.configs.add(name=name, value=value)
        resp = pb_grpc.GroupCoordinatorStub(channel).AlterGroupConfigs(req, timeout=10)
    if resp.error_code:
        raise RuntimeError(f"could not set {name} for group {group}: {resp.error_message}")


def _start_offsets(address: str) -> dict[int, int]:
    """Each share-partition's start offset (DescribeShareGroupOffsets): every record below it is acknowledged."""
    import grpc

    from groupcoord.wire.v1 import share_pb2 as spb
    from groupcoord.wire.v1 import share_pb2_grpc as spb_grpc

    with grpc.insecure_channel(address) as channel:
        resp = spb_grpc.ShareGroupCoordinatorStub(channel).DescribeShareGroupOffsets(
            spb.DescribeShareGroupOffsetsRequest(group_id=GROUP), timeout=5)
    return {p.partition: p.start_offset for p in resp.partitions if p.topic_name == TOPIC}


def _end_offsets(bootstrap_servers: str) -> dict[int, int]:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log.connection.close": False})
    futures = admin.list_offsets({TopicPartition(TOPIC, p): OffsetSpec.latest() for p in range(PARTITIONS)},
                                 request_timeout=10)
    return {tp.partition: f.result(timeout=10).offset for tp, f in futures.items()}


def run_alone(output: Path, driver_memory: str, start_timeout_s: float, out: Callable[[str], None],
              spark_args: tuple[str, ...] = ()) -> int:
    """``groupcoord demo --share-only``: the share act by itself (embedded Kafka, coordinator, three drivers),
    for a look at queue semantics without the consumer-group acts (about a minute on a quiet machine)."""
    from groupcoord.demo_processes import CoordinatorProcess
    from groupcoord.embedded_kafka import EmbeddedKafka

    t0 = time.monotonic()

    def say(text: str) -> None:
        out(f"[{time.monotonic() - t0:6.1f}s] {text}")

    kafka = EmbeddedKafka()
    coordinator: CoordinatorProcess | None = None
    act: ShareAct | None = None
    try:
        coordinator = CoordinatorProcess(kafka.bootstrap_servers, output / "coordinator.log", SHARE_SETTINGS)
        coordinator.wait_ready()
        say(f"embedded Kafka at {kafka.bootstrap_servers}; coordinator serving on {coordinator.address}")
        act = ShareAct(kafka, coordinator.address, output, say, out).prepare(driver_memory, spark_args)
        result = act.run(start_timeout_s)
        return 0 if result["missing"] == 0 else 1
    finally:
        if act is not None:
            act.stop()
        if coordinator is not None:
            coordinator.stop()
        kafka.close()  # last: every reader of it has stopped
        say("stopped: share drivers, coordinator, embedded Kafka")
