"""Client-side assignors other than cooperative-sticky: roundrobin and the adapted range and lag."""

from __future__ import annotations

from groupcoord.assignors.api import PartitionOffsets
from groupcoord.assignors.classic import ClassicSubscription, classic_assignor_names, get_classic_assignor


def test_classic_assignor_names() -> None:
    assert classic_assignor_names() == ["cooperative-sticky", "lag", "range", "roundrobin"]
    assert get_classic_assignor("round-robin") is get_classic_assignor("roundrobin")


def test_round_robin_kafka_example() -> None:
    subs = {"C0": ClassicSubscription(("t0", "t1")), "C1": ClassicSubscription(("t0", "t1"))}
    out = get_classic_assignor("roundrobin").assign({"t0": 3, "t1": 3}, subs)
    assert out == {
        "C0": [("t0", 0), ("t0", 2), ("t1", 1)],
        "C1": [("t0", 1), ("t1", 0), ("t1", 2)],
    }


def test_round_robin_skips_members_not_subscribed() -> None:
    subs = {
        "C0": ClassicSubscription(("t0",)),
        "C1": ClassicSubscription(("t0", "t1")),
        "C2": ClassicSubscription(("t0", "t1", "t2")),
    }
    out = get_classic_assignor("roundrobin").assign({"t0": 1, "t1": 2, "t2": 3}, subs)
    assert out == {
        "C0": [("t0", 0)],
        "C1": [("t1", 0)],
        "C2": [("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)],
    }


def test_range_client_side() -> None:
    subs = {"C0": ClassicSubscription(("t0", "t1")), "C1": ClassicSubscription(("t0", "t1"))}
    out = get_classic_assignor("range").assign({"t0": 3, "t1": 3}, subs)
    assert out == {"C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)], "C1": [("t0", 2), ("t1", 2)]}


def test_lag_client_side_readme_example() -> None:
    subs = {"C0": ClassicSubscription(("t0",)), "C1": ClassicSubscription(("t0",))}
    lag = {
        ("t0", 0): PartitionOffsets(100_000, 0),
        ("t0", 1): PartitionOffsets(50_000, 0),
        ("t0", 2): PartitionOffsets(60_000, 0),
    }
    out = get_classic_assignor("lag").assign({"t0": 3}, subs, lag)
    assert out == {"C0": [("t0", 0)], "C1": [("t0", 1), ("t0", 2)]}
