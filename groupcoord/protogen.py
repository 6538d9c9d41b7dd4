"""Regenerate the protobuf/gRPC Python modules from `proto/` (one command: `make proto`), and with `--go` the
Go stubs of the Go load generator in bench/go/heartbeat (`make proto-go`).

The generated files are checked in so the package installs without grpcio-tools; the drift tests
(tests/test_proto_drift.py, tests/test_go_proto_drift.py) regenerate them into a temporary directory and
compare byte for byte.

Go: protoc is grpcio-tools' (the same pinned one); the two Go plugins are built at the versions pinned as
`tool` dependencies in bench/go/heartbeat/go.mod (protoc-gen-go from google.golang.org/protobuf,
protoc-gen-go-grpc from grpc-go), which the go command fetches from the Go module proxy.
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
GO_PROTOS = ["groupcoord/wire/v1/coordinator.proto"]  # the Go load generator needs only the consumer group service
GO_PLUGINS = {
    "protoc-gen-go": "google.golang.org/protobuf/cmd/protoc-gen-go",
    "protoc-gen-go-grpc": "google.golang.org/grpc/cmd/protoc-gen-go-grpc",
}
GO_MISSING = ("the go command is not on PATH: install Go 1.26 or newer, as bench/go/heartbeat/go.mod's `go` line "
              "asks (https://go.dev/doc/install; or `apt-get install golang-go` where its version is new enough)")


def proto_files() -> list[Path]:
    return sorted(PROTO_ROOT.rglob("*.proto"))


def generate(out_dir: Path) -> None:
    """Run protoc (from grpcio-tools) over every .proto below proto/ into out_dir."""
    import grpc_tools
    from grpc_tools import protoc  # dev-only dependency

    include = Path(grpc_tools.__file__).parent / "_proto"
    common = ["grpc_tools.protoc", f"-I{PROTO_ROOT}", f"-I{include}"]
    files = [str(p.relative_to(PROTO_ROOT)) for p in proto_files()]
    with_services = [str(p.relative_to(PROTO_ROOT)) for p in proto_files() if "\nservice " in p.read_text()]
    runs = [[*common, f"--python_out={out_dir}", f"--pyi_out={out_dir}", *files]]
    if with_services:
        runs.append([*common, f"--grpc_python_out={out_dir}", *with_services])
    for args in runs:
        rc = protoc.main(args)
        if rc != 0:
            raise SystemExit(f"protoc failed with exit code {rc}")


def go_command() -> str:
    go = shutil.which("go")
    if go is None:
        raise SystemExit(GO_MISSING)
    return go


def generate_go(out_root: Path) -> None:
    """Generate gcpb/*.go for GO_PROTOS into out_root, laid out as the Go module (out_root/gcpb/...)."""
    from grpc_tools import protoc  # dev-only dependency

    go = go_command()
    with tempfile.TemporaryDirectory(prefix="protoc-gen-go-") as tmp:
        plugins = {name: Path(tmp) / name for name in GO_PLUGINS}
        for name, package in GO_PLUGINS.items():  # at the version go.mod's `tool` block pins
            subprocess.run([go, "build", "-o", str(plugins[name]), package], cwd=GO_MODULE_DIR, check=True)
        opts = f"module={GO_MODULE}," + ",".join(f"M{p}={GO_PACKAGE}" for p in GO_PROTOS)
        out_root.mkdir(parents=True, exist_ok=True)
        rc = protoc.main(["grpc_tools.protoc", f"-I{PROTO_ROOT}",
                          f"--plugin=protoc-gen-go={plugins['protoc-gen-go']}",
                          f"--plugin=protoc-gen-go-grpc={plugins['protoc-gen-go-grpc']}",
                          f"--go_out={out_root}", f"--go_opt={opts}",
                          f"--go-grpc_out={out_root}", f"--go-grpc_opt={opts}", *GO_PROTOS])
        if rc != 0:
            raise SystemExit(f"protoc failed with exit code {rc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None,
                        help="output root (default: the repo; with --go, bench/go/heartbeat)")
    parser.add_argument("--go", action="store_true", help="the Go stubs of bench/go/heartbeat instead")
    args = parser.parse_args(argv)
    if args.go:
        generate_go(args.out or GO_MODULE_DIR)
        print(f"generated Go stubs of {', '.join(GO_PROTOS)} into {args.out or GO_MODULE_DIR}/gcpb", file=sys.stderr)
        return 0
    generate(args.out or REPO_ROOT)
    print(f"generated {len(proto_files())} proto file(s) into {args.out or REPO_ROOT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
