"""A share member keeps working when its coordinator forgets the group (a restart without state), as the
consumer `GroupMember` does: found by the fault suite's stateless-restart step, where both share members stayed
out of the group for good (every heartbeat answered 69, none rejoined)."""

from __future__ import annotations

import time

import pytest

from groupcoord.clients.share_member import ShareMember
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from tests.integration.conftest import FAST

SHARE_FAST = {**FAST, "group.share.min.session.timeout.ms": 300, "group.share.session.timeout.ms": 1500,
              "group.share.min.heartbeat.interval.ms": 20, "group.share.heartbeat.interval.ms": 100,
              "group.share.assignment.interval.ms": 0}


def serve(listen: str) -> ServerThread:
    options = ServerOptions(listen=listen, metrics_port=0, config=BrokerConfig.from_mapping(SHARE_FAST),
                            metadata_source=StaticMetadataSource({"jobs": 2}), metadata_poll_s=0.2)
    return ServerThread(options).start()


@pytest.mark.integration
def test_a_share_member_joins_again_when_a_restarted_coordinator_does_not_know_its_group() -> None:
    first = serve("127.0.0.1:0")
    address = first.address
    def log(topic: str, partition: int) -> tuple[int, int]:  # a log that grows (new share-partitions start at its end)
        return 0, int(time.monotonic() * 100)

    member = ShareMember(address, "queue", ["jobs"], "", watermarks=log, rpc_timeout_s=5)
    try:
        assert member.heartbeat().error_code == 0 and member.member_epoch > 0
        first.stop()
        second = serve(address)  # the same address, no state: the group is unknown there
        try:
            deadline = time.monotonic() + 20
            got = member.acquire(max_records=10)
            while time.monotonic() < deadline and not got:
                member.heartbeat()
                time.sleep(0.1)
                got = member.acquire(max_records=10)
            assert got and member.member_epoch > 0, member.last_error
        finally:
            second.stop()
    finally:
        member.close(leave=False)
