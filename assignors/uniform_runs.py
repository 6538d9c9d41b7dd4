"""`uniform` for homogeneous groups in O(members + moved): results as runs, fed back without re-encoding.

Why: one member joining a large homogeneous group moves a few dozen partitions, yet encoding the whole
current assignment into arrays and building a frozenset per member and topic cost the general path time
proportional to the group's size in partitions. Here a member's assignment is a few runs of consecutive
global partition indices (topics sorted by id, as `_layout` numbers them), wrapped in a `MemberView`
that builds its topic -> frozenset mapping only when read. Every result remembers its runs in a
`RunState`; when the next call gets exactly those views back (the current target, unchanged), it starts
from the state instead of decoding partitions, and only the members that release or receive partitions
get new views. Unchanged members get the very same view objects back, so callers comparing by identity
skip them.

The rules are Kafka's UniformHomogeneousAssignmentBuilder (see `uniform_homogeneous`, the general path,
which `tests/assignors/test_uniform_runs.py` checks these results against), in their run form:
- all partitions owned and counts within one (max holder <= min member + 1): nothing changes;
- members in the order of Kafka's member `HashMap` (`_java_order`);
- targets: floor(P / n); the remainder goes first to members owning more than the floor, in that order,
  then to the last members (in that order) of the others;
- members above target release their last partitions in Kafka's visiting order (their topics as Kafka's
  record of their assignment, read back, iterates them: `member_map_order`; partitions ascending);
- unowned partitions, ascending, then the released ones in member order, go in consecutive runs to
  members below target, in member order.
Anything else (other kinds of current assignment) takes the general path. Racks are ignored, as in Kafka.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import accumulate, compress, islice, repeat
from operator import is_

from groupcoord.assignors._java_order import (
    hash_map_member_order,
    hash_set_order,
    member_key,
    member_map_key,
    member_map_order,
    member_table_size,
)
from groupcoord.assignors._lazy_view import LazyAssignmentView
from groupcoord.assignors.api import (
    AssignorError,
    GroupAssignment,
    GroupSpec,
    MemberSpec,
    SubscriptionType,
    TopicDescriber,
)

Runs = tuple[int, ...]  # flattened sorted half-open ranges: a0, b0, a1, b1, ...
_NO_RUNS: Runs = ()


class Layout:
    """Subscribed topics with partitions, in Kafka's `HashSet<Uuid>` order, and the first global index of
    each (`base`, len T+1). A subscribed topic that does not exist is an error, as in Kafka."""

    __slots__ = ("_all_keys", "_keys", "base", "describer", "index", "subscription", "topic_ids", "total")

    def __init__(self, subscription: frozenset[str], describer: TopicDescriber) -> None:
        names = hash_set_order(subscription)
        counts = list(map(describer.partition_count, names))
        if counts and min(counts) < 0:
            raise AssignorError("members are subscribed to a topic that does not exist in the topic metadata")
        self.topic_ids = [t for t, c in zip(names, counts, strict=True) if c > 0]
        self.base = [0, *accumulate(c for c in counts if c > 0)]
        self.total = self.base[-1]
        self.index = {t: i for i, t in enumerate(self.topic_ids)}
        self._keys: dict[int, tuple[int, str]] = {}
        self._all_keys: list[tuple[int, str]] | None = None
        self.subscription = subscription
        self.describer = describer

    def keys16(self) -> list[tuple[int, str]]:
        """`map_key` of every topic, computed once per layout."""
        keys = self._all_keys
        if keys is None:
            keys = self._all_keys = [_MAP_KEY_16(t) for t in self.topic_ids]
        return keys

    def map_key(self, t: int) -> tuple[int, str]:
        """`member_map_key` of topic t in a member's map of up to 12 topics (Kafka's 16-slot table)."""
        k = self._keys.get(t)
        if k is None:
            k = self._keys[t] = _MAP_KEY_16(self.topic_ids[t])
        return k

    def same_as(self, other: Layout) -> bool:
        return self.topic_ids == other.topic_ids and self.base == other.base


_MAP_KEY_16 = member_map_key(12)
_LAYOUTS: dict[tuple[int, int], Layout] = {}
_MAX_LAYOUTS = 64


def layout_of(subscription: frozenset[str], describer: TopicDescriber) -> Layout:
    """Cached by the identity of the (immutable) subscription set and describer; the entry holds both, so
    their ids cannot be reused while it lives."""
    key = (id(subscription), id(describer))
    lay = _LAYOUTS.get(key)
    if lay is not None and lay.subscription is subscription and lay.describer is describer:
        return lay
    lay = Layout(subscription, describer)
    if len(_LAYOUTS) >= _MAX_LAYOUTS:
        _LAYOUTS.clear()
    _LAYOUTS[key] = lay
    return lay


class MemberView(LazyAssignmentView):
    """One member's assignment as runs; the topic -> partitions mapping is built on first read."""

    __slots__ = ("_layout", "_lineage", "count", "member", "runs")

    def __init__(self, state: RunState, member: str, runs: Runs, count: int) -> None:
        super().__init__()
        self._lineage = state.lineage  # not the state: an old view must not keep old states alive
        self._layout = state.layout
        self.member = member
        self.runs = runs
        self.count = count

    def _build(self) -> dict[str, frozenset[int]]:
        return runs_to_mapping(self.runs, self._layout)

    def __bool__(self) -> bool:
        return self.count > 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MemberView) and other._layout.same_as(self._layout):
            return other.runs == self.runs
        return dict(self._mapping()) == other if isinstance(other, Mapping) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MemberView({self._mapping()!r})"

    def __reduce__(self) -> tuple[type, tuple[dict[str, frozenset[int]]]]:
        return dict, (dict(self._mapping()),)


def runs_to_mapping(runs: Runs, layout: Layout) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    base, tids = layout.base, layout.topic_ids
    for i in range(0, len(runs), 2):
        a, b = runs[i], runs[i + 1]
        t = bisect_right(base, a) - 1
        while a < b:
            end = min(b, base[t + 1])
            ps = frozenset(range(a - base[t], end - base[t]))
            name = tids[t]
            prev = out.get(name)
            out[name] = ps if prev is None else prev | ps
            a = end
            t += 1
    if len(out) > 1:
        out = {t: out[t] for t in member_map_order(out)}  # as Kafka's record of it, read back
    return out


class Lineage:
    """The last few states of one group's chain of results, most recently used first. Views point here
    rather than at their state, so memory stays bounded however long a view lives; the next call finds
    its state among these (the latest, in a coordinator; the same one again, in a benchmark)."""

    __slots__ = ("states",)
    KEEP = 4

    def __init__(self) -> None:
        self.states: list[RunState] = []

    def remember(self, state: RunState) -> None:
        states = [state, *(s for s in self.states if s is not state)]
        self.states = states[: self.KEEP]  # one assignment: readers on other threads see old or new


class RunState:
    """What one result knows about itself: every member's view, members by count, unowned runs."""

    __slots__ = ("by_count", "created", "free", "layout", "lineage", "views")

    def __init__(self, layout: Layout, lineage: Lineage) -> None:
        self.layout = layout
        self.lineage = lineage
        self.views: dict[str, MemberView] = {}
        self.by_count: dict[int, set[str]] = {}
        self.free: list[tuple[int, int]] = []
        self.created: list[str] = []  # a few members whose views this state made: a cheap first check


def _eligible(group: GroupSpec) -> frozenset[str] | None:
    """The shared subscription when the fast path may apply at all."""
    if not group.members or group.subscription_type is not SubscriptionType.HOMOGENEOUS:
        return None
    return next(iter(group.members.values())).subscribed_topic_ids


def fresh(group: GroupSpec, topics: TopicDescriber) -> GroupAssignment | None:
    """No member owns anything: consecutive runs in member order, the last `P % n` members one larger
    (Kafka's builder hands the extras on until only as many members are left). None: not this case."""
    sub = _eligible(group)
    if sub is None or any(_assigned(group.members.values())):
        return None
    state = RunState(layout_of(sub, topics), Lineage())
    n = len(group.members)
    members = hash_map_member_order(group.members, n)
    floor, extra = divmod(state.layout.total, n)
    sizes = [floor] * (n - extra) + [floor + 1] * extra
    ends = list(accumulate(sizes))
    views = state.views
    for m, size, end in zip(members, sizes, ends, strict=True):
        views[m] = MemberView(state, m, (end - size, end) if size else _NO_RUNS, size)
    if extra:
        state.by_count[floor + 1] = set(members[n - extra:])
    if n > extra:
        state.by_count[floor] = set(members[:n - extra])
    state.created = members[:8]
    state.lineage.remember(state)
    return dict(views)


def _assigned(specs: Iterable[MemberSpec]) -> list[object]:
    return [s.assigned_partitions for s in specs]


def _find_state(group: GroupSpec, values: list[object]) -> tuple[RunState, list[str]] | None:
    """The state whose views the members hold, and the members that are new to it."""
    first = next((v for v in values if type(v) is MemberView), None)
    if first is None:
        return None
    lineage = first._lineage
    members = group.members
    for state in lineage.states:
        if not all(members[m].assigned_partitions is state.views[m] for m in state.created if m in members):
            continue
        new = _matches(state, group, values)
        if new is not None:
            lineage.remember(state)
            return state, new
    return None


def _matches(state: RunState, group: GroupSpec, values: list[object]) -> list[str] | None:
    """The members unknown to `state` (new members, each with an empty assignment) when every other
    member's current assignment is its view in `state`; None when the input is not that."""
    expected = list(map(state.views.get, group.members))
    same = list(map(is_, values, expected)).count(True)
    if same == len(values):
        return []
    unknown = list(map(is_, expected, repeat(None)))
    if same + unknown.count(True) != len(values) or any(compress(values, unknown)):
        return None
    return list(compress(group.members, unknown))


def incremental(group: GroupSpec, topics: TopicDescriber) -> GroupAssignment | None:
    """From the state of the result the members hold; None when the input is not such a result."""
    sub = _eligible(group)
    if sub is None:
        return None
    values = _assigned(group.members.values())
    found = _find_state(group, values)
    if found is None:
        return None
    prev, new = found
    layout = prev.layout
    if sub is not layout.subscription and sub != layout.subscription:
        return None
    if topics is not layout.describer:
        now = layout_of(sub, topics)
        if not now.same_as(layout):
            return None
        layout = now
    return _rebalance(prev, group, layout, new)


def _rebalance(prev: RunState, group: GroupSpec, layout: Layout, new: list[str]) -> GroupAssignment | None:
    members = group.members
    known = prev.views
    removed = [m for m in known if m not in members] if len(known) + len(new) != len(members) else []
    free = list(prev.free)
    by_count = {c: set(ms) for c, ms in prev.by_count.items()} if removed else prev.by_count
    for m in removed:
        v = known[m]
        by_count[v.count].discard(m)
        runs = v.runs
        free += zip(runs[0::2], runs[1::2], strict=True)
    n = len(members)
    floor, extra = divmod(layout.total, n)
    counts = [c for c, ms in by_count.items() if ms]
    if new:
        counts.append(0)
    state = RunState(layout, prev.lineage)
    views = state.views
    if not free and max((c for c in counts if c), default=0) <= min(counts) + 1:
        views.update(known)
        for m in removed:
            del views[m]
        for m in new:
            views[m] = MemberView(state, m, _NO_RUNS, 0)
        state.by_count = _counts_with(by_count, moved={}, new=new)
        prev.lineage.remember(state)
        return dict(views)

    key = member_key(member_table_size(n))
    over = sorted((m for c, ms in by_count.items() if c > floor for m in ms), key=key)
    if len(over) >= extra:
        ceil = set(over[:extra])
    else:
        over_set = set(over)
        rest = heapq.nlargest(extra - len(over), (m for m in members if m not in over_set), key=key)
        ceil = over_set.union(rest)
    moved: dict[str, tuple[Runs, int]] = {}
    free.sort()
    for m in over:
        v = known[m]
        target = floor + (m in ceil)
        if v.count > target:
            kept, released = _trim(v.runs, v.count - target, layout)
            moved[m] = (kept, target)
            free += released  # after the unowned ones, in member order, each in Kafka's visiting order
    receiving = {m for c, ms in by_count.items() if c < floor for m in ms}
    receiving.update(new)
    receiving.update(m for m in ceil if m not in known or known[m].count <= floor)
    receivers = sorted(receiving, key=key)
    it = _merged(free)
    a, b = next(it, (0, 0))
    for m in receivers:
        held = known.get(m)
        count = held.count if held is not None else 0
        target = floor + (m in ceil)
        need = target - count
        if need <= 0:
            continue
        got: list[int] = list(held.runs) if held is not None else []
        while need:
            take = min(need, b - a)
            got += (a, a + take)
            a += take
            need -= take
            if a == b:
                a, b = next(it, (0, 0))
        moved[m] = (_normalise_runs(got), target)  # pieces of the free runs, in hand-out order
    views.update(known)
    for m in removed:
        del views[m]
    for m in new:
        if m not in moved:
            views[m] = MemberView(state, m, _NO_RUNS, 0)
    for m, (runs, count) in moved.items():
        views[m] = MemberView(state, m, runs, count)
    state.created = list(islice(moved, 8))
    state.by_count = _counts_with(by_count, moved={m: (known[m].count if m in known else 0, c)
                                                                for m, (_, c) in moved.items()},
                                  new=[m for m in new if m not in moved])
    prev.lineage.remember(state)
    return dict(views)


def _counts_with(by_count: dict[int, set[str]], moved: dict[str, tuple[int, int]],
                 new: Sequence[str]) -> dict[int, set[str]]:
    """Members by count after the changes; sets that do not change are shared with the previous state."""
    touched = {c for old, now in moved.values() for c in (old, now)}
    if new:
        touched.add(0)
    out = {c: (set(ms) if c in touched else ms) for c, ms in by_count.items() if ms}
    for m, (old, now) in moved.items():
        if old in out:
            out[old].discard(m)
        out.setdefault(now, set()).add(m)
    if new:
        out.setdefault(0, set()).update(new)
    return {c: ms for c, ms in out.items() if ms}


def _trim(runs: Runs, k: int, layout: Layout) -> tuple[Runs, list[tuple[int, int]]]:
    """Release the last k partitions in the order Kafka visits this member's assignment (its topics in
    `member_map_order`, partitions ascending); the released ranges in that order."""
    base = layout.base
    first_topic = bisect_right(base, runs[0]) - 1
    if runs[-1] <= base[first_topic + 1]:  # one topic: its highest partitions
        return _cut_tail(runs, k)
    if len(runs) == 2:  # one run over consecutive topics (the usual shape)
        a, b = runs
        last_topic = bisect_right(base, b - 1) - 1
        keys = layout.keys16() if last_topic - first_topic < 12 else None
        if keys is not None:
            final = max(range(first_topic, last_topic + 1), key=keys.__getitem__)
            lo, hi = max(a, base[final]), min(b, base[final + 1])
            if hi - lo >= k:
                if hi == b:
                    return (a, b - k), [(b - k, b)]
                return ((a, hi - k, hi, b) if a < hi - k else (hi, b)), [(hi - k, hi)]
    held: list[int] = []
    for i in range(0, len(runs), 2):
        for t in range(bisect_right(base, runs[i]) - 1, bisect_right(base, runs[i + 1] - 1)):
            if not held or held[-1] != t:
                held.append(t)
    key = layout.map_key if len(held) <= 12 else _map_key_for(layout, len(held))
    final = max(held, key=key)  # the topic Kafka visits last: if it holds k, its top k go
    if _count_in(runs, base[final], base[final + 1]) >= k:
        return _cut_in(runs, k, base[final], base[final + 1])
    pieces: dict[int, list[tuple[int, int]]] = {}
    for i in range(0, len(runs), 2):
        a, b = runs[i], runs[i + 1]
        t = bisect_right(base, a) - 1
        while a < b:
            end = min(b, base[t + 1])
            pieces.setdefault(t, []).append((a, end))
            a = end
            t += 1
    names = layout.topic_ids
    order = [layout.index[n] for n in member_map_order([names[t] for t in pieces])]
    flat = [ab for t in order for ab in pieces[t]]
    kept_pairs: list[tuple[int, int]] = []
    released: list[tuple[int, int]] = []
    total = sum(b - a for a, b in flat)
    keep = total - k
    for a, b in flat:
        if keep >= b - a:
            kept_pairs.append((a, b))
            keep -= b - a
        elif keep > 0:
            kept_pairs.append((a, a + keep))
            released.append((a + keep, b))
            keep = 0
        else:
            released.append((a, b))
    kept: list[int] = []
    for a, b in _merged(sorted(kept_pairs)):
        kept += (a, b)
    return tuple(kept), released


def _count_in(runs: Runs, lo: int, hi: int) -> int:
    """How many of the runs' partitions lie in [lo, hi)."""
    n = 0
    for i in range(0, len(runs), 2):
        n += max(0, min(runs[i + 1], hi) - max(runs[i], lo))
    return n


def _cut_in(runs: Runs, k: int, lo: int, hi: int) -> tuple[Runs, list[tuple[int, int]]]:
    """Release the k highest partitions in [lo, hi) (there are at least k); released ranges ascending."""
    out = list(runs)
    released: list[tuple[int, int]] = []
    i = len(out) - 2
    while k and i >= 0:
        a, b = out[i], out[i + 1]
        top, bottom = min(b, hi), max(a, lo)
        if top > bottom:
            take = min(k, top - bottom)
            released.append((top - take, top))
            k -= take
            out[i:i + 2] = ([a, top - take] if a < top - take else []) + ([top, b] if top < b else [])
        i -= 2
    released.reverse()
    return tuple(out), released


def _map_key_for(layout: Layout, n: int) -> Callable[[int], tuple[int, str]]:
    key = member_map_key(n)
    names = layout.topic_ids
    return lambda t: key(names[t])


def _cut_tail(runs: Runs, k: int) -> tuple[Runs, list[tuple[int, int]]]:
    """Release the highest k partitions (ascending ranges)."""
    b = runs[-1]
    if b - runs[-2] > k:
        return (*runs[:-1], b - k), [(b - k, b)]
    out = list(runs)
    released: list[tuple[int, int]] = []
    while k:
        a, b = out[-2], out[-1]
        take = min(k, b - a)
        released.append((b - take, b))
        k -= take
        if take == b - a:
            del out[-2:]
        else:
            out[-1] = b - take
    released.reverse()
    return tuple(out), released


def _merged(ranges: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """The ranges in their order, adjacent ones joined."""
    it = iter(ranges)
    first = next(it, None)
    if first is None:
        return
    a, b = first
    for c, d in it:
        if c == b:
            b = d
        else:
            yield a, b
            a, b = c, d
    yield a, b


def _normalise_runs(flat: list[int]) -> Runs:
    pairs = sorted(zip(flat[0::2], flat[1::2], strict=True))
    out: list[int] = []
    for a, b in _merged(pairs):
        out += (a, b)
    return tuple(out)

