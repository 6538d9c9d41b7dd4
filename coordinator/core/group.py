"""The `Group` protocol: what the shard's generic paths ask of a group, whatever its type.

Admin (describe, list, delete), offsets (commit, fetch, OffsetDelete), offset retention, snapshots, loads,
rollbacks and partition moves treat every group alike through these methods; each group type decides the
answers: consumer groups with their mixed members (`consumer/group.py`), classic (`classic/answers.py`), share
(`share/group.py`) and streams (`streams/state.py`). Every group lives in the shard's `groups`. The shard only
routes, so a new group type implements this protocol instead of adding an
isinstance branch to every generic path.

Records, timers and offloaded runs' completions are plugged in per type (`GroupTypeHooks`, built once by the
shard's constructor): a record may create a group, and a fired timer names its kind before it names a group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.limits import ECHO_MAX_CHARS
from groupcoord.coordinator.core.messages import DescribedGroup, ListedGroup
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.core.results import Result, TimerKey, TimerOp

# The group types, as `group_type` names them: a group id has exactly one.
CONSUMER = "consumer"
CLASSIC = "classic"
SHARE = "share"
STREAMS = "streams"


def not_this_type(group_id: str, group_type: str) -> str:
    """Kafka's message for a request of one group type naming a group of another."""
    return f"Group {group_id[:ECHO_MAX_CHARS]} is not a {group_type} group."


class GroupView(Protocol):
    """What DescribeGroups, ListGroups and DeleteGroups ask of any group, streams groups included."""

    @property
    def group_id(self) -> str: ...

    @property
    def group_type(self) -> str: ...

    def describe(self) -> DescribedGroup: ...

    def listed(self) -> ListedGroup: ...

    def is_empty(self) -> bool: ...

    def member_count(self) -> int: ...


class GroupMember(Protocol):
    """What generic paths read of a member: who it is and the principal that joined it (principals.py)."""

    @property
    def member_id(self) -> str: ...

    @property
    def principal(self) -> str | None: ...


class OffsetGroup(GroupView, Protocol):
    """What the offset paths (commit, fetch, OffsetDelete, retention, DeleteGroups) ask of a group, of every
    type."""

    @property
    def members(self) -> Mapping[str, GroupMember]: ...

    def should_expire(self) -> bool:
        """May the retention check delete the group once it is empty and its offsets expired (Kafka's
        shouldExpire)?"""
        ...

    def topics_in_use(self) -> set[str] | None:
        """Topics whose committed offsets the members still use (retention keeps them, OffsetDelete refuses
        them); None: every topic (a group with members whose subscriptions are opaque)."""
        ...

    def validate_offset_commit(self, member_id: str, instance_id: str | None, epoch: int,
                               partitions: list[tuple[str, int]],
                               image: MetadataImage) -> Mapping[tuple[str, int], Errors]:
        """Per-partition errors for a commit (empty: all accepted); raises CoordinatorError for the request."""
        ...

    def validate_offset_fetch(self, member_id: str, member_epoch: int) -> None:
        """Raises CoordinatorError when a member-scoped OffsetFetch is not allowed."""
        ...

    def validate_offset_delete(self) -> None:
        """Raises CoordinatorError when OffsetDelete may not touch this group's offsets at all."""
        ...

    def deletion_records(self) -> list[Any]:
        """Tombstones for everything the group wrote (offsets and GroupEmptySince are the shard's)."""
        ...

    @property
    def tracks_empty_since(self) -> bool:
        """Do its offsets expire from when it became empty (GroupEmptySince records), or from their commit
        only (streams groups, as Kafka's offsetExpirationCondition)?"""
        ...


class Group(OffsetGroup, Protocol):
    """A group in the shard's `groups`, of any type (consumer, classic, share, streams): Kafka's `Group`
    interface."""

    def snapshot_records(self) -> Iterator[Any]:
        """Records that rebuild the group when replayed into an empty shard."""
        ...

    def timers_after_load(self, now: int) -> list[TimerOp]:
        """The timers to arm once the group was replayed (timers are not state)."""
        ...


class GroupDefaults:
    """The answers most group types give alike, for a group keeping its members in a `members` dict; a type
    overrides what it decides differently (consumer groups know their subscriptions, share groups never
    expire, ...)."""

    __slots__ = ()
    members: Mapping[str, GroupMember]
    tracks_empty_since = True

    def is_empty(self) -> bool:
        return not self.members

    def member_count(self) -> int:
        return len(self.members)

    def should_expire(self) -> bool:
        return True

    def topics_in_use(self) -> set[str] | None:
        """Subscriptions opaque to the coordinator: with members, every topic counts as in use."""
        return None if self.members else set()

    def validate_offset_fetch(self, member_id: str, member_epoch: int) -> None:
        """No member epoch to check (Kafka checks it for consumer groups only)."""

    def validate_offset_delete(self) -> None:
        """Per-partition checks only (`topics_in_use`)."""


@dataclass(frozen=True, slots=True)
class GroupTypeHooks:
    """What one group type plugs into the shard, returned by its package and read once by the shard's
    constructor: the replayer of each of its record types, the handler of each of its timer kinds, and the
    handler of its offloaded assignor runs' completions (by group type)."""

    replayers: Mapping[type, Callable[[Any], None]] = field(default_factory=dict)
    timers: Mapping[str, Callable[[TimerKey, int], Result[None]]] = field(default_factory=dict)
    completions: Mapping[str, Callable[[Any, int], Result[None]]] = field(default_factory=dict)
