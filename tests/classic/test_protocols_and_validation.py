"""Protocol selection by vote, and the JoinGroup checks: protocol type, common protocol, session timeout bounds,
group.max.size, malformed requests."""

from __future__ import annotations

from groupcoord.coordinator.core.classic.records import ClassicGroupState
from groupcoord.coordinator.core.errors import Errors
from tests.classic.context import INITIAL_DELAY_MS, ClassicContext


def joined_generation(ctx: ClassicContext, *protocol_lists: tuple[tuple[str, bytes], ...]) -> list[str]:
    """New members with these protocol lists join a new group together; returns their ids."""
    calls = [ctx.join_new(protocols=p) for p in protocol_lists]
    ctx.advance(2 * INITIAL_DELAY_MS)
    assert all(ctx.join_answer(c).error_code is Errors.NONE for _, c in calls)
    return [mid for mid, _ in calls]


def test_the_protocol_is_chosen_by_vote_among_the_protocols_every_member_supports() -> None:
    ctx = ClassicContext()
    joined_generation(ctx,
                      (("lag", b""), ("range", b""), ("roundrobin", b"")),
                      (("roundrobin", b""), ("range", b"")),
                      (("roundrobin", b""), ("range", b""), ("lag", b"")))
    # lag is not supported by everyone; of range and roundrobin, roundrobin gets two first-choice votes.
    assert ctx.group().protocol_name == "roundrobin"


def test_a_tied_vote_goes_to_the_leaders_preference() -> None:
    ctx = ClassicContext()
    joined_generation(ctx, (("range", b""), ("roundrobin", b"")), (("roundrobin", b""), ("range", b"")))
    assert ctx.group().protocol_name == "range"


def test_a_rolling_upgrade_keeps_the_old_protocol_until_every_member_supports_the_new_one() -> None:
    ctx = ClassicContext()
    old = (("range", b"v1"),)
    new = (("cooperative-sticky", b"v2"), ("range", b"v1"))
    a, b = joined_generation(ctx, old, old)
    ctx.complete_sync([a, b], 1)
    calls = ctx.rejoin_all([a], protocols=new) | ctx.rejoin_all([b])
    assert ctx.join_answer(calls[a]).protocol_name == "range"
    ctx.complete_sync([a, b], 2)
    calls = ctx.rejoin_all([a], protocols=new) | ctx.rejoin_all([b], protocols=new)
    assert ctx.join_answer(calls[b]).protocol_name == "cooperative-sticky"
    assert [m.metadata for m in ctx.join_answer(calls[a]).members] == [b"v2", b"v2"]


def test_a_member_sharing_no_protocol_with_the_group_is_rejected_inconsistent_group_protocol() -> None:
    ctx = ClassicContext()
    ctx.stable_group(2, protocols=(("range", b""), ("roundrobin", b"")))
    response = ctx.join_answer(ctx.join("", protocols=(("cooperative-sticky", b""),)))
    assert response.error_code is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.group().pending_members == set()


def test_a_member_of_another_protocol_type_is_rejected_inconsistent_group_protocol() -> None:
    ctx = ClassicContext()
    ctx.stable_group(1)
    response = ctx.join_answer(ctx.join("", protocol_type="connect", protocols=(("range", b""),)))
    assert response.error_code is Errors.INCONSISTENT_GROUP_PROTOCOL


def test_a_join_group_without_protocol_type_or_protocols_is_inconsistent_group_protocol() -> None:
    ctx = ClassicContext()
    assert ctx.join_answer(ctx.join("", protocol_type="")).error_code is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.join_answer(ctx.join("", protocols=())).error_code is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert "grp" not in ctx.shard.groups


def test_a_session_timeout_outside_the_configured_bounds_is_invalid_session_timeout() -> None:
    ctx = ClassicContext(group_min_session_timeout_ms=6000, group_max_session_timeout_ms=30_000)
    for bad in (5999, 30_001):
        response = ctx.join_answer(ctx.join("", session_timeout_ms=bad))
        assert response.error_code is Errors.INVALID_SESSION_TIMEOUT
        assert "6000" in response.error_message and "30000" in response.error_message
    for good in (6000, 30_000):
        assert ctx.join_answer(ctx.join("", session_timeout_ms=good)).error_code is Errors.MEMBER_ID_REQUIRED


def test_duplicate_protocol_names_empty_group_id_and_empty_instance_id_are_invalid() -> None:
    ctx = ClassicContext()
    dup = (("range", b"a"), ("range", b"b"))
    assert ctx.join_answer(ctx.join("", protocols=dup)).error_code is Errors.INVALID_REQUEST
    assert ctx.join_answer(ctx.join("", group_id="")).error_code is Errors.INVALID_GROUP_ID
    assert ctx.join_answer(ctx.join("", instance_id="")).error_code is Errors.INVALID_REQUEST


def test_new_members_beyond_group_max_size_are_rejected_but_existing_members_rejoin() -> None:
    ctx = ClassicContext(group_max_size=2)
    a, b = ctx.stable_group(2)
    response = ctx.join_answer(ctx.join(""))
    assert (response.error_code, response.member_id) == (Errors.GROUP_MAX_SIZE_REACHED, "")
    calls = ctx.rejoin_all([a, b], protocols=(("range", b"changed"),))
    assert {ctx.join_answer(c).generation_id for c in calls.values()} == {2}


def test_a_join_group_with_an_unknown_member_id_is_unknown_member_id() -> None:
    ctx = ClassicContext()
    assert ctx.join_answer(ctx.join("ghost")).error_code is Errors.UNKNOWN_MEMBER_ID
    assert "grp" not in ctx.shard.groups  # a member id does not create a group
    ctx.stable_group(1)
    assert ctx.join_answer(ctx.join("ghost")).error_code is Errors.UNKNOWN_MEMBER_ID
    assert ctx.state() is ClassicGroupState.STABLE
