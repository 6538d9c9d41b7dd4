"""The web view with many groups: JSON size and time, and page load in headless Chromium.

    python -m bench.web_view_bench [--groups 1000] [--members 3] [--repeats 20] [--screenshot FILE.png]

Starts `groupcoord serve --http-port` as a subprocess with the embedded Kafka (so lag has end offsets), joins
`--members` members into each of `--groups` groups with raw ConsumerGroupHeartbeat calls (they stay members for
the session timeout; nothing else loads the server), commits an offset per partition, then measures:
- the JSON of the groups list (a page of 50 and of 200), a filtered list, and one group's detail: bytes, the
  server's build time (`built_ms`) and the client's wall time, medians over `--repeats`;
- the page in Debian's chromium (Playwright): navigation to the list until its 50 rows are drawn, and to a
  group until its members are drawn, medians over 5 loads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import grpc
from confluent_kafka import Producer

from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.web.conftest import chromium_path, serve, stop

TOPIC_PARTITIONS = 12
WIDE_PARTITIONS = 1000


def join_big_group(stub: Any, members: int) -> None:
    """One group `big` of `members` members on the `wide` topic, its first member committing every partition."""
    futures = []
    for _ in range(members):
        req = pb.ConsumerGroupHeartbeatRequest(group_id="big", member_id=str(uuid.uuid4()), member_epoch=0,
                                               rebalance_timeout_ms=60_000)
        req.subscribed_topic_names.values.append("wide")
        req.topic_partitions.SetInParent()
        futures.append((req.member_id, stub.ConsumerGroupHeartbeat.future(req, timeout=60)))
    for _, f in futures:
        assert f.result().error_code == 0
    member_id, joined = futures[0]
    req = pb.OffsetCommitRequest(group_id="big", member_id=member_id,
                                 generation_id_or_member_epoch=joined.result().member_epoch)
    t = req.topics.add(name="wide")
    for p in range(WIDE_PARTITIONS):
        t.partitions.add(partition_index=p, committed_offset=0, committed_leader_epoch=-1)
    resp = stub.OffsetCommit(req, timeout=30)
    assert not any(p.error_code for t in resp.topics for p in t.partitions)


def populate(target: str, bootstrap: str, groups: int, members: int, big: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in range(TOPIC_PARTITIONS):
        for i in range(100 + 10 * p):
            producer.produce("orders", value=b"%d" % i, partition=p)
    producer.flush(30)
    channel = grpc.insecure_channel(target)
    stub = pb_grpc.GroupCoordinatorStub(channel)
    futures = []
    committer: dict[str, tuple[str, Any]] = {}  # group -> (its first member, that member's join response)
    for g in range(groups):
        gid = f"group-{g:05d}"
        for k in range(members):
            req = pb.ConsumerGroupHeartbeatRequest(group_id=gid, member_id=str(uuid.uuid4()),
                                                   member_epoch=0, rebalance_timeout_ms=60_000)
            req.subscribed_topic_names.values.append("orders")
            req.topic_partitions.SetInParent()
            future = stub.ConsumerGroupHeartbeat.future(req, timeout=60)
            futures.append(future)
            if k == 0:
                committer[gid] = (req.member_id, future)
        if len(futures) >= 500:
            for f in futures:
                assert f.result().error_code == 0
            futures.clear()
    for f in futures:
        assert f.result().error_code == 0
    for g in range(groups):  # the first member commits an offset per partition, behind the log end
        gid = f"group-{g:05d}"
        member_id, joined = committer[gid]
        req = pb.OffsetCommitRequest(group_id=gid, member_id=member_id,
                                     generation_id_or_member_epoch=joined.result().member_epoch)
        t = req.topics.add(name="orders")
        for p in range(TOPIC_PARTITIONS):
            t.partitions.add(partition_index=p, committed_offset=50 + g % 40, committed_leader_epoch=-1)
        resp = stub.OffsetCommit(req, timeout=30)
        assert not any(p.error_code for t in resp.topics for p in t.partitions), resp
    if big:
        join_big_group(stub, big)
    channel.close()


def timed_get(url: str) -> tuple[float, int, dict[str, Any]]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as r:
        body = r.read()
    return (time.perf_counter() - started) * 1000, len(body), json.loads(body)


def json_rows(http: str, repeats: int, groups: int) -> list[tuple[str, int, float, float]]:
    rows = []
    middle = f"group-{groups // 2:05d}"
    for label, path in (("groups list, page of 50", "/api/groups?limit=50"),
                        ("groups list, page of 200", "/api/groups?limit=200"),
                        ("groups list, last page of 50", f"/api/groups?offset={max(0, groups - 50)}&limit=50"),
                        ("groups list filtered (q=0099)", "/api/groups?q=0099&limit=50"),
                        ("one group's detail", "/api/group?id=" + middle),
                        ("the group of --big-group members", "/api/group?id=big"),
                        ("the same, all rows", "/api/group?id=big&rows=100000")):
        walls, builts, size = [], [], 0
        for _ in range(repeats):
            wall, size, data = timed_get(http + path)
            walls.append(wall)
            builts.append(data["built_ms"])
        rows.append((label, size, statistics.median(builts), statistics.median(walls)))
    return rows


def page_rows(http: str, screenshot: Path | None, groups: int, members: int,
              big: int) -> list[tuple[str, float]]:
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        for label, url, selector, count in (
                ("groups list (50 rows drawn)", http + "/#/", "#groups tbody tr[data-group]", 50),
                ("group page (members drawn)", http + f"/#/group/group-{groups // 2:05d}",
                 "#members tbody tr[data-member]", members),
                ("group of --big-group members (first 200 drawn)", http + "/#/group/big",
                 "#members tbody tr[data-member]", min(big, 200))):
            times = []
            for _ in range(5):
                page.goto("about:blank")
                started = time.perf_counter()
                page.goto(url)
                page.locator(selector).nth(count - 1).wait_for(timeout=60_000)
                times.append((time.perf_counter() - started) * 1000)
            out.append((label, statistics.median(times)))
            if screenshot is not None and "list" in label:
                page.screenshot(path=str(screenshot), full_page=False)
        browser.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--members", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--big-group", type=int, default=1000, help="members of one more group, on a topic of "
                                                                f"{WIDE_PARTITIONS} partitions")
    ap.add_argument("--screenshot", type=Path, default=None)
    ap.add_argument("--quick", action="store_true", help="100 groups, 5 repeats")
    args = ap.parse_args()
    if args.quick:
        args.groups, args.repeats, args.big_group = 100, 5, 100
    served = serve("--topic", f"orders:{TOPIC_PARTITIONS}", "--topic", f"wide:{WIDE_PARTITIONS}",
                   "--set", "group.consumer.session.timeout.ms=60000",
                   "--set", "group.consumer.max.session.timeout.ms=60000", embedded_kafka=True)
    try:
        assert served.bootstrap is not None
        started = time.perf_counter()
        populate(served.grpc, served.bootstrap, args.groups, args.members, args.big_group)
        print(f"{args.groups} groups x {args.members} members (and one of {args.big_group}) joined and committed "
              f"in {time.perf_counter() - started:.1f} s")
        time.sleep(3)  # the lag snapshot refreshes every 200 ms
        print(f"\n{'JSON API':<40} {'bytes':>9} {'server ms':>10} {'wall ms':>9}")
        for label, size, built, wall in json_rows(served.http, args.repeats, args.groups):
            label = label.replace("--big-group", f"{args.big_group:,}")
            print(f"{label:<40} {size:>9,} {built:>10.2f} {wall:>9.2f}")
        print(f"\n{'page in headless chromium':<40} {'load ms':>9}")
        for label, ms in page_rows(served.http, args.screenshot, args.groups, args.members, args.big_group):
            label = label.replace("--big-group", f"{args.big_group:,}")
            print(f"{label:<40} {ms:>9.0f}")
    finally:
        stop(served)
    return 0


if __name__ == "__main__":
    sys.exit(main())
