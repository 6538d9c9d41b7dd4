"""Kafka's general sticky assignment (AbstractStickyAssignor.GeneralAssignmentBuilder, no racks), statement
by statement, for groups whose members subscribe to different topics.

Theory of operation
-------------------
Owned partitions (claims settled by `_kafka_sticky.resolve_claims`) stay where their owner still
subscribes. Unowned partitions, topics with the fewest potential consumers first, go one by one to the
first member of the (size, id)-sorted set that subscribes their topic. While the result is not balanced,
Kafka walks the partitions and moves one whenever its holder has two more than another subscriber (back
to its previous-generation owner when that one has two fewer), choosing which partition actually moves so
that no two partitions of a topic swap between the same two members; a round of moves that does not
lower the balance score is undone. The choice among equal candidates follows Java's HashSet order of
TopicPartition, reproduced here.

It is quadratic or worse in group size, as Kafka's is (2,100 x 2,100 took minutes), so callers use it
only for small groups and balance larger ones with `_balance`.
"""

from __future__ import annotations

from collections.abc import Sequence

from groupcoord.assignors._kafka_sticky import java_string_hash


class _JavaHashSet:
    """Iteration order of a `HashSet<TopicPartition>`: by bucket of the table the set grew to (it never
    shrinks), then by insertion among the current elements of a bucket."""

    def __init__(self) -> None:
        self.items: dict[int, int] = {}  # partition -> hash, in insertion order
        self.capacity = 16

    def add(self, p: int, h: int) -> None:
        if p not in self.items:
            self.items[p] = h
            if len(self.items) > self.capacity * 3 // 4:
                self.capacity *= 2

    def first(self) -> int:
        mask = self.capacity - 1
        return min(self.items, key=lambda p: (self.items[p] ^ (self.items[p] >> 16)) & mask)


class GeneralBuilder:
    """One run of the general assignment; `run()` returns the owner of every partition."""

    def __init__(
        self,
        owner: list[int],
        ptopic: list[int],
        plocal: list[int],
        topic_names: Sequence[str],
        member_topics: Sequence[set[int]],
        java_order: Sequence[int],
        previous: dict[int, int],
        revocation_required: bool,
    ) -> None:
        self.ptopic, self.plocal, self.topic_names = ptopic, plocal, topic_names
        self.n_topics = len(topic_names)
        self.member_topics = member_topics
        self.previous = previous  # partition -> its previous-generation owner (Kafka's prevAssignment)
        self.revocation_required = revocation_required
        self.assignment: dict[int, list[int]] = {m: [] for m in range(len(member_topics))}
        for p, m in enumerate(owner):
            if m >= 0:
                self.assignment[m].append(p)
        self.holder = list(owner)
        self.consumers = [[m for m in java_order if t in member_topics[m]] for t in range(self.n_topics)]
        self.topic_partitions: list[list[int]] = [[] for _ in range(self.n_topics)]
        for p, t in enumerate(ptopic):
            self.topic_partitions[t].append(p)
        self.max_size = [sum(len(self.topic_partitions[t]) for t in ts) for ts in member_topics]
        self.moves: dict[int, tuple[int, int]] = {}
        self.moves_by_topic: dict[int, dict[tuple[int, int], _JavaHashSet]] = {}
        self.active = set(range(len(member_topics)))

    # --- the sorted set of members: (size, id); member indices are in id order ---------------------------
    def _sorted(self) -> list[int]:
        return sorted(self.active, key=lambda m: (len(self.assignment[m]), m))

    def _first_subscriber(self, t: int) -> int | None:
        best = None
        for m in self.consumers[t]:
            if m in self.active and (best is None or (len(self.assignment[m]), m) < (len(self.assignment[best]), best)):
                best = m
        return best

    def run(self) -> list[int]:
        order = sorted(range(self.n_topics), key=lambda t: (len(self.consumers[t]), t))
        all_partitions = [p for t in order for p in self.topic_partitions[t]]
        unassigned = [p for p in all_partitions if self.holder[p] < 0]
        initializing = all(not ps for ps in self.assignment.values())
        for p in unassigned:
            m = self._first_subscriber(self.ptopic[p])
            if m is not None:
                self.assignment[m].append(p)
                self.holder[p] = m
        fixed_topics = {t for t in range(self.n_topics) if len(self.consumers[t]) < 2}
        all_partitions = [p for p in all_partitions if self.ptopic[p] not in fixed_topics]
        unassigned = [p for p in unassigned if self.ptopic[p] not in fixed_topics]
        for m in range(len(self.member_topics)):
            size = len(self.assignment[m])
            if size >= self.max_size[m] and all(self.ptopic[p] in fixed_topics for p in self.assignment[m]):
                self.active.discard(m)
        before = {m: list(self.assignment[m]) for m in self.active}
        holder_before = list(self.holder)
        if not self.revocation_required:
            self._perform(unassigned)
        performed = self._perform(all_partitions)
        if not initializing and performed and self._score(self.assignment) >= self._score(before):
            for m, ps in before.items():
                self.assignment[m] = ps
            self.holder = holder_before
        return self.holder

    def _score(self, assignment: dict[int, list[int]]) -> int:
        sizes = sorted(len(assignment[m]) for m in self.active)
        n = len(sizes)
        return sum(s * (2 * i - n + 1) for i, s in enumerate(sizes))

    def _balanced(self) -> bool:
        sizes = [len(self.assignment[m]) for m in self.active]
        if not sizes or min(sizes) >= max(sizes) - 1:
            return True
        for t in range(self.n_topics):
            held = [self.holder[p] for p in self.topic_partitions[t] if self.holder[p] in self.active]
            if not held:
                continue
            top = max(len(self.assignment[m]) for m in held)
            for m in self.consumers[t]:
                size = len(self.assignment[m])
                if m in self.active and size < self.max_size[m] and size + 1 < top:
                    return False
        return True

    def _perform(self, partitions: list[int]) -> bool:
        performed = False
        modified = True
        while modified:
            modified = False
            for p in partitions:
                if self._balanced():
                    break
                m = self.holder[p]
                prev = self.previous.get(p)
                size = len(self.assignment[m])
                # Kafka moves a partition back to its previous owner even if that one no longer subscribes
                # its topic (or was set aside as fixed: a NullPointerException there); we do neither
                if (prev is not None and prev in self.active and self.ptopic[p] in self.member_topics[prev]
                        and size > len(self.assignment[prev]) + 1):
                    self._reassign(p, prev)
                    performed = modified = True
                    continue
                for other in self.consumers[self.ptopic[p]]:
                    if other in self.active and size > len(self.assignment[other]) + 1:
                        new = self._first_subscriber(self.ptopic[p])
                        assert new is not None
                        self._reassign(p, new)
                        performed = modified = True
                        break
        return performed

    def _reassign(self, p: int, new: int) -> None:
        old = self.holder[p]
        p = self._actual_partition_to_move(p, old, new)
        old = self.holder[p]
        self._move(p, old, new)
        self.assignment[old].remove(p)
        self.assignment[new].append(p)
        self.holder[p] = new

    def _tp_hash(self, p: int) -> int:
        return (31 * (31 + self.plocal[p]) + java_string_hash(self.topic_names[self.ptopic[p]])) & 0xFFFFFFFF

    def _actual_partition_to_move(self, p: int, old: int, new: int) -> int:
        by_pair = self.moves_by_topic.get(self.ptopic[p])
        if by_pair is None:
            return p
        if p in self.moves:
            old = self.moves[p][0]
        reverse = by_pair.get((new, old))
        return p if reverse is None else reverse.first()

    def _remove_record(self, p: int) -> tuple[int, int]:
        pair = self.moves.pop(p)
        by_pair = self.moves_by_topic[self.ptopic[p]]
        del by_pair[pair].items[p]
        if not by_pair[pair].items:
            del by_pair[pair]
        if not by_pair:
            del self.moves_by_topic[self.ptopic[p]]
        return pair

    def _add_record(self, p: int, pair: tuple[int, int]) -> None:
        self.moves[p] = pair
        self.moves_by_topic.setdefault(self.ptopic[p], {}).setdefault(pair, _JavaHashSet()).add(p, self._tp_hash(p))

    def _move(self, p: int, old: int, new: int) -> None:
        if p in self.moves:
            src, _ = self._remove_record(p)
            if src != new:
                self._add_record(p, (src, new))
        else:
            self._add_record(p, (old, new))
