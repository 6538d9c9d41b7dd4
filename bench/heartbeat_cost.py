"""Heartbeat cost per server, measured with a load generator that is not Python (issue 30).

    python -m bench.heartbeat_cost                     # 2,000 members, 20 groups, 1,000 partitions, 30 s per row
    python -m bench.heartbeat_cost --seconds 10 --members 500
    python -m bench.heartbeat_cost --rows groupcoord:unary:3000,echo:unary:3000 --repeat 2
    python -m bench.heartbeat_cost --quick --rows groupcoord-tls:unary:1000,native-tls:unary:1000  # secured

Starts every server once: `groupcoord serve` on its embedded defaults with a topic of `--partitions`
partitions; the control, a bare grpc.aio server answering the same RPCs with canned replies
(bench/echo_server.py); the `-tls` servers, `groupcoord serve` secured as deployed (mTLS with client
certificates and an ACL file: every call authenticated and authorized) from a throwaway PKI of `openssl`; with
`--sync-echo`, the same control on grpcio's thread-pool server; and the real
Apache Kafka 4.4 broker (groupcoord/kafka_broker.py, Kafka's production JVM flags unless `--kafka-test-jvm`),
whose own group coordinator serves ConsumerGroupHeartbeat v1. Then it measures every server's idle CPU over
one window of the same length, all at once, and runs the rows in the order given (interleaving the servers),
each with the Go load generator of bench/go/heartbeat (built with `go build` on first use; its modules come
from the Go module proxy). A row joins the members in fresh groups, brings them to a stable assignment, runs
`--warmup` seconds of load and then measures `--seconds`: achieved rate, latency from each heartbeat's
scheduled send time (open loop, coordinated-omission free), errors, and the server's CPU (process and
descendants, from /proc) minus the idle baseline, per heartbeat answered in the window. Members leave at the
end of their row.

The machine is shared: the table's header gives the load average and how busy all cores were during the
rows, and only figures from one run (interleaved) compare.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
GO_DIR = REPO / "bench" / "go" / "heartbeat"
GO_BINARY = REPO / ".cache" / "bench-heartbeat-go"
TOPIC = "bench"
DEFAULT_ROWS = ("kafka:kafka:3000,groupcoord:unary:3000,echo:unary:3000,"
                "groupcoord:unary:1000,echo:unary:1000,kafka:kafka:1000,"
                "groupcoord:stream:3000,echo:stream:3000,groupcoord:batch:3000,echo:batch:3000")
SERVER_LABEL = {"groupcoord": "groupcoord", "native": "groupcoord, native front end (tonic through PyO3)",
                "groupcoord-tls": "groupcoord, mTLS + ACLs",
                "native-tls": "groupcoord, native front end, mTLS + ACLs",
                "echo": "bare grpc.aio echo (canned reply)",
                "echo-sync": "bare grpc sync-server echo (thread pool)",
                "echo-reuseport": "bare grpc.aio echo, 2 processes on one port (SO_REUSEPORT)",
                "echo-throughput": "bare grpc.aio echo, grpc.optimization_target=throughput",
                "echo-bdp-off": "bare grpc.aio echo, grpc.http2.bdp_probe=0",
                "echo-nocompress": "bare grpc.aio echo, compression off explicitly",
                "echo-maxstreams": "bare grpc.aio echo, grpc.max_concurrent_streams=16",
                "echo-uvloop": "bare grpc.aio echo on uvloop",
                "echo-acceptors": "2 grpc.aio acceptor processes (SO_REUSEPORT) in front of one echo worker",
                "echo-tonic": "compiled echo: Rust tonic, one thread (canned reply)",
                "kafka": "Kafka 4.4 broker (own coordinator)"}
# The echo variants of issue 30 step 4: extra `bench.echo_server` arguments.
ECHO_VARIANTS = {"echo": [], "echo-sync": ["--sync"], "echo-reuseport": ["--processes", "2"],
                 "echo-throughput": ["--option", "grpc.optimization_target=throughput"],
                 "echo-bdp-off": ["--option", "grpc.http2.bdp_probe=0"],
                 "echo-nocompress": ["--option", "grpc.default_compression_algorithm=0",
                                     "--option", "grpc.default_compression_level=0"],
                 "echo-maxstreams": ["--option", "grpc.max_concurrent_streams=16"],
                 "echo-uvloop": ["--uvloop"], "echo-acceptors": ["--acceptors", "2"], "echo-tonic": []}


def progress(text: str) -> None:
    print(time.strftime("%H:%M:%S ") + text, file=sys.stderr, flush=True)


TONIC_DIR = REPO / "bench" / "tonic_echo"
TONIC_TARGET = REPO / ".cache" / "tonic-echo-target"


def build_tonic_echo() -> Path:
    """The compiled echo control (bench/tonic_echo, Rust): cargo build, its crates from crates.io; protoc is
    grpcio-tools' (a wrapper script, as tonic-build runs `$PROTOC`)."""
    cargo = shutil.which("cargo")
    if cargo is None:
        raise SystemExit("the echo-tonic rows need Rust's cargo (rustup.rs)")
    TONIC_TARGET.mkdir(parents=True, exist_ok=True)
    protoc = TONIC_TARGET / "protoc"
    protoc.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m grpc_tools.protoc "$@"\n')
    protoc.chmod(0o755)
    progress("building the tonic echo server (cargo build --release; crates from crates.io on first use)")
    subprocess.run([cargo, "build", "--release", "--quiet"], cwd=TONIC_DIR, check=True,
                   env={**os.environ, "PROTOC": str(protoc), "CARGO_TARGET_DIR": str(TONIC_TARGET)})
    return TONIC_TARGET / "release" / "tonic-echo"


def build_generator(binary: Path = GO_BINARY) -> Path:
    go = shutil.which("go")
    if go is None:
        from groupcoord.protogen import GO_MISSING
        raise SystemExit(GO_MISSING)
    binary.parent.mkdir(parents=True, exist_ok=True)
    progress("building the Go load generator (go build; modules from the Go module proxy on first use)")
    subprocess.run([go, "build", "-o", str(binary), "."], cwd=GO_DIR, check=True)
    return binary


def make_pki(d: Path) -> Path:
    """A CA, a server certificate for localhost and 127.0.0.1, a client certificate of CN bench (X.509 v3, as
    rustls asks), and the ACL file that lets User:bench do everything."""
    d.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=heartbeat-cost-ca")
    for name, ext in (("server", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
                      ("bench", "extendedKeyUsage=clientAuth")):
        (d / f"{name}.ext").write_text(ext + "\n")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-subj", f"/CN={name}",
                "-out", f"{name}.csr")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext")
    (d / "acls.toml").write_text('[[acl]]\nprincipal = "User:bench"\noperation = "ALL"\nresource_type = "GROUP"\n'
                                 'pattern_type = "LITERAL"\nresource_name = "*"\npermission = "ALLOW"\n')
    return d


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes] | None, what: str, timeout: float = 60) -> None:
    import socket
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.2)
    raise SystemExit(f"{what} did not listen on {port} within {timeout:.0f} s")


@dataclass
class Server:
    kind: str
    addr: str
    pid: int
    close: Any
    idle_rate: float = 0.0  # CPU seconds per second while idle
    client_args: list[str] = field(default_factory=list)  # the load generator's credentials (the -tls servers)


def start_groupcoord(args: argparse.Namespace, logs: Path, front_end: str = "grpcio",
                     pki: Path | None = None) -> Server:
    """`groupcoord serve` with grpcio or (the `native` rows) the compiled front end of native/frontend; with
    `pki`, secured: mTLS (client certificates required) and ACLs."""
    port = free_port()
    cmd = [sys.executable, "-m", "groupcoord", "serve", "--listen", f"127.0.0.1:{port}",
           "--topic", f"{TOPIC}:{args.partitions}", "--front-end", front_end]
    client_args = []
    if pki is not None:
        cmd += ["--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key"),
                "--tls-client-ca", str(pki / "ca.pem"), "--acl-file", str(pki / "acls.toml")]
        client_args = ["-tls-ca", str(pki / "ca.pem"), "-tls-cert", str(pki / "bench.pem"),
                       "-tls-key", str(pki / "bench.key")]
    for kv in args.groupcoord_set:
        cmd += ["--set", kv]
    kind = ("groupcoord" if front_end == "grpcio" else "native") + ("-tls" if pki is not None else "")
    proc = subprocess.Popen(cmd, stdout=open(logs / f"{kind}.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    wait_port(port, proc, "groupcoord serve")
    return Server(kind, f"localhost:{port}" if pki is not None else f"127.0.0.1:{port}", proc.pid,
                  lambda: stop_process(proc), client_args=client_args)


def start_echo(args: argparse.Namespace, logs: Path, kind: str) -> Server:
    port = free_port()
    if kind == "echo-tonic":
        proc = subprocess.Popen([str(build_tonic_echo()), "--port", str(port)],
                                stdout=open(logs / f"{kind}.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
        wait_port(port, proc, kind)
        return Server(kind, f"127.0.0.1:{port}", proc.pid, lambda: stop_process(proc))
    cmd = [sys.executable, "-m", "bench.echo_server", "--port", str(port), *ECHO_VARIANTS[kind]]
    for kv in args.echo_option:
        cmd += ["--option", kv]
    # The control gets the transport options `groupcoord serve` sets for itself (its queue of pending calls).
    from groupcoord.coordinator.core.config import BrokerConfig
    from groupcoord.coordinator.runtime.server import transport_queue_options
    config = BrokerConfig.from_mapping(dict(kv.split("=", 1) for kv in args.groupcoord_set))
    for key, value in transport_queue_options(config):
        cmd += ["--option", f"{key}={value}"]
    proc = subprocess.Popen(cmd, stdout=open(logs / f"{kind}.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    wait_port(port, proc, kind)
    return Server(kind, f"127.0.0.1:{port}", proc.pid, lambda: stop_process(proc))


def start_kafka(args: argparse.Namespace) -> Server:
    from groupcoord.kafka_broker import PRODUCTION_JVM_OPTIONS, KafkaBroker
    broker = KafkaBroker(jvm_options=None if args.kafka_test_jvm else PRODUCTION_JVM_OPTIONS)
    broker.create_topic(TOPIC, args.partitions)
    return Server("kafka", broker.bootstrap_servers, broker.pids[0], broker.close)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def process_cpu(pid: int) -> float:
    """CPU seconds of `pid` (with its waited-for children) and its live descendants, as the Go tool counts."""
    tick = os.sysconf("SC_CLK_TCK")

    def stat(p: int, with_children: bool) -> float:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return sum(int(f) for f in fields[11:15 if with_children else 13]) / tick

    def below(p: int) -> list[int]:
        out: list[int] = []
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{p}/task"):
                with contextlib.suppress(OSError):
                    for c in Path(f"/proc/{p}/task/{task}/children").read_text().split():
                        out += [int(c), *below(int(c))]
        return out

    return stat(pid, True) + sum(stat(c, False) for c in below(pid))


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all cores, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


@dataclass
class Row:
    server: str
    rpc: str
    rate: int
    result: dict[str, Any] = field(default_factory=dict)


def parse_rows(text: str) -> list[Row]:
    rows = []
    for spec in text.split(","):
        server, rpc, rate = spec.strip().split(":")
        if server not in SERVER_LABEL:
            raise SystemExit(f"unknown server {server!r} in --rows (one of {', '.join(SERVER_LABEL)})")
        rows.append(Row(server, rpc, int(rate)))
    return rows


def run_row(binary: Path, server: Server, row: Row, index: int, args: argparse.Namespace) -> dict[str, Any]:
    target = "kafka" if server.kind == "kafka" else "grpc"
    conns = args.kafka_conns if target == "kafka" else args.conns
    cmd = [str(binary), "-target", target, "-addr", server.addr, "-rpc", row.rpc, "-rate", str(row.rate),
           "-members", str(args.members), "-groups", str(args.groups), "-conns", str(conns), "-topic", TOPIC,
           "-seconds", str(args.seconds), "-warmup", str(args.warmup), "-group-prefix", f"row{index}",
           "-server-pid", str(server.pid), "-idle-cpu-rate", f"{server.idle_rate:.6f}",
           "-linger", f"{args.linger_ms}ms", *server.client_args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None and proc.stdout is not None
    for line in proc.stderr:
        progress(f"  [{row.server} {row.rpc} {row.rate}/s] {line.rstrip()[9:]}")
    out = proc.stdout.read()
    if proc.wait() != 0 or not out.strip():
        return {"failed": f"load generator exited with {proc.returncode}"}
    return dict(json.loads(out))


def ms(v: float) -> str:
    if v < 0:
        return "-"
    return f"{v:.2f} ms" if v < 10 else (f"{v:.0f} ms" if v < 1000 else f"{v / 1000:.1f} s")


def rpc_label(row: Row, args: argparse.Namespace) -> str:
    if row.server == "kafka":
        conns = "one connection per member" if args.kafka_conns <= 0 else f"{args.kafka_conns} connections"
        return f"ConsumerGroupHeartbeat v1, {conns}"
    name = {"unary": "unary ConsumerGroupHeartbeat", "stream": "ConsumerGroupHeartbeatStream",
            "batch": "ConsumerGroupHeartbeatBatchStream"}[row.rpc]
    return f"{name}, {args.conns} {'channels' if row.rpc == 'unary' else 'streams'}"


def table(rows: list[Row], args: argparse.Namespace) -> str:
    head = ("| server | RPC | client | offered/s | achieved/s | p50 | p99 | server CPU per heartbeat | errors |\n"
            "|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for row in rows:
        r = row.result
        if "failed" in r:
            lines.append(f"| {SERVER_LABEL[row.server]} | {rpc_label(row, args)} | Go | {row.rate:,} | "
                         f"{r['failed']} | | | | |")
            continue
        errors = dict(r.get("errors") or {})
        if r.get("unfinished"):
            errors["unanswered"] = r["unfinished"]
        err = ", ".join(f"{k} {v:,}" for k, v in sorted(errors.items())) or "0"
        extra = f" ({r['heartbeats_per_message']:.1f}/message)" if r.get("heartbeats_per_message") else ""
        cpu = r.get("cpu_per_heartbeat_us")
        sys_share = r.get("server_sys_cpu_s", 0) / r["server_cpu_s"] * 100 if r.get("server_cpu_s") else 0
        lines.append(f"| {SERVER_LABEL[row.server]} | {rpc_label(row, args)}{extra} | Go | {row.rate:,} | "
                     f"{r['achieved']:,.0f} | {ms(r['p50_ms'])} | {ms(r['p99_ms'])} | "
                     f"{'-' if cpu is None else f'{cpu:,.0f} µs ({sys_share:.0f}% sys)'} | {err} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=int, default=2000)
    p.add_argument("--groups", type=int, default=20)
    p.add_argument("--partitions", type=int, default=1000, help="partitions of the one topic every group reads")
    p.add_argument("--seconds", type=float, default=30, help="measured window of each row (and of the idle baseline)")
    p.add_argument("--warmup", type=float, default=5, help="load before each row's window, not measured")
    p.add_argument("--settle", type=float, default=20, help="wait after starting the servers, before the baseline")
    p.add_argument("--conns", type=int, default=20, help="gRPC channels (unary) or streams")
    p.add_argument("--kafka-conns", type=int, default=0, help="Kafka connections (0: one per member, as clients do)")
    p.add_argument("--linger-ms", type=float, default=0, help="batch stream: linger before each message")
    p.add_argument("--rows", default=DEFAULT_ROWS, help="SERVER:RPC:RATE,... in run order (servers: "
                   f"{', '.join(SERVER_LABEL)}; RPC unary, stream, batch, or kafka)")
    p.add_argument("--repeat", type=int, default=1, help="run the rows this many times, interleaved")
    p.add_argument("--sync-echo", action="store_true", help="add echo-sync rows beside every echo row")
    p.add_argument("--kafka-test-jvm", action="store_true", help="the test broker's JVM flags (C1, serial GC)")
    p.add_argument("--groupcoord-set", action="append", default=[], metavar="KEY=VALUE",
                   help="a config of `groupcoord serve` (repeatable)")
    p.add_argument("--echo-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a gRPC channel argument of the echo servers (repeatable)")
    p.add_argument("--json", type=Path, help="also write the rows' raw results here")
    p.add_argument("--quick", action="store_true", help="a short run: 500 members, 10 s rows, 2 s warm-up")
    p.add_argument("--cache-dir", type=Path, default=REPO / ".cache",
                   help="where the load generator is built and the logs and the -tls servers' PKI go")
    args = p.parse_args(argv)
    if args.quick:
        args.members, args.seconds, args.warmup, args.settle = 500, 10, 2, 10

    rows = parse_rows(args.rows)
    if args.sync_echo:
        rows = [r2 for r in rows for r2 in ([r, Row("echo-sync", r.rpc, r.rate)] if r.server == "echo" else [r])]
    rows = [Row(r.server, r.rpc, r.rate) for _ in range(args.repeat) for r in rows]
    binary = build_generator(args.cache_dir / GO_BINARY.name)
    logs = args.cache_dir / "heartbeat-cost-logs"
    logs.mkdir(parents=True, exist_ok=True)
    pki = make_pki(args.cache_dir / "heartbeat-cost-pki") if any(r.server.endswith("-tls") for r in rows) else None
    servers: dict[str, Server] = {}
    try:
        for kind in dict.fromkeys(r.server for r in rows):
            progress(f"starting {SERVER_LABEL[kind]}")
            servers[kind] = (start_groupcoord(args, logs) if kind == "groupcoord" else
                             start_groupcoord(args, logs, "native") if kind == "native" else
                             start_groupcoord(args, logs, "grpcio", pki) if kind == "groupcoord-tls" else
                             start_groupcoord(args, logs, "native", pki) if kind == "native-tls" else
                             start_kafka(args) if kind == "kafka" else start_echo(args, logs, kind))
        progress(f"settling {args.settle:.0f} s (Kafka's JIT and its 1,000 new partitions' start-up work)")
        time.sleep(args.settle)
        progress(f"idle baseline: {args.seconds:.0f} s, every server at once")
        before = {k: process_cpu(s.pid) for k, s in servers.items()}
        time.sleep(args.seconds)
        for k, s in servers.items():
            s.idle_rate = (process_cpu(s.pid) - before[k]) / args.seconds
            progress(f"  {k}: idle {s.idle_rate * 100:.2f}% of a core")
        load0, busy0 = os.getloadavg(), machine_busy()
        for i, row in enumerate(rows):
            progress(f"row {i + 1}/{len(rows)}: {row.server} {row.rpc} at {row.rate}/s")
            row.result = run_row(binary, servers[row.server], row, i, args)
        load1, busy1 = os.getloadavg(), machine_busy()
    finally:
        for s in servers.values():
            with contextlib.suppress(Exception):
                s.close()
    busy = (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1]) * 100
    print(f"\n{args.members:,} members in {args.groups} groups on a {args.partitions:,}-partition topic, uniform "
          f"assignor, {args.seconds:.0f} s per row after {args.warmup:.0f} s of warm-up, {os.cpu_count()} cores; "
          f"load average {load0[0]:.2f} before the rows, {load1[0]:.2f} after; all cores {busy:.0f}% busy during "
          f"the rows (load generator included)\n")
    print(table(rows, args))
    print("\nserver CPU: the server's process and descendants from /proc, minus its idle rate ("
          + ", ".join(f"{k} {s.idle_rate * 100:.2f}%" for k, s in servers.items())
          + " of a core), per heartbeat answered in the window, with the kernel's (system) share of the server's CPU; "
          "latency from each heartbeat's scheduled send time")
    if args.json is not None:
        args.json.write_text(json.dumps([{"server": r.server, "rpc": r.rpc, "rate": r.rate, **r.result}
                                         for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
