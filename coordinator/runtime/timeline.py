"""Recent rebalances per group, for the web view: a bounded ring of events kept by the runtime, not the core.

The core's persisted state holds only what replay needs; when a group's epoch moved or its state changed is
history an operator wants to see, not state. So the runtime watches each operation's records (they name the
groups it touched) and, right after the operation, compares each touched group's summary (state, group and
target epochs, members) with the one it saw last. A difference is one `RebalanceEvent`. It runs on the
event loop between two operations, so it reads the shard as the operations left it.

`ChangeFeed` is the version the web view's long polls wait on: bumped after every operation that wrote
records, so a page asks again only when something may have changed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from groupcoord.coordinator.core import admin
from groupcoord.coordinator.core.consumer.group import ConsumerGroup

EVENTS_PER_GROUP = 64
# Records that change who is in a consumer group: only then is its member set compared (O(members)).
_MEMBERSHIP_RECORDS = frozenset({"ConsumerGroupMemberMetadata", "ConsumerGroupMemberMetadataTombstone"})
# Records that change nothing the timeline shows: an offset commit is not a rebalance.
_QUIET_RECORDS = frozenset({"OffsetCommit", "OffsetCommitTombstone", "GroupConfig"})


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_type: str
    state: str
    group_epoch: int
    target_epoch: int
    members: frozenset[str]


@dataclass(frozen=True, slots=True)
class RebalanceEvent:
    at_ms: int
    cause: str  # the operation: ConsumerGroupHeartbeat, timer, assignor-complete, JoinGroup, ...
    previous_state: str
    state: str
    group_epoch: int
    target_epoch: int
    members: int
    joined: tuple[str, ...] = ()
    left: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize(shard: Any, group_id: str, members_from: GroupSummary | None = None) -> GroupSummary | None:
    """The group as the timeline compares it; `members_from` reuses a previous member set (unchanged)."""
    group = shard.groups.get(group_id)
    if isinstance(group, ConsumerGroup):
        members = members_from.members if members_from is not None else frozenset(group.members)
        return GroupSummary("consumer", group.state().value, group.group_epoch, group.target_assignment_epoch,
                            members)
    if group is None:
        return None
    member_map = getattr(group, "members", None)
    if group.group_type in ("classic", "share") and isinstance(member_map, dict):
        # classic and share groups: their listing and member ids, not a describe (which would build every
        # member's metadata on each join of a large classic rebalance)
        listed = group.listed()
        epoch = getattr(group, "group_epoch", getattr(group, "generation", 0))
        return GroupSummary(listed.group_type, listed.group_state, epoch, getattr(group, "target_assignment_epoch", 0),
                            frozenset(member_map))
    d = admin.describe_groups(shard, [group_id])[0]
    if d.error_code:
        return None
    return GroupSummary(d.group_type, d.group_state, d.group_epoch, d.assignment_epoch,
                        frozenset(m.member_id for m in d.members))


class RebalanceTimeline:
    """Per group, the last `per_group` events. A deleted group's ring goes with it."""

    def __init__(self, shard: Any, per_group: int = EVENTS_PER_GROUP) -> None:
        self._shard = shard
        self._per_group = per_group
        self._last: dict[str, GroupSummary] = {}
        self._events: dict[str, deque[RebalanceEvent]] = {}

    def observe(self, cause: str, records: Sequence[Any], now: int) -> None:
        touched: dict[str, bool] = {}  # group id -> its membership may have changed
        for r in records:
            name = type(r).__name__
            gid = getattr(r, "group_id", None)
            if not isinstance(gid, str) or name in _QUIET_RECORDS:
                continue
            touched[gid] = touched.get(gid, False) or name in _MEMBERSHIP_RECORDS
        for gid, membership in touched.items():
            self._compare(gid, cause, now, membership)

    def _compare(self, gid: str, cause: str, now: int, membership: bool) -> None:
        before = self._last.get(gid)
        after = summarize(self._shard, gid, None if membership or before is None else before)
        if after is None:
            self._last.pop(gid, None)
            self._events.pop(gid, None)
            return
        self._last[gid] = after
        if before is not None and (before.state, before.group_epoch, before.target_epoch, before.members) == (
                after.state, after.group_epoch, after.target_epoch, after.members):
            return
        previous = before.members if before is not None else frozenset()
        event = RebalanceEvent(now, cause, before.state if before is not None else "", after.state,
                               after.group_epoch, after.target_epoch, len(after.members),
                               tuple(sorted(after.members - previous)), tuple(sorted(previous - after.members)))
        ring = self._events.get(gid)
        if ring is None:
            ring = self._events[gid] = deque(maxlen=self._per_group)
        ring.append(event)

    def events(self, group_id: str) -> list[RebalanceEvent]:
        return list(self._events.get(group_id, ()))


class ChangeFeed:
    """A version number and a way to wait for it to move. Used on the event loop only."""

    def __init__(self) -> None:
        self.version = 0
        self._changed: asyncio.Event | None = None

    def bump(self) -> None:
        self.version += 1
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    async def wait_past(self, version: int, timeout_s: float) -> None:
        """Return once the version differs from `version`, or after `timeout_s`."""
        if self.version != version:
            return
        if self._changed is None:
            self._changed = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout_s)
