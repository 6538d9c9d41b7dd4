"""Registers every built-in assignor, server- and client-side (imported by `registry._load_builtins`)."""

from __future__ import annotations

from groupcoord.assignors.classic import ServerAssignorAdapter, register_classic_assignor
from groupcoord.assignors.cooperative_sticky import CooperativeStickyAssignor
from groupcoord.assignors.lag import LagAssignor
from groupcoord.assignors.lag_sticky import LagStickyAssignor
from groupcoord.assignors.range import RangeAssignor
from groupcoord.assignors.registry import register_server_assignor
from groupcoord.assignors.round_robin import RoundRobinAssignor
from groupcoord.assignors.simple_share import SimpleShareAssignor
from groupcoord.assignors.uniform import UniformAssignor

# SimpleShareAssignor serves share groups only (registry.SHARE_ONLY_ASSIGNORS); registered here so that a
# background worker process, which imports only this module, finds it for an offloaded share-group run.
for _server in (UniformAssignor(), RangeAssignor(), LagAssignor(), LagStickyAssignor(), SimpleShareAssignor()):
    register_server_assignor(_server)

for _classic in (
    CooperativeStickyAssignor(),
    RoundRobinAssignor(),
    ServerAssignorAdapter(RangeAssignor()),
    ServerAssignorAdapter(LagAssignor()),
):
    register_classic_assignor(_classic)
