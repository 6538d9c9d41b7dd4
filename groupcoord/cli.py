"""`groupcoord`: run the coordinator, inspect and configure its groups, reproduce KIP-1263's tables.

    groupcoord serve --topic orders:12                     # a coordinator on 127.0.0.1:50051
    groupcoord groups list                                 # every group, with type and state
    groupcoord groups describe my-group --bootstrap-server localhost:9092   # offsets and lag, as Kafka's tool
    groupcoord groups describe my-group --members --verbose # members, epochs, current and target assignments
    groupcoord groups reset-offsets my-group --all-topics --to-earliest --bootstrap-server localhost:9092 --execute
    groupcoord config set my-group consumer.assignment.interval.ms=0
    groupcoord simulate                                    # KIP-1263 rebalance-time tables
    groupcoord acls check --acl-file acls.toml --principal User:alice --operation READ --group orders
    groupcoord faults --minutes 30                         # the fault-injection suite's figures
"""

# This module builds the parsers and runs `main` (its docstring above is `groupcoord --help`). Each command's
# code is in a module of its own that never imports this one (CliError and the like are in cli_base): serve in
# cli_serve; groups list/delete and config in cli_admin; groups describe/reset-offsets/delete-offsets in
# cli_groups, with what they read from Kafka in cli_kafka_offsets; acls in acls_cli.

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from groupcoord import cli_admin, cli_serve
from groupcoord.cli_base import CliError

DEFAULT_SERVER = "127.0.0.1:50051"


def cmd_simulate(args: argparse.Namespace) -> int:
    from groupcoord.coordinator import simulation

    return int(simulation.main(args.rest) or 0)


def cmd_demo(args: argparse.Namespace) -> int:
    from groupcoord import demo

    return int(demo.main(args.rest) or 0)


def cmd_log(args: argparse.Namespace) -> int:
    """Exit 0: intact (or repaired); 1: damaged (check) or not repaired; 2: not a state directory."""
    from groupcoord import log_check
    from groupcoord.coordinator.runtime.log_frames import LogCorruptError

    try:
        check = log_check.check_directory(Path(args.dir))
    except (OSError, ValueError) as e:
        print(f"groupcoord: {e}", file=sys.stderr)
        return 2
    for line in log_check.describe(check):
        print(line)
    if args.log_cmd == "check" or not check.damaged:
        return 1 if check.damaged else 0
    if not args.yes:
        print("nothing changed: pass --yes to truncate (stop the server using this directory first)")
        return 1
    try:
        for line in log_check.repair(check):
            print(line)
    except LogCorruptError as e:
        print(f"groupcoord: cannot repair: {e.path.name} is a damaged snapshot at byte {e.offset} ({e.reason}); "
              "restore the directory from a backup", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    from groupcoord import cli_help

    p = cli_help.Parser(prog="groupcoord", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR (default INFO)")
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("serve", help="run the coordinator (gRPC + Prometheus metrics)",
                       description="Run the coordinator until SIGTERM/SIGINT (graceful: in-flight RPCs finish).")
    s.add_argument("--listen", default=DEFAULT_SERVER, help=f"gRPC address HOST:PORT (default {DEFAULT_SERVER})")
    s.add_argument("--metrics-port", type=int, default=None,
                   help="serve Prometheus metrics on this port at /metrics (default: off; 0 = any free port)")
    s.add_argument("--metrics-host", default="127.0.0.1", help="address for the metrics endpoint")
    s.add_argument("--http-port", type=int, default=None,
                   help="serve the live web view of groups, its JSON API (/api/...) and /metrics on this port "
                        "(default: off; 0 = any free port)")
    s.add_argument("--http-host", default="127.0.0.1",
                   help="address for the web view (default 127.0.0.1; with --acl-file the API needs a token of "
                        "--auth-tokens, with --tls-cert it is HTTPS)")
    s.add_argument("--front-end", choices=("auto", "native", "grpcio"), default="auto",
                   help="who serves gRPC: native, the compiled front end (Rust tonic, native/frontend: a third of "
                        "grpcio's CPU per heartbeat), or grpcio (grpc.aio); both serve TLS, tokens and ACLs. auto "
                        "(default): native unless it is not built or client certificates are required "
                        "(--tls-client-ca: grpcio, which also accepts X.509 v1 certificates)")
    s.add_argument("--config", help="TOML file with [config] (Kafka config names), [topics], [kafka] tables")
    s.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="a broker config, e.g. group.consumer.heartbeat.interval.ms=5000 (repeatable); "
                        "queued.max.requests (default 20000) sizes gRPC's queue of calls not yet taken up, which "
                        "must hold every member rejoining at once after a restart")
    s.add_argument("--topic", action="append", metavar="NAME:PARTITIONS",
                   help="a topic for the static metadata source, or to create in the embedded Kafka (repeatable)")
    s.add_argument("--bootstrap-servers", help="read topic metadata and lag from this Kafka cluster")
    s.add_argument("--embedded-kafka", action="store_true",
                   help="start librdkafka's mock Kafka cluster in-process and use it (topics from --topic)")
    s.add_argument("--embedded-brokers", type=int, default=1, help="brokers of the embedded cluster (default 1)")
    s.add_argument("--state-dir", help="persist groups and offsets here (an append-only log plus snapshots); "
                   "without it state is in memory only and lost on restart")
    s.add_argument("--state-topic", metavar="NAME",
                   help="keep groups and offsets in this compacted Kafka topic instead (needs --bootstrap-servers); "
                   "every instance with the same topic shares the groups, Kafka deciding which instance serves which")
    s.add_argument("--state-partitions", type=int, default=50, metavar="N",
                   help="partitions of --state-topic (default 50); must match the topic if it exists")
    s.add_argument("--state-session-timeout-ms", type=int, default=10_000, metavar="MS",
                   help="how long a vanished instance keeps its groups before the others take them (default 10000)")
    s.add_argument("--state-lease-margin-ms", type=int, default=None, metavar="MS",
                   help="serve a partition only until its last confirmed membership + session timeout - this margin "
                        "(default: a fifth of the session timeout)")
    s.add_argument("--advertised-listener", metavar="HOST:PORT",
                   help="the address clients reach this instance on, as FindCoordinator answers it "
                   "(default: the --listen address)")
    s.add_argument("--metadata-refresh-ms", type=int, default=5000,
                   help="how often to re-read topic metadata from Kafka (default 5000)")
    s.add_argument("--lag-refresh-ms", type=int, default=2000,
                   help="how often to re-read log start/end offsets from Kafka for lag-aware assignors (default 2000)")
    s.add_argument("--tls-cert", help="serve TLS with this certificate chain (PEM); with --tls-key")
    s.add_argument("--tls-key", help="the server certificate's private key (PEM)")
    s.add_argument("--tls-client-ca", help="require client certificates signed by this CA (mTLS); the principal "
                   "is User:<subject CN>")
    s.add_argument("--auth-tokens", help="TOML file with a [tokens] table \"TOKEN\" = \"User:NAME\"; clients send "
                   "`authorization: Bearer TOKEN`")
    s.add_argument("--acl-file", help="authorize every request with the [[acl]] entries of this TOML file "
                   "(deny by default; reloaded when it changes)")
    s.add_argument("--health-port", type=int, metavar="PORT",
                   help="also serve gRPC health in plaintext on this port (probes without client certificates)")
    s.add_argument("--workers", type=int, default=1, metavar="N",
                   help="run N coordinator processes (one per core), worker K on port PORT+K with its own "
                   "--state-dir/worker-K, splitting the groups as the state partitions do (default 1)")
    s.add_argument("--worker-index", type=int, default=None, help=argparse.SUPPRESS)
    s.set_defaults(fn=cli_serve.cmd_serve)

    server = cli_help.Parser(add_help=False)
    server.add_argument("--server", default=DEFAULT_SERVER, help=f"coordinator address (default {DEFAULT_SERVER})")
    server.add_argument("--tls-ca", help="connect with TLS, trusting this CA file (PEM)")
    server.add_argument("--tls-cert", help="client certificate (PEM) for mTLS; with --tls-key")
    server.add_argument("--tls-key", help="the client certificate's private key (PEM)")
    server.add_argument("--token", help="bearer token (default: $GROUPCOORD_TOKEN)")
    g = sub.add_parser("groups", help="list, describe or delete groups; reset or delete their offsets")
    gsub = g.add_subparsers(dest="groups_cmd", required=True)
    gl = gsub.add_parser("list", help="list groups", parents=[server])
    gl.add_argument("--state", action="append", help="only groups in this state (repeatable)")
    gl.add_argument("--type", action="append", choices=["consumer", "classic", "streams"], help="only this group type")
    gl.add_argument("--json", action="store_true", help="machine-readable output")
    from groupcoord import cli_groups

    cli_groups.add_parsers(gsub, server, cli_admin.cmd_groups)
    gx = gsub.add_parser("delete", help="delete empty groups and their committed offsets",
                         parents=[server])
    gx.add_argument("group", nargs="+")
    g.set_defaults(fn=cli_admin.cmd_groups)

    c = sub.add_parser("config", help="read or change a group's dynamic configs")
    csub = c.add_subparsers(dest="config_cmd", required=True)
    cg = csub.add_parser("get", help="show a group's configs", parents=[server])
    cg.add_argument("group")
    cg.add_argument("--json", action="store_true")
    cs = csub.add_parser("set", help="set (NAME=VALUE) or --delete group config overrides",
                         parents=[server])
    cs.add_argument("group")
    cs.add_argument("pairs", nargs="*", metavar="NAME=VALUE")
    cs.add_argument("--delete", action="append", metavar="NAME", help="remove an override (repeatable)")
    cs.add_argument("--validate-only", action="store_true", help="check without changing anything")
    c.set_defaults(fn=cli_admin.cmd_config)

    lg = sub.add_parser("log", help="check a --state-dir for damage, or repair it by truncating")
    lsub = lg.add_subparsers(dest="log_cmd", required=True)
    lc = lsub.add_parser("check", help="report damage: files, operations, records, first bad byte, what a repair "
                         "drops; exit 1 if damaged")
    lc.add_argument("dir", help="the --state-dir")
    lr = lsub.add_parser("repair", help="truncate the first damaged log at its first bad byte and remove later "
                         "logs (only with --yes); stop the server first")
    lr.add_argument("dir", help="the --state-dir")
    lr.add_argument("--yes", action="store_true", help="really truncate (without it: say what would be dropped)")
    lg.set_defaults(fn=cmd_log)

    sim = sub.add_parser("simulate", help="print KIP-1263's rebalance-time tables from a deterministic simulation",
                         add_help=False)
    sim.add_argument("rest", nargs=argparse.REMAINDER)
    sim.set_defaults(fn=cmd_simulate)

    d = sub.add_parser("demo", help="Kafka + coordinator + Spark drivers, end to end (the README's main command)",
                       add_help=False)
    d.add_argument("rest", nargs=argparse.REMAINDER)
    d.set_defaults(fn=cmd_demo)

    f = sub.add_parser("faults", help="the fault-injection suite: kill -9, SIGSTOP, proxy faults; prints figures",
                       add_help=False)
    f.add_argument("rest", nargs=argparse.REMAINDER)

    from groupcoord import acls_cli

    acls_cli.add_parser(sub)
    return cli_help.add_examples(p)


PASS_THROUGH = {"simulate": "groupcoord.coordinator.simulation", "demo": "groupcoord.demo",
                "faults": "groupcoord.faults.run"}


def _subcommand_index(argv: list[str]) -> int | None:
    """Index of the subcommand word, skipping the global `--log-level X` option."""
    i = 0
    while i < len(argv):
        if argv[i] == "--log-level":
            i += 2
        elif argv[i].startswith("--log-level="):
            i += 1
        else:
            return i if not argv[i].startswith("-") else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:  # a newcomer's first call: the commands and the first thing to try
        from groupcoord.cli_help import overview

        print(overview(build_parser()))
        return 0
    i = _subcommand_index(argv)
    if i is not None and argv[i] in PASS_THROUGH:
        # `simulate` and `demo` own their flags (and --help): hand them everything after the subcommand.
        import importlib

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        return int(importlib.import_module(PASS_THROUGH[argv[i]]).main(argv[i + 1:]) or 0)
    args = build_parser().parse_args(argv)
    args.argv = argv  # `serve --workers N` starts its workers with the same arguments
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.fn(args))
    except CliError as e:
        print(f"groupcoord: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
