"""`pip install .` ships the web view's page: its files are package data in the wheel (no build step needed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.web.conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PAGE_FILES = ("index.html", "app.js", "style.css")


def test_the_wheel_contains_the_web_view_page(tmp_path: Path) -> None:
    # built from a clean copy: an in-tree build would reuse a build/ directory left by an earlier one
    source = tmp_path / "src"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "test-artifacts", "__pycache__", ".*_cache", ".hypothesis",
        "demo-output", "spark-warehouse", "tests", "bench"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path)], check=True, capture_output=True, timeout=300, cwd=tmp_path)
    [wheel] = tmp_path.glob("groupcoord-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for name in PAGE_FILES:
        shipped = [n for n in names if n.endswith(f"runtime/web_static/{name}")]
        assert shipped, f"{name} is not in the wheel"
        assert zipfile.ZipFile(wheel).read(shipped[0]) == (REPO / "coordinator/runtime/web_static" / name).read_bytes()
