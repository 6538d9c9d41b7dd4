"""The scenario scripts, each played against Kafka's coordinator and groupcoord (see harness.py)."""

from __future__ import annotations

import functools
from typing import Any

from tests.differential.harness import Script, scenario

CGHB = "ConsumerGroupHeartbeat"
REBALANCE_TIMEOUT_MS = 30000


# --- helpers ----------------------------------------------------------------------------------------------

def join(s: Script, m: str, topics: tuple[str, ...] = ("a",), group: str = "g", label: str | None = None,
         **fields: Any) -> dict[str, Any]:
    req = {"group_id": s.group(group), "member_id": s.mid(m), "member_epoch": 0,
           "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS, "subscribed_topic_names": [s.topic(t) for t in topics],
           "topic_partitions": [], **fields}
    return s.call(m, CGHB, req, label or f"join {m}")


def hb(s: Script, m: str, epoch: int, owned: list[tuple[str, list[int]]] | None = None, group: str = "g",
       label: str | None = None, **fields: Any) -> dict[str, Any]:
    req = {"group_id": s.group(group), "member_id": s.mid(m), "member_epoch": epoch, **fields}
    if owned is not None:
        req["topic_partitions"] = [(s.topic(t), p) for t, p in owned]
    return s.call(m, CGHB, req, label or f"hb {m}")


def owned(resp: dict[str, Any], s: Script) -> list[tuple[str, list[int]]]:
    """The response's assignment as an owned list in topic aliases."""
    alias = {s.topic(a): a for a in ("a", "b", "c")}
    return [(alias[t], p) for t, p in (resp["assignment"] or [])]


def settle(s: Script, members: dict[str, dict[str, Any]], rounds: int = 6, group: str = "g") -> dict[str, Any]:
    """Heartbeats every member in turn, reporting what it owns, until the epochs stop moving; records each
    heartbeat. `members` maps alias -> last response (with 'assignment' kept when absent)."""
    state = {m: {"epoch": r["member_epoch"], "owned": owned(r, s)} for m, r in members.items()}
    for _ in range(rounds):
        moved = False
        for m, st in state.items():
            r = hb(s, m, st["epoch"], st["owned"], group=group)
            if r["error_code"]:
                return state
            if r["member_epoch"] != st["epoch"] or r["assignment"] is not None:
                moved = True
            st["epoch"] = r["member_epoch"]
            if r["assignment"] is not None:
                st["owned"] = owned(r, s)
        if not moved:
            break
    return state


def describe(s: Script, group: str = "g", label: str = "describe") -> dict[str, Any]:
    return s.call("admin", "ConsumerGroupDescribe", {"group_ids": [s.group(group)]}, label)


def commit(s: Script, m: str, epoch: int, parts: dict[str, list[int]], group: str = "g", offset: int = 10,
           member_id: str | None = None, label: str | None = None, **fields: Any) -> dict[str, Any]:
    req = {"group_id": s.group(group), "generation_id_or_member_epoch": epoch,
           "member_id": s.mid(m) if member_id is None else member_id,
           "topics": [{"name": s.topic(t), "partitions": [
               {"partition_index": p, "committed_offset": offset, "committed_leader_epoch": -1,
                "committed_metadata": "md"} for p in ps]} for t, ps in parts.items()], **fields}
    return s.call(m, "OffsetCommit", req, label or f"commit {m}")


def fetch(s: Script, m: str | None, epoch: int, parts: dict[str, list[int]] | None, group: str = "g",
          label: str | None = None) -> dict[str, Any]:
    req = {"group_id": s.group(group), "member_id": s.mid(m) if m else None, "member_epoch": epoch,
           "topics": None if parts is None else [{"name": s.topic(t), "partition_indexes": p}
                                                 for t, p in parts.items()]}
    return s.call(m or "admin", "OffsetFetch", req, label or f"fetch {m}")


# --- consumer groups: joins, epochs, leaves ----------------------------------------------------------------

@scenario
def first_member_joins_and_gets_every_partition(s: Script) -> None:
    r = join(s, "m1")
    settle(s, {"m1": r})
    describe(s)


@scenario
def second_member_joins_and_partitions_move_cooperatively(s: Script) -> None:
    r1 = join(s, "m1")
    st = settle(s, {"m1": r1})
    r2 = join(s, "m2")
    settle(s, {"m1": {"member_epoch": st["m1"]["epoch"], "assignment": _asg(s, st["m1"]["owned"])}, "m2": r2})
    describe(s)


def _asg(s: Script, own: list[tuple[str, list[int]]]) -> list[tuple[str, list[int]]]:
    return [(s.topic(t), p) for t, p in own]


@scenario
def three_members_join_then_one_leaves(s: Script) -> None:
    rs = {m: join(s, m) for m in ("m1", "m2", "m3")}
    st = settle(s, rs)
    hb(s, "m2", -1, label="m2 leaves")
    settle(s, {m: {"member_epoch": st[m]["epoch"], "assignment": _asg(s, st[m]["owned"])} for m in ("m1", "m3")})
    describe(s)


@scenario
def last_member_leaves_and_group_is_empty(s: Script) -> None:
    r = join(s, "m1")
    settle(s, {"m1": r})
    hb(s, "m1", -1, label="m1 leaves")
    describe(s)
    s.call("admin", "ListGroups", {"types_filter": ["consumer"]}, "list", record=False)


@scenario
def heartbeat_without_change_returns_no_assignment(s: Script) -> None:
    r = join(s, "m1")
    st = settle(s, {"m1": r})
    hb(s, "m1", st["m1"]["epoch"], label="hb, nothing sent")
    hb(s, "m1", st["m1"]["epoch"], st["m1"]["owned"], label="hb, owned sent")


@scenario
def full_heartbeat_after_join_returns_assignment(s: Script) -> None:
    r = join(s, "m1")
    st = settle(s, {"m1": r})
    hb(s, "m1", st["m1"]["epoch"], st["m1"]["owned"], rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
       subscribed_topic_names=[s.topic("a")], label="full hb")


@scenario
def rejoin_with_epoch_zero_keeps_the_member(s: Script) -> None:
    r = join(s, "m1")
    settle(s, {"m1": r})
    join(s, "m1", label="rejoin m1")
    describe(s)


@scenario
def join_with_empty_member_id_is_invalid_in_v1(s: Script) -> None:
    s.call("m1", CGHB, {"group_id": s.group(), "member_id": "", "member_epoch": 0,
                        "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS, "subscribed_topic_names": [s.topic("a")],
                        "topic_partitions": []}, "join with empty member id")


@scenario
def join_without_rebalance_timeout_is_invalid(s: Script) -> None:
    join(s, "m1", rebalance_timeout_ms=-1)


@scenario
def join_without_subscription_is_invalid(s: Script) -> None:
    join(s, "m1", subscribed_topic_names=None)


@scenario
def join_with_owned_partitions_is_invalid(s: Script) -> None:
    join(s, "m1", topic_partitions=[(s.topic("a"), [0])])


@scenario
def join_without_owned_list_is_invalid(s: Script) -> None:
    join(s, "m1", topic_partitions=None)


@scenario
def join_with_empty_group_id_is_invalid(s: Script) -> None:
    s.call("m1", CGHB, {"group_id": "", "member_id": s.mid("m1"), "member_epoch": 0,
                        "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS, "subscribed_topic_names": [s.topic("a")],
                        "topic_partitions": []}, "join group ''")


@scenario
def join_with_unknown_assignor_is_unsupported(s: Script) -> None:
    join(s, "m1", server_assignor="sticky-bogus")


@scenario
def join_with_negative_epoch_below_minus_two_is_invalid(s: Script) -> None:
    hb(s, "m1", -3, label="hb epoch -3")


@scenario
def heartbeat_of_unknown_member_is_unknown_member_id(s: Script) -> None:
    r = join(s, "m1")
    settle(s, {"m1": r})
    hb(s, "m2", 1, label="hb unknown m2")


@scenario
def heartbeat_to_unknown_group_with_epoch_is_rejected(s: Script) -> None:
    hb(s, "m1", 5, label="hb unknown group")


@scenario
def heartbeat_with_a_future_epoch_is_fenced(s: Script) -> None:
    r = join(s, "m1")
    st = settle(s, {"m1": r})
    hb(s, "m1", st["m1"]["epoch"] + 1, label="hb epoch+1")


@scenario
def heartbeat_with_an_old_epoch_and_other_owned_partitions_is_fenced(s: Script) -> None:
    r1 = join(s, "m1")
    st = settle(s, {"m1": r1})
    r2 = join(s, "m2")
    settle(s, {"m1": {"member_epoch": st["m1"]["epoch"], "assignment": _asg(s, st["m1"]["owned"])}, "m2": r2})
    hb(s, "m2", 1, [("a", [0, 1, 2, 3, 4, 5])], label="m2 old epoch, claims all")


@scenario
def heartbeat_with_previous_epoch_and_matching_owned_is_accepted(s: Script) -> None:
    r1 = join(s, "m1")
    st = settle(s, {"m1": r1})
    e = st["m1"]["epoch"]
    join(s, "m2", topics=("b",))
    hb(s, "m1", e, st["m1"]["owned"], label="m1 sees the new epoch")
    hb(s, "m1", e, st["m1"]["owned"], label="m1 repeats the previous epoch")


@scenario
def leave_of_unknown_member_is_unknown_member_id(s: Script) -> None:
    join(s, "m1")
    hb(s, "m2", -1, label="m2 leaves (never joined)")


@scenario
def leave_of_a_member_then_heartbeat_is_unknown(s: Script) -> None:
    r = join(s, "m1")
    hb(s, "m1", -1, label="m1 leaves")
    hb(s, "m1", r["member_epoch"], label="m1 heartbeats after leaving")


# --- subscriptions ---------------------------------------------------------------------------------------

@scenario
def subscription_change_moves_the_group_epoch(s: Script) -> None:
    r = join(s, "m1")
    st = settle(s, {"m1": r})
    hb(s, "m1", st["m1"]["epoch"], st["m1"]["owned"], subscribed_topic_names=[s.topic("a"), s.topic("b")],
       label="m1 adds b")
    describe(s)


@scenario
def subscription_shrink_revokes_partitions(s: Script) -> None:
    r = join(s, "m1", topics=("a", "b"))
    st = settle(s, {"m1": r})
    r2 = hb(s, "m1", st["m1"]["epoch"], st["m1"]["owned"], subscribed_topic_names=[s.topic("b")],
            label="m1 drops a")
    settle(s, {"m1": {"member_epoch": r2["member_epoch"], "assignment": _asg(s, owned(r2, s) or st["m1"]["owned"])}})
    describe(s)


@scenario
def subscription_to_unknown_topic_gets_nothing(s: Script) -> None:
    r = s.call("m1", CGHB, {"group_id": s.group(), "member_id": s.mid("m1"), "member_epoch": 0,
                            "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS,
                            "subscribed_topic_names": [s.group("no-such-topic")], "topic_partitions": []},
               "join, unknown topic")
    hb(s, "m1", r["member_epoch"], [])
    describe(s)


@scenario
def empty_subscription_gets_nothing(s: Script) -> None:
    r = join(s, "m1", topics=())
    hb(s, "m1", r["member_epoch"], [])
    describe(s)


def bracket_last_letter(topic: str) -> str:
    """A regex matching exactly `topic` that is not its name ("diff-1a2b3c-b" -> "diff-1a2b3c-[b]"). Only the
    last letter: the run's random prefix may itself hold "-b" (a hex prefix starting with b)."""
    return f"{topic[:-1]}[{topic[-1]}]"


@scenario
def regex_subscription_is_resolved(s: Script) -> None:
    r = s.call("m1", CGHB, {"group_id": s.group(), "member_id": s.mid("m1"), "member_epoch": 0,
                            "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS,
                            "subscribed_topic_regex": bracket_last_letter(s.topic("b")),
                            "topic_partitions": []}, "join by regex")
    st = {"epoch": r["member_epoch"], "owned": owned(r, s)}
    s.wait_until(lambda: bool(s.call("m1", CGHB, {"group_id": s.group(), "member_id": s.mid("m1"),
                                                  "member_epoch": st["epoch"], "topic_partitions": []},
                                     record=False)["assignment"]))
    describe(s)


@scenario
def invalid_regex_is_rejected(s: Script) -> None:
    s.call("m1", CGHB, {"group_id": s.group(), "member_id": s.mid("m1"), "member_epoch": 0,
                        "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS, "subscribed_topic_regex": "[a-",
                        "topic_partitions": []}, "join with bad regex")


# --- server assignors -------------------------------------------------------------------------------------

@scenario
def range_assignor_splits_by_member_order(s: Script) -> None:
    rs = {m: join(s, m, topics=("a", "b"), server_assignor="range") for m in ("m1", "m2", "m3")}
    settle(s, rs)
    describe(s)


@scenario
def uniform_assignor_balances_two_topics(s: Script) -> None:
    # Which partitions a member keeps depends on the order members and topics are visited: groupcoord
    # visits them in the order of Kafka's hash maps, so the partitions match exactly (unless this run's
    # topic ids share a bucket: see `topic_ids_share_a_bucket`).
    s.assignment_sizes_only = s.topic_ids_share_a_bucket(("a", "b"))
    rs = {m: join(s, m, topics=("a", "b"), server_assignor="uniform") for m in ("m1", "m2")}
    settle(s, rs)
    describe(s)


@scenario
def uniform_assignor_member_joins_a_settled_group(s: Script) -> None:
    """Who gives up which partitions to the newcomer: Kafka's member and topic visiting orders."""
    s.assignment_sizes_only = s.topic_ids_share_a_bucket(("a", "b", "c"))
    rs = {m: join(s, m, topics=("a", "b", "c"), server_assignor="uniform") for m in ("m1", "m2")}
    st = settle(s, rs)
    r3 = join(s, "m3", topics=("a", "b", "c"), server_assignor="uniform")
    settle(s, {**{m: {"member_epoch": st[m]["epoch"], "assignment": _asg(s, st[m]["owned"])} for m in st},
               "m3": r3})
    describe(s)


@scenario
def uniform_assignor_five_members_join_then_two_leave(s: Script) -> None:
    """Five members join one by one into a settled group, then two leave; each step compared exactly. The
    aliases give member ids in five different buckets of Kafka's member map: within one bucket Kafka keeps
    its own insertion order, groupcoord the ids' order (a listed difference; m5 would share m4's)."""
    s.assignment_sizes_only = s.topic_ids_share_a_bucket(("a", "b", "c"))
    names = ("m1", "m2", "m3", "m4", "m6")
    st = settle(s, {"m1": join(s, "m1", topics=("a", "b", "c"), server_assignor="uniform")})
    for m in names[1:]:
        r = join(s, m, topics=("a", "b", "c"), server_assignor="uniform")
        st = settle(s, {**{k: {"member_epoch": v["epoch"], "assignment": _asg(s, v["owned"])} for k, v in st.items()},
                        m: r})
    for m in ("m2", "m4"):
        hb(s, m, -1, label=f"{m} leaves")
        del st[m]
        st = settle(s, {k: {"member_epoch": v["epoch"], "assignment": _asg(s, v["owned"])} for k, v in st.items()})
    describe(s)


@scenario
def range_assignor_orders_static_members_by_instance_id(s: Script) -> None:
    """Kafka's range sorts static members by instance id (before dynamic ones), not by member id."""
    rs = {"m1": join(s, "m1", topics=("a",), server_assignor="range", instance_id="i3"),
          "m2": join(s, "m2", topics=("a",), server_assignor="range", instance_id="i1"),
          "m3": join(s, "m3", topics=("a",), server_assignor="range")}
    settle(s, rs)
    describe(s)


@scenario
def uniform_assignor_with_different_subscriptions(s: Script) -> None:
    rs = {"m1": join(s, "m1", topics=("a",)), "m2": join(s, "m2", topics=("a", "b")),
          "m3": join(s, "m3", topics=("b", "c"))}
    settle(s, rs)
    describe(s)


@scenario
def range_assignor_with_different_subscriptions(s: Script) -> None:
    rs = {"m1": join(s, "m1", topics=("a", "c"), server_assignor="range"),
          "m2": join(s, "m2", topics=("a",), server_assignor="range"),
          "m3": join(s, "m3", topics=("c",), server_assignor="range")}
    settle(s, rs)
    describe(s)


@scenario
def more_members_than_partitions(s: Script) -> None:
    rs = {m: join(s, m, topics=("c",)) for m in ("m1", "m2", "m3")}
    settle(s, rs)
    describe(s)


@scenario
def assignor_switch_by_a_member(s: Script) -> None:
    rs = {m: join(s, m, topics=("a",)) for m in ("m1", "m2")}
    st = settle(s, rs)
    hb(s, "m1", st["m1"]["epoch"], st["m1"]["owned"], server_assignor="range", label="m1 asks for range")
    describe(s)


# --- static membership ------------------------------------------------------------------------------------

@scenario
def static_member_rejoins_after_temporary_leave_with_same_epoch(s: Script) -> None:
    r = join(s, "m1", instance_id="i1")
    st = settle(s, {"m1": r})
    hb(s, "m1", -2, label="-2 without the instance id")
    hb(s, "m1", -2, instance_id="i1", label="m1 leaves temporarily (-2)")
    describe(s)
    r = join(s, "m1b", instance_id="i1", label="i1 rejoins as m1b")
    hb(s, "m1b", r["member_epoch"], st["m1"]["owned"], label="m1b heartbeats with what m1 owned")
    describe(s)


@scenario
def static_member_replaced_while_still_active_is_unreleased(s: Script) -> None:
    r = join(s, "m1", instance_id="i1")
    settle(s, {"m1": r})
    join(s, "m2", instance_id="i1", label="m2 takes i1 while m1 is active")


@scenario
def static_member_heartbeat_with_wrong_instance(s: Script) -> None:
    r = join(s, "m1", instance_id="i1")
    st = settle(s, {"m1": r})
    hb(s, "m1", st["m1"]["epoch"], instance_id="i2", label="m1 claims instance i2")


@scenario
def static_member_leaves_for_good(s: Script) -> None:
    r = join(s, "m1", instance_id="i1")
    settle(s, {"m1": r})
    hb(s, "m1", -1, instance_id="i1", label="m1 leaves (-1)")
    describe(s)
    join(s, "m2", instance_id="i1", label="i1 joins again as m2")


@scenario
def static_member_temporary_leave_keeps_partitions_from_others(s: Script) -> None:
    rs = {"m1": join(s, "m1", instance_id="i1"), "m2": join(s, "m2", instance_id="i2")}
    st = settle(s, rs)
    hb(s, "m1", -2, instance_id="i1", label="m1 leaves temporarily")
    hb(s, "m2", st["m2"]["epoch"], st["m2"]["owned"], label="m2 heartbeats")
    describe(s)


@scenario
def dynamic_member_temporary_leave_is_rejected(s: Script) -> None:
    r = join(s, "m1")
    settle(s, {"m1": r})
    hb(s, "m1", -2, label="dynamic m1 sends -2")
    describe(s)


# --- offsets with member epochs ---------------------------------------------------------------------------

@scenario
def commit_at_current_epoch_is_accepted_and_fetched(s: Script) -> None:
    r = join(s, "m1")
    st = settle(s, {"m1": r})
    e = st["m1"]["epoch"]
    commit(s, "m1", e, {"a": [0, 1]})
    fetch(s, "m1", e, {"a": [0, 1, 2]})
    fetch(s, None, -1, None, label="fetch all, no member")


@scenario
def commit_at_an_old_epoch_is_stale(s: Script) -> None:
    r1 = join(s, "m1")
    st = settle(s, {"m1": r1})
    e = st["m1"]["epoch"]
    r2 = join(s, "m2")
    settle(s, {"m1": {"member_epoch": e, "assignment": _asg(s, st["m1"]["owned"])}, "m2": r2})
    commit(s, "m1", e, {"a": [0, 5]}, label="m1 commits at its old epoch")
    commit(s, "m1", e - 1, {"a": [0]}, label="m1 commits at an older epoch")


@scenario
def commit_with_a_future_epoch_is_fenced(s: Script) -> None:
    r = join(s, "m1")
    st = settle(s, {"m1": r})
    commit(s, "m1", st["m1"]["epoch"] + 1, {"a": [0]})


@scenario
def commit_with_unknown_member_is_unknown_member_id(s: Script) -> None:
    r = join(s, "m1")
    st = settle(s, {"m1": r})
    commit(s, "m2", st["m1"]["epoch"], {"a": [0]}, label="unknown m2 commits")


@scenario
def commit_from_outside_the_group_to_a_consumer_group(s: Script) -> None:
    r = join(s, "m1")
    settle(s, {"m1": r})
    commit(s, "admin", -1, {"a": [0]}, member_id="", label="admin commit, epoch -1")


@scenario
def standalone_commit_creates_a_classic_group(s: Script) -> None:
    commit(s, "admin", -1, {"a": [0, 1]}, member_id="", label="standalone commit")
    fetch(s, None, -1, {"a": [0, 1, 2]})
    s.call("admin", "DescribeGroups", {"groups": [s.group()]}, "describe classic")


@scenario
def commit_to_unknown_group_with_member_epoch(s: Script) -> None:
    commit(s, "m1", 3, {"a": [0]}, label="commit to unknown group")


@scenario
def fetch_with_stale_member_epoch(s: Script) -> None:
    r = join(s, "m1")
    st = settle(s, {"m1": r})
    e = st["m1"]["epoch"]
    fetch(s, "m1", e + 1, {"a": [0]}, label="fetch with epoch+1")
    fetch(s, "m1", e - 1, {"a": [0]}, label="fetch with epoch-1")
    fetch(s, "m2", e, {"a": [0]}, label="fetch unknown member")


@scenario
def commit_of_unknown_partition(s: Script) -> None:
    r = join(s, "m1")
    st = settle(s, {"m1": r})
    commit(s, "m1", st["m1"]["epoch"], {"c": [7]}, label="commit c-7")


# --- classic protocol --------------------------------------------------------------------------------------

def jg(s: Script, conn: str, member_id: str, group: str = "g", instance: str | None = None,
       meta: bytes = b"meta", session_ms: int = 10000, protocols: tuple[str, ...] = ("range",)) -> dict[str, Any]:
    return {"group_id": s.group(group), "session_timeout_ms": session_ms, "rebalance_timeout_ms": 10000,
            "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": p, "metadata": meta + conn.encode()} for p in protocols], "reason": None}


def classic_join(s: Script, conn: str, group: str = "g", instance: str | None = None) -> dict[str, Any]:
    """JoinGroup with no member id: MEMBER_ID_REQUIRED (recorded), then the real join (returned unrecorded
    when it parks: the caller decides)."""
    first = s.call(conn, "JoinGroup", jg(s, conn, "", group, instance), f"join {conn} without member id")
    return first


def classic_stable_single(s: Script, conn: str = "k1", group: str = "g") -> dict[str, Any]:
    first = classic_join(s, conn, group)
    mid = first["member_id"]
    r = s.call(conn, "JoinGroup", jg(s, conn, mid, group), f"join {conn}")
    s.call(conn, "SyncGroup", {"group_id": s.group(group), "generation_id": r["generation_id"], "member_id": mid,
                               "protocol_type": "consumer", "protocol_name": "range",
                               "assignments": [{"member_id": mid, "assignment": b"all"}]}, f"sync {conn}")
    return {"member_id": mid, "generation_id": r["generation_id"]}


@scenario
def classic_join_requires_member_id_then_single_member_syncs(s: Script) -> None:
    k = classic_stable_single(s)
    s.call("k1", "Heartbeat", {"group_id": s.group(), "generation_id": k["generation_id"],
                               "member_id": k["member_id"]}, "heartbeat")
    s.call("admin", "DescribeGroups", {"groups": [s.group()]}, "describe")


@scenario
def classic_second_member_triggers_rebalance(s: Script) -> None:
    k1 = classic_stable_single(s, "k1")
    first = classic_join(s, "k2")
    pending = s.spawn("k2", "JoinGroup", jg(s, "k2", first["member_id"]))
    def rebalancing() -> bool:
        state = s.call("admin", "DescribeGroups", {"groups": [s.group()]}, record=False)["groups"][0]["group_state"]
        return state in ("PreparingRebalance", "Joining")  # groupcoord names it as its seed does (listed)

    s.wait_until(rebalancing)
    s.call("k1", "Heartbeat", {"group_id": s.group(), "generation_id": k1["generation_id"],
                               "member_id": k1["member_id"]}, "k1 heartbeat during rebalance")
    r1 = s.call("k1", "JoinGroup", jg(s, "k1", k1["member_id"]), "k1 rejoins")
    r2 = s.result(pending, "k2 join completes")
    leader, follower = (r1, r2) if r1["member_id"] == r1["leader"] else (r2, r1)
    lconn, fconn = ("k1", "k2") if leader is r1 else ("k2", "k1")
    fsync = s.spawn(fconn, "SyncGroup", {"group_id": s.group(), "generation_id": follower["generation_id"],
                                         "member_id": follower["member_id"], "protocol_type": "consumer",
                                         "protocol_name": "range", "assignments": []})
    s.call(lconn, "SyncGroup", {"group_id": s.group(), "generation_id": leader["generation_id"],
                                "member_id": leader["member_id"], "protocol_type": "consumer",
                                "protocol_name": "range",
                                "assignments": [{"member_id": leader["member_id"], "assignment": b"L"},
                                                {"member_id": follower["member_id"], "assignment": b"F"}]},
           "leader syncs")
    s.result(fsync, "follower sync relayed")
    s.call("admin", "DescribeGroups", {"groups": [s.group()]}, "describe")
    s.call("k1", "LeaveGroup", {"group_id": s.group(), "members": [
        {"member_id": k1["member_id"], "group_instance_id": None, "reason": "done"}]}, "k1 leaves")
    s.call("admin", "DescribeGroups", {"groups": [s.group()]}, "describe after leave")


@scenario
def classic_heartbeat_with_wrong_generation_is_illegal(s: Script) -> None:
    k = classic_stable_single(s)
    s.call("k1", "Heartbeat", {"group_id": s.group(), "generation_id": k["generation_id"] + 1,
                               "member_id": k["member_id"]}, "heartbeat gen+1")
    s.call("k1", "Heartbeat", {"group_id": s.group(), "generation_id": k["generation_id"],
                               "member_id": "nobody"}, "heartbeat unknown member")


@scenario
def classic_sync_with_wrong_generation_is_illegal(s: Script) -> None:
    k = classic_stable_single(s)
    s.call("k1", "SyncGroup", {"group_id": s.group(), "generation_id": k["generation_id"] + 1,
                               "member_id": k["member_id"], "protocol_type": "consumer", "protocol_name": "range",
                               "assignments": []}, "sync gen+1")


@scenario
def classic_join_with_inconsistent_protocol_type(s: Script) -> None:
    k = classic_stable_single(s)
    req = jg(s, "k2", "")
    req["protocol_type"] = "connect"
    s.call("k2", "JoinGroup", req, "k2 joins with protocol type connect")
    s.call("k1", "Heartbeat", {"group_id": s.group(), "generation_id": k["generation_id"],
                               "member_id": k["member_id"]}, "k1 heartbeat")


@scenario
def classic_join_with_invalid_session_timeout(s: Script) -> None:
    s.call("k1", "JoinGroup", {**jg(s, "k1", ""), "session_timeout_ms": 100}, "join session 100 ms")


@scenario
def classic_leave_of_unknown_member(s: Script) -> None:
    classic_stable_single(s)
    s.call("k2", "LeaveGroup", {"group_id": s.group(), "members": [
        {"member_id": "nobody", "group_instance_id": None, "reason": None}]}, "leave unknown")


@scenario
def classic_offset_commit_with_generation(s: Script) -> None:
    k = classic_stable_single(s)
    base = {"group_id": s.group(), "member_id": k["member_id"],
            "topics": [{"name": s.topic("a"), "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                               "committed_leader_epoch": -1,
                                                               "committed_metadata": None}]}]}
    s.call("k1", "OffsetCommit", {**base, "generation_id_or_member_epoch": k["generation_id"]}, "commit at gen")
    s.call("k1", "OffsetCommit", {**base, "generation_id_or_member_epoch": k["generation_id"] + 1},
           "commit at gen+1")
    s.call("k1", "OffsetCommit", {**base, "generation_id_or_member_epoch": k["generation_id"],
                                  "member_id": "nobody"}, "commit unknown member")
    fetch(s, None, -1, {"a": [0]})


@scenario
def classic_static_member_rejoins_with_new_member_id(s: Script) -> None:
    first = classic_join(s, "k1", instance="s1")
    r = s.call("k1", "JoinGroup", jg(s, "k1", first["member_id"] or "", instance="s1"), "join s1")
    mid = r["member_id"]
    s.call("k1", "SyncGroup", {"group_id": s.group(), "generation_id": r["generation_id"], "member_id": mid,
                               "group_instance_id": "s1", "protocol_type": "consumer", "protocol_name": "range",
                               "assignments": [{"member_id": mid, "assignment": b"x"}]}, "sync s1")
    s.call("k2", "JoinGroup", jg(s, "k2", "", instance="s1"), "s1 rejoins with no member id")
    s.call("k1", "Heartbeat", {"group_id": s.group(), "generation_id": r["generation_id"], "member_id": mid,
                               "group_instance_id": "s1"}, "old s1 heartbeats")


# --- describe / list ---------------------------------------------------------------------------------------

@scenario
def describe_unknown_groups(s: Script) -> None:
    describe(s, "nothing", "consumer describe unknown")
    s.call("admin", "DescribeGroups", {"groups": [s.group("nothing")]}, "classic describe unknown")


@scenario
def list_groups_by_type_and_state(s: Script) -> None:
    r = join(s, "m1", group="cg")
    settle(s, {"m1": r}, group="cg")
    classic_stable_single(s, "k1", group="kg")

    def listed(req: dict[str, Any], label: str) -> None:
        resp = s.call("admin", "ListGroups", req, record=False)
        # consumer group states compare case-insensitively here (see Script.normalise)
        mine = [(g[0], g[1], g[2].lower() if g[3] == "consumer" else g[2], g[3]) for g in resp["groups"]
                if s.normalise(g[0]).startswith("@")]
        s.note(label, {"error_code": resp["error_code"], "groups": sorted(mine)})

    listed({}, "list all")
    listed({"types_filter": ["consumer"]}, "list consumer")
    listed({"types_filter": ["classic"]}, "list classic")
    listed({"states_filter": ["Stable"]}, "list Stable")
    listed({"states_filter": ["stable"], "types_filter": ["consumer"]}, "list stable consumer")


@scenario
def consumer_describe_of_a_classic_group(s: Script) -> None:
    classic_stable_single(s)
    describe(s, label="consumer describe of classic group")


@scenario
def consumer_heartbeat_to_a_classic_group(s: Script) -> None:
    classic_stable_single(s)
    join(s, "m1", label="consumer join to a classic group")


@scenario
def classic_join_to_a_consumer_group(s: Script) -> None:
    r = join(s, "m1")
    settle(s, {"m1": r})
    s.call("k1", "JoinGroup", jg(s, "k1", ""), "classic join to consumer group")


@scenario
def find_coordinator_for_groups(s: Script) -> None:
    s.call("admin", "FindCoordinator", {"coordinator_keys": [s.group("x"), s.group("y")]}, "find")


@scenario
def consumer_group_states_are_upper_case(s: Script) -> None:
    """The one scenario that compares consumer group state names as sent (the others lower-case them)."""
    s.lower_states = False
    r = join(s, "m1")
    settle(s, {"m1": r})
    describe(s)
    resp = s.call("admin", "ListGroups", {"types_filter": ["consumer"]}, record=False)
    s.note("listed state", [g[2] for g in resp["groups"] if g[0] == s.group()])


@scenario
def epochs_advance_once_per_membership_change(s: Script) -> None:
    r1 = join(s, "m1", topics=("a", "b"), server_assignor="range")
    st = settle(s, {"m1": r1})
    r2 = join(s, "m2", topics=("a", "b"))
    st = settle(s, {"m1": {"member_epoch": st["m1"]["epoch"], "assignment": _asg(s, st["m1"]["owned"])},
                    "m2": r2})
    r3 = join(s, "m3", topics=("b",))
    settle(s, {**{m: {"member_epoch": st[m]["epoch"], "assignment": _asg(s, st[m]["owned"])} for m in st},
               "m3": r3})
    describe(s)


# --- group configs: KIP-1263 offload, session timeouts ------------------------------------------------------

def group_configs(s: Script, configs: dict[str, str], group: str = "g") -> None:
    s.call("admin", "AlterGroupConfigs", {"group_id": s.group(group), "configs": configs}, "alter group configs")


@scenario
def first_join_with_assignor_offload(s: Script) -> None:
    """KIP-1263: with the assignor offloaded, the first member of a new group gets the empty assignment at
    epoch 1 and its partitions (epoch 2) on a later heartbeat."""
    group_configs(s, {"consumer.assignor.offload.enable": "true"})
    r = join(s, "m1")
    st = {"epoch": r["member_epoch"], "owned": owned(r, s)}

    def assigned() -> bool:
        resp = s.call("m1", CGHB, {"group_id": s.group(), "member_id": s.mid("m1"), "member_epoch": st["epoch"],
                                   "topic_partitions": [(s.topic(t), p) for t, p in st["owned"]]}, record=False)
        st["epoch"] = resp["member_epoch"]
        if resp["assignment"] is not None:
            st["owned"] = owned(resp, s)
        return bool(st["owned"])

    s.wait_until(assigned)
    s.note("settled", {"epoch": st["epoch"], "owned": st["owned"]})
    describe(s)


@scenario
def silent_member_is_fenced_after_the_session_timeout(s: Script) -> None:
    group_configs(s, {"consumer.heartbeat.interval.ms": "100", "consumer.session.timeout.ms": "2000"})
    rs = {m: join(s, m) for m in ("m1", "m2")}
    st = settle(s, rs)

    def m2_gone() -> bool:  # m1 keeps heartbeating (unrecorded) while m2 stays silent
        resp = s.call("m1", CGHB, {"group_id": s.group(), "member_id": s.mid("m1"),
                                   "member_epoch": st["m1"]["epoch"],
                                   "topic_partitions": [(s.topic(t), p) for t, p in st["m1"]["owned"]]},
                      record=False)
        st["m1"]["epoch"] = resp["member_epoch"]
        if resp["assignment"] is not None:
            st["m1"]["owned"] = owned(resp, s)
        members = s.call("admin", "ConsumerGroupDescribe", {"group_ids": [s.group()]}, record=False)
        return len(members["groups"][0]["members"]) == 1 and len(st["m1"]["owned"][0][1]) == 6

    s.wait_until(m2_gone)
    hb(s, "m2", st["m2"]["epoch"], st["m2"]["owned"], label="m2 heartbeats after its session expired")
    describe(s)


# --- more invalid field combinations -------------------------------------------------------------------------

@scenario
def join_with_empty_instance_id_is_invalid(s: Script) -> None:
    join(s, "m1", instance_id="")


@scenario
def join_with_empty_rack_id_is_invalid(s: Script) -> None:
    join(s, "m1", rack_id="")


@scenario
def join_with_topic_names_and_regex(s: Script) -> None:
    r = join(s, "m1", subscribed_topic_regex=bracket_last_letter(s.topic("b")))
    if r["error_code"] == 0:  # wait (unrecorded) until the regex is resolved and b's partitions assigned
        st = {"epoch": r["member_epoch"], "owned": owned(r, s)}

        def has_b() -> bool:
            resp = s.call("m1", CGHB, {"group_id": s.group(), "member_id": s.mid("m1"),
                                       "member_epoch": st["epoch"],
                                       "topic_partitions": [(s.topic(t), p) for t, p in st["owned"]]},
                          record=False)
            st["epoch"] = resp["member_epoch"]
            if resp["assignment"] is not None:
                st["owned"] = owned(resp, s)
            return any(t == "b" for t, _ in st["owned"])

        s.wait_until(has_b)
    describe(s)


@scenario
def heartbeat_with_epoch_and_no_member_id_is_invalid(s: Script) -> None:
    r = join(s, "m1")
    s.call("m1", CGHB, {"group_id": s.group(), "member_id": "", "member_epoch": r["member_epoch"]},
           "hb without member id")


@scenario
def leave_of_an_unknown_group(s: Script) -> None:
    hb(s, "m1", -1, label="leave unknown group")


@scenario
def commit_with_too_large_metadata(s: Script) -> None:
    r = join(s, "m1")
    req = {"group_id": s.group(), "generation_id_or_member_epoch": r["member_epoch"], "member_id": s.mid("m1"),
           "topics": [{"name": s.topic("a"), "partitions": [
               {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                "committed_metadata": "x" * 5000},
               {"partition_index": 1, "committed_offset": 1, "committed_leader_epoch": -1,
                "committed_metadata": "ok"}]}]}
    s.call("m1", "OffsetCommit", req, "commit, one metadata over 4096 bytes")
    fetch(s, "m1", r["member_epoch"], {"a": [0, 1]})


@scenario
def fetch_all_offsets_with_member_epoch(s: Script) -> None:
    r = join(s, "m1", topics=("a", "b"))
    st = settle(s, {"m1": r})
    commit(s, "m1", st["m1"]["epoch"], {"a": [0, 3], "b": [1]}, offset=42)
    fetch(s, "m1", st["m1"]["epoch"], None, label="fetch all with member epoch")


@scenario
def classic_join_without_protocols(s: Script) -> None:
    req = jg(s, "k1", "")
    req["protocols"] = []
    s.call("k1", "JoinGroup", req, "join with no protocols")


@scenario
def classic_requests_to_an_unknown_group(s: Script) -> None:
    s.call("k1", "Heartbeat", {"group_id": s.group(), "generation_id": 1, "member_id": "nobody"}, "heartbeat")
    s.call("k1", "SyncGroup", {"group_id": s.group(), "generation_id": 1, "member_id": "nobody",
                               "protocol_type": "consumer", "protocol_name": "range", "assignments": []}, "sync")
    s.call("k1", "LeaveGroup", {"group_id": s.group(), "members": [
        {"member_id": "nobody", "group_instance_id": None, "reason": None}]}, "leave")


@scenario
def classic_sync_of_unknown_member(s: Script) -> None:
    k = classic_stable_single(s)
    s.call("k2", "SyncGroup", {"group_id": s.group(), "generation_id": k["generation_id"], "member_id": "nobody",
                               "protocol_type": "consumer", "protocol_name": "range", "assignments": []},
           "sync of unknown member")


def _classic_members_are(s: Script, n: int) -> bool:
    return len(s.call("admin", "DescribeGroups", {"groups": [s.group()]}, record=False)["groups"][0]["members"]) == n


@scenario
def classic_three_members_keep_the_first_leader(s: Script) -> None:
    """k1 leads a stable group; k2 and k3 join one after the other (each parks); k1 rejoins: all three
    JoinGroups complete in one generation, k1 still the leader and the only one given the members."""
    k1 = classic_stable_single(s, "k1")
    pending = {}
    for n, c in enumerate(("k2", "k3"), start=2):
        first = classic_join(s, c)
        pending[c] = s.spawn(c, "JoinGroup", jg(s, c, first["member_id"]))
        s.wait_until(functools.partial(_classic_members_are, s, n))
    s.call("k1", "JoinGroup", jg(s, "k1", k1["member_id"]), "k1 rejoins")
    for c in ("k2", "k3"):
        s.result(pending[c], f"{c} join completes")
