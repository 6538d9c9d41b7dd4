"""The web view's JSON API over real HTTP, against `groupcoord serve --http-port` with real members."""

from __future__ import annotations

import threading
import time
import urllib.request
from pathlib import Path

import pytest

from groupcoord.clients.credentials import Credentials
from groupcoord.clients.group_member import GroupMember
from tests.web.conftest import serve, stop, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ADMIN_TOKEN = "admin-token-0123456789abcdef"
ALICE_TOKEN = "alice-token-0123456789abcdef"


def test_groups_api_pages_filters_and_describes_a_group_with_its_timeline() -> None:
    served = serve("--topic", "orders:4")
    members = [GroupMember(served.grpc, f"g-{i:02d}", ["orders"]).start() for i in range(5)]
    try:
        for m in members:
            wait_for(lambda m=m: len(m.assignment()) == 4,  # type: ignore[misc]
                     what="each member owning its group's partitions")
        status, page = served.get("/api/groups?offset=1&limit=2")
        assert status == 200
        assert page["total"] == 5 and page["offset"] == 1 and page["limit"] == 2
        assert [g["group_id"] for g in page["groups"]] == ["g-01", "g-02"]
        wait_for(lambda: served.get("/api/groups")[1]["states"] == {"STABLE": 5}, what="every group STABLE")
        g = served.get("/api/groups?q=G-03")[1]["groups"]
        assert len(g) == 1 and g[0]["group_id"] == "g-03"
        assert {k: g[0][k] for k in ("type", "protocol", "state", "members", "group_epoch", "target_epoch")} == {
            "type": "consumer", "protocol": "consumer", "state": "STABLE", "members": 1, "group_epoch": 2,
            "target_epoch": 2}
        assert g[0]["lag"] is None  # no Kafka cluster: no log end offsets
        assert served.get("/api/groups?state=ASSIGNING")[1]["total"] == 0
        assert served.get("/api/groups?type=classic")[1]["total"] == 0

        status, d = served.get("/api/group?id=g-03")
        assert status == 200
        [member] = d["member_list"]
        assert member["member_id"] == members[3].member_id and member["state"] == "STABLE"
        assert member["assignment"] == member["target_assignment"] == {"orders": [0, 1, 2, 3]}
        assert member["partitions_pending_revocation"] == {}
        states = [(e["previous_state"], e["state"]) for e in d["timeline"]]
        assert states == [("", "ASSIGNING"), ("ASSIGNING", "RECONCILING"), ("RECONCILING", "STABLE")]
        assert d["timeline"][0]["joined"] == [members[3].member_id]
        assert {c["name"] for c in d["configs"]} >= {"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"}

        d = served.get("/api/group?id=g-03&rows=0")[1]  # a group page lists the first `rows` members and partitions
        assert (d["member_list"], d["members"], d["partitions"], d["partitions_total"]) == ([], 1, [], 4)
        assert served.get("/api/group?id=nope")[0] == 404
        assert served.get("/api/groups?offset=x")[0] == 400
        assert served.get("/api/nothing")[0] == 404
    finally:
        for m in members:
            m.close()
        stop(served)


def test_a_long_poll_answers_as_soon_as_a_group_changes() -> None:
    served = serve("--topic", "orders:2")
    member: GroupMember | None = None
    try:
        version = served.get("/api/groups")[1]["version"]
        answered: list[tuple[float, dict]] = []

        def poll() -> None:
            answered.append((time.monotonic(), served.get(f"/api/groups?wait={version}")[1]))

        poller = threading.Thread(target=poll)
        poller.start()
        time.sleep(0.5)
        assert not answered, "a long poll with nothing changed must wait"
        joined_at = time.monotonic()
        member = GroupMember(served.grpc, "live", ["orders"]).start()
        poller.join(timeout=30)
        assert answered, "the long poll did not answer after a change"
        at, page = answered[0]
        assert page["version"] > version and [g["group_id"] for g in page["groups"]] == ["live"]
        assert at - joined_at < 8  # well before the 10 s long-poll limit: it answered on the change

        # a long poll in flight does not hold up a graceful stop
        member.close(leave=False)  # sends nothing: the next poll has nothing to answer on
        member = None
        latest = served.get("/api/groups")[1]["version"]
        ended: list[str] = []

        def wait_long() -> None:
            try:
                served.get(f"/api/groups?wait={latest}")
                ended.append("answered")
            except OSError as e:  # http.client.RemoteDisconnected: the server closed it on stopping
                ended.append(type(e).__name__)

        waiting = threading.Thread(target=wait_long, daemon=True)
        waiting.start()
        time.sleep(0.3)
        assert stop(served) == 0, "".join(served.output)
        waiting.join(timeout=30)
        assert ended, "the long poll neither answered nor ended when the server stopped"
    finally:
        if member is not None:
            member.close()
        stop(served)


def test_web_view_refuses_a_host_header_that_is_not_loopback() -> None:
    """While bound to loopback, a page served from another name (DNS rebinding) must not read the API."""
    served = serve("--topic", "orders:1")
    try:
        assert served.get("/api/groups", headers={"Host": "attacker.example:8080"})[0] == 421
        assert served.get("/api/groups", headers={"Host": "localhost:1234"})[0] == 200
        req = urllib.request.Request(served.http + "/api/groups", method="POST")
        try:
            urllib.request.urlopen(req, timeout=10)
            raise AssertionError("POST must be refused")
        except urllib.error.HTTPError as e:
            assert e.code == 405
    finally:
        stop(served)


def test_with_acls_the_api_needs_a_token_and_shows_only_groups_the_principal_may_describe(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(f'[tokens]\n"{ADMIN_TOKEN}" = "User:admin"\n"{ALICE_TOKEN}" = "User:alice"\n')
    acls = tmp_path / "acls.toml"
    acls.write_text(
        '[[acl]]\nprincipal = "User:admin"\noperation = "ALL"\nresource_type = "GROUP"\npattern_type = "LITERAL"\n'
        'resource_name = "*"\npermission = "ALLOW"\n\n'
        '[[acl]]\nprincipal = "User:alice"\noperation = "DESCRIBE"\nresource_type = "GROUP"\n'
        'pattern_type = "PREFIXED"\nresource_name = "team-a"\npermission = "ALLOW"\n')
    served = serve("--topic", "orders:2", "--auth-tokens", str(tokens), "--acl-file", str(acls))
    admin = Credentials(token=ADMIN_TOKEN)
    members = [GroupMember(served.grpc, gid, ["orders"], credentials=admin).start() for gid in ("team-a-1", "team-b-1")]
    try:
        for m in members:
            assert m.wait_joined(30)
        assert served.get("/api/groups")[0] == 401
        assert served.get("/api/groups", headers={"Authorization": "Bearer wrong-token-0123456789"})[0] == 401
        as_admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        as_alice = {"Authorization": f"Bearer {ALICE_TOKEN}"}
        assert served.get("/api/groups", as_admin)[1]["total"] == 2
        page = served.get("/api/groups", as_alice)[1]
        assert [g["group_id"] for g in page["groups"]] == ["team-a-1"] and page["total"] == 1
        assert served.get("/api/group?id=team-b-1", as_alice)[0] == 404
        status, d = served.get("/api/group?id=team-a-1", as_alice)
        assert status == 200 and "configs" not in d  # DESCRIBE_CONFIGS not granted
        assert "configs" in served.get("/api/group?id=team-a-1", as_admin)[1]
        status, html = served.get("/")  # the page itself holds no data: it asks for a token
        assert status == 200 and b"--auth-tokens" in html
    finally:
        for m in members:
            m.close()
        stop(served)


def test_a_classic_group_is_listed_with_its_type_protocol_state_and_generation() -> None:
    from groupcoord.clients.classic_member import ClassicGroupMember

    served = serve("--topic", "orders:4")
    member = ClassicGroupMember(served.grpc, "legacy", ["orders"], partitions={"orders": 4},
                                session_timeout_ms=6000, heartbeat_interval_ms=200).start()
    try:
        assert member.wait_stable(30)
        [g] = wait_for(lambda: served.get("/api/groups?type=classic")[1]["groups"], what="the classic group")
        assert (g["group_id"], g["type"], g["protocol"], g["members"]) == ("legacy", "classic", "consumer", 1)
        assert g["state"] == "Stable" and g["group_epoch"] >= 1  # Kafka's classic state name; the generation
        d = served.get("/api/group?id=legacy")[1]
        assert [m["member_id"] for m in d["member_list"]] == [member.member_id]
        assert d["member_list"][0]["assignment_bytes"] > 0  # the leader's assignment, opaque to the coordinator
        assert [(e["state"], e["members"]) for e in d["timeline"]][-1] == ("Stable", 1)
    finally:
        member.close()
        stop(served)


def test_connections_past_the_limit_are_answered_503_until_some_close() -> None:
    import socket
    from urllib.parse import urlsplit

    from groupcoord.coordinator.runtime.web import MAX_CONNECTIONS

    served = serve("--topic", "orders:1")
    url = urlsplit(served.http)
    idle: list[socket.socket] = []
    try:
        for _ in range(MAX_CONNECTIONS):  # connected, sending nothing: each holds a handler until its read deadline
            idle.append(socket.create_connection((url.hostname, url.port), timeout=10))
        wait_for(lambda: served.get("/api/groups")[0] == 503, what="a 503 past the connection limit")
        for s in idle:
            s.close()
        idle.clear()
        wait_for(lambda: served.get("/api/groups")[0] == 200, what="answers again once connections closed")
    finally:
        for s in idle:
            s.close()
        stop(served)


def test_a_share_group_is_listed_with_its_type_and_shown_with_its_member() -> None:
    import grpc

    from groupcoord.wire.v1 import share_pb2 as spb
    from groupcoord.wire.v1 import share_pb2_grpc as spb_grpc

    served = serve("--topic", "orders:2")
    channel = grpc.insecure_channel(served.grpc)
    try:
        stub = spb_grpc.ShareGroupCoordinatorStub(channel)
        req = spb.ShareGroupHeartbeatRequest(group_id="shared", member_id="share-member-1", member_epoch=0)
        req.subscribed_topic_names.values.append("orders")
        assert stub.ShareGroupHeartbeat(req, timeout=30).error_code == 0
        [g] = wait_for(lambda: served.get("/api/groups?type=share")[1]["groups"], what="the share group")
        assert (g["group_id"], g["type"], g["members"]) == ("shared", "share", 1)
        d = served.get("/api/group?id=shared")[1]
        assert [m["member_id"] for m in d["member_list"]] == ["share-member-1"]
        assert d["timeline"] and d["timeline"][0]["joined"] == ["share-member-1"]
        assert served.get("/api/groups?type=consumer")[1]["total"] == 0
    finally:
        channel.close()
        stop(served)


def test_a_streams_group_is_listed_with_its_type_and_shown_with_its_members() -> None:
    import grpc

    from groupcoord.wire.v1 import streams_pb2_grpc
    from tests.streams.test_grpc_streams_group import STREAMS_FAST, TOPICS, Member

    served = serve(*(a for name, n in TOPICS.items() for a in ("--topic", f"{name}:{n}")),
                   *(a for k, v in STREAMS_FAST.items() for a in ("--set", f"{k}={v}")))
    channel = grpc.insecure_channel(served.grpc)
    try:
        member = Member(streams_pb2_grpc.StreamsGroupCoordinatorStub(channel), "streams-member-1", "process-1")
        member.beat()
        wait_for(lambda: member.beat() and member.tasks(), what="the streams member getting tasks")
        [g] = wait_for(lambda: served.get("/api/groups?type=streams")[1]["groups"], what="the streams group")
        assert (g["group_id"], g["type"], g["members"]) == ("app", "streams", 1)
        d = served.get("/api/group?id=app")[1]
        assert [m["member_id"] for m in d["member_list"]] == ["streams-member-1"]
        assert d["timeline"] and d["timeline"][0]["joined"] == ["streams-member-1"]
    finally:
        channel.close()
        stop(served)
