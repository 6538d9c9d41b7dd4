"""The web view's JSON: a page of the groups list and one group's detail, read from the shard.

Everything here reads through the core's describe/list functions (the ones DescribeGroups and ListGroups
answer with) and runs on the event loop between two operations, so what it reads is consistent. Lag is
committed offsets against the lag provider's last known log end offsets (Kafka's
`kafka-consumer-groups.sh --describe` LAG); without a Kafka cluster there are no end offsets and lag is null.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from groupcoord.coordinator.core import admin
from groupcoord.coordinator.core.consumer.group import ConsumerGroup
from groupcoord.coordinator.core.messages import DescribedGroup, DescribedMember
from groupcoord.coordinator.runtime.timeline import RebalanceTimeline

MAX_PAGE = 200
DETAIL_ROWS = 200  # members and partitions a group's page lists unless asked for more
TopicPartition = tuple[str, int]


def _names(shard: Any, tps: Mapping[str, Iterable[int]]) -> dict[str, list[int]]:
    """Topic id -> partitions as topic name -> sorted partitions (an unknown id keeps its id)."""
    out: dict[str, list[int]] = {}
    for tid, parts in tps.items():
        t = shard.metadata.by_id.get(tid)
        out[t.name if t is not None else tid] = sorted(parts)
    return dict(sorted(out.items()))


def _member_json(shard: Any, m: DescribedMember) -> dict[str, Any]:
    return {
        "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
        "client_host": m.client_host, "member_epoch": m.member_epoch, "state": m.state,
        "subscribed_topic_names": list(m.subscribed_topic_names), "subscribed_topic_regex": m.subscribed_topic_regex,
        "assignment": _names(shard, m.assignment), "target_assignment": _names(shard, m.target_assignment),
        "partitions_pending_revocation": _names(shard, m.partitions_pending_revocation),
        "assignment_bytes": len(m.member_assignment),
    }


def partition_lag(shard: Any, group: DescribedGroup) -> list[dict[str, Any]]:
    """One row per partition the group has an offset for or a member owns."""
    committed = {tp: c.committed_offset for tp, c in shard.offsets.committed(group.group_id).items()}
    owner: dict[TopicPartition, str] = {}
    for m in group.members:  # a partition pending revocation is still the member's until it releases it
        for owned in (m.assignment, m.partitions_pending_revocation):
            for topic, parts in _names(shard, owned).items():
                for p in parts:
                    owner[(topic, p)] = m.member_id
    tps = sorted(set(committed) | set(owner))
    provider = shard.lag_provider
    known = provider.offsets(tps) if provider is not None and tps else {}
    rows: list[dict[str, Any]] = []
    for tp in tps:
        current = committed.get(tp)
        end = _end(known, tp)
        rows.append({"topic": tp[0], "partition": tp[1], "committed_offset": current, "log_end_offset": end,
                     "lag": _lag(current, end), "member_id": owner.get(tp)})
    return rows


def total_lag(shard: Any, group_id: str) -> int | None:
    """The sum of the lag of every partition with a committed offset (Kafka's lag needs one); None when no end
    offset is known for any of them."""
    committed = shard.offsets.committed(group_id)
    provider = shard.lag_provider
    if provider is None or not committed:
        return None
    known = provider.offsets(sorted(committed))
    lags = [_lag(c.committed_offset, _end(known, tp)) for tp, c in committed.items()]
    return sum(lag for lag in lags if lag is not None) if any(lag is not None for lag in lags) else None


def _end(known: Mapping[TopicPartition, tuple[int, int]], tp: TopicPartition) -> int | None:
    start_end = known.get(tp)
    return start_end[1] if start_end is not None else None


def _lag(committed: int | None, end: int | None) -> int | None:
    return max(0, end - committed) if end is not None and committed is not None and end >= 0 else None


def _list_entry(shard: Any, group_id: str) -> dict[str, Any] | None:
    """A groups-list row. A consumer group's is read from the group itself: describing it would build every
    member's assignment, which the list does not show."""
    group = shard.groups.get(group_id)
    if isinstance(group, ConsumerGroup):
        return {"group_id": group_id, "type": "consumer", "protocol": "consumer", "state": group.state().value,
                "members": len(group.members), "group_epoch": group.group_epoch,
                "target_epoch": group.target_assignment_epoch, "assignor": group.last_assignor,
                "lag": total_lag(shard, group_id)}
    d = admin.describe_groups(shard, [group_id])[0]
    return None if d.error_code else _summary(d, total_lag(shard, group_id))


def _summary(d: DescribedGroup, total_lag: int | None) -> dict[str, Any]:
    return {"group_id": d.group_id, "type": d.group_type, "protocol": d.protocol_type, "state": d.group_state,
            "members": len(d.members), "group_epoch": d.group_epoch, "target_epoch": d.assignment_epoch,
            "assignor": d.assignor_name, "lag": total_lag}


def groups_page(shard: Any, *, offset: int = 0, limit: int = 50, query: str = "", state: str = "",
                group_type: str = "", visible: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """A page of groups sorted by id. Filtering uses the list (cheap); only the page's groups are described."""
    listed = admin.list_groups(shard, [state] if state else [], [group_type] if group_type else [])
    q = query.lower()
    ids: list[str] = []
    states: dict[str, int] = {}
    for g in listed:
        if (q and q not in g.group_id.lower()) or (visible is not None and not visible(g.group_id)):
            continue
        ids.append(g.group_id)
        states[g.group_state] = states.get(g.group_state, 0) + 1
    limit = max(1, min(limit, MAX_PAGE))
    offset = max(0, offset)
    page = ids[offset:offset + limit]
    entries = [_list_entry(shard, gid) for gid in page]
    return {"total": len(ids), "offset": offset, "limit": limit, "states": dict(sorted(states.items())),
            "groups": [e for e in entries if e is not None]}


def group_detail(shard: Any, timeline: RebalanceTimeline | None, group_id: str, show_configs: bool = True,
                 rows: int = DETAIL_ROWS) -> dict[str, Any] | None:
    """One group's members, current against target assignment, lag per partition, configs and timeline. The
    first `rows` members and partitions are listed (`members` and `partitions_total` count them all)."""
    d = admin.describe_groups(shard, [group_id])[0]
    if d.error_code:
        return None
    partitions = partition_lag(shard, d)
    out = _summary(d, total_lag(shard, group_id))
    out.update({
        "assignment_timestamp_ms": d.assignment_timestamp_ms,
        "member_list": [_member_json(shard, m) for m in d.members[:max(0, rows)]],
        "partitions": partitions[:max(0, rows)],
        "partitions_total": len(partitions),
        "timeline": [e.to_json() for e in timeline.events(group_id)] if timeline is not None else [],
    })
    if show_configs:
        configs = admin.describe_group_configs(shard, [group_id])[0].configs
        out["configs"] = [{"name": c.name, "value": c.value, "default": c.is_default} for c in configs]
    return out
