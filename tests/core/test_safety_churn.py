"""Safety under random churn: no partition is ever owned by two live clients, the coordinator's ownership index
agrees with its members, and once the churn stops the group converges to STABLE with every subscribed
partition assigned. See churn.py for the client model and what "live" means."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.core.consumer import reconciliation as reconciliation
from tests.core.churn import SUBSCRIPTIONS, ChurnSimulation, run_churn
from tests.core.clients import ModelClient
from tests.core.context import shard_state

STEPS = 10_000


@pytest.mark.parametrize(("offload", "interval_ms", "seed"), [
    (False, 0, 11), (False, 1000, 12), (True, 0, 13), (True, 1000, 14),
])
def test_random_churn_never_gives_a_partition_to_two_live_clients_and_converges(
        offload: bool, interval_ms: int, seed: int) -> None:
    sim = run_churn(seed, STEPS, offload=offload, interval_ms=interval_ms)  # checks after every step
    s, core = sim.stats, sim.ctx.shard.stats
    # The run exercised what it claims to.
    assert s.steps >= STEPS
    assert min(s.joins, s.leaves, s.crashes, s.lost_responses, s.slow_revocations, s.commits,
               s.metadata_changes, s.config_changes, s.fenced_errors, s.zombies) > 0, s
    assert core.members_fenced_session > 0 and core.members_fenced_rebalance > 0
    assert core.assignor_runs_offloaded > 0 and core.assignor_runs_sync > 0  # group overrides flip offload
    if interval_ms:
        assert core.assignor_skipped_interval > 0
    if offload:
        assert core.assignor_skipped_inflight > 0
    assert shard_state(sim.ctx.fresh_replay()) == shard_state(sim.ctx.shard)


ACTIONS = ["join", "static_join", "heartbeat", "finish_revocation", "leave", "crash", "advance", "complete_run",
           "metadata", "resubscribe"]
SLOTS = 6


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, SLOTS - 1), st.integers(0, 2)),
                    max_size=60),
       offload=st.booleans(), interval_ms=st.sampled_from([0, 400, 1000]))
def test_property_single_ownership_holds_after_every_operation_and_the_group_converges(
        ops: list[tuple[str, int, int]], offload: bool, interval_ms: int) -> None:
    """The small, shrinkable version: hypothesis chooses every client action (k picks a variant: lose the
    response, revoke slowly, leave temporarily, fail the assignor run, ...)."""
    sim = ChurnSimulation(random.Random(0), offload=offload, interval_ms=interval_ms)
    ctx = sim.ctx
    slots: dict[int, ModelClient] = {}
    for action, i, k in ops:
        c = slots.get(i)
        if action == "advance":
            ctx.advance([200, 3_000, 7_000][k])
        elif action == "complete_run":
            if ctx.pending_runs:
                ctx.complete_run(ctx.pending_runs[0].run_id, fail=k == 2)
        elif action == "metadata":
            sim.change_metadata(["foo", "bar", "baz"][k], 1 + i % 2)
        elif action in ("join", "static_join"):
            instance = f"instance-{i % 3}" if action == "static_join" else None
            if (c is None or not c.alive) and not any(x.alive and x.instance_id == instance
                                                      for x in slots.values() if instance is not None):
                slots[i] = c = sim.add_client(instance)
                c.heartbeat()
        elif c is None or not c.alive:
            pass
        elif action == "heartbeat":
            c.heartbeat(lose_response=k == 1, slow_revoke=k == 2)
        elif action == "finish_revocation":
            if c.finish_revocation():
                c.heartbeat()
        elif action == "leave":
            c.leave(static_temporary=k == 1 and c.instance_id is not None)
        elif action == "crash":
            c.crash()
        elif action == "resubscribe":
            c.subscribe(*SUBSCRIPTIONS[k])
        sim.check()
    sim.restart_heartbeats()
    sim.settle()
    assert shard_state(ctx.fresh_replay()) == shard_state(ctx.shard)


def test_the_churn_checks_catch_a_coordinator_that_hands_out_owned_partitions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness is not vacuous: break the one rule (grant only free partitions) and it fails."""
    compute_next = reconciliation._compute_next

    def ignores_owners(member, member_epoch, target_epoch, target, subscribed, owner_of, owned):  # type: ignore[no-untyped-def]
        return compute_next(member, member_epoch, target_epoch, target, subscribed, lambda t, p: None, owned)

    monkeypatch.setattr(reconciliation, "_compute_next", ignores_owners)
    with pytest.raises(AssertionError, match="held by both|owned by live clients"):
        run_churn(11, 2_000, offload=False, interval_ms=0)


def test_the_churn_checks_catch_a_coordinator_that_does_not_wait_for_revocation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reconciliation, "_still_owns", lambda owned, revoked: False)
    with pytest.raises(AssertionError, match="the coordinator did not give it|owned by live clients"):
        run_churn(11, 2_000, offload=False, interval_ms=0)
