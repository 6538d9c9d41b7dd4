"""Regenerate the protobuf/gRPC Python modules from `proto/` (one command: `make proto`).

The generated files are checked in so the package installs without grpcio-tools; the drift test
regenerates them into a temporary directory and compares byte for byte.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = REPO_ROOT / "proto"


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO_ROOT, help="output root (default: the repo)")
    args = parser.parse_args(argv)
    generate(args.out)
    print(f"generated {len(proto_files())} proto file(s) into {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
