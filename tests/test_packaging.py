"""The installed package has one import name, `groupcoord`, and the wheel carries real files, not links."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINKED = ("assignors", "coordinator", "clients", "wire")


def _build_wheel(out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out)], check=True, capture_output=True, timeout=300)
    (wheel,) = out.glob("groupcoord-*.whl")
    return wheel


def test_wheel_installs_no_top_level_package_but_groupcoord(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path / "dist")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        tops = {n.split("/")[0] for n in names}
        top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
        assert z.read(top_level).decode().split() == ["groupcoord"]
    assert {t for t in tops if not t.endswith(".dist-info")} == {"groupcoord"}
    for package in LINKED:
        assert any(n.startswith(f"groupcoord/{package}/") and n.endswith(".py") for n in names), package
    assert "groupcoord/wire/v1/coordinator_pb2.py" in names
    assert "groupcoord/wire/records/v1/records_pb2.py" in names


def test_unpacked_wheel_imports_every_layer_under_groupcoord(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path / "dist")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    probe = (
        "import groupcoord.wire.v1.coordinator_pb2 as pb, groupcoord.coordinator.core.shard as shard, "
        "groupcoord.clients.group_member as gm, groupcoord.assignors.range as rng\n"
        "for m in (pb, shard, gm, rng): print(m.__file__)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(site)},
                         check=True, capture_output=True, text=True, timeout=120).stdout.split()
    assert len(out) == 4
    assert all(path.startswith(str(site)) for path in out), out
