"""Where a unary heartbeat's CPU goes in `groupcoord serve` (issue 30 step 2): py-spy with native frames.

    python -m bench.heartbeat_profile                        # 2,000 members, unary at 1,000/s, 30 s sampled
    python -m bench.heartbeat_profile --rpc stream --rate 3000 --raw /tmp/profile.txt

Starts `groupcoord serve` (embedded defaults, one topic of --partitions partitions; `--server echo`: the echo
control of bench.heartbeat_cost instead, to compare), brings the Go load
generator's members to a stable assignment, and while they heartbeat open loop records the server with
`py-spy record --native` (every thread, CPU samples only). Then it prints: the share of samples per part of
the path, each sample counted once, to the innermost frame that names a part (so "protobuf" is the time inside
protobuf, whoever called it); the inclusive share of the coordinator's own functions on the path; and the
hottest leaf frames. `--raw` keeps py-spy's collapsed stacks (flamegraph.pl input).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.heartbeat_cost import TOPIC, build_generator, free_port, progress, wait_port

# A sample whose innermost frame waits (an idle poller, a pool thread blocked on its queue, a futex) is no CPU:
# py-spy --native cannot tell those threads idle, so they are dropped here.
IDLE_LEAF = re.compile(r"^(epoll_wait|epoll_pwait|poll|ppoll|select|nanosleep|clock_nanosleep|pthread_cond|sem_|futex|"
                       r"syscall) ")
IDLE_WAIT = re.compile(r"acquire_lock|SimpleQueue_get|pthread_cond_wait|Condition.wait")
# The system calls a heartbeat makes on the event-loop thread (grpc.aio runs gRPC core's batches there).
SYSCALLS: list[tuple[str, re.Pattern[str]]] = [(name, re.compile(p)) for name, p in [
    ("syscall sendmsg: gRPC core writing to the socket", r"^sendmsg "),
    ("syscall write: gRPC core's eventfd, waking its poller thread", r"^(eventfd_)?write "),
    ("syscall recv/read: the loop reading the poller's wake-up, socket reads", r"^(recv|recvmsg|read) "),
]]
# (part, pattern over one frame): the innermost frame of a sample that matches names its part. Order matters only
# among patterns that could match the same frame.
PARTS: list[tuple[str, re.Pattern[str]]] = [(name, re.compile(p)) for name, p in [
    ("metrics (prometheus_client, runtime/metrics.py)", r"prometheus_client|runtime/metrics\.py|windowed"),
    ("logging", r"/logging/"),
    ("protobuf (upb, message construction and parsing)", r"google/protobuf|_message\.|upb|_upb"),
    ("ACL / auth / principals", r"runtime/(acl|auth)\.py|secured_service|core/principals"),
    ("malformed-request guard (runtime/malformed.py)", r"runtime/malformed\.py"),
    ("request limits (core/limits.py)", r"core/limits\.py"),
    ("the core (coordinator/core, the state machine)", r"coordinator/core/"),
    ("records, log, timers (runtime)", r"runtime/(log|timers|timeline|record_codec|rollback)\.py"),
    ("runtime: submit, execute, futures (runtime.py)", r"runtime/runtime\.py"),
    ("service: validation, request/response conversion", r"runtime/(service|service_base|kafka_common)\.py"),
    ("wake-up coalescing (aio_wakeups.py)", r"aio_wakeups"),
    ("native front end: Python side (runtime/native_server.py)", r"runtime/native_server\.py"),
    ("native front end: tonic, hyper, h2, tokio (groupcoord_frontend)",
     r"groupcoord_frontend|tokio|hyper|h2::|tonic|mio::|bytes::"),
    ("grpcio: grpc.aio's Cython and gRPC core (cygrpc, symbols stripped)",
     r"grpc/aio|grpc/_cython|cygrpc|\(grpc/|grpc_core|chttp2|absl"),
    ("asyncio event loop", r"asyncio/|_asyncio|selectors\.py|uvloop"),
    ("garbage collection", r"gc_collect|collect_generations|_PyGC|gc_collect_main"),
    ("kernel / libc (syscalls, epoll, locks)", r"libc\.so|libpthread|epoll|__libc|syscall|futex"),
    ("CPython interpreter", r"_PyEval|PyObject_|_PyObject|PyFrame|libpython|python3\.11"),
]]
OWN = re.compile(r"^(\S+) \((?:.*/)?(coordinator/[^:]+|clients/[^:]+|groupcoord/[^:]+):\d+\)$")
# The entry point's frames (main, `groupcoord serve`) are in every stack: they say nothing about where time goes.
ENTRY = re.compile(r"groupcoord/cli(_serve)?\.py|__main__")


def parse_raw(path: Path) -> list[tuple[list[str], int]]:
    """py-spy's raw (collapsed) format: `frame;frame;...;leaf count`, outermost first."""
    out = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            out.append((stack.split(";"), int(count)))
    return out


def is_idle(stack: list[str]) -> bool:
    return bool(IDLE_LEAF.match(stack[-1])) or (stack[-1].startswith("0x") and any(IDLE_WAIT.search(f) for f in stack))


def part_of(stack: list[str]) -> str:
    for name, pattern in SYSCALLS:
        if pattern.search(stack[-1]):
            return name
    for frame in reversed(stack):
        for name, pattern in PARTS:
            if pattern.search(frame):
                return name
    return "other"


def report(all_samples: list[tuple[list[str], int]], top: int) -> str:
    samples = [(stack, count) for stack, count in all_samples if not is_idle(stack)]
    total = sum(c for _, c in samples) or 1
    parts: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    for stack, count in samples:
        parts[part_of(stack)] += count
        seen = set()
        for frame in stack:
            m = OWN.match(frame)
            if m and not ENTRY.search(frame):
                key = f"{m.group(1)} ({m.group(2)})"
                if key not in seen:
                    seen.add(key)
                    inclusive[key] += count
        leaves[re.sub(r":\d+\)$", ")", stack[-1])] += count
    everything = sum(c for _, c in all_samples)
    lines = [f"{total:,} busy samples of {everything:,} (all threads; waiting ones dropped)", "",
             "| part of the path | share of samples |", "|---|---|"]
    lines += [f"| {name} | {100 * n / total:.1f}% |" for name, n in parts.most_common()]
    lines += ["", "| groupcoord function (inclusive) | share |", "|---|---|"]
    lines += [f"| `{name}` | {100 * n / total:.1f}% |" for name, n in inclusive.most_common(top)]
    lines += ["", "| leaf frame (self) | share |", "|---|---|"]
    lines += [f"| `{name[:110]}` | {100 * n / total:.1f}% |" for name, n in leaves.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=int, default=2000)
    p.add_argument("--groups", type=int, default=20)
    p.add_argument("--partitions", type=int, default=1000)
    p.add_argument("--server", default="groupcoord", choices=["groupcoord", "native", "echo"],
                   help="native: `groupcoord serve --front-end native`; echo: the control of bench.heartbeat_cost "
                        "(bench/echo_server.py)")
    p.add_argument("--rpc", default="unary", choices=["unary", "stream", "batch"])
    p.add_argument("--rate", type=int, default=1000)
    p.add_argument("--conns", type=int, default=20)
    p.add_argument("--seconds", type=int, default=30, help="how long py-spy samples")
    p.add_argument("--sampling-rate", type=int, default=100, help="py-spy samples per second")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a `groupcoord serve` config")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--raw", type=Path, help="keep py-spy's collapsed stacks here")
    p.add_argument("--analyze", type=Path, metavar="RAW", help="only print the report of stacks recorded before")
    p.add_argument("--quick", action="store_true", help="500 members, 10 s sampled")
    args = p.parse_args(argv)
    if args.quick:
        args.members, args.seconds = 500, 10
    if args.analyze is not None:
        print(report(parse_raw(args.analyze), args.top))
        return 0

    binary = build_generator()
    port = free_port()
    cmd = [sys.executable, "-m", "groupcoord", "serve", "--listen", f"127.0.0.1:{port}",
           "--topic", f"{TOPIC}:{args.partitions}", *(a for kv in args.set for a in ("--set", kv)),
           "--front-end", "native" if args.server == "native" else "grpcio"]
    if args.server == "echo":
        from groupcoord.coordinator.core.config import BrokerConfig
        from groupcoord.coordinator.runtime.server import transport_queue_options
        options = transport_queue_options(BrokerConfig.from_mapping(dict(kv.split("=", 1) for kv in args.set)))
        cmd = [sys.executable, "-m", "bench.echo_server", "--port", str(port),
               *(a for key, value in options for a in ("--option", f"{key}={value}"))]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    raw = args.raw or Path(tempfile.mkstemp(prefix="heartbeat-profile-", suffix=".txt")[1])
    try:
        wait_port(port, server, "groupcoord serve")
        load = subprocess.Popen([str(binary), "-addr", f"127.0.0.1:{port}", "-rpc", args.rpc, "-rate",
                                 str(args.rate), "-members", str(args.members), "-groups", str(args.groups),
                                 "-conns", str(args.conns), "-topic", TOPIC, "-warmup", "5",
                                 "-seconds", str(args.seconds + 5), "-server-pid", str(server.pid)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert load.stderr is not None and load.stdout is not None
        for line in load.stderr:
            progress("  " + line.rstrip()[9:])
            if line.rstrip().endswith("measuring"):
                break
        time.sleep(1)
        progress(f"py-spy record --native for {args.seconds} s")
        spy = subprocess.run([str(Path(sys.executable).parent / "py-spy"), "record", "--native",
                              "-p", str(server.pid), "-d", str(args.seconds), "-r", str(args.sampling_rate),
                              "-f", "raw", "-o", str(raw)], capture_output=True, text=True, check=False)
        if spy.returncode != 0:
            raise SystemExit(f"py-spy failed ({spy.returncode}): {spy.stderr[-2000:]}")
        for line in load.stderr:
            progress("  " + line.rstrip()[9:])
        result = load.stdout.read()
        load.wait()
    finally:
        server.terminate()
        server.wait()
    progress(f"load: {result.strip()[:400]}")
    server_name = {"groupcoord": "groupcoord serve", "native": "groupcoord serve --front-end native",
                   "echo": "the echo control (bench/echo_server.py)"}[args.server]
    print(f"\n{server_name}, {args.rpc} heartbeats at {args.rate:,}/s from the Go load generator "
          f"({args.members:,} members, {args.groups} groups, {args.partitions:,} partitions), py-spy --native:\n")
    print(report(parse_raw(raw), args.top))
    print(f"\nraw stacks: {raw}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
