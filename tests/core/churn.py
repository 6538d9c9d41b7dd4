"""A seeded, event-driven churn simulation of one consumer group against the core, with model clients.

Clients join (dynamic or static), leave (-1, or -2 for a static member's temporary leave), crash (stop
heartbeating until the session timeout fences them), lose responses, revoke promptly or slowly (sometimes
longer than their rebalance timeout), change subscriptions and commit offsets; topics grow, appear and
disappear; the group's offload and interval overrides flip; an empty group is sometimes deleted while an
offloaded run is in flight. After every step `check` asserts the safety properties.

"Live" means the process runs and the coordinator still knows its member. A client the coordinator fenced by
a timer while it still believed it owned partitions (a slow revoker past its rebalance timeout, or one whose
responses kept getting lost) is a *zombie* until its next heartbeat tells it so: Kafka's protocol cannot stop
a zombie from believing it owns partitions, only fence its commits, and `check` asserts that too.
"""

from __future__ import annotations

import heapq
import itertools
import random
from dataclasses import dataclass
from typing import Any

from groupcoord.coordinator.core.consumer.group import ConsumerGroup, ConsumerGroupState, MemberState
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import CommitPartition, OffsetCommitRequest
from groupcoord.coordinator.core.metadata import MetadataImage, TopicMetadata, topic_id_for_name
from tests.core.clients import ModelClient
from tests.core.context import CoreContext, check_group_invariants

HEARTBEAT_MS = 1000
SESSION_MS = 6000
REBALANCE_MS = 3000
GROUP = "churn"
SUBSCRIPTIONS: list[tuple[tuple[str, ...] | None, str | None]] = [
    (("foo", "bar"), None), (("foo",), None), (("bar", "baz"), None), (None, "ba.*"), (None, "f.*|baz"),
]
INSTANCE_IDS = [f"instance-{i}" for i in range(5)]
MAX_CLIENTS = 10


@dataclass
class Traits:
    loss: float  # probability that a heartbeat's response is lost
    slow: float  # probability that a revocation is slow
    slow_ms: int  # how long a slow revocation takes (may exceed the rebalance timeout)


@dataclass
class ChurnStats:
    steps: int = 0
    joins: int = 0
    leaves: int = 0
    crashes: int = 0
    lost_responses: int = 0
    slow_revocations: int = 0
    zombies: int = 0
    fenced_errors: int = 0
    offloaded_runs: int = 0
    commits: int = 0
    stale_pending_commits: int = 0
    deletes: int = 0
    metadata_changes: int = 0
    config_changes: int = 0


class ChurnSimulation:
    def __init__(self, rng: random.Random, *, offload: bool, interval_ms: int,
                 context: type[CoreContext] = CoreContext) -> None:
        self.rng = rng
        self.topics: dict[str, int] = {"foo": 6, "bar": 4}
        self.ctx = context(self.topics, auto_complete_runs=False, overrides={
            "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
            "group.consumer.min.session.timeout.ms": 1000,
            "group.consumer.session.timeout.ms": SESSION_MS,
            "group.consumer.assignment.interval.ms": interval_ms,
            "group.consumer.assignor.offload.enable": offload,
        })
        self.clients: list[ModelClient] = []
        self.traits: dict[str, Traits] = {}
        self.queue: list[tuple[int, int, str, Any]] = []
        self.seq = itertools.count()
        self.scheduled_runs: set[int] = set()
        self.known_zombies: set[str] = set()
        self.names = itertools.count(1)
        self.churning = True
        self.baz_generation = 0
        self.stats = ChurnStats()

    # --- scheduling ----------------------------------------------------------------------------------------
    def at(self, time_ms: int, kind: str, payload: Any = None) -> None:
        heapq.heappush(self.queue, (time_ms, next(self.seq), kind, payload))

    def group(self) -> ConsumerGroup | None:
        group = self.ctx.shard.groups.get(GROUP)
        return group if isinstance(group, ConsumerGroup) else None

    def live(self) -> list[ModelClient]:
        return [c for c in self.clients if c.alive]

    def is_zombie(self, c: ModelClient) -> bool:
        group = self.group()
        return c.joined and (group is None or c.member_id not in group.members)

    # --- the run -----------------------------------------------------------------------------------------
    def run(self, steps: int) -> ChurnStats:
        for _ in range(4):
            self.add_client()
        self.at(self.ctx.now + 500, "churn")
        for _ in range(steps):
            self.step()
        self.settle()
        return self.stats

    def step(self) -> None:
        time_ms, _, kind, payload = heapq.heappop(self.queue)
        self.ctx.advance(time_ms - self.ctx.now)
        getattr(self, f"on_{kind}")(payload)
        self.schedule_runs()
        self.stats.steps += 1
        self.check()

    def restart_heartbeats(self) -> None:
        """Forget the schedule and start over from now: every live client heartbeats, slow revocations
        finish, pending runs complete (for tests that drive the clients directly and then settle)."""
        self.queue.clear()
        self.scheduled_runs.clear()
        for c in self.live():
            self.at(self.ctx.now, "heartbeat", c)
            if c.pending is not None:
                self.at(self.ctx.now, "revoked", c)
        self.schedule_runs()

    def settle(self) -> None:
        """Churn stops, the network heals and every client revokes promptly: the group must converge."""
        self.churning = False
        for t in self.traits.values():
            t.loss, t.slow = 0.0, 0.0
        if not any(c.alive for c in self.clients):
            for _ in range(3):
                self.add_client()
        end = self.ctx.now + SESSION_MS + 40 * HEARTBEAT_MS
        while self.queue and self.queue[0][0] <= end:
            self.step()
        self.ctx.advance(end - self.ctx.now)
        self.check_converged()

    # --- events --------------------------------------------------------------------------------------------
    def add_client(self, instance_id: str | None = None) -> ModelClient:
        topics, regex = self.rng.choice(SUBSCRIPTIONS)
        name = f"c{next(self.names)}"
        c = ModelClient(self.ctx, name, group_id=GROUP, topics=topics, regex=regex, instance_id=instance_id,
                        rebalance_timeout_ms=REBALANCE_MS,
                        server_assignor=self.rng.choice([None, None, "uniform", "range"]))
        self.clients.append(c)
        slow_ms = self.rng.choice([200, 1500, 2500, 4500])  # 4500 > the rebalance timeout
        self.traits[name] = Traits(loss=self.rng.choice([0.0, 0.0, 0.05, 0.3]),
                                   slow=self.rng.choice([0.0, 0.5, 1.0]), slow_ms=slow_ms)
        self.stats.joins += 1
        self.at(self.ctx.now, "heartbeat", c)
        return c

    def on_heartbeat(self, c: ModelClient) -> None:
        if not c.alive:
            return
        self.send(c)
        self.at(self.ctx.now + HEARTBEAT_MS, "heartbeat", c)

    def on_ack(self, c: ModelClient) -> None:
        if c.alive and c.needs_ack:
            self.send(c)

    def on_revoked(self, c: ModelClient) -> None:
        if c.alive and c.finish_revocation():
            self.send(c)

    def send(self, c: ModelClient) -> None:
        t = self.traits[c.name]
        lose = self.rng.random() < t.loss
        slow = self.rng.random() < t.slow
        was_zombie = self.is_zombie(c)
        had_pending = c.pending is not None
        response = c.heartbeat(lose_response=lose, slow_revoke=slow)
        if lose:
            self.stats.lost_responses += 1
            return
        if response.error_code in (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID):
            self.stats.fenced_errors += 1
            assert c.owned == {}
            if response.error_code is Errors.UNKNOWN_MEMBER_ID:
                assert was_zombie, "only a member the coordinator removed is unknown"
            self.at(self.ctx.now, "heartbeat_once", c)  # rejoin at once, as a fenced client does
            return
        if c.pending is not None and not had_pending:
            self.stats.slow_revocations += 1
            self.at(self.ctx.now + t.slow_ms, "revoked", c)
        elif c.needs_ack:
            self.at(self.ctx.now, "ack", c)

    def on_heartbeat_once(self, c: ModelClient) -> None:
        if c.alive:
            self.send(c)

    def on_run(self, run_id: int) -> None:
        self.ctx.complete_run(run_id, fail=self.rng.random() < 0.02)

    def schedule_runs(self) -> None:
        for run in self.ctx.pending_runs:
            if run.run_id not in self.scheduled_runs:
                self.scheduled_runs.add(run.run_id)
                self.stats.offloaded_runs += 1
                self.at(self.ctx.now + self.rng.choice([0, 0, 50, 700, 3000]), "run", run.run_id)

    def on_churn(self, _: Any) -> None:
        if not self.churning:
            return
        self.at(self.ctx.now + int(self.rng.expovariate(1 / 700)), "churn")
        action = self.rng.choices(
            ["join", "static_join", "leave", "crash", "resubscribe", "commit", "metadata", "config", "delete"],
            weights=[6, 4, 5, 3, 2, 6, 1, 1, 1])[0]
        getattr(self, f"churn_{action}")()

    def churn_join(self) -> None:
        if len(self.live()) < MAX_CLIENTS:
            self.add_client()

    def churn_static_join(self) -> None:
        held = {c.instance_id for c in self.live()}
        free = [i for i in INSTANCE_IDS if i not in held]
        if free and len(self.live()) < MAX_CLIENTS:
            self.add_client(self.rng.choice(free))

    def churn_leave(self) -> None:
        live = self.live()
        if live:
            c = self.rng.choice(live)
            c.leave(static_temporary=c.instance_id is not None and self.rng.random() < 0.7)
            self.stats.leaves += 1

    def churn_crash(self) -> None:
        live = self.live()
        if live:
            self.rng.choice(live).crash()
            self.stats.crashes += 1

    def churn_resubscribe(self) -> None:
        live = self.live()
        if live:
            topics, regex = self.rng.choice(SUBSCRIPTIONS)
            self.rng.choice(live).subscribe(topics, regex)

    def churn_commit(self) -> None:
        """A client commits what it believes it owns. A live owner's commit is always accepted (KIP-848: any
        epoch from the partition's assignment epoch up); a zombie's is always rejected."""
        holders = [c for c in self.live() if c.joined and c.owned]
        if not holders:
            return
        c = self.rng.choice(holders)
        parts = [CommitPartition(name, p, self.rng.randrange(1000))
                 for name, meta in self.ctx.image.by_name.items() for p in c.owned.get(meta.topic_id, ())]
        response = self.ctx.apply(self.ctx.shard.offset_commit(
            OffsetCommitRequest(GROUP, c.member_id, c.epoch, parts), self.ctx.now))
        self.stats.commits += 1
        if self.is_zombie(c):
            assert all(p.error_code in (Errors.UNKNOWN_MEMBER_ID, Errors.GROUP_ID_NOT_FOUND)
                       for p in response.partitions), response
            return
        group = self.group()
        assert group is not None
        member = group.members[c.member_id]
        for p in response.partitions:
            topic_id = self.ctx.image.by_name[p.topic].topic_id
            if c.epoch < member.member_epoch and p.partition in member.partitions_pending_revocation.get(topic_id, ()):
                # The client missed the response that moved it on *and* the one asking it to revoke: it still
                # holds the partition (pending revocation), so KIP-1251 accepts its commit from the older epoch.
                assert p.error_code is Errors.NONE, (c.name, c.epoch, member, p)
                self.stats.stale_pending_commits += 1
            else:
                assert p.error_code is Errors.NONE, (c.name, c.epoch, member, p)

    def churn_metadata(self) -> None:
        self.change_metadata(self.rng.choice(["foo", "bar", "baz", "baz"]), self.rng.choice([1, 2]))

    def change_metadata(self, topic: str, k: int) -> None:
        """foo and bar grow by k partitions (Kafka never shrinks a topic); baz is deleted, or re-created with
        2 or 5 partitions under a new topic id."""
        topics = dict(self.topics)
        if topic != "baz":
            topics[topic] = min(topics[topic] + k, 12)
        elif "baz" in topics:
            del topics["baz"]
        else:
            topics["baz"] = 2 if k == 1 else 5
            self.baz_generation += 1
        self.topics = topics
        self.ctx.image = MetadataImage.of(
            TopicMetadata(topic_id_for_name(n if n != "baz" else f"baz#{self.baz_generation}"), n, count)
            for n, count in topics.items())
        self.ctx.apply(self.ctx.shard.on_metadata_update(self.ctx.image, self.ctx.now))
        self.stats.metadata_changes += 1

    def churn_config(self) -> None:
        offload = self.rng.choice([None, "true", "false"])
        interval = self.rng.choice([None, "-1", "0", "400", "2000"])
        response = self.ctx.apply(self.ctx.shard.alter_group_configs(
            GROUP, {"consumer.assignor.offload.enable": offload, "consumer.assignment.interval.ms": interval},
            False, self.ctx.now))
        assert response.error_code is Errors.NONE, response
        self.stats.config_changes += 1

    def churn_delete(self) -> None:
        group = self.group()
        if group is not None and not group.members:
            [response] = self.ctx.apply(self.ctx.shard.delete_groups([GROUP], self.ctx.now))
            assert response.error_code is Errors.NONE, response
            self.stats.deletes += 1

    # --- properties ----------------------------------------------------------------------------------------
    def check(self) -> None:
        group = self.group()
        if group is not None:
            check_group_invariants(group)
        owner: dict[tuple[str, int], str] = {}
        for c in self.clients:
            if not c.alive:
                assert not c.owned
                continue
            if c.epoch <= 0:
                assert not c.owned, f"{c.name} owns partitions without being a member"
                continue
            if self.is_zombie(c):
                if c.name not in self.known_zombies:
                    self.known_zombies.add(c.name)
                    self.stats.zombies += 1
                continue
            assert group is not None
            member = group.members[c.member_id]
            allowed = {(t, p) for t, ps in member.assigned_partitions.items() for p in ps}
            allowed |= {(t, p) for t, ps in member.partitions_pending_revocation.items() for p in ps}
            mine = c.owned_pairs()
            assert mine <= allowed, f"{c.name} owns {sorted(mine - allowed)} the coordinator did not give it"
            for tp in mine:
                assert tp not in owner, f"{tp} owned by live clients {owner[tp]} and {c.name}"
                owner[tp] = c.name

    def check_converged(self) -> None:
        group = self.group()
        live = [c for c in self.clients if c.alive]
        assert group is not None and live
        assert group.state() is ConsumerGroupState.STABLE, group.state()
        assert group.target_assignment_epoch == group.group_epoch
        assert {c.member_id for c in live} == set(group.members), "every member is a live client"
        image: MetadataImage = self.ctx.image
        expected: set[tuple[str, int]] = set()
        for c in live:
            member = group.members[c.member_id]
            assert member.state is MemberState.STABLE and member.member_epoch == group.group_epoch
            assert c.epoch == member.member_epoch and c.owned == member.assigned_sets(), c.name
            names = group.resolved_topics(c.regex) if c.regex else set(c.topics or ())
            for name in names:
                if name in image.by_name:
                    t = image.by_name[name]
                    expected |= {(t.topic_id, p) for p in range(t.partition_count)}
        owned = [tp for c in live for tp in c.owned_pairs()]
        assert len(owned) == len(set(owned))
        assert set(owned) == expected, "every subscribed partition is assigned, and nothing else"


def run_churn(seed: int, steps: int, *, offload: bool, interval_ms: int,
              context: type[CoreContext] = CoreContext) -> ChurnSimulation:
    sim = ChurnSimulation(random.Random(seed), offload=offload, interval_ms=interval_ms, context=context)
    sim.run(steps)
    return sim
