"""SharePartition under arbitrary acquire/acknowledge/expire/release sequences: the ranges stay a compact,
exact cover of the window, a record is locked to at most one member, and nothing is lost or redone."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.core.share.partition import AcknowledgeType, RecordState, SharePartition

MEMBERS = ("a", "b", "c")
LIMIT = 3

ops = st.lists(st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(1, 40), st.integers(0, 120)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.integers(0, 120), st.integers(0, 30),
              st.sampled_from(list(AcknowledgeType))),
    st.tuples(st.just("expire"), st.integers(0, 5)),
    st.tuples(st.just("release"), st.sampled_from(MEMBERS)),
), max_size=60)


def check(sp: SharePartition, done: set[int]) -> None:
    assert sp.start_offset <= sp.next_offset
    expected = sp.start_offset
    for i, b in enumerate(sp.batches):
        assert b.first == expected and b.first <= b.last
        expected = b.last + 1
        if i == 0:
            assert b.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        if b.state is RecordState.ACQUIRED:
            assert b.member_id
        else:
            assert not b.member_id
        if i:
            p = sp.batches[i - 1]
            assert (p.state, p.delivery_count, p.member_id, p.lock_deadline_ms) != (
                b.state, b.delivery_count, b.member_id, b.lock_deadline_ms)  # merged
    assert expected == sp.next_offset or not sp.batches and sp.start_offset == sp.next_offset
    for b in sp.batches:  # a finished record is never handed out again
        if b.state in (RecordState.AVAILABLE, RecordState.ACQUIRED):
            assert not done.intersection(range(b.first, b.last + 1))


@settings(max_examples=300, deadline=None)
@given(ops)
def test_ranges_cover_the_window_exactly_and_each_record_has_one_holder(sequence: list[tuple]) -> None:
    sp = SharePartition(0, 0)
    now = 0
    done: set[int] = set()
    for op in sequence:
        now += 1
        if op[0] == "acquire":
            _, member, n, end = op
            before = sp
            sp, ranges = sp.acquire(member, n, end, now + 3, 50)
            got = sum(r.last - r.first + 1 for r in ranges)
            assert got <= n and sp.next_offset <= max(end, before.next_offset)
            for r in ranges:  # only records nobody held and nobody finished
                assert not any(before.holds(m, r.first, r.last) for m in MEMBERS)
                assert not set(range(r.first, r.last + 1)) & done
                assert sp.holds(member, r.first, r.last)
        elif op[0] == "ack":
            _, member, first, length, kind = op
            last = first + length
            if sp.holds(member, first, last):
                sp = sp.acknowledge(first, last, kind, LIMIT)
                if kind in (AcknowledgeType.ACCEPT, AcknowledgeType.REJECT):  # RELEASE and RENEW finish nothing
                    done.update(range(first, last + 1))
        elif op[0] == "expire":
            now += op[1]
            sp = sp.expire_locks(now, LIMIT)
        else:
            sp = sp.release_member(op[1], LIMIT)
        check(sp, done)
        assert all(b.delivery_count <= LIMIT for b in sp.batches)
