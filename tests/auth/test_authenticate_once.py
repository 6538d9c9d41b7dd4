"""Every RPC, of every service, authenticates its caller once per call: a heartbeat is not authenticated a second
time to learn the principal it carries into the core, and a stream of heartbeats once for the whole stream
(each of its heartbeats is still authorized on its own)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from groupcoord.clients.credentials import Credentials
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.auth import TokenStore
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from groupcoord.wire.v1 import share_pb2 as sharepb
from groupcoord.wire.v1 import share_pb2_grpc as sharepb_grpc
from groupcoord.wire.v1 import streams_pb2_grpc as streamspb_grpc
from tests.auth.conftest import write_acls
from tests.auth.test_streams_acls import join as streams_join
from tests.integration.conftest import FAST

TOKEN = "alice-token-0123456789abcdef"
DENIED = 30


class CountingTokens(TokenStore):
    """The token store, counting its look-ups: one per authentication."""

    def __init__(self, tokens: dict[str, str]) -> None:
        super().__init__(tokens)
        self.lookups = 0

    def principal(self, token: str) -> str | None:
        self.lookups += 1
        return super().principal(token)


@pytest.fixture
def secured(tmp_path: Path, front_end: str) -> Iterator[tuple[grpc.Channel, CountingTokens]]:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "READ", "PREFIXED:orders-", "ALLOW"))
    tokens = CountingTokens({TOKEN: "User:alice"})
    options = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping(FAST),
                            metadata_source=StaticMetadataSource({"orders": 6}), tokens=tokens, acl_file=acls,
                            front_end=front_end)
    with ServerThread(options) as srv, Credentials(token=TOKEN).channel(srv.address) as channel:
        yield channel, tokens


def consumer_join(group: str) -> pb.ConsumerGroupHeartbeatRequest:
    return pb.ConsumerGroupHeartbeatRequest(group_id=group, member_epoch=0, rebalance_timeout_ms=5000,
                                            subscribed_topic_names=pb.StringList(values=["orders"]),
                                            topic_partitions=pb.TopicPartitionsList())


def test_a_heartbeat_of_each_group_type_authenticates_once(secured: tuple[grpc.Channel, CountingTokens]) -> None:
    channel, tokens = secured
    consumer = pb_grpc.GroupCoordinatorStub(channel)
    assert consumer.ConsumerGroupHeartbeat(consumer_join("orders-app"), timeout=10).error_code == 0
    assert tokens.lookups == 1
    assert consumer.ConsumerGroupHeartbeat(consumer_join("billing"), timeout=10).error_code == DENIED
    assert tokens.lookups == 2
    assert streams_join(streamspb_grpc.StreamsGroupCoordinatorStub(channel), "orders-streams").error_code == 0
    assert tokens.lookups == 3
    share = sharepb.ShareGroupHeartbeatRequest(group_id="orders-share", member_id="s1", member_epoch=0)
    share.subscribed_topic_names.values.append("orders")
    assert sharepb_grpc.ShareGroupCoordinatorStub(channel).ShareGroupHeartbeat(share, timeout=10).error_code == 0
    assert tokens.lookups == 4


def test_a_heartbeat_stream_authenticates_once_and_authorizes_every_heartbeat(
        secured: tuple[grpc.Channel, CountingTokens]) -> None:
    channel, tokens = secured
    stub = pb_grpc.GroupCoordinatorStub(channel)
    batch = pb.ConsumerGroupHeartbeatBatchRequest(heartbeats=[
        consumer_join(g) for g in ("orders-a", "billing", "orders-b")])
    answers = [r.error_code for m in stub.ConsumerGroupHeartbeatBatchStream(iter([batch, batch]), timeout=10)
               for r in m.responses]
    assert answers == [0, DENIED, 0] * 2
    assert tokens.lookups == 1
    singles = list(stub.ConsumerGroupHeartbeatStream(iter([consumer_join("orders-c"), consumer_join("x")]),
                                                     timeout=10))
    assert [a.error_code for a in singles] == [0, DENIED]
    assert tokens.lookups == 2
