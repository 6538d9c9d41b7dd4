"""Counters the core keeps about what it decided; the runtime exports them as Prometheus metrics.

Plain integers, no metrics library: the core stays free of I/O and threads.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from groupcoord.coordinator.core.errors import Errors


@dataclass(slots=True)
class CoreStats:
    heartbeats_by_error: Counter[str] = field(default_factory=Counter)
    assignor_runs_sync: int = 0
    assignor_runs_offloaded: int = 0
    assignor_skipped_interval: int = 0
    assignor_skipped_inflight: int = 0
    assignor_results_discarded: int = 0
    assignor_failures: int = 0
    rebalances: int = 0  # group epoch bumps
    members_left: int = 0
    members_fenced_session: int = 0
    members_fenced_rebalance: int = 0
    metadata_bumps: int = 0
    groups_upgraded: int = 0  # classic groups converted to consumer groups (online upgrade)
    groups_downgraded: int = 0  # consumer groups converted back to classic groups (online downgrade)

    def count_heartbeat(self, code: Errors) -> None:
        self.heartbeats_by_error[code.name] += 1
