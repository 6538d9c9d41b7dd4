"""Target assignments at scale through the sans-I/O core: memory per partition, and one member joining.

    python -m bench.target_bench [--quick]

1. Memory: a group's target assignment of 1,000,000 partitions (1,000 members x 1,000 topics x 1,000
   partitions, each member holding consecutive partitions as `uniform` hands them out), built by
   replaying its ConsumerGroupTargetAssignmentMember records into a shard; tracemalloc counts what the
   shard keeps (the records themselves are dropped).
2. Join: a stable group of 1,000 members x 1,000 topics x 50 partitions (replayed into a shard, uniform,
   synchronous assignor, interval 0). One member joins: its heartbeat (assignor, records), then rounds of
   heartbeats from every member (owned partitions reported, as a Kafka client does after a change) until
   the group is STABLE again. Times are this thread's CPU time (the machine is shared) through the core
   only (no gRPC, no log), medians of --repeat runs.
Not part of the test suite: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc

import numpy as np

from groupcoord.assignors.api import GroupSpec, MemberSpec, StaticTopicDescriber
from groupcoord.assignors.uniform import UniformAssignor
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest
from groupcoord.coordinator.core.metadata import MetadataImage, TopicMetadata, topic_id_for_name
from groupcoord.coordinator.core.records import (
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMetadata,
    ConsumerGroupTargetAssignmentMember,
    ConsumerGroupTargetAssignmentMetadata,
)
from groupcoord.coordinator.core.shard import GroupCoordinatorShard

GID = "g"


def _shard(topics: int, partitions: int) -> GroupCoordinatorShard:
    config = BrokerConfig.from_mapping({"group.consumer.assignor.offload.enable": False,
                                        "group.consumer.assignment.interval.ms": 0})
    image = MetadataImage.of([TopicMetadata(topic_id_for_name(f"topic-{t}"), f"topic-{t}", partitions)
                              for t in range(topics)])
    return GroupCoordinatorShard(config, lambda: "newMember", image)


def _uniform_target(shard: GroupCoordinatorShard, members: int) -> dict[str, dict[str, frozenset[int]]]:
    ids = frozenset(shard.metadata.by_id)
    spec = GroupSpec.of({f"member{i}": MemberSpec(ids) for i in range(members)})
    counts = {t: m.partition_count for t, m in shard.metadata.by_id.items()}
    out = UniformAssignor().assign(spec, StaticTopicDescriber(counts))
    return {m: {t: frozenset(ps) for t, ps in a.items() if ps} for m, a in out.items()}


def memory_per_partition(members: int, topics: int, partitions: int) -> tuple[float, float]:
    """Bytes the shard keeps per assigned partition of the target, and the replay time in seconds."""
    shard = _shard(topics, partitions)
    target = _uniform_target(shard, members)
    # what the records carry, as plain ranges: the frozensets are built inside the traced region
    plan = {m: {t: (min(ps), max(ps) + 1) for t, ps in a.items()} for m, a in target.items()}
    del target
    gc.collect()
    tracemalloc.start()
    start = time.perf_counter()
    for m, a in plan.items():
        shard.replay(ConsumerGroupTargetAssignmentMember(GID, m, {t: frozenset(range(lo, hi))
                                                                  for t, (lo, hi) in a.items()}))
    elapsed = time.perf_counter() - start
    gc.collect()
    kept, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return kept / (topics * partitions), elapsed


def stable_group(members: int, topics: int, partitions: int) -> GroupCoordinatorShard:
    """A STABLE group at epoch 2 whose target is uniform's, every member holding its target."""
    shard = _shard(topics, partitions)
    names = tuple(sorted(t.name for t in shard.metadata.by_id.values()))
    target = _uniform_target(shard, members)
    shard.replay(ConsumerGroupMetadata(GID, 2, shard.metadata.topics_hash(names)))
    for i in range(members):
        m = f"member{i}"
        shard.replay(ConsumerGroupMemberMetadata(GID, m, None, None, "c", "h", names, None, "uniform", 60000))
        a = target[m]
        shard.replay(ConsumerGroupTargetAssignmentMember(GID, m, a))
        shard.replay(ConsumerGroupCurrentMemberAssignment(
            GID, m, 2, 1, "STABLE", {t: dict.fromkeys(ps, 2) for t, ps in a.items()}, {}))
    shard.replay(ConsumerGroupTargetAssignmentMetadata(GID, 2, 1))
    return shard


def join(members: int, topics: int, partitions: int) -> dict[str, float]:
    """CPU seconds (this thread) for the joining heartbeat, the first round of heartbeats after it, and all
    rounds to STABLE; and how many rounds that took."""
    shard = stable_group(members, topics, partitions)
    group = shard.groups[GID]
    names = tuple(sorted(t.name for t in shard.metadata.by_id.values()))
    now = 10
    gc.collect()
    start = time.thread_time()
    shard.apply(shard.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        GID, "", 0, rebalance_timeout_ms=60000, subscribed_topic_names=names, topic_partitions={}), now))
    joined = time.thread_time()
    rounds = 0
    first = 0.0
    while group.state().value != "STABLE" and rounds < 10:
        for m in list(group.members.values()):
            owned = {t: frozenset(ps) for t, ps in m.assigned_partitions.items() if ps}
            shard.apply(shard.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
                GID, m.member_id, m.member_epoch, topic_partitions=owned), now))
        rounds += 1
        if rounds == 1:
            first = time.thread_time() - joined
    settled = time.thread_time()
    assert group.state().value == "STABLE", group.state()
    return {"join heartbeat": joined - start, "first round": first, "rounds": rounds,
            "join to STABLE": settled - start}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a tenth of the sizes, one run")
    p.add_argument("--repeat", type=int, default=5, help="join runs (median reported)")
    args = p.parse_args(argv)
    scale = 10 if args.quick else 1
    np.unique(np.arange(3))  # numpy imports some modules on first use: not part of any figure
    mem_shape = (1000 // scale, 1000 // scale, 1000)
    per_part, replay_s = memory_per_partition(*mem_shape)
    print(f"target memory: {mem_shape[0]} members x {mem_shape[1]} topics x {mem_shape[2]} partitions")
    print(f"  bytes kept per assigned partition   {per_part:10.1f}")
    print(f"  replay of the target records (s)    {replay_s:10.3f}")
    shape = (1000 // scale, 1000 // scale, 50)
    runs = [join(*shape) for _ in range(1 if args.quick else args.repeat)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"one member joins a stable group: {shape[0]} members x {shape[1]} topics x {shape[2]} partitions"
          f" (CPU ms, median of {len(runs)})")
    print(f"  {'join heartbeat (assignor, records)':<36}{med['join heartbeat'] * 1e3:10.1f}")
    print(f"  {'first round of heartbeats':<36}{med['first round'] * 1e3:10.1f}")
    print(f"  {'join to STABLE':<36}{med['join to STABLE'] * 1e3:10.1f}  ({int(med['rounds'])} rounds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
