"""KIP-1263's "Impact on Rebalance Times", reproduced by a deterministic simulation of the real core.

    python -m groupcoord.coordinator.simulation [--members 10] [--partitions 120] [--heartbeat-ms 5000]
                                     [--interval-ms 1000] [--previous-join-ms -200]

The scenario is the KIP's: a consumer group scales up, every member subscribes to the same topic, members
1 to N heartbeat every `heartbeat_ms` in that order, and clients revoke at once (a member told to revoke
heartbeats again immediately with its reduced owned set). Members 1 to N-2 have been stable for a while;
member N-1 joins `previous_join_ms` before member N (so the previous assignment was computed just before
member N joined, as in the KIP's table where the next computation may happen at +800 ms); member N joins
at +0 ms. Offloaded assignor runs complete instantly and are used from the next request on.

Only `groupcoord.coordinator.core` and the assignors run; the clock is virtual, so the output is the same on every
run. Times in the timeline are relative to member N's join.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from groupcoord.assignors.registry import get_server_assignor
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.consumer.group import ConsumerGroup, ConsumerGroupState
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest
from groupcoord.coordinator.core.metadata import MetadataImage, TopicMetadata, topic_id_for_name
from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion, AssignorRun
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.shard import GroupCoordinatorShard

__all__ = ["Event", "Timeline", "main", "simulate_scale_up"]

BASE_MS = 1_000_000_000  # the virtual wall clock at member N's join; an assignment timestamp of 0 means "never"
GROUP_ID = "scale-up"
TOPIC = "events"
WARM_UP_ROUNDS = 6


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened at `time_ms` (to `end_ms` when several similar steps are folded into one)."""

    time_ms: int
    text: str
    end_ms: int | None = None

    def when(self) -> str:
        if self.end_ms is None or self.end_ms == self.time_ms:
            return _ms(self.time_ms)
        return f"{_ms(self.time_ms)} to {_ms(self.end_ms)}"


@dataclass(frozen=True, slots=True)
class Timeline:
    n_members: int
    interval_ms: int
    offload: bool
    heartbeat_ms: int
    partitions: int
    events: tuple[Event, ...]
    completion_ms: int  # when every member owns its whole target, relative to member N's join
    preamble: str = ""
    # (time_ms, member, partitions owned) from recording's start: what `--plot` draws, one line per member
    ownership: tuple[tuple[int, int, int], ...] = ()

    def title(self) -> str:
        return (f"N = {self.n_members} member{'s' if self.n_members != 1 else ''}, {self.partitions} partitions, "
                f"heartbeat {self.heartbeat_ms:,} ms, assignment.interval.ms = {self.interval_ms:,} ms, "
                f"assignor.offload.enable = {'true' if self.offload else 'false'}")

    def table(self) -> str:
        rows = [("Time", "Event")]
        if self.preamble:
            rows.append(("before", self.preamble))
        rows.extend((e.when(), e.text) for e in self.events)
        width = max(len(r[0]) for r in rows)
        lines = [f"| {rows[0][0]:<{width}} | {rows[0][1]} |", f"|{'-' * (width + 2)}|---|"]
        lines.extend(f"| {when:<{width}} | {text} |" for when, text in rows[1:])
        return "\n".join(lines)


def _ms(t: int) -> str:
    return f"{'+' if t >= 0 else '-'}{abs(t):,} ms"


# --- the simulation ---------------------------------------------------------------------------------------
@dataclass
class _Client:
    """A prompt KIP-848 client: it owns what the last response gave it and revokes at once."""

    index: int
    member_id: str
    epoch: int = 0
    owned: dict[str, frozenset[int]] = field(default_factory=dict)
    gains: int = 0

    def count(self) -> int:
        return sum(len(ps) for ps in self.owned.values())


@dataclass
class _Step:
    """One member's heartbeat (with its instant re-heartbeat after a revocation) and what it caused."""

    time_ms: int
    kind: str  # join | revoke | gain | idle | wait (an idle heartbeat while the target lags the group epoch)
    member: int
    text: str
    notes: list[str] = field(default_factory=list)  # group-level consequences: target computed, run offloaded


class _ScaleUp:
    def __init__(self, n_members: int, interval_ms: int, offload: bool, heartbeat_ms: int, partitions: int,
                 previous_join_ms: int) -> None:
        if n_members < 1 or partitions < 1 or heartbeat_ms < 1 or interval_ms < 0:
            raise ValueError("n_members, partitions and heartbeat_ms must be positive, interval_ms non-negative")
        if n_members >= 2 and not -heartbeat_ms < previous_join_ms < 0:
            raise ValueError("previous_join_ms must be within one heartbeat interval before member N's join")
        self.n, self.hb, self.partitions, self.interval = n_members, heartbeat_ms, partitions, interval_ms
        self.previous_join_ms = previous_join_ms
        config = BrokerConfig.from_mapping({
            "group.consumer.min.heartbeat.interval.ms": 1,
            "group.consumer.heartbeat.interval.ms": heartbeat_ms,
            "group.consumer.max.heartbeat.interval.ms": max(15_000, heartbeat_ms),
            "group.consumer.session.timeout.ms": max(45_000, 10 * heartbeat_ms),
            "group.consumer.max.session.timeout.ms": max(60_000, 10 * heartbeat_ms),
            "group.consumer.assignment.interval.ms": interval_ms,
            "group.consumer.max.assignment.interval.ms": max(15_000, interval_ms),
            "group.consumer.assignor.offload.enable": offload,
        })
        self.topic_id = topic_id_for_name(TOPIC)
        image = MetadataImage.of([TopicMetadata(self.topic_id, TOPIC, partitions)])
        self.shard = GroupCoordinatorShard(config, lambda: "unused", image)
        self.clients = {i: _Client(i, f"member-{i}") for i in range(1, n_members + 1)}
        self.by_id = {c.member_id: c for c in self.clients.values()}
        self.queue: list[tuple[int, int, int]] = []  # (relative time, order, member index)
        self.order = itertools.count()
        self.now = 0
        self.recording = False
        self.steps: list[_Step] = []
        self.ownership: list[tuple[int, int, int]] = []

    # --- driving the core -------------------------------------------------------------------------------
    def group(self) -> ConsumerGroup:
        group = self.shard.groups[GROUP_ID]
        assert isinstance(group, ConsumerGroup)
        return group

    def _apply(self, result: Result[Any]) -> None:
        """Play the runtime: timers never fire here (nobody is silent long enough); offloaded runs finish at
        once, after the response that started them has gone out."""
        for task in result.tasks:
            assert isinstance(task, AssignorRun)
            assignment = get_server_assignor(task.assignor_name).assign(task.spec, task.topics, task.lag)
            self.shard.apply(self.shard.on_assignment_complete(
                AssignorCompletion(task.group_id, task.run_id, assignment), BASE_MS + self.now))

    def heartbeat(self, c: _Client, again: bool = False) -> None:
        joining = c.epoch == 0
        if joining:
            request = ConsumerGroupHeartbeatRequest(GROUP_ID, c.member_id, 0, rebalance_timeout_ms=60_000,
                                                    subscribed_topic_names=(TOPIC,), topic_partitions={})
        else:
            request = ConsumerGroupHeartbeatRequest(GROUP_ID, c.member_id, c.epoch, topic_partitions=c.owned)
        group = self.shard.groups.get(GROUP_ID)
        target_before = group.target_assignment_epoch if isinstance(group, ConsumerGroup) else 0
        runs_before = self.shard.stats.assignor_runs_offloaded
        had = c.count()
        result = self.shard.consumer_group_heartbeat(request, BASE_MS + self.now)
        self.shard.apply(result)
        response = result.response
        if response.error_code is not Errors.NONE:
            raise RuntimeError(f"member {c.index}: {response.error_code.name}: {response.error_message}")
        c.epoch = response.member_epoch
        revoked = 0
        if response.assignment is not None:
            new = {t: frozenset(ps) for t, ps in response.assignment.items() if ps}
            revoked = sum(len(ps - new.get(t, frozenset())) for t, ps in c.owned.items())
            c.owned = new
            if self.recording:
                self.ownership.append((self.now, c.index, c.count()))
        step = self._step(c, joining, revoked, c.count() - had + revoked)
        if self.group().target_assignment_epoch != target_before:
            step.notes.append(self._target_text())
        self._apply(result)
        if self.shard.stats.assignor_runs_offloaded != runs_before:
            target = self._target_text()
            step.notes.append("The assignor run is offloaded and completes at once, for use from the next "
                              f"request: {target[0].lower()}{target[1:]}")
        elif joining and self.group().group_epoch > self.group().target_assignment_epoch:
            step.notes.append("No new target assignment yet.")
        if self.recording and not (again and step.kind in ("idle", "wait") and not step.notes):
            self.steps.append(step)
        if revoked:
            self.heartbeat(c, again=True)  # instant revocation: tell the coordinator at once

    def _step(self, c: _Client, joining: bool, revoked: int, gained: int) -> _Step:
        group = self.group()
        target = sum(len(ps) for ps in group.target_for(c.member_id).values())
        if joining:
            return _Step(self.now, "join", c.index, f"Member {c.index} joins the group.")
        if revoked:
            text = (f"Member {c.index} heartbeats and discovers it must revoke {_partitions(revoked)}; "
                    "it revokes and heartbeats again at once.")
            return _Step(self.now, "revoke", c.index, text)
        if gained:
            whole = c.count() == target
            if self.n == 1:
                what = "its partitions"
            elif whole and c.gains:
                what = "the rest of the revoked partitions"
            else:
                what = "the revoked partitions" if whole else "some but not all revoked partitions"
            c.gains += 1
            return _Step(self.now, "gain", c.index, f"Member {c.index} heartbeats, gaining {what} "
                                                    f"({c.count()} of {target}).")
        kind = "wait" if group.group_epoch > group.target_assignment_epoch else "idle"
        return _Step(self.now, kind, c.index, f"Member {c.index} heartbeats.")

    def _target_text(self) -> str:
        group = self.group()
        holders = sorted(self.by_id[m].index for m, p in group.target_assignment.items() if any(p.values()))
        verb = "has" if len(holders) == 1 else "have"
        return (f"New target assignment (epoch {group.target_assignment_epoch}): {_members(holders)} {verb} "
                "all partitions.")

    def complete(self) -> bool:
        """Every member is STABLE at the target epoch, which is the group epoch, and owns its whole target."""
        group = self.group()
        if len(group.members) != self.n or group.state() is not ConsumerGroupState.STABLE:
            return False
        return all(
            {t: ps for t, ps in group.target_for(c.member_id).items() if ps} == c.owned
            for c in self.clients.values()
        )

    # --- the scenario -----------------------------------------------------------------------------------
    def slot(self, index: int) -> int:
        """Member i heartbeats at i/N of the heartbeat interval after member N's join, every interval."""
        return index * self.hb // self.n

    def schedule(self, time_ms: int, index: int) -> None:
        heapq.heappush(self.queue, (time_ms, next(self.order), index))

    def run(self) -> Timeline:
        n = self.n
        start = -WARM_UP_ROUNDS * self.hb
        for i in range(1, n - 1):  # the established members
            self.schedule(start + self.slot(i), i)
        if n >= 2:
            self.schedule(self.previous_join_ms, n - 1)
        self.schedule(0, n)
        preamble = ""
        completion: int | None = None
        horizon = 4 * self.hb + 2 * self.interval
        while self.queue and completion is None:
            time_ms, _, index = heapq.heappop(self.queue)
            if time_ms > horizon:
                break
            if not self.recording and time_ms >= min(self.previous_join_ms, 0):
                preamble = self._warm_up_done()
                self.recording = True
                self.ownership.extend((time_ms, c.index, c.count()) for c in self.clients.values())
            self.now = time_ms
            self.heartbeat(self.clients[index])
            self.schedule(time_ms + self.hb, index)
            if self.now >= 0 and self.complete():
                completion = self.now
        if completion is None:
            raise RuntimeError(f"the group did not converge within {horizon:,} ms")
        events = _fold(self.steps)
        events[-1] = Event(events[-1].time_ms, events[-1].text + " The rebalance has completed.", events[-1].end_ms)
        return Timeline(n, int(self.shard.config["group.consumer.assignment.interval.ms"]),
                        bool(self.shard.config["group.consumer.assignor.offload.enable"]), self.hb,
                        self.partitions, tuple(events), completion, preamble, tuple(self.ownership))

    def _warm_up_done(self) -> str:
        established = [c for c in self.clients.values() if c.index <= self.n - 2]
        if not established:
            return ""
        group = self.group()
        owned = sum(c.count() for c in established)
        if group.state() is not ConsumerGroupState.STABLE or owned != self.partitions:
            raise RuntimeError("members 1 to N-2 did not settle before the scale-up; use more warm-up rounds")
        who = _members([c.index for c in established]).capitalize()
        return f"{who} are stable and own all {self.partitions} partitions (target assignment epoch " \
               f"{group.target_assignment_epoch})."


def _members(indexes: Sequence[int]) -> str:
    if not indexes:
        return "no members"
    if len(indexes) == 1:
        return f"member {indexes[0]}"
    if list(indexes) == list(range(indexes[0], indexes[-1] + 1)):
        return f"members {indexes[0]} to {indexes[-1]}"
    return "members " + ", ".join(map(str, indexes))


def _partitions(k: int) -> str:
    return f"{k} partition{'s' if k != 1 else ''}"


def _fold(steps: list[_Step]) -> list[Event]:
    """One row per heartbeat, as the KIP's table has; runs of the same plain step by consecutive members (one
    after the other, nothing else happening) become one row with a time range."""
    events: list[Event] = []
    i = 0
    while i < len(steps):
        s = steps[i]
        j = i + 1
        if s.kind in _RUN_TEXT and not s.notes:
            while j < len(steps) and steps[j].kind == s.kind and not steps[j].notes \
                    and steps[j].member == steps[j - 1].member + 1:
                j += 1
        if j - i > 1:
            events.append(Event(s.time_ms, _RUN_TEXT[s.kind].format(s.member, steps[j - 1].member),
                                steps[j - 1].time_ms))
        elif s.kind == "join":
            events.append(Event(s.time_ms, " ".join([s.text, *s.notes])))
        else:
            text = s.text + (" No new target assignment yet." if s.kind == "wait" else "")
            events.append(Event(s.time_ms, " ".join([*s.notes, text])))
        i = j
    return events


_RUN_TEXT = {
    "revoke": "Members {} to {} heartbeat and discover they must revoke partitions; each revokes and heartbeats "
              "again at once.",
    "idle": "Members {} to {} heartbeat.",
    "wait": "Members {} to {} heartbeat. No new target assignment yet.",
}


def simulate_scale_up(n_members: int, interval_ms: int, offload: bool, heartbeat_ms: int = 5000,
                      partitions: int = 120, previous_join_ms: int = -200) -> Timeline:
    """Scale a group up to `n_members` and return what happened, relative to member N's join."""
    return _ScaleUp(n_members, interval_ms, offload, heartbeat_ms, partitions, previous_join_ms).run()


# --- the CLI ----------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="groupcoord simulate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=int, default=10, help="members of the large group (default 10)")
    p.add_argument("--partitions", type=int, default=120, help="partitions of the subscribed topic (default 120)")
    p.add_argument("--heartbeat-ms", type=int, default=5000, help="heartbeat interval (default 5000)")
    p.add_argument("--interval-ms", type=int, default=1000,
                   help="assignment.interval.ms compared with 0 (default 1000, the KIP's default)")
    p.add_argument("--previous-join-ms", type=int, default=-200,
                   help="when member N-1 joined, relative to member N (default -200)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="also draw the timelines: partitions owned per member over time, one panel per table")
    rest = list(argv) if argv is not None else None
    if rest and rest[0] == "--":  # `groupcoord simulate -- --members 20` passes the separator through
        rest = rest[1:]
    args = p.parse_args(rest)
    try:
        timelines = _print_comparison(args.members, args.partitions, args.heartbeat_ms, args.interval_ms,
                                      args.previous_join_ms)
        from groupcoord.coordinator.share_simulation import print_share_comparison

        print()
        print_share_comparison(args.members, args.partitions, args.heartbeat_ms, args.interval_ms,
                               args.previous_join_ms)
    except (ValueError, RuntimeError) as e:
        print(f"error: {e}")
        return 2
    if args.plot and timelines:
        from groupcoord import plots  # matplotlib only when asked for

        try:
            plots.simulation_timelines(timelines, args.plot)
        except OSError as e:
            print(f"error: cannot write {args.plot}: {e.strerror or e}")
            return 2
        print(f"plot written to {args.plot}")
    return 0 if timelines else 1


def _print_comparison(large: int, partitions: int, heartbeat_ms: int, interval_ms: int,
                      previous_join_ms: int) -> list[Timeline]:
    """Interval 0 vs `interval_ms` (offload off) and offload off vs on (interval 0), for the large group and a
    single-member group: every timeline is computed first, so a bad parameter prints nothing but the error."""
    scenarios = [(0, False), (interval_ms, False), (0, True)]
    sizes = list(dict.fromkeys((large, 1)))
    timelines = [simulate_scale_up(n, interval, offload, heartbeat_ms, partitions, previous_join_ms)
                 for n in sizes for interval, offload in scenarios]
    summary = [("Group", "assignment.interval.ms", "offload", "Rebalance completes")]
    for k, t in enumerate(timelines):
        label = f"{t.n_members} member{'s' if t.n_members != 1 else ''}"
        if k % len(scenarios) == 0:
            print(f"## Scaling up to {label}\n")
        print(f"### {t.title()}\n\n{t.table()}\n")
        summary.append((label, f"{t.interval_ms:,} ms", "on" if t.offload else "off", _ms(t.completion_ms)))
    print("## Summary: when the rebalance completes, relative to member N's join\n")
    widths = [max(len(row[k]) for row in summary) for k in range(4)]
    for k, row in enumerate(summary):
        print("| " + " | ".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=True)) + " |")
        if k == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return timelines


if __name__ == "__main__":
    raise SystemExit(main())
