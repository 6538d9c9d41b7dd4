"""The command line every leased member worker of the fault suite shares (share and streams members): where
to connect, which group and topic, and how often to act."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import Protocol


class LeasedWorker(Protocol):
    def run(self) -> None: ...


WorkerFactory = Callable[[str, str, str, float, float, int], LeasedWorker]


def run_worker(prog: str, make: WorkerFactory, argv: list[str] | None = None) -> int:
    """Parse the worker's arguments, set up logging to stderr, and run `make(target, group, topic, interval_s,
    rpc_timeout_s, session_timeout_ms)` until the suite kills the process."""
    p = argparse.ArgumentParser(prog=prog)
    p.add_argument("--target", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--interval-ms", type=int, default=100)
    p.add_argument("--rpc-timeout-ms", type=int, default=1000)
    p.add_argument("--session-timeout-ms", type=int, required=True)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    make(args.target, args.group, args.topic, args.interval_ms / 1000, args.rpc_timeout_ms / 1000,
         args.session_timeout_ms).run()
    return 0
