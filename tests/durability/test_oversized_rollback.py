"""An operation the log refuses as too large changes nothing: the request gets Kafka's error code, the groups it
touched are put back to what the log holds, and every other request is still served."""

from __future__ import annotations

from pathlib import Path

import grpc

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.log import FileLog
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc


def commit(stub: pb_grpc.GroupCoordinatorStub, group: str, offsets: dict[int, int],
           metadata: str = "") -> pb.OffsetCommitResponse:
    return stub.OffsetCommit(pb.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, topics=[
        pb.OffsetCommitRequestTopic(name="orders", partitions=[
            pb.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                            committed_metadata=metadata)
            for p, o in offsets.items()])]), timeout=10)


def fetched(stub: pb_grpc.GroupCoordinatorStub, group: str) -> dict[int, int]:
    resp = stub.OffsetFetch(pb.OffsetFetchRequest(group_id=group, member_epoch=-1), timeout=10)
    return {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}


def test_a_commit_over_the_log_limit_gets_invalid_commit_offset_size_and_changes_nothing(tmp_path: Path) -> None:
    options = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping({}),
                            metadata_source=StaticMetadataSource({"orders": 64}),
                            sink=FileLog(tmp_path, max_frame_bytes=8192))
    with ServerThread(options) as server, grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.GroupCoordinatorStub(channel)
        assert commit(stub, "g", {0: 5, 1: 6}).topics[0].partitions[0].error_code == 0
        refused = commit(stub, "g", {p: 100 + p for p in range(64)}, metadata="m" * 200)
        assert {p.error_code for p in refused.topics[0].partitions} == {28}  # INVALID_COMMIT_OFFSET_SIZE
        assert "over the log's limit of 8192 bytes" in refused.topics[0].partitions[0].error_message
        assert fetched(stub, "g") == {0: 5, 1: 6}  # rolled back: memory is what the log holds
        assert commit(stub, "g", {2: 7}).topics[0].partitions[0].error_code == 0  # still serving
        assert commit(stub, "other", {0: 1}).topics[0].partitions[0].error_code == 0
        assert fetched(stub, "g") == {0: 5, 1: 6, 2: 7}
    log = FileLog(tmp_path)
    replayed: list[object] = []
    log.load(replayed.append)
    log.close()
    assert sorted((x.group_id, x.partition, x.committed_offset) for x in replayed) == [  # type: ignore[attr-defined]
        ("g", 0, 5), ("g", 1, 6), ("g", 2, 7), ("other", 0, 1)]
