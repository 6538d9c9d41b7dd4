"""The fault suite's streams member against a real coordinator: after a restart without state (every heartbeat
answered 69) it joins again only one lease later, as `GroupMember` does. Found by the 30-minute run: the member
rejoined at once, the forgotten group gave it every task, and another member still ran six of them under its
lease for 19 ms."""

from __future__ import annotations

import time

import pytest

from groupcoord.clients.lease import lease_duration_s
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.faults.streams_worker import StreamsWorker
from tests.integration.conftest import FAST

SESSION_MS = 1500
STREAMS_FAST = {**FAST, "group.streams.heartbeat.interval.ms": 100, "group.streams.session.timeout.ms": SESSION_MS,
                "group.streams.initial.rebalance.delay.ms": 0, "group.streams.assignment.interval.ms": 0}


def serve(listen: str) -> ServerThread:
    options = ServerOptions(listen=listen, metrics_port=0, config=BrokerConfig.from_mapping(STREAMS_FAST),
                            metadata_source=StaticMetadataSource({"t": 4}), metadata_poll_s=0.2)
    return ServerThread(options).start()


def beat_until(worker: StreamsWorker, done: object, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not done():  # type: ignore[operator]
        worker.heartbeat()
        time.sleep(0.05)
    assert done(), "timed out"  # type: ignore[operator]


@pytest.mark.integration
def test_a_streams_member_whose_group_was_forgotten_joins_again_only_one_lease_later() -> None:
    first = serve("127.0.0.1:0")
    address = first.address
    worker = StreamsWorker(address, "app", "t", 0.1, 1.0, SESSION_MS)
    second = None
    try:
        beat_until(worker, lambda: worker.epoch > 0 and worker.active == {0, 1, 2, 3})
        first.stop()
        second = serve(address)  # the same address, no state: the group is unknown there
        beat_until(worker, lambda: worker.epoch == 0)  # answered 69: it stopped its tasks
        answered = time.monotonic()
        assert worker.active == set()
        beat_until(worker, lambda: worker.epoch > 0)
        lease = lease_duration_s(SESSION_MS, worker.heartbeat_interval_ms)
        assert time.monotonic() - answered >= lease - 0.1
    finally:
        if second is not None:
            second.stop()
        else:
            first.stop()
