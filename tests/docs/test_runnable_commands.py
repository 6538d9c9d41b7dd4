"""Every command the README and the docs mark runnable works as written (tests/docs/runnable.py says how a block
is marked). Each page runs in a subprocess in a network namespace of its own (`unshare --net`, loopback only), so
the documented default ports are free; where namespaces are not allowed the page runs in this one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.runnable import REPO, extract, pages

PAGES = [p for p in pages() if extract(p)]


def _isolated() -> list[str]:
    """The prefix that runs a command in a fresh network namespace with loopback up, if this machine allows it."""
    unshare = shutil.which("unshare")
    ip = shutil.which("ip")
    if unshare is None or ip is None:
        return []
    prefix = [unshare, "--user", "--map-root-user", "--net", "--", "sh", "-c", f'{ip} link set lo up && exec "$@"',
              "sh"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=30, check=False)
    return prefix if probe.returncode == 0 else []


def test_the_readme_and_the_docs_mark_commands_runnable() -> None:
    """The test below must have something to run: the README's tour and the reference pages' commands."""
    assert REPO / "README.md" in PAGES
    assert sum(len(extract(p)) for p in PAGES) >= 10


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_runnable_blocks_of_the_page_work_as_written(page: Path) -> None:
    budget = sum(b.timeout_s for b in extract(page)) + 60
    done = subprocess.run([*_isolated(), sys.executable, "-m", "tests.docs.runnable", "--json", str(page)],
                          cwd=REPO, capture_output=True, text=True, timeout=budget, check=False)
    assert done.stdout.strip(), f"the runner printed nothing:\n{done.stderr[-3000:]}"
    results = json.loads(done.stdout.strip().splitlines()[-1])
    failed = [r for r in results if not r["ok"]]
    report = "\n\n".join(f"{r['where']}: {r['message']}\n{r['output']}" for r in failed)
    assert not failed, f"{len(failed)} of {len(results)} runnable blocks failed:\n\n{report}"
