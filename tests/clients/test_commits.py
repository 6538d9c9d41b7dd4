"""GroupMember's commits: split to fit the coordinator's per-request cap, and bound to a membership."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from groupcoord.clients.group_member import MAX_PARTITIONS_PER_COMMIT, GroupMember, GroupMemberClosedError
from tests.clients.cluster import Coordinator, wait_until

PARTITIONS = MAX_PARTITIONS_PER_COMMIT + 500
SETTINGS = {"group.consumer.min.heartbeat.interval.ms": 20, "group.consumer.heartbeat.interval.ms": 100,
            "group.consumer.min.session.timeout.ms": 500, "group.consumer.session.timeout.ms": 3000,
            "group.consumer.assignment.interval.ms": 0}


@pytest.fixture()
def coordinator() -> Iterator[Coordinator]:
    c = Coordinator(SETTINGS, topics=f"wide:{PARTITIONS}").start()
    yield c
    c.stop()


def test_a_commit_larger_than_the_coordinators_cap_is_split_and_every_partition_accepted(
        coordinator: Coordinator) -> None:
    member = GroupMember(coordinator.address, "wide-group", ["wide"])
    member.start()
    try:
        wait_until(lambda: len(member.assignment()) == PARTITIONS, 30, "the member to own every partition")
        errors = member.commit_offsets({tp: 7 for tp in member.assignment()})
        assert len(errors) == PARTITIONS and set(errors.values()) == {0}
        fetched = member.fetch_offsets()
        assert len(fetched) == PARTITIONS and set(fetched.values()) == {7}
    finally:
        member.close()


def test_a_commit_bound_to_a_membership_the_member_no_longer_has_is_refused(coordinator: Coordinator) -> None:
    member = GroupMember(coordinator.address, "bound-group", ["wide"])
    member.start()
    try:
        wait_until(lambda: len(member.assignment()) == PARTITIONS, 30, "the member to own every partition")
        tp = min(member.assignment())
        errors = member.commit_offsets({tp: 5}, membership=(member.member_id, member.member_epoch + 5))
        assert errors[tp] != 0  # an epoch the member never had: refused, nothing committed
        assert member.fetch_offsets([tp])[tp] == -1
        assert member.commit_offsets({tp: 6}, membership=(member.member_id, member.member_epoch)) == {tp: 0}
    finally:
        member.close()


def test_a_commit_after_close_raises_the_members_closed_error_not_grpcs(coordinator: Coordinator) -> None:
    """An application thread still committing when another closes the member gets the client's own error, which
    says what happened, rather than gRPC's ValueError about a closed channel."""
    member = GroupMember(coordinator.address, "closed-group", ["wide"])
    member.start()
    wait_until(lambda: len(member.assignment()) == PARTITIONS, 30, "the member to own every partition")
    tp = min(member.assignment())
    member.close()
    with pytest.raises(GroupMemberClosedError, match="closed"):
        member.commit_offsets({tp: 5})
    with pytest.raises(GroupMemberClosedError):
        member.fetch_offsets([tp])
