"""`cooperative-sticky`: the constrained cooperative sticky assignor of the classic protocol."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.assignors.classic import ClassicSubscription, get_classic_assignor
from groupcoord.assignors.cooperative_sticky import CooperativeStickyAssignor

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
COOP = CooperativeStickyAssignor()
PLAIN = CooperativeStickyAssignor(cooperative=False)

Classic = tuple[dict[str, int], dict[str, ClassicSubscription]]


@st.composite
def classic_groups(draw: st.DrawFn, same_topics: bool = False) -> Classic:
    topics = [f"t{i}" for i in range(draw(st.integers(1, 4)))]
    counts = {t: draw(st.integers(0, 8)) for t in topics}
    common = tuple(sorted(draw(st.sets(st.sampled_from(topics), min_size=1))))
    subs = {}
    for i in range(draw(st.integers(1, 7))):
        mine = common if same_topics else tuple(sorted(draw(st.sets(st.sampled_from(topics)))))
        owned = draw(st.sets(st.tuples(st.sampled_from(topics), st.integers(0, 9)), max_size=5))
        subs[f"c{i}"] = ClassicSubscription(mine, tuple(sorted(owned)), draw(st.integers(-1, 3)))
    return counts, subs


def all_partitions(counts: dict[str, int], subs: dict[str, ClassicSubscription]) -> set[tuple[str, int]]:
    topics = {t for s in subs.values() for t in s.topics}
    return {(t, p) for t in topics for p in range(counts.get(t, 0))}


def check_lists(counts: dict[str, int], subs: dict[str, ClassicSubscription], out: dict) -> None:
    assert set(out) == set(subs)
    flat = [tp for ps in out.values() for tp in ps]
    assert len(flat) == len(set(flat))
    for m, ps in out.items():
        assert ps == sorted(ps)
        assert all(t in subs[m].topics for t, _ in ps)
    assert set(flat) <= all_partitions(counts, subs)


def claims(subs: dict[str, ClassicSubscription]) -> dict[tuple[str, int], set[str]]:
    out: dict[tuple[str, int], set[str]] = {}
    for m, s in subs.items():
        for tp in s.owned_partitions:
            out.setdefault(tp, set()).add(m)
    return out


def newest_claimant(subs: dict[str, ClassicSubscription], tp: tuple[str, int]) -> str | None:
    """The single claimant of the highest generation; None when two tie."""
    gens = sorted((subs[m].generation, m) for m in claims(subs).get(tp, ()))
    if len(gens) > 1 and gens[-1][0] == gens[-2][0]:
        return None
    return gens[-1][1]


@SETTINGS
@given(group=classic_groups())
def test_a_claimed_partition_goes_only_to_its_single_newest_claimant(group: Classic) -> None:
    counts, subs = group
    out = COOP.assign(counts, subs)
    check_lists(counts, subs, out)
    target = PLAIN.assign(counts, subs)
    claimed = claims(subs)
    for m, ps in out.items():
        assert set(ps) <= set(target[m])
        for tp in ps:
            assert tp not in claimed or newest_claimant(subs, tp) == m
    for m, ps in target.items():
        for tp in set(ps) - set(out[m]):
            assert tp in claimed  # only a partition some member may still hold is withheld
    if len({s.topics for s in subs.values()}) > 1:  # general path: exactly those are withheld
        for m, ps in target.items():
            for tp in ps:
                given_now = tp in out[m]
                assert given_now == (tp not in claimed or newest_claimant(subs, tp) == m)


@SETTINGS
@given(group=classic_groups())
def test_target_is_complete_and_balanced_among_subscribers(group: Classic) -> None:
    counts, subs = group
    out = PLAIN.assign(counts, subs)
    check_lists(counts, subs, out)
    assert {tp for ps in out.values() for tp in ps} == all_partitions(counts, subs)
    n = {m: len(ps) for m, ps in out.items()}
    for m, ps in out.items():
        for t, _ in ps:
            for other, s in subs.items():
                if t in s.topics:
                    assert n[m] <= n[other] + 1


@SETTINGS
@given(group=classic_groups(same_topics=True))
def test_revoke_then_assign_converges_in_two_rebalances(group: Classic) -> None:
    counts, subs = group
    first = COOP.assign(counts, subs)
    # members revoke what they lost, keep the rest, and rejoin with the next generation
    rejoined = {m: ClassicSubscription(s.topics, tuple(first[m]), 10) for m, s in subs.items()}
    second = COOP.assign(counts, rejoined)
    assert {tp for ps in second.values() for tp in ps} == all_partitions(counts, subs)
    sizes = [len(ps) for ps in second.values()]
    assert max(sizes) - min(sizes) <= 1
    for m in subs:
        assert set(first[m]) <= set(second[m])  # nothing handed out in round one is taken back
    stable = {m: ClassicSubscription(s.topics, tuple(second[m]), 11) for m, s in subs.items()}
    assert COOP.assign(counts, stable) == second


def test_fresh_group_is_filled_round_robin_in_topic_then_partition_order() -> None:
    subs = {m: ClassicSubscription(("t0", "t1")) for m in ("c2", "c1", "c3")}
    out = COOP.assign({"t0": 2, "t1": 2}, subs)
    assert out == {"c1": [("t0", 0), ("t1", 1)], "c2": [("t0", 1)], "c3": [("t1", 0)]}


def test_members_keep_owned_partitions_up_to_quota() -> None:
    subs = {
        "c1": ClassicSubscription(("t",), (("t", 0), ("t", 1), ("t", 2), ("t", 3)), 4),
        "c2": ClassicSubscription(("t",), (("t", 4), ("t", 5)), 4),
        "c3": ClassicSubscription(("t",), (), 4),
    }
    out = COOP.assign({"t": 6}, subs)
    # quota 2 each: c1 keeps t0, t1 and revokes t2, t3; they are withheld from c3 until c1 revokes
    assert out == {"c1": [("t", 0), ("t", 1)], "c2": [("t", 4), ("t", 5)], "c3": []}
    again = {
        "c1": ClassicSubscription(("t",), (("t", 0), ("t", 1)), 5),
        "c2": ClassicSubscription(("t",), (("t", 4), ("t", 5)), 5),
        "c3": ClassicSubscription(("t",), (), 5),
    }
    assert COOP.assign({"t": 6}, again)["c3"] == [("t", 2), ("t", 3)]


def test_a_claim_from_an_older_generation_loses_to_the_newest() -> None:
    subs = {
        "c1": ClassicSubscription(("t",), (("t", 0),), generation=7),
        "c2": ClassicSubscription(("t",), (("t", 0), ("t", 1)), generation=6),
    }
    out = COOP.assign({"t": 2}, subs)
    assert out == {"c1": [("t", 0)], "c2": [("t", 1)]}


def test_a_partition_claimed_twice_in_one_generation_is_kept_by_neither() -> None:
    subs = {
        "c1": ClassicSubscription(("t",), (("t", 0), ("t", 1)), generation=3),
        "c2": ClassicSubscription(("t",), (("t", 1), ("t", 2)), generation=3),
        "c3": ClassicSubscription(("t",), (), generation=3),
    }
    target = PLAIN.assign({"t": 3}, subs)
    assert target == {"c1": [("t", 0)], "c2": [("t", 2)], "c3": [("t", 1)]}
    assert COOP.assign({"t": 3}, subs) == {"c1": [("t", 0)], "c2": [("t", 2)], "c3": []}


def test_a_member_leaving_frees_its_partitions_at_once() -> None:
    subs = {m: ClassicSubscription(("t",), (("t", i),), 2) for i, m in enumerate(("c1", "c2", "c3"))}
    del subs["c2"]
    assert COOP.assign({"t": 3}, subs) == {"c1": [("t", 0), ("t", 1)], "c3": [("t", 2)]}


def test_registered_under_its_kafka_name_with_both_protocols() -> None:
    assignor = get_classic_assignor("cooperative-sticky")
    assert assignor.supported_protocols == ("cooperative", "eager")


def test_a_member_listing_a_partition_twice_keeps_it() -> None:
    subs = {
        "c1": ClassicSubscription(("t",), (("t", 0), ("t", 0)), generation=3),
        "c2": ClassicSubscription(("t",), (("t", 1),), generation=3),
    }
    assert COOP.assign({"t": 2}, subs) == {"c1": [("t", 0)], "c2": [("t", 1)]}


def test_different_subscriptions_follow_kafkas_moves() -> None:
    # Kafka 4.4.0's CooperativeStickyAssignor on this input (scripts/kafka_sticky_diff.py): c36 keeps
    # topic2-0 and revokes topic0-0 and topic1-0, which its rivals get only in the follow-up round
    subs = {
        "c36": ClassicSubscription(("topic0", "topic1", "topic2"), (("topic0", 0), ("topic2", 0), ("topic1", 0)), 2),
        "c35": ClassicSubscription(("topic0", "topic1", "topic2"), (("topic2", 0),), 1),
        "c32": ClassicSubscription(("topic1", "topic2"), (("topic2", 0),), 1),
    }
    counts = {"topic0": 1, "topic1": 1, "topic2": 1}
    assert COOP.assign(counts, subs) == {"c32": [], "c35": [], "c36": [("topic2", 0)]}
    target = PLAIN.assign(counts, subs)
    assert target["c36"] == [("topic2", 0)] and sorted(target["c35"] + target["c32"]) == [("topic0", 0), ("topic1", 0)]


def test_a_partition_never_moves_back_to_a_previous_owner_that_no_longer_subscribes_its_topic() -> None:
    subs = {
        "c0": ClassicSubscription(("t0", "t1"), (), 0),
        "c1": ClassicSubscription((), (), 1),
        "c2": ClassicSubscription(("t2",), (("t1", 0),), 0),  # an older generation owned t1-0
        "c3": ClassicSubscription(("t0", "t1", "t2", "t3"), (("t2", 0),), 0),
    }
    out = PLAIN.assign({"t0": 0, "t1": 2, "t2": 1, "t3": 1}, subs)
    assert all(t in subs[m].topics for m, ps in out.items() for t, _ in ps)
