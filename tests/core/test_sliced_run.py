"""An offloaded run crosses to a worker in slices (so the coordinator never holds its GIL long to pickle one) and
is put back together there exactly: the same rows in the same order, the same current target, the same result."""

from __future__ import annotations

import math
import pickle

from groupcoord.coordinator.core.consumer.spec_members import SpecMembers
from groupcoord.coordinator.runtime.executor import compact_run, run_compact, run_sliced
from groupcoord.coordinator.runtime.sliced_run import SlicedRun, slice_run, unslice
from tests.core.context import CoreContext
from tests.core.test_target_delta import offloaded, settle


def churned_group() -> CoreContext:
    """30 members on two subscriptions, some static, some with racks, settled; then one leaves and one joins."""
    ctx = offloaded()
    for i in range(30):
        ctx.join(f"m{i}", subscribed_topic_names=("foo",) if i % 3 else ("foo", "bar"),
                 rack_id=f"r{i % 2}" if i % 4 == 0 else None, instance_id=f"i{i}" if i % 5 == 0 else None)
    settle(ctx)
    ctx.heartbeat(member_id="m7", member_epoch=-1)  # leaves
    ctx.join("late", subscribed_topic_names=("foo", "bar"))
    return ctx


def test_a_run_is_sliced_and_put_back_together_with_the_same_rows_in_the_same_order() -> None:
    ctx = churned_group()
    run = compact_run(ctx.pending_runs[-1])
    members = run.spec.members
    assert isinstance(members, SpecMembers) and run.spec.current is not None
    sliced = slice_run(run, size=7)
    assert isinstance(sliced, SlicedRun)
    assert len(sliced.rows) == len(sliced.row_ids) == math.ceil(len(members.rows) / 7)
    assert len(sliced.member_ids) == math.ceil(len(run.spec.current.member_ids) / 7)
    back = unslice(pickle.loads(pickle.dumps(sliced)))
    got = back.spec.members
    assert isinstance(got, SpecMembers)
    assert list(got.rows.items()) == list(members.rows.items())
    assert all(row[0] in got.distinct and any(row[0] is s for s in got.distinct) for row in got.rows.values())
    assert back.spec.current is not None and got.current is back.spec.current
    assert back.spec.current.member_ids == run.spec.current.member_ids
    assert (back.spec.current.owner == run.spec.current.owner).all()
    assert back.spec.subscription_type == run.spec.subscription_type and back.assignor_name == run.assignor_name


def test_a_sliced_run_gives_the_worker_the_same_outcome_as_the_whole_run() -> None:
    ctx = churned_group()
    run = compact_run(ctx.pending_runs[-1])
    whole = run_compact(pickle.loads(pickle.dumps(run)))
    in_slices = run_sliced(pickle.loads(pickle.dumps(slice_run(run, size=4))))
    assert whole.error is None and in_slices.error is None
    assert in_slices.changes == whole.changes and in_slices.chunks == whole.chunks
    assert whole.changes and "late" in whole.changes
