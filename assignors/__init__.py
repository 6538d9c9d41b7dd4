"""Partition assignors as pure functions: server-side (KIP-848) and client-side (classic protocol).

Server-side (`get_server_assignor`): `uniform` (default; balanced, sticky), `range` (co-partitioned
ranges), `lag` (KAFKA-5337, per topic), `lag-sticky` (lag balanced across topics, few moves).
Client-side (`get_classic_assignor`): `cooperative-sticky`, `roundrobin`, `range`, `lag`.
The classes are exported for callers that need non-default parameters
(e.g. `LagStickyAssignor(move_threshold=0.05)`). Each module's docstring explains its algorithm;
`_balance` holds the shared balancing engine, `_layout` the compact encoding the hot paths use and
`_kafka_sticky` the parts of Kafka's sticky assignor that fix its exact answer.
"""

from groupcoord.assignors.api import (
    EMPTY_LAG,
    AssignorError,
    GroupAssignment,
    GroupSpec,
    LagSnapshot,
    MemberAssignment,
    MemberSpec,
    PartitionOffsets,
    ServerAssignor,
    StaticTopicDescriber,
    SubscriptionType,
    TopicDescriber,
)
from groupcoord.assignors.classic import (
    ClassicAssignment,
    ClassicAssignor,
    ClassicSubscription,
    classic_assignor_names,
    get_classic_assignor,
    register_classic_assignor,
)
from groupcoord.assignors.cooperative_sticky import CooperativeStickyAssignor
from groupcoord.assignors.lag import LagAssignor
from groupcoord.assignors.lag_sticky import LagStickyAssignor
from groupcoord.assignors.range import RangeAssignor
from groupcoord.assignors.registry import get_server_assignor, register_server_assignor, server_assignor_names
from groupcoord.assignors.round_robin import RoundRobinAssignor
from groupcoord.assignors.uniform import UniformAssignor

__all__ = [
    "EMPTY_LAG",
    "AssignorError",
    "ClassicAssignment",
    "ClassicAssignor",
    "ClassicSubscription",
    "CooperativeStickyAssignor",
    "GroupAssignment",
    "GroupSpec",
    "LagAssignor",
    "LagSnapshot",
    "LagStickyAssignor",
    "MemberAssignment",
    "MemberSpec",
    "PartitionOffsets",
    "RangeAssignor",
    "RoundRobinAssignor",
    "ServerAssignor",
    "StaticTopicDescriber",
    "SubscriptionType",
    "TopicDescriber",
    "UniformAssignor",
    "classic_assignor_names",
    "get_classic_assignor",
    "get_server_assignor",
    "register_classic_assignor",
    "register_server_assignor",
    "server_assignor_names",
]
