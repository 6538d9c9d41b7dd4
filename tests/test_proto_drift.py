"""The checked-in generated code must be exactly what `make proto` produces from proto/."""

from __future__ import annotations

import filecmp
from pathlib import Path

from groupcoord import protogen

REPO = Path(__file__).resolve().parent.parent


def test_generated_protobuf_code_matches_proto_sources(tmp_path: Path) -> None:
    protogen.generate(tmp_path)
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.py*"))
    assert generated, "protoc produced nothing"
    for rel in generated:
        checked_in = REPO / rel
        assert checked_in.exists(), f"{rel} is not checked in: run `make proto`"
        assert filecmp.cmp(tmp_path / rel, checked_in, shallow=False), f"{rel} drifted from proto/: run `make proto`"
