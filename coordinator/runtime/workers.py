"""`serve --workers N`: N coordinator processes on one machine, each owning a fixed share of the groups.

Theory of operation. The groups are divided exactly as in the Kafka-backed mode
(`groupcoord.coordinator.runtime.sharding`):
group g lives in state partition `state_partition(g, P)`. Here no Kafka group hands the partitions out; the
assignment is fixed: worker K owns the partitions p with p mod N == K, listens on base port + K and keeps its
records in its own file log, `STATE_DIR/worker-K/`. `StaticOwnership` is its router and directory: a request
for a group of another worker is refused with NOT_COORDINATOR, and FindCoordinator names the owner's port, so a
client that followed the protocol (clients/group_member.py does) reaches the owner at the first retry.

Because the layout is fixed, a worker that restarts (the supervisor, `groupcoord.supervisor`, restarts one that
died) replays its own log and serves the same groups again. The layout is written to `STATE_DIR/workers.json`
and checked at start: with a different N or P, groups would be looked for in the wrong worker's log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.coordinator.runtime.sharding import Located


@dataclass(frozen=True, slots=True)
class WorkerLayout:
    index: int  # this worker, 0..workers-1
    workers: int
    partitions: int  # state partitions the groups hash into (as --state-partitions)
    host: str  # the address every worker advertises (they share the host)
    base_port: int  # worker K listens on base_port + K

    def owner(self, group_id: str) -> int:
        return state_partition(group_id, self.partitions) % self.workers

    def port(self, worker: int) -> int:
        return self.base_port + worker


class StaticOwnership:
    """The runtime's router (call it with a group id) and FindCoordinator's directory for one worker."""

    def __init__(self, layout: WorkerLayout) -> None:
        self.layout = layout

    def __call__(self, group_id: str) -> tuple[Errors, str] | None:
        owner = self.layout.owner(group_id)
        if owner == self.layout.index:
            return None
        return (Errors.NOT_COORDINATOR, f"Group {group_id} belongs to worker {owner} (port "
                f"{self.layout.port(owner)}), not to worker {self.layout.index}; ask FindCoordinator.")

    def locate(self, group_id: str) -> Located:
        return Located(self.layout.host, self.layout.port(self.layout.owner(group_id)))


class LayoutMismatch(Exception):
    pass


def check_layout(state_dir: Path, workers: int, partitions: int) -> None:
    """Record the layout in a new state directory; refuse one written with another layout."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / "workers.json"
    want = {"workers": workers, "partitions": partitions}
    if path.exists():
        have = json.loads(path.read_text())
        if have != want:
            raise LayoutMismatch(f"{state_dir} holds the groups of {have.get('workers')} worker(s) over "
                                 f"{have.get('partitions')} partitions; start with --workers "
                                 f"{have.get('workers')} --state-partitions {have.get('partitions')}")
        return
    existing = [p.name for p in state_dir.iterdir() if p.name != "workers.json"]
    if existing and not all(name.startswith("worker-") for name in existing):
        raise LayoutMismatch(f"{state_dir} holds a single coordinator's state; --workers needs its own directory")
    path.write_text(json.dumps(want) + "\n")
