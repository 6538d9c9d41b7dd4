"""Steady-state heartbeats through the sans-I/O core alone, on one core (target: >= 50,000/s).

    python -m bench.core_bench [--groups 50] [--members 100] [--seconds 3]

Builds `groups` x `members` stable members, then replays steady heartbeats (same epoch, no owned
partitions: what a Kafka client sends between rebalances) round-robin and reports the rate.
"""

from __future__ import annotations

import argparse
import time

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest
from groupcoord.coordinator.core.metadata import MetadataImage, TopicMetadata, topic_id_for_name
from groupcoord.coordinator.core.shard import GroupCoordinatorShard


def build(groups: int, members: int) -> tuple[GroupCoordinatorShard, list[ConsumerGroupHeartbeatRequest]]:
    config = BrokerConfig.from_mapping({"group.consumer.assignor.offload.enable": False,
                                        "group.consumer.assignment.interval.ms": 0})
    image = MetadataImage.of([TopicMetadata(topic_id_for_name(f"t{g}"), f"t{g}", members * 2) for g in range(groups)])
    shard = GroupCoordinatorShard(config, lambda: "unused", image)
    steady: list[ConsumerGroupHeartbeatRequest] = []
    now = 0
    for g in range(groups):
        gid = f"group-{g}"
        for m in range(members):
            shard.apply(shard.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
                gid, f"m{m}", 0, rebalance_timeout_ms=60000, subscribed_topic_names=(f"t{g}",),
                topic_partitions={}), now))
        # Reconcile everyone: heartbeat with the owned partitions until stable.
        for _ in range(4):
            for m in range(members):
                member = shard.groups[gid].members[f"m{m}"]
                owned = {t: frozenset(p) for t, p in member.assigned_partitions.items()}
                shard.apply(shard.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
                    gid, f"m{m}", member.member_epoch, topic_partitions=owned), now))
        assert shard.groups[gid].state().value == "STABLE", shard.groups[gid].state()
        for m in range(members):
            steady.append(ConsumerGroupHeartbeatRequest(gid, f"m{m}", shard.groups[gid].members[f"m{m}"].member_epoch))
    return shard, steady


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--groups", type=int, default=50)
    p.add_argument("--members", type=int, default=100)
    p.add_argument("--seconds", type=float, default=3.0)
    args = p.parse_args(argv)
    shard, steady = build(args.groups, args.members)
    n = 0
    now = 1
    start = time.perf_counter()
    deadline = start + args.seconds
    heartbeat, apply = shard.consumer_group_heartbeat, shard.apply
    while time.perf_counter() < deadline:
        for req in steady:
            result = heartbeat(req, now)
            apply(result)  # as the runtime does after each operation
            assert result.response.error_code == 0
        n += len(steady)
        now += 1
    elapsed = time.perf_counter() - start
    print(f"{'case':<40} {'heartbeats':>12} {'seconds':>8} {'heartbeats/s':>14} {'us/heartbeat':>13}")
    print(f"{f'core steady, {args.groups} groups x {args.members}':<40} {n:>12,} {elapsed:>8.2f} "
          f"{n / elapsed:>14,.0f} {elapsed / n * 1e6:>13.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
