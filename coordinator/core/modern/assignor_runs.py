"""An assignor run offloaded to the background executor, and what comes back: the same two shapes for every modern
group type that offloads (consumer and share groups, KIP-1263), so the runtime's executor knows no group type."""

from __future__ import annotations

from dataclasses import dataclass

from groupcoord.assignors.api import GroupAssignment, GroupSpec, LagSnapshot
from groupcoord.coordinator.core.metadata import MetadataImage


@dataclass(frozen=True, slots=True)
class AssignorRun:
    """A task for the background executor: everything the assignor needs, immutable."""

    group_id: str
    run_id: int
    assignor_name: str
    assignment_epoch: int
    spec: GroupSpec
    topics: MetadataImage
    lag: LagSnapshot | None


@dataclass(frozen=True, slots=True)
class AssignorCompletion:
    """What the runtime hands back to the core when an offloaded run ends."""

    group_id: str
    run_id: int
    assignment: GroupAssignment | None
    error: str | None = None
