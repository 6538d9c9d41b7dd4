"""An offloaded run pickled in slices, so the coordinator never holds its GIL long to send one.

Why: a run on a 10,000-member group crosses to a worker process as 0.34 MB: every member's row (its
subscription, rack and instance id) and the current target's member ids. Pickling that is one C call that
holds the GIL for 1.6 ms; every heartbeat of every other group that arrives meanwhile waits for it, several
times a second for a group that churns at assignment interval 0. Here the rows and the member ids are
pickled a slice (0.1 ms) at a time, as callbacks of the event loop itself between which it answers
heartbeats (`slicing`; a thread that pickled them would take the GIL from the loop at every slice), and the
worker puts the run back together (`unslice`) before running
it exactly as an unsliced one (the executor's `run_sliced`).
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from groupcoord.assignors.compact import CompactAssignment
from groupcoord.coordinator.core.consumer.spec_members import Row, SpecMembers

if TYPE_CHECKING:  # the executor imports this module
    from groupcoord.coordinator.runtime.executor import CompactRun

T = TypeVar("T")

SLICE = 1000  # rows (or member ids) per pickle: about 0.1 ms each


@dataclass(frozen=True, slots=True)
class SlicedRun:
    """A `CompactRun` as pickles: `head` is the run with its members' rows and its current target's member
    ids left out; `row_ids`, `rows` and `member_ids` are those (the rows' keys and values apart: no pair
    tuple per member to build and pickle), a slice per pickle, in order."""

    head: bytes
    row_ids: tuple[bytes, ...]
    rows: tuple[bytes, ...]
    member_ids: tuple[bytes, ...]


def slicing(run: CompactRun, size: int = SLICE) -> Generator[None, None, SlicedRun | CompactRun]:
    """`run` sliced (`size` rows or ids a pickle) when its members are the coordinator's rows (`SpecMembers`)
    over its current target, else `run` as it is (a plain mapping of `MemberSpec`s), as a generator's return
    value: it yields after each slice, so its driver decides what runs in between (the executor: the event
    loop's other callbacks, one slice per loop pass)."""
    spec = run.spec
    members, current = spec.members, spec.current
    if not isinstance(members, SpecMembers) or members.current is not current:
        return run
    head = pickle.dumps(hollow_run(run), protocol=pickle.HIGHEST_PROTOCOL)
    parts: list[tuple[bytes, ...]] = []
    for items in (list(members.rows), list(members.rows.values()), current.member_ids if current else []):
        out = []
        for start in range(0, len(items), size):
            yield
            out.append(pickle.dumps(items[start:start + size], protocol=pickle.HIGHEST_PROTOCOL))
        parts.append(tuple(out))
    return SlicedRun(head, *parts)


def hollow_run(run: CompactRun) -> CompactRun:
    """`run` without its members' rows and its current target's member ids (its members must be `SpecMembers`
    over its current target): the part of a run that is cheap to pickle whole."""
    spec = run.spec
    members, current = spec.members, spec.current
    assert isinstance(members, SpecMembers)
    hollow_current = None if current is None else CompactAssignment(
        [], current.topic_ids, current.base, current.owner, None, current.changed)
    hollow = dataclasses.replace(spec, members=SpecMembers({}, members.distinct, hollow_current),
                                 current=hollow_current)
    return dataclasses.replace(run, spec=hollow)


def to_the_end(steps: Generator[None, None, T]) -> T:
    """A stepwise job (`slicing`, the executor's `loading`) driven to its end at once, for callers with no
    event loop to answer between its steps (tools, tests, benchmarks)."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result


def slice_run(run: CompactRun, size: int = SLICE) -> SlicedRun | CompactRun:
    """`slicing` driven to its end at once."""
    return to_the_end(slicing(run, size))


def unslice(sliced: SlicedRun) -> CompactRun:
    """The run `slice_run` was given, with the same rows in the same order. A member's subscription is again
    the very object of `distinct` it was (each slice pickled its own copy of it)."""
    run: CompactRun = pickle.loads(sliced.head)
    members = run.spec.members
    assert isinstance(members, SpecMembers)
    canonical = {s: s for s in members.distinct}
    values: list[Row] = [(canonical.get(subscription, subscription), rack, instance)
                         for chunk in sliced.rows for subscription, rack, instance in pickle.loads(chunk)]
    members.rows = dict(zip((m for chunk in sliced.row_ids for m in pickle.loads(chunk)), values, strict=True))
    if run.spec.current is not None:
        run.spec.current.member_ids = [m for chunk in sliced.member_ids for m in pickle.loads(chunk)]
    return run

