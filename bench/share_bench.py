"""Share groups: acquire/acknowledge throughput through the coordinator, and memory per million in-flight offsets.

    python -m bench.share_bench [--seconds 5] [--range 500] [--quick]

Throughput: one member acquires a range (ShareAcquire) and accepts it (ShareAcknowledge), over real gRPC on
loopback with the in-memory record sink, and through the core alone (no gRPC, no asyncio). Records/s counts
offsets moved from AVAILABLE to ACKNOWLEDGED.

Memory: share-partitions with one million offsets in flight, measured with tracemalloc: acquired in ranges
of 500 (each range its own lock deadline), and the worst case, every other offset acknowledged (one range per
offset left in flight).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from typing import Any

import grpc

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.metadata import MetadataImage, TopicMetadata, topic_id_for_name
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.core.share.acquisition import acknowledge, acquire
from groupcoord.coordinator.core.share.handlers import heartbeat
from groupcoord.coordinator.core.share.partition import Batch, RecordState, SharePartition
from groupcoord.coordinator.core.share.records import (
    AcknowledgeRange,
    AcquirePartition,
    ShareAcknowledgeRequest,
    ShareAcquireRequest,
    ShareGroupHeartbeatRequest,
)
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.wire.v1 import share_pb2 as spb
from groupcoord.wire.v1 import share_pb2_grpc as spb_grpc

TOPIC = "jobs"
TID = topic_id_for_name(TOPIC)
CONFIG = {"group.share.assignor.offload.enable": False, "group.share.assignment.interval.ms": 0,
          "group.share.partition.max.record.locks": 10000}


def core_throughput(seconds: float, size: int) -> float:
    shard = GroupCoordinatorShard(BrokerConfig.from_mapping(CONFIG), lambda: "m",
                                  MetadataImage.of([TopicMetadata(TID, TOPIC, 1)]))
    now = 1_000_000
    shard.group_configs["q"] = {"share.auto.offset.reset": "earliest"}
    heartbeat(shard, ShareGroupHeartbeatRequest("q", "m", 0, subscribed_topic_names=(TOPIC,)), now)
    moved, end = 0, time.perf_counter() + seconds
    log_end = 1 << 60
    while time.perf_counter() < end:
        got = acquire(shard, ShareAcquireRequest("q", "m", (AcquirePartition(TID, 0, 0, log_end),), size), now)
        first, last, _ = got.response.partitions[0].ranges[0]
        acknowledge(shard, ShareAcknowledgeRequest("q", "m", (AcknowledgeRange(TID, 0, first, last, 1),)), now)
        moved += last - first + 1
        now += 1
    return moved / seconds


def grpc_throughput(seconds: float, size: int) -> float:
    config = BrokerConfig.from_mapping({k: str(v).lower() if isinstance(v, bool) else v for k, v in CONFIG.items()})
    options = ServerOptions(listen="127.0.0.1:0", config=config, metadata_source=StaticMetadataSource({TOPIC: 1}))
    with ServerThread(options) as server, grpc.insecure_channel(server.address) as channel:
        server.server.runtime.shard.group_configs["q"] = {"share.auto.offset.reset": "earliest"}  # type: ignore
        stub = spb_grpc.ShareGroupCoordinatorStub(channel)
        join = spb.ShareGroupHeartbeatRequest(group_id="q", member_id="m", member_epoch=0)
        join.subscribed_topic_names.values.append(TOPIC)
        stub.ShareGroupHeartbeat(join)
        moved, end = 0, time.perf_counter() + seconds
        req = spb.ShareAcquireRequest(group_id="q", member_id="m", max_records=size)
        req.partitions.add(topic_id=TID, partition=0, log_start_offset=0, log_end_offset=1 << 60)
        while time.perf_counter() < end:
            r = stub.ShareAcquire(req).partitions[0].acquired_records[0]
            ack = spb.ShareAcknowledgeRequest(group_id="q", member_id="m")
            ack.batches.add(topic_id=TID, partition=0, first_offset=r.first_offset, last_offset=r.last_offset,
                            acknowledge_type=1)
            stub.ShareAcknowledge(ack)
            moved += r.last_offset - r.first_offset + 1
        return moved / seconds


def memory_per_million(size: int, fragmented: bool) -> tuple[float, int]:
    """Bytes per million in-flight offsets (100 partitions x 10,000 offsets) and the number of ranges."""
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    partitions: list[Any] = []
    for p in range(100):
        sp = SharePartition(0, 0)
        for i in range(10_000 // size):
            sp, _ = sp.acquire(f"member-{p % 7}", size, 1 << 60, 1_000_000 + i, 10_000)
        if fragmented:  # what acknowledging every other offset leaves (built directly: same structure)
            sp = SharePartition(0, 10_000, tuple(
                Batch(o, o, RecordState.ACQUIRED if o % 2 == 0 else RecordState.ACKNOWLEDGED, 1,
                      f"member-{p % 7}" if o % 2 == 0 else "", 1_000_000 + o if o % 2 == 0 else 0)
                for o in range(10_000)))
        partitions.append(sp)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    used = sum(s.size_diff for s in after.compare_to(before, "filename"))
    in_flight = sum(sp.in_flight for sp in partitions)
    return used * 1_000_000 / in_flight, sum(len(sp.batches) for sp in partitions)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--range", type=int, default=500, dest="size")
    ap.add_argument("--quick", action="store_true", help="1 s per throughput run")
    a = ap.parse_args()
    if a.quick:
        a.seconds = 1.0
    print(f"{'path':<40} {'records/s':>14}")
    print(f"{'core (acquire+ack, ranges of ' + str(a.size) + ')':<40} {core_throughput(a.seconds, a.size):>14,.0f}")
    print(f"{'gRPC loopback (acquire+ack)':<40} {grpc_throughput(a.seconds, a.size):>14,.0f}")
    print()
    print(f"{'in-flight layout':<40} {'ranges':>10} {'MB per 1M offsets':>18}")
    for label, fragmented in ((f"acquired in ranges of {a.size}", False), ("every other offset acked", True)):
        per_million, ranges = memory_per_million(a.size, fragmented)
        print(f"{label:<40} {ranges:>10,} {per_million / 1e6:>18.2f}")


if __name__ == "__main__":
    main()
