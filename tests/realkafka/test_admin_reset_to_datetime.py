"""`groups reset-offsets --to-datetime` needs ListOffsets by timestamp, which librdkafka's mock cluster does
not answer (it returns -1): this runs against the real broker."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from groupcoord import cli
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.kafka_broker import KafkaBroker
from tests.integration.conftest import start_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@pytest.fixture
def server(unique: str) -> Iterator[ServerThread]:
    srv = start_server({unique: 1})
    try:
        yield srv
    finally:
        srv.stop()


def test_reset_to_datetime_finds_the_first_record_at_or_after_the_time(
        capsys: pytest.CaptureFixture[str], kafka_broker: KafkaBroker, server: ServerThread, unique: str) -> None:
    kafka_broker.create_topic(unique, 1)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    now_ms = int(time.time() * 1000)
    for i, ts in enumerate([now_ms - 60_000, now_ms - 50_000, now_ms - 10_000, now_ms]):
        producer.produce(unique, value=b"v%d" % i, partition=0, timestamp=ts)
    assert producer.flush(10) == 0
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((now_ms - 30_000) / 1000)) + ".000"

    def reset(when: str) -> int:
        rc = cli.main(["groups", "reset-offsets", "g", "--topic", f"{unique}:0", "--to-datetime", when, "--json",
                       "--server", server.address, "--bootstrap-server", kafka_broker.bootstrap_servers])
        out = capsys.readouterr().out
        assert rc == 0, out
        return int(json.loads(out)["partitions"][0]["new_offset"])

    assert reset(at) == 2  # the record 10 s old is the first at or after 30 s ago
    assert reset("2000-01-01T00:00:00.000") == 0
    assert reset("2999-01-01T00:00:00.000+00:00") == 4  # nothing that late: the log end, as Kafka does
