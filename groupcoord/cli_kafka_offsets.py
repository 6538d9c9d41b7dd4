"""What only the Kafka cluster knows for `groupcoord groups describe | reset-offsets`: log start and end offsets,
the offset for a time, a topic's partitions; read as kafka-consumer-groups.sh reads them (`--bootstrap-server`,
`--timeout`), every failure one CliError line.

Kept apart from cli_groups.py (the group's own views, read from the coordinator): this is the one part of those
commands that talks to Kafka, through confluent_kafka's AdminClient.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from groupcoord.cli_base import CliError, _short

KAFKA_TIMEOUT_MS = 5000  # kafka-consumer-groups.sh --timeout
TopicPartition = tuple[str, int]


class KafkaOffsets:
    """What only the Kafka cluster knows; every failure is one CliError line."""

    def __init__(self, bootstrap: str, timeout_ms: int = KAFKA_TIMEOUT_MS) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.timeout_s = timeout_ms / 1000
        self._admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": timeout_ms,
                                   "log_level": 0, "logger": _quiet_logger()})

    def _fail(self, e: BaseException) -> CliError:
        err: Any = e.args[0] if e.args else None
        text = str(err.str()) if hasattr(err, "str") else str(e)  # a KafkaException carries a KafkaError
        if not text:
            text = f"no answer within {self.timeout_s:g} s (is --bootstrap-server right? --timeout MS waits longer)"
        return CliError(f"cannot read offsets from Kafka at {self.bootstrap}: {text[:200]}")

    def partitions(self, topic: str) -> list[int]:
        try:
            meta = self._admin.list_topics(topic=topic, timeout=self.timeout_s)
        except Exception as e:
            raise self._fail(e) from None
        t = meta.topics.get(topic)
        if t is None or t.error is not None or not t.partitions:
            raise CliError(f"topic {_short(topic)} does not exist in Kafka at {self.bootstrap}")
        return sorted(t.partitions)

    def list_offsets(self, tps: Iterable[TopicPartition], spec: str,
                     timestamp_ms: int = 0) -> dict[TopicPartition, int]:
        from confluent_kafka import TopicPartition as KTp
        from confluent_kafka.admin import OffsetSpec

        offset_spec = {"earliest": OffsetSpec.earliest, "latest": OffsetSpec.latest}.get(spec)
        wanted = {KTp(t, p): (offset_spec() if offset_spec else OffsetSpec.for_timestamp(timestamp_ms))
                  for t, p in tps}
        if not wanted:
            return {}
        try:
            futures = self._admin.list_offsets(wanted, request_timeout=self.timeout_s)
            return {(tp.topic, tp.partition): f.result(timeout=self.timeout_s).offset for tp, f in futures.items()}
        except Exception as e:
            raise self._fail(e) from None


def kafka_offsets(args: argparse.Namespace) -> KafkaOffsets | None:
    if not args.bootstrap_server:
        return None
    if args.timeout <= 0:
        raise CliError("--timeout expects a positive number of milliseconds")
    return KafkaOffsets(args.bootstrap_server, args.timeout)


def _quiet_logger() -> Any:
    import logging

    logger = logging.getLogger("groupcoord.cli.kafka")
    logger.setLevel(logging.CRITICAL)
    return logger

