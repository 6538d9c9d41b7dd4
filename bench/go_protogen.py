"""Regenerate the Go stubs of bench/go/heartbeat (gcpb/) from proto/ (one command: `make proto-go`).

The Go load generator of issue 30 speaks groupcoord's wire API from the same `proto/` as the Python
stubs. protoc is grpcio-tools' (the pinned dev dependency that generates the Python ones); the two Go
plugins are built from the versions pinned as `tool` dependencies in bench/go/heartbeat/go.mod
(protoc-gen-go from google.golang.org/protobuf, protoc-gen-go-grpc from grpc-go), fetched by the go
command from the Go module proxy. The generated files are checked in; tests/test_go_proto_drift.py
regenerates them into a temporary directory and compares byte for byte.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = REPO_ROOT / "proto"
GO_MODULE_DIR = REPO_ROOT / "bench" / "go" / "heartbeat"
GO_MODULE = "groupcoord/bench/heartbeat"
GO_PACKAGE = f"{GO_MODULE}/gcpb"
PROTOS = ["groupcoord/wire/v1/coordinator.proto"]  # the Go tool needs only the consumer group service
PLUGINS = {
    "protoc-gen-go": "google.golang.org/protobuf/cmd/protoc-gen-go",
    "protoc-gen-go-grpc": "google.golang.org/grpc/cmd/protoc-gen-go-grpc",
}
GO_MISSING = ("the go command is not on PATH: install Go 1.26 or newer, as go.mod's `go` line asks "
              "(https://go.dev/doc/install; or `apt-get install golang-go` where its version is new enough)")


def go_binary() -> str:
    go = shutil.which("go")
    if go is None:
        raise SystemExit(GO_MISSING)
    return go


def build_plugins(bin_dir: Path) -> dict[str, Path]:
    """`go build` each plugin at the version go.mod pins (its `tool` block) into bin_dir."""
    go = go_binary()
    out: dict[str, Path] = {}
    for name, package in PLUGINS.items():
        target = bin_dir / name
        subprocess.run([go, "build", "-o", str(target), package], cwd=GO_MODULE_DIR, check=True)
        out[name] = target
    return out


def generate(out_root: Path) -> None:
    """Generate gcpb/*.go for PROTOS into out_root (laid out as the module: out_root/gcpb/...)."""
    from grpc_tools import protoc  # dev-only dependency

    with tempfile.TemporaryDirectory(prefix="protoc-gen-go-") as tmp:
        plugins = build_plugins(Path(tmp))
        mapping = ",".join(f"M{p}={GO_PACKAGE}" for p in PROTOS)
        args = ["grpc_tools.protoc", f"-I{PROTO_ROOT}",
                f"--plugin=protoc-gen-go={plugins['protoc-gen-go']}",
                f"--plugin=protoc-gen-go-grpc={plugins['protoc-gen-go-grpc']}",
                f"--go_out={out_root}", f"--go_opt=module={GO_MODULE},{mapping}",
                f"--go-grpc_out={out_root}", f"--go-grpc_opt=module={GO_MODULE},{mapping}",
                *PROTOS]
        out_root.mkdir(parents=True, exist_ok=True)
        rc = protoc.main(args)
        if rc != 0:
            raise SystemExit(f"protoc failed with exit code {rc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=GO_MODULE_DIR, help="output root (default: the Go module)")
    args = parser.parse_args(argv)
    generate(args.out)
    print(f"generated Go stubs for {', '.join(PROTOS)} into {args.out}/gcpb", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
