"""group.streams.rack.aware.assignment.tags (and the group's streams.rack.aware.assignment.tags) reach the
streams assignor with the members' client tags: standbys go to the other zone."""

from __future__ import annotations

from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from tests.core.streams_context import GROUP, Ctx, StreamsSettings

BASE = dict(assignor_offload_enable=False, initial_rebalance_delay_ms=0, assignment_interval_ms=0,
            max_warmup_replicas=0, num_standby_replicas=1)
LAYOUT = {"a": "z1", "b": "z2", "c": "z1", "d": "z2"}  # tag-blind, a standby lands in its active's zone


def run(ctx: Ctx) -> dict[str, str]:
    for m, zone in LAYOUT.items():
        ctx.join(m, client_tags=(("zone", zone),))
    g = ctx.sg.groups[GROUP]
    return {m: LAYOUT[m] for m in g.members}


def standby_zones_differ(ctx: Ctx) -> bool:
    g = ctx.sg.groups[GROUP]
    zone_of_active = {t: LAYOUT[m] for m, a in g.target.items() for t in a.active}
    return all(LAYOUT[m] != zone_of_active[t] for m, a in g.target.items() for t in a.standby)


def test_broker_tags_put_each_standby_in_the_other_zone() -> None:
    ctx = Ctx(StreamsSettings(**BASE, rack_aware_assignment_tags=("zone",)))  # type: ignore[arg-type]
    run(ctx)
    g = ctx.sg.groups[GROUP]
    assert sum(len(a.standby) for a in g.target.values()) == 4, "one standby per stateful task"
    assert standby_zones_differ(ctx)


def test_without_tags_some_standby_shares_its_actives_zone() -> None:
    ctx = Ctx(StreamsSettings(**BASE))  # type: ignore[arg-type]
    run(ctx)
    assert not standby_zones_differ(ctx), "the layout must be one the tags change"


def test_a_group_override_sets_the_tags() -> None:
    ctx = Ctx(StreamsSettings(**BASE))  # type: ignore[arg-type]
    ctx.set_group_config({"streams.rack.aware.assignment.tags": "zone"})
    run(ctx)
    assert standby_zones_differ(ctx)


def test_a_repeated_tag_key_is_an_invalid_config() -> None:
    ctx = Ctx(StreamsSettings(**BASE))  # type: ignore[arg-type]
    try:
        ctx.set_group_config({"streams.rack.aware.assignment.tags": "zone,zone"})
    except CoordinatorError as e:
        assert e.code == Errors.INVALID_CONFIG
    else:
        raise AssertionError("accepted a repeated key")


def test_a_member_without_a_configured_tag_key_gets_missing_client_tags_last() -> None:
    from groupcoord.coordinator.core.streams.topology import StreamsStatus

    ctx = Ctx(StreamsSettings(**BASE, rack_aware_assignment_tags=("zone", "rack")))  # type: ignore[arg-type]
    r = ctx.join("a", client_tags=(("zone", "z1"),))
    assert [(s.code, s.detail) for s in r.status or ()] == [(
        StreamsStatus.MISSING_CLIENT_TAGS,
        "Missing required client tags for rack-aware standby assignment: [rack]. Configure them via "
        "'client.tag.<tagKey>' in your Streams config.")]
    r = ctx.join("b", client_tags=(("zone", "z2"), ("rack", "r1")))
    assert not r.status, "a member with every key gets no status"
