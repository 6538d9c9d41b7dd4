"""Client-side assignors for the classic JoinGroup/SyncGroup protocol, run by the group leader.

In the classic protocol the leader receives every member's subscription (topics, owned partitions,
generation, rack, opaque user data) and computes the whole assignment itself; the coordinator only relays
it. Topics are names here (the classic protocol predates topic ids) and results are plain sorted lists,
ready to serialise into a ConsumerProtocolAssignment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from groupcoord.assignors.api import (
    GroupSpec,
    LagSnapshot,
    MemberSpec,
    PartitionOffsets,
    ServerAssignor,
    StaticTopicDescriber,
)

EAGER = "eager"
COOPERATIVE = "cooperative"

ClassicAssignment = dict[str, list[tuple[str, int]]]


@dataclass(frozen=True, slots=True)
class ClassicSubscription:
    """One member's ConsumerProtocolSubscription, decoded."""

    topics: tuple[str, ...]
    owned_partitions: tuple[tuple[str, int], ...] = ()
    generation: int = -1  # -1: unknown (KIP-792); owned partitions of older generations are not sticky
    rack_id: str | None = None
    user_data: bytes = b""


class ClassicAssignor(Protocol):
    """What a classic-protocol leader calls. Deterministic and side-effect free, like server assignors."""

    @property
    def name(self) -> str: ...

    @property
    def supported_protocols(self) -> tuple[str, ...]: ...

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, ClassicSubscription],
        lag: Mapping[tuple[str, int], PartitionOffsets] | None = None,
        auto_offset_reset: str = "latest",
    ) -> ClassicAssignment:
        """member id -> sorted (topic, partition) list, for every member in `subscriptions`."""
        ...


class ServerAssignorAdapter:
    """Runs a server assignor for a classic group: subscriptions become a `GroupSpec` (owned partitions as
    the current assignment), names serve as topic ids. Eager only, as Kafka's range assignor."""

    supported_protocols: tuple[str, ...] = (EAGER,)

    def __init__(self, server: ServerAssignor) -> None:
        self._server = server
        self.name = server.name

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, ClassicSubscription],
        lag: Mapping[tuple[str, int], PartitionOffsets] | None = None,
        auto_offset_reset: str = "latest",
    ) -> ClassicAssignment:
        members = {m: _member_spec(s, partitions_per_topic) for m, s in subscriptions.items()}
        result = self._server.assign(
            GroupSpec.of(members),
            StaticTopicDescriber(partitions_per_topic),
            LagSnapshot(lag or {}, auto_offset_reset),
        )
        out: ClassicAssignment = {}
        for m in sorted(subscriptions):
            a = result.get(m, {})
            out[m] = [(t, p) for t in sorted(a) for p in sorted(a[t])]
        return out


def _member_spec(s: ClassicSubscription, partitions_per_topic: Mapping[str, int]) -> MemberSpec:
    """Topics the leader has no metadata for are left out, as Kafka's client assignors skip them (server
    assignors refuse a subscription to a topic that does not exist)."""
    owned: dict[str, set[int]] = {}
    for t, p in s.owned_partitions:
        owned.setdefault(t, set()).add(p)
    return MemberSpec(
        subscribed_topic_ids=frozenset(t for t in s.topics if t in partitions_per_topic),
        assigned_partitions={t: frozenset(ps) for t, ps in owned.items()},
        rack_id=s.rack_id,
    )


_CLASSIC_ASSIGNORS: dict[str, ClassicAssignor] = {}
_ALIASES = {"round-robin": "roundrobin"}


def register_classic_assignor(assignor: ClassicAssignor) -> None:
    _CLASSIC_ASSIGNORS[assignor.name] = assignor


def get_classic_assignor(name: str) -> ClassicAssignor:
    """The classic assignor called `name` (Kafka's protocol name; "round-robin" also finds "roundrobin");
    KeyError if none."""
    from groupcoord.assignors.registry import _load_builtins

    _load_builtins()
    return _CLASSIC_ASSIGNORS[_ALIASES.get(name, name)]


def classic_assignor_names() -> list[str]:
    from groupcoord.assignors.registry import _load_builtins

    _load_builtins()
    return sorted(_CLASSIC_ASSIGNORS)
