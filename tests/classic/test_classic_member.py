"""The consumer's side of the embedded protocol, without a coordinator: what the leader computes, and how a
member applies its assignment (eager vs cooperative)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import pytest

from groupcoord.assignors.api import PartitionOffsets
from groupcoord.assignors.classic import ClassicSubscription, get_classic_assignor
from groupcoord.clients.classic_member import (
    INCONSISTENT_GROUP_PROTOCOL,
    AssignmentError,
    ClassicGroupMember,
    JoinedMember,
)
from groupcoord.clients.consumer_protocol import (
    Assignment,
    Subscription,
    TopicPartition,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

NOWHERE = "127.0.0.1:9"  # channels connect lazily: these members never send an RPC


@pytest.fixture
def members() -> Iterator[list[ClassicGroupMember]]:
    made: list[ClassicGroupMember] = []
    yield made
    for m in made:
        m.close(leave=False)


def member(made: list[ClassicGroupMember], assignors: Sequence[str], **kwargs: object) -> ClassicGroupMember:
    m = ClassicGroupMember(NOWHERE, "g", ["t0", "t1"], partitions={"t0": 3, "t1": 3, "other": 9},
                           assignors=assignors, **kwargs)  # type: ignore[arg-type]
    made.append(m)
    return m


def joined(*subs: tuple[str, Subscription]) -> list[JoinedMember]:
    return [JoinedMember(mid, None, encode_subscription(s)) for mid, s in subs]


def test_a_member_is_cooperative_only_if_every_configured_assignor_supports_it(
        members: list[ClassicGroupMember]) -> None:
    assert member(members, ["cooperative-sticky"]).cooperative
    assert not member(members, ["range"]).cooperative
    assert not member(members, ["cooperative-sticky", "range"]).cooperative


def test_the_subscription_offers_every_assignor_in_order_with_owned_partitions_only_when_cooperative(
        members: list[ClassicGroupMember]) -> None:
    coop = member(members, ["cooperative-sticky"], rack_id="r1")
    coop._owned = {("t0", 1)}
    coop.generation = 4
    ((name, metadata),) = coop._protocols()
    assert name == "cooperative-sticky"
    assert decode_subscription(metadata) == Subscription(("t0", "t1"), None, (("t0", 1),), 4, "r1")
    eager = member(members, ["range", "roundrobin"])
    eager._owned = {("t0", 1)}
    assert [n for n, _ in eager._protocols()] == ["range", "roundrobin"]
    assert decode_subscription(eager._protocols()[0][1]).owned_partitions == ()


def test_the_leader_runs_the_chosen_assignor_on_the_members_subscriptions(members: list[ClassicGroupMember]) -> None:
    leader = member(members, ["range"])
    subs = joined(("a", Subscription(("t0", "t1"))), ("b", Subscription(("t0", "t1"))))
    out = {mid: decode_assignment(data).partitions for mid, data in leader._assign("range", subs).items()}
    expected = get_classic_assignor("range").assign(
        {"t0": 3, "t1": 3}, {"a": ClassicSubscription(("t0", "t1")), "b": ClassicSubscription(("t0", "t1"))})
    assert out == {mid: tuple(tps) for mid, tps in expected.items()}


def test_the_leader_feeds_its_lag_source_to_the_lag_assignor(members: list[ClassicGroupMember]) -> None:
    asked: list[Sequence[TopicPartition]] = []
    lags = {("t0", 0): 100_000, ("t0", 1): 50_000, ("t0", 2): 60_000}

    def lag(tps: Sequence[TopicPartition]) -> dict[TopicPartition, PartitionOffsets]:
        asked.append(tps)
        return {tp: PartitionOffsets(lags.get(tp, 0), 0) for tp in tps}

    leader = member(members, ["lag"], lag=lag)
    subs = joined(("C0", Subscription(("t0",))), ("C1", Subscription(("t0",))))
    out = {mid: decode_assignment(data).partitions for mid, data in leader._assign("lag", subs).items()}
    assert out == {"C0": (("t0", 0),), "C1": (("t0", 1), ("t0", 2))}
    assert asked == [[("t0", 0), ("t0", 1), ("t0", 2)]]  # only the subscribed topics


def test_an_assignor_the_leader_does_not_know_is_an_assignment_error(members: list[ClassicGroupMember]) -> None:
    leader = member(members, ["range"])
    with pytest.raises(AssignmentError) as e:
        leader._assign("sticky-from-the-future", joined(("a", Subscription(("t0",)))))
    assert e.value.code == INCONSISTENT_GROUP_PROTOCOL


def test_a_cooperative_member_revokes_only_what_moves_and_asks_for_the_follow_up_rebalance(
        members: list[ClassicGroupMember]) -> None:
    revoked: list[frozenset[TopicPartition]] = []
    assigned: list[frozenset[TopicPartition]] = []
    m = member(members, ["cooperative-sticky"], on_revoked=revoked.append, on_assigned=assigned.append)
    m._owned = {("t0", 0), ("t0", 1), ("t0", 2)}
    m._last_ok = time.monotonic()  # as after a successful SyncGroup: the lease is valid
    rejoin = m._on_synced("cooperative-sticky", encode_assignment(Assignment((("t0", 0), ("t1", 0)))))
    assert rejoin
    assert revoked == [frozenset({("t0", 1), ("t0", 2)})] and assigned == [frozenset({("t1", 0)})]
    assert m.assignment() == {("t0", 0), ("t1", 0)}
    assert not m._on_synced("cooperative-sticky", encode_assignment(Assignment((("t0", 0), ("t1", 0)))))


def test_an_eager_member_gives_everything_back_before_it_rejoins(members: list[ClassicGroupMember]) -> None:
    revoked: list[frozenset[TopicPartition]] = []
    m = member(members, ["range"], on_revoked=revoked.append)
    m._owned = {("t0", 0), ("t0", 1)}
    m._prepare_join()
    assert revoked == [frozenset({("t0", 0), ("t0", 1)})] and m.assignment() == frozenset()
    assert not m._on_synced("range", encode_assignment(Assignment((("t0", 1),))))
    m._last_ok = time.monotonic()  # as after a successful SyncGroup: the lease is valid
    assert m.assignment() == {("t0", 1)}
