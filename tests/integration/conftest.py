"""Fixtures that start the real coordinator on a loopback port."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource

FAST: dict[str, Any] = {
    "group.consumer.min.heartbeat.interval.ms": 20,
    "group.consumer.heartbeat.interval.ms": 100,
    "group.consumer.min.session.timeout.ms": 300,
    "group.consumer.session.timeout.ms": 1500,
    "group.consumer.assignment.interval.ms": 100,
    "group.streams.min.heartbeat.interval.ms": 20,
    "group.streams.min.session.timeout.ms": 300,
}


# GROUPCOORD_TEST_FRONT_END=grpcio or native runs the tests that start servers here through that front end (default:
# auto, the native one where it serves what the test configures).
FRONT_END = os.environ.get("GROUPCOORD_TEST_FRONT_END", "auto")


def start_server(topics: dict[str, Any], front_end: str = FRONT_END, **overrides: Any) -> ServerThread:
    raw = dict(FAST)
    raw.update(overrides)
    options = ServerOptions(listen="127.0.0.1:0", metrics_port=0, config=BrokerConfig.from_mapping(raw),
                            metadata_source=StaticMetadataSource(topics), metadata_poll_s=0.2, front_end=front_end)
    return ServerThread(options).start()


@pytest.fixture
def server() -> Iterator[ServerThread]:
    srv = start_server({"orders": 24, "audit": 6})
    try:
        yield srv
    finally:
        srv.stop()
