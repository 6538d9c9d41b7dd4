"""The web view in headless Chromium (Debian's, driven by Playwright) against `groupcoord serve` with real members.

The page is loaded once; a second member joins while it is open, and the page shows the rebalance as it
happens (RECONCILING with partitions pending revocation, the new member, then STABLE) without a reload.
Screenshots: test-artifacts/web/<test name>/*.png (see tests/web/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from playwright.sync_api import expect, sync_playwright

from groupcoord.clients.credentials import Credentials
from groupcoord.clients.group_member import GroupMember
from tests.web.conftest import Served, chromium_path, serve, stop, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

GROUP = "payments-processor"
PARTITIONS = 6


def _produce(bootstrap: str, counts: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for p, n in counts.items():
        for i in range(n):
            producer.produce("orders", value=b"x%d" % i, partition=p)
    assert producer.flush(30) == 0


@pytest.fixture
def served() -> Iterator[Served]:
    # sessions of 10 s: a member must not lose its lease because a loaded machine delayed a heartbeat
    s = serve("--topic", f"orders:{PARTITIONS}", "--topic", "audit:3", "--set",
              "group.consumer.session.timeout.ms=10000", embedded_kafka=True)
    yield s
    stop(s)


def test_page_shows_a_rebalance_live_as_a_member_joins(served: Served, artifacts: Path) -> None:
    assert served.bootstrap is not None
    _produce(served.bootstrap, {p: 40 + 10 * p for p in range(PARTITIONS)})
    first = GroupMember(served.grpc, GROUP, ["orders"], defer_revocation=True, rebalance_timeout_ms=30_000).start()
    others = [GroupMember(served.grpc, f"audit-reader-{i}", ["audit"]).start() for i in range(3)]
    second: GroupMember | None = None
    try:
        wait_for(lambda: len(first.assignment()) == PARTITIONS, what="the first member owning every partition")
        assert first.session_timeout_ms == 10_000
        # committed offsets behind the log end: the page shows lag per partition and in total
        assert not any(first.commit_offsets({("orders", p): 25 for p in range(PARTITIONS)}).values())
        for m in others:
            wait_for(m.wait_joined, what="the audit readers joining")

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path(), headless=True,
                                         args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(served.http + "/")
            row = page.locator(f'#groups tr[data-group="{GROUP}"]')
            expect(row).to_contain_text("STABLE", timeout=30_000)
            expect(row).to_contain_text("consumer")
            # lag: 40+50+...+90 produced = 390, 6 x 25 committed = 150 -> 240 behind
            expect(row.locator("td").nth(8)).to_have_text("240", timeout=30_000)
            expect(page.locator("#groups tbody tr")).to_have_count(4)
            page.screenshot(path=str(artifacts / "01-groups-list.png"), full_page=True)

            row.locator("a").click()
            expect(page.locator("h1")).to_contain_text(GROUP)
            expect(page.locator("h1 .badge")).to_have_text("STABLE", timeout=30_000)
            expect(page.locator("#members tbody tr[data-member]")).to_have_count(1)
            # orders-0: 40 produced, 25 committed -> lag 15
            expect(page.locator("#partitions tbody tr").first.locator("td")).to_have_text(
                ["orders", "0", "25", "40", "15", first.member_id[:8] + "…"], timeout=30_000)
            page.evaluate("window.__loadedOnce = true")  # gone if the page reloads
            page.screenshot(path=str(artifacts / "02-group-stable-one-member.png"), full_page=True)

            # A member joins while the page is open. The first member defers revoking, so the group stays
            # RECONCILING with partitions pending revocation until it releases them.
            second = GroupMember(served.grpc, GROUP, ["orders"], rebalance_timeout_ms=30_000).start()
            expect(page.locator("#members tbody tr[data-member]")).to_have_count(2, timeout=30_000)
            expect(page.locator("h1 .badge")).to_have_text("RECONCILING", timeout=30_000)
            wait_for(lambda: first.pending_revocation(), what="partitions pending revocation at the first member")
            first_row = page.locator(f'#members tr[data-member="{first.member_id}"]')
            expect(first_row.locator(".pending")).to_contain_text("orders:", timeout=30_000)
            expect(first_row.locator(".diff-del").first).to_be_visible()  # owned, leaving: struck through
            second_row = page.locator(f'#members tr[data-member="{second.member_id}"]')
            expect(second_row.locator(".diff-add").first).to_be_visible()  # coming once released
            expect(page.locator("#timeline")).to_contain_text("RECONCILING")
            page.screenshot(path=str(artifacts / "03-rebalance-in-progress.png"), full_page=True)

            first.release()
            expect(page.locator("h1 .badge")).to_have_text("STABLE", timeout=30_000)
            expect(page.locator("#members tbody .pending", has_text="orders:")).to_have_count(0, timeout=30_000)
            expect(page.locator("#members tbody .diff-add")).to_have_count(0, timeout=30_000)
            joined = second.member_id[:8]
            expect(page.locator("#timeline")).to_contain_text("+" + joined)
            assert page.evaluate("window.__loadedOnce") is True, "the page reloaded"
            page.screenshot(path=str(artifacts / "04-rebalanced-stable-two-members.png"), full_page=True)

            page.goto(served.http + "/#/")
            expect(page.locator(f'#groups tr[data-group="{GROUP}"]')).to_contain_text("STABLE", timeout=30_000)
            expect(page.locator(f'#groups tr[data-group="{GROUP}"] td').nth(4)).to_have_text("2")
            # the list is live too: a group that appears is listed without a reload
            late = GroupMember(served.grpc, "late-joiner", ["audit"]).start()
            others.append(late)
            expect(page.locator('#groups tr[data-group="late-joiner"]')).to_have_count(1, timeout=30_000)
            expect(page.locator("#groups tbody tr")).to_have_count(5)
            page.screenshot(path=str(artifacts / "05-groups-list-after.png"), full_page=True)
            browser.close()
        assert len(first.assignment()) + len(second.assignment()) == PARTITIONS
        assert sorted(p.name for p in artifacts.iterdir()) == [
            "01-groups-list.png", "02-group-stable-one-member.png", "03-rebalance-in-progress.png",
            "04-rebalanced-stable-two-members.png", "05-groups-list-after.png"]
    finally:
        for m in [first, *others, *([second] if second is not None else [])]:
            m.close()


def test_with_acls_the_page_asks_for_a_token_and_lists_only_the_groups_it_may_describe(
        tmp_path: Path, artifacts: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[tokens]\n"admin-token-0123456789abcdef" = "User:admin"\n'
                      '"alice-token-0123456789abcdef" = "User:alice"\n')
    acls = tmp_path / "acls.toml"
    acls.write_text(
        '[[acl]]\nprincipal = "User:admin"\noperation = "ALL"\nresource_type = "GROUP"\npattern_type = "LITERAL"\n'
        'resource_name = "*"\npermission = "ALLOW"\n\n'
        '[[acl]]\nprincipal = "User:alice"\noperation = "DESCRIBE"\nresource_type = "GROUP"\n'
        'pattern_type = "PREFIXED"\nresource_name = "team-a"\npermission = "ALLOW"\n')
    served = serve("--topic", "orders:2", "--auth-tokens", str(tokens), "--acl-file", str(acls))
    admin = Credentials(token="admin-token-0123456789abcdef")
    members = [GroupMember(served.grpc, gid, ["orders"], credentials=admin).start()
               for gid in ("team-a-orders", "team-b-billing")]
    try:
        for m in members:
            assert m.wait_joined(30)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path(), headless=True,
                                         args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": 1200, "height": 500})
            page.goto(served.http + "/")
            expect(page.locator("#login-form")).to_be_visible(timeout=30_000)
            page.screenshot(path=str(artifacts / "01-token-asked.png"))
            page.fill("#token", "alice-token-0123456789abcdef")
            page.click("#login-form button")
            expect(page.locator('#groups tr[data-group="team-a-orders"]')).to_have_count(1, timeout=30_000)
            expect(page.locator("#groups tbody tr")).to_have_count(1)  # team-b-billing is not DESCRIBEd to alice
            page.screenshot(path=str(artifacts / "02-signed-in-as-alice.png"))
            browser.close()
    finally:
        for m in members:
            m.close()
        stop(served)
