"""The Spark source reaches a coordinator that requires client certificates, with the source's TLS options."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql.streaming.datasource import ReadAllAvailable

from groupcoord.clients.spark_driver import build_parser
from groupcoord.clients.spark_source import SCHEMA, GroupcoordStreamReader, SourceOptions, decode_offset
from groupcoord.embedded_kafka import EmbeddedKafka
from tests.auth.conftest import Pki, StartServer, write_acls


@pytest.fixture
def kafka() -> Iterator[EmbeddedKafka]:
    with EmbeddedKafka(brokers=1) as cluster:
        yield cluster


def test_spark_source_plans_batches_through_an_mtls_coordinator(
        pki: Pki, start_secured: StartServer, kafka: EmbeddedKafka, tmp_path: Path) -> None:
    kafka.create_topic("orders", 6)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for p in range(6):
        producer.produce("orders", value=b"x", partition=p)
    producer.flush(10)
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "READ", "LITERAL:spark-app", "ALLOW"))
    srv = start_secured(tls=pki.tls(), acl_file=acls)
    options = SourceOptions.parse({
        "coordinator": f"localhost:{srv.server.port}", "group": "spark-app", "topics": "orders",
        "bootstrap.servers": kafka.bootstrap_servers, "startingOffsets": "earliest",
        "coordinator.tls.ca": str(pki.path("ca.pem")), "coordinator.tls.cert": str(pki.path("alice.pem")),
        "coordinator.tls.key": str(pki.path("alice.key"))})
    reader = GroupcoordStreamReader(options, SCHEMA)
    try:
        start = reader.initialOffset()
        every = {("orders", p): (0, 1) for p in range(6)}
        deadline = time.monotonic() + 30
        while decode_offset(reader.latestOffset(start, ReadAllAvailable())) != every:
            assert time.monotonic() < deadline, "the reader never planned every partition"
            time.sleep(0.05)
    finally:
        reader.stop()


def test_spark_tls_options_go_together_and_the_driver_takes_them(pki: Pki) -> None:
    base = {"coordinator": "localhost:1", "group": "g", "topics": "t", "bootstrap.servers": "k:9092"}
    with pytest.raises(ValueError, match="go together"):
        SourceOptions.parse({**base, "coordinator.tls.cert": str(pki.path("alice.pem"))})
    assert not SourceOptions.parse(base).credentials().tls
    args = build_parser().parse_args(["--coordinator", "c:1", "--group", "g", "--topic", "t", "--bootstrap-servers",
                                      "k:9092", "--output", "/tmp/x", "--tls-ca", "ca.pem", "--tls-cert", "a.pem",
                                      "--tls-key", "a.key"])
    assert (args.tls_ca, args.tls_cert, args.tls_key) == ("ca.pem", "a.pem", "a.key")
