"""KIP-1263's scale-up scenario for share groups, on the real core with a virtual clock (`groupcoord simulate`).

The same scenario as `simulation.py`: members 1 to N-2 are stable, member N-1 joins `previous_join_ms` before
member N, member N joins at +0 ms, and member i heartbeats at i/N of the heartbeat interval after that, every
interval; offloaded runs complete at once, for use from the next request. A share group has no revocation:
a member takes its new target at its next heartbeat. The rebalance completes when every member holds its
target at the group epoch. The seed's statement for share groups: offload delays completion by up to one
heartbeat interval, and batching affects it less than it does consumer groups (no revoke round trips).
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any

from groupcoord.assignors.registry import get_server_assignor
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.metadata import MetadataImage, TopicMetadata, topic_id_for_name
from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion, AssignorRun
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.core.share.group import ShareGroup
from groupcoord.coordinator.core.share.handlers import heartbeat, on_assignment_complete
from groupcoord.coordinator.core.share.records import ShareGroupHeartbeatRequest

BASE_MS = 1_000_000_000
GROUP_ID = "share-scale-up"
TOPIC = "events"
WARM_UP_ROUNDS = 6


def simulate_share_scale_up(n_members: int, interval_ms: int, offload: bool, heartbeat_ms: int = 5000,
                            partitions: int = 120, previous_join_ms: int = -200) -> int:
    """When the share group's rebalance completes, in ms relative to member N's join."""
    config = BrokerConfig.from_mapping({
        "group.share.min.heartbeat.interval.ms": 1,
        "group.share.heartbeat.interval.ms": heartbeat_ms,
        "group.share.max.heartbeat.interval.ms": max(15_000, heartbeat_ms),
        "group.share.session.timeout.ms": max(45_000, 10 * heartbeat_ms),
        "group.share.max.session.timeout.ms": max(60_000, 10 * heartbeat_ms),
        "group.share.assignment.interval.ms": interval_ms,
        "group.share.max.assignment.interval.ms": max(15_000, interval_ms),
        "group.share.assignor.offload.enable": offload,
        "group.share.max.size": max(200, n_members),
    })
    image = MetadataImage.of([TopicMetadata(topic_id_for_name(TOPIC), TOPIC, partitions)])
    shard = GroupCoordinatorShard(config, lambda: "unused", image)
    epochs: dict[int, int] = {}
    queue: list[tuple[int, int, int]] = []
    order = itertools.count()
    for i in range(1, n_members - 1):
        heapq.heappush(queue, (-WARM_UP_ROUNDS * heartbeat_ms + i * heartbeat_ms // n_members, next(order), i))
    if n_members >= 2:
        heapq.heappush(queue, (previous_join_ms, next(order), n_members - 1))
    heapq.heappush(queue, (0, next(order), n_members))
    horizon = 4 * heartbeat_ms + 2 * interval_ms
    while queue:
        now, _, i = heapq.heappop(queue)
        if now > horizon:
            break
        req = ShareGroupHeartbeatRequest(GROUP_ID, f"member-{i}", epochs.get(i, 0),
                                         subscribed_topic_names=(TOPIC,) if i not in epochs else None)
        result: Any = heartbeat(shard, req, BASE_MS + now)
        shard.apply(result)  # as the runtime does: the handler applied nothing
        epochs[i] = result.response.member_epoch
        for task in result.tasks:
            assert isinstance(task, AssignorRun)
            assignment = get_server_assignor(task.assignor_name).assign(task.spec, task.topics, task.lag)
            shard.apply(on_assignment_complete(shard, AssignorCompletion(task.group_id, task.run_id, assignment),
                                               BASE_MS + now))
        heapq.heappush(queue, (now + heartbeat_ms, next(order), i))
        group = shard.groups[GROUP_ID]
        assert isinstance(group, ShareGroup)
        if now >= 0 and len(group.members) == n_members and group.target_assignment_epoch == group.group_epoch \
                and all(m.member_epoch == group.group_epoch for m in group.members.values()):
            return now
    raise RuntimeError(f"the share group did not converge within {horizon:,} ms")


def print_share_comparison(large: int, partitions: int, heartbeat_ms: int, interval_ms: int,
                           previous_join_ms: int) -> None:
    rows = [("Share group", "assignment.interval.ms", "offload", "Rebalance completes")]
    for n in dict.fromkeys((large, 1)):
        for interval, offload in ((0, False), (interval_ms, False), (0, True)):
            done = simulate_share_scale_up(n, interval, offload, heartbeat_ms, partitions, previous_join_ms)
            rows.append((f"{n} member{'s' if n != 1 else ''}", f"{interval:,} ms", "on" if offload else "off",
                         f"{'+' if done >= 0 else '-'}{abs(done):,} ms"))
    print("## Share groups (KIP-932): when the rebalance completes, relative to member N's join\n")
    widths = [max(len(r[k]) for r in rows) for k in range(4)]
    for k, row in enumerate(rows):
        print("| " + " | ".join(f"{c:<{w}}" for c, w in zip(row, widths, strict=True)) + " |")
        if k == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
