"""`cooperative-sticky`'s shortcuts for the common case give exactly the general path's answer."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.assignors.classic import ClassicSubscription
from groupcoord.assignors.cooperative_sticky import member_lists, sticky_assign

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Group = tuple[dict[str, int], dict[str, ClassicSubscription]]


@st.composite
def groups(draw: st.DrawFn) -> Group:
    """Groups near the shortcuts' edges: mostly equal subscriptions (as tuples, or the same set in
    another order), owned partitions that are absent, claimed once, or claimed twice, generations of
    every kind (v1 user data included), partitions out of range and topics that do not exist."""
    topics = [f"t{i}" for i in range(draw(st.integers(1, 3)))]
    counts = {t: draw(st.integers(0, 9)) for t in topics}
    common = tuple(sorted(draw(st.sets(st.sampled_from(topics), min_size=1))))
    shape = draw(st.sampled_from(["equal", "reordered", "different"]))
    claims = draw(st.sampled_from(["none", "disjoint", "any"]))
    pool = [(t, p) for t in [*topics, "gone"] for p in range(-1, 11)]
    free = list(pool)
    subs = {}
    for i in range(draw(st.integers(1, 9))):
        mine = common
        if shape == "reordered":
            mine = tuple(draw(st.permutations(common)))
        elif shape == "different":
            mine = tuple(sorted(draw(st.sets(st.sampled_from(topics)))))
        owned: list[tuple[str, int]] = []
        if claims == "any":
            owned = draw(st.lists(st.sampled_from(pool), max_size=6))
        elif claims == "disjoint" and free:
            owned = draw(st.lists(st.sampled_from(free), max_size=4, unique=True))
            free = [tp for tp in free if tp not in owned]
        generation = draw(st.integers(-1, 3))
        user_data = draw(st.sampled_from([b"", (2).to_bytes(4, "big"), b"\x00"]))
        subs[f"c{draw(st.integers(0, 30))}-{i}"] = ClassicSubscription(mine, tuple(owned), generation,
                                                                       None, user_data)
    return counts, subs


@SETTINGS
@given(group=groups(), cooperative=st.booleans())
def test_shortcuts_give_the_general_answer(group: Group, cooperative: bool) -> None:
    counts, subs = group
    fast = sticky_assign(counts, subs, cooperative, fast=True)
    general = sticky_assign(counts, subs, cooperative, fast=False)
    assert fast == general
    assert list(fast) == list(general)  # the same key order (member ids sorted)


@SETTINGS
@given(st.data())
def test_balanced_lists_equal_sliced_lists(data: st.DataObject) -> None:
    n_members = data.draw(st.integers(1, 12))
    counts = data.draw(st.lists(st.integers(1, 7), min_size=1, max_size=3))
    total = sum(counts)
    base = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    if data.draw(st.booleans()):  # balanced: every member holds lo or lo + 1, some partitions unowned
        held = data.draw(st.integers(0, total))
        sizes = [held // n_members + (m < held % n_members) for m in range(n_members)]
        flat = [m for m, k in enumerate(sizes) for _ in range(k)] + [-1] * (total - held)
        owner = np.asarray(data.draw(st.permutations(flat)), dtype=np.int32)
    else:
        owner = np.asarray(data.draw(st.lists(st.integers(-1, n_members - 1), min_size=total, max_size=total)),
                           dtype=np.int32)
    tids = [f"t{i}" for i in range(len(counts))]
    assert member_lists(n_members, tids, base, owner, True) == member_lists(n_members, tids, base, owner, False)
