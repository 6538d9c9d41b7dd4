"""The Go load generator's checked-in stubs (bench/go/heartbeat/gcpb) must be exactly what `make proto-go`
produces from proto/. Without Go this fails, naming how to install it: the stubs cannot be checked otherwise."""

from __future__ import annotations

import filecmp
import shutil
from pathlib import Path

import pytest

from groupcoord import protogen


def test_generated_go_stubs_match_proto_sources(tmp_path: Path) -> None:
    if shutil.which("go") is None:
        pytest.fail(protogen.GO_MISSING)
    protogen.generate_go(tmp_path)
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.go"))
    checked_in = sorted(p.relative_to(protogen.GO_MODULE_DIR) for p in (protogen.GO_MODULE_DIR / "gcpb").rglob("*.go"))
    assert generated, "protoc produced no Go code"
    assert generated == checked_in, "bench/go/heartbeat/gcpb has other files than protoc makes: run `make proto-go`"
    for rel in generated:
        assert filecmp.cmp(tmp_path / rel, protogen.GO_MODULE_DIR / rel, shallow=False), \
            f"bench/go/heartbeat/{rel} drifted from proto/: run `make proto-go`"
