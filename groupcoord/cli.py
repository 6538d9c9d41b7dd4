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

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import signal
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_SERVER = "127.0.0.1:50051"
ADMIN_TIMEOUT_S = 10
ADMIN_MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # the server's default groupcoord.response.max.bytes


class CliError(Exception):
    """A mistake the user can fix: `main` prints it as one line `groupcoord: ...` and exits 1."""


def _short(value: str, limit: int = 64) -> str:
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}..."


def _parse_set(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise CliError(f"--set expects key=value, got {_short(item)}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


# --- serve ------------------------------------------------------------------------------------------------
def load_config_file(path: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(broker configs, topics, kafka settings) from a TOML file with [config], [topics], [kafka] tables."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise CliError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"cannot read config file {path}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise CliError(f"config file {path} is not valid TOML: {e}") from None
    unknown = set(data) - {"config", "topics", "kafka"}
    if unknown:
        raise CliError(f"config file {path}: unknown table(s) {', '.join(sorted(unknown))}; "
                         "expected [config], [topics], [kafka]")
    return dict(data.get("config", {})), dict(data.get("topics", {})), dict(data.get("kafka", {}))


def _listen_port(flag: str, address: str) -> tuple[str, int]:
    """HOST:PORT with a port in 1..65535 (port 0, "any free port", only makes sense in tests)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError(f"{flag} expects HOST:PORT with a port in 1..65535, got {_short(address)}")
    return host.strip("[]"), int(port)


def _check_free(flag: str, host: str, port: int) -> None:
    """Bind once before the server does, so that a port in use is one clear line (not gRPC's log output)."""
    import socket

    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise CliError(f"{flag}: cannot resolve {_short(host)}: {e.strerror}") from None
    family, kind, proto, _, sockaddr = infos[0]
    with socket.socket(family, kind, proto) as s:
        # SO_REUSEADDR as the gRPC server sets it: TIME_WAIT connections left by a killed predecessor do not
        # make the port "in use", a listening socket still does.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(sockaddr)
        except OSError as e:
            raise CliError(f"{flag}: cannot listen on port {port} of {host or '*'}: {e.strerror}") from None


def _split_workers(args: argparse.Namespace) -> int | None:
    """`--workers N`: the parent supervises (returns its exit code); a worker (`--worker-index K`) gets its own
    port, metrics port and state directory (returns None and serves). See coordinator/runtime/workers.py."""
    from groupcoord.coordinator.runtime.workers import LayoutMismatch, WorkerLayout, check_layout

    n = args.workers
    if not 1 <= n <= 64:
        print("groupcoord: --workers expects 1..64", file=sys.stderr)
        return 2
    if args.state_topic or args.embedded_kafka:
        print("groupcoord: --workers splits the groups over file logs; with --state-topic run one instance per "
              "core instead", file=sys.stderr)
        return 2
    try:
        host, base = _listen_port("--listen", args.listen)
        adv_host, adv_base = (_listen_port("--advertised-listener", args.advertised_listener)
                              if args.advertised_listener else (host, base))
        if base + n > 65536 or adv_base + n > 65536:
            raise CliError("--workers N needs ports PORT..PORT+N-1 below 65536")
        if args.worker_index is None:
            for k in range(n):
                _check_free("--listen", host, base + k)
                if args.metrics_port:
                    _check_free("--metrics-port", args.metrics_host, args.metrics_port + k)
                if args.http_port:
                    _check_free("--http-port", args.http_host, args.http_port + k)
            if args.state_dir:
                check_layout(Path(args.state_dir), n, args.state_partitions)
            from groupcoord.supervisor import supervise

            return supervise(args.argv, n, [base + k for k in range(n)])
    except LayoutMismatch as e:
        print(f"groupcoord: {e}", file=sys.stderr)
        return 2
    except CliError as e:
        print(f"groupcoord: {e}", file=sys.stderr)
        return 2
    k = args.worker_index
    if not 0 <= k < n:
        print("groupcoord: --worker-index must be below --workers", file=sys.stderr)
        return 2
    listen_host = f"[{host}]" if ":" in host else host
    args.listen = f"{listen_host}:{base + k}"
    if args.metrics_port:
        args.metrics_port += k
    if args.http_port:  # each worker's web view shows the groups that worker serves
        args.http_port += k
    if args.state_dir:
        args.state_dir = str(Path(args.state_dir) / f"worker-{k}")
    adv = "127.0.0.1" if adv_host in ("0.0.0.0", "::", "") else adv_host
    args.advertised_listener = f"{f'[{adv}]' if ':' in adv else adv}:{adv_base + k}"
    args.layout = WorkerLayout(k, n, args.state_partitions, adv, adv_base)
    return None


def tune_serving_process() -> None:
    """Process-wide settings for a process that only serves (`groupcoord serve`, each of its workers): set here,
    at the entry point, never by the library, so a server built in a test or an application changes nothing
    for the rest of that process.

    Most of what the coordinator allocates per request is acyclic and freed by reference counting; the default
    GC thresholds make full collections (tens of ms with many members) frequent enough to show in p99 latency.
    Collect less often, and never rescan what exists at start-up. Offloaded assignor runs are Python code on
    executor threads: hand the GIL back to the event loop every 1 ms (default 5 ms) so heartbeats of other
    groups wait less while an assignor runs."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    sys.setswitchinterval(0.001)


def cmd_serve(args: argparse.Namespace) -> int:
    from groupcoord.coordinator.core.config import BrokerConfig, ConfigError
    from groupcoord.coordinator.runtime.server import CoordinatorServer, ServerOptions
    from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource, parse_topic_flag

    raw: dict[str, Any] = {}
    topics: dict[str, Any] = {}
    kafka: dict[str, Any] = {}
    if args.config:
        raw, topics, kafka = load_config_file(Path(args.config))
    raw.update(_parse_set(args.set or []))
    try:
        config = BrokerConfig.from_mapping(raw)
        for flag in args.topic or []:
            name, count = parse_topic_flag(flag)
            topics[name] = count
    except (ConfigError, ValueError) as e:
        print(f"groupcoord: invalid configuration: {e}", file=sys.stderr)
        return 2

    bootstrap = args.bootstrap_servers or kafka.get("bootstrap.servers")
    if args.state_topic and args.state_dir:
        print("groupcoord: --state-topic and --state-dir both say where state lives; choose one", file=sys.stderr)
        return 2
    if args.state_topic and not (bootstrap or args.embedded_kafka):
        print("groupcoord: --state-topic needs --bootstrap-servers (or --embedded-kafka)", file=sys.stderr)
        return 2
    if args.state_partitions < 1 or args.state_session_timeout_ms < 1:
        print("groupcoord: --state-partitions and --state-session-timeout-ms must be positive", file=sys.stderr)
        return 2
    margin = args.state_lease_margin_ms
    if margin is not None and not 0 <= margin < args.state_session_timeout_ms:
        print("groupcoord: --state-lease-margin-ms must be at least 0 and below --state-session-timeout-ms",
              file=sys.stderr)
        return 2
    if args.advertised_listener:
        from groupcoord.coordinator.runtime.kafka_state_options import parse_host_port

        try:
            parse_host_port(args.advertised_listener)
        except ValueError as e:
            print(f"groupcoord: --advertised-listener: {e}", file=sys.stderr)
            return 2
    if args.workers != 1 or args.worker_index is not None:
        supervised = _split_workers(args)
        if supervised is not None:
            return supervised
    try:
        listen_host, listen_port = _listen_port("--listen", args.listen)
        for flag, port in (("--metrics-port", args.metrics_port), ("--http-port", args.http_port)):
            if port is not None and not 0 <= port < 65536:
                raise CliError(f"{flag} expects a port in 1..65535 (or 0: any free port), got {port}")
    except CliError as e:
        print(f"groupcoord: {e}", file=sys.stderr)
        return 2
    _check_free("--listen", listen_host, listen_port)
    if args.metrics_port:
        _check_free("--metrics-port", args.metrics_host, args.metrics_port)
    if args.http_port:
        _check_free("--http-port", args.http_host, args.http_port)
    embedded = None
    cleanups: list[Any] = []
    metadata_source: Any
    lag_provider: Any = None
    if args.embedded_kafka:
        from groupcoord.embedded_kafka import EmbeddedKafka

        embedded = EmbeddedKafka(brokers=args.embedded_brokers)
        for name, spec in topics.items():
            count = spec if isinstance(spec, int) else spec[0] if isinstance(spec, tuple) else spec["partitions"]
            embedded.create_topic(name, int(count))
        if args.state_topic:  # the mock cluster has no CreateTopics API
            embedded.create_topic(args.state_topic, args.state_partitions)
        bootstrap = embedded.bootstrap_servers
        print(f"embedded Kafka: bootstrap.servers={bootstrap}", flush=True)
        cleanups.append(embedded.close)
    gauges: dict[str, Any] = {}
    if bootstrap:
        from groupcoord.coordinator.runtime.kafka_lag import KafkaLagSource, partitions_of
        from groupcoord.coordinator.runtime.kafka_metadata import KafkaMetadataSource

        kafka_source = KafkaMetadataSource(bootstrap, refresh_interval_s=args.metadata_refresh_ms / 1000)
        kafka_source.start()
        cleanups.insert(0, kafka_source.stop)
        lag_source = KafkaLagSource(bootstrap, partitions=lambda: partitions_of(kafka_source.snapshot()),
                                    refresh_interval_s=args.lag_refresh_ms / 1000)
        lag_source.start()
        cleanups.insert(0, lag_source.stop)
        metadata_source, lag_provider = kafka_source, lag_source
        from groupcoord.coordinator.runtime.topic_creation import FunctionTopicCreator, KafkaTopicCreator

        topic_creator: Any = KafkaTopicCreator(bootstrap, on_created=kafka_source.refresh_now)
        if embedded is not None:  # the mock cluster has no CreateTopics API
            topic_creator = FunctionTopicCreator(
                embedded.create_topic, lambda name: name in kafka_source.snapshot().by_name,
                on_created=kafka_source.refresh_now)
        gauges["groupcoord_kafka_metadata_age_seconds"] = (
            "Seconds since topic metadata was last read from Kafka", kafka_source.age_seconds)
        gauges["groupcoord_kafka_lag_snapshot_age_seconds"] = (
            "Seconds since log start/end offsets were last read from Kafka (lag-aware assignors use them)",
            lag_source.snapshot_age_seconds)
    else:
        metadata_source = StaticMetadataSource(topics)
        topic_creator = None  # the server creates them in the static source

    kafka_state = None
    if args.state_topic:
        from groupcoord.coordinator.runtime.kafka_state_options import KafkaStateOptions

        kafka_state = KafkaStateOptions(str(bootstrap), topic=args.state_topic, partitions=args.state_partitions,
                                        session_timeout_ms=args.state_session_timeout_ms, lease_margin_ms=margin)
    try:
        security = _security_options(args)
        _front_end_usable(args.front_end)
        if args.http_port is not None and args.acl_file and not args.auth_tokens:
            raise CliError("--http-port with --acl-file needs --auth-tokens: the web view's API authenticates "
                           "with bearer tokens (client certificates are not asked for over HTTP)")
    except CliError as e:
        print(f"groupcoord: {e}", file=sys.stderr)
        return 2
    options = ServerOptions(**security, listen=args.listen, metrics_port=args.metrics_port,
                            metrics_host=args.metrics_host, http_port=args.http_port, http_host=args.http_host,
                            config=config, metadata_source=metadata_source, lag_provider=lag_provider,
                            gauges=gauges, state_dir=Path(args.state_dir) if args.state_dir else None,
                            kafka_state=kafka_state, advertised_listener=args.advertised_listener,
                            workers=getattr(args, "layout", None), topic_creator=topic_creator,
                            front_end=args.front_end)

    async def main() -> None:
        server = CoordinatorServer(options)
        tune_serving_process()
        await server.start()
        print(f"groupcoord serving on {args.listen} (port {server.port})"
              + (f", metrics on :{server.metrics_port}/metrics" if server.metrics_port else "")
              + (f", web view on {_web_url(options, server.http_port)}" if server.http_port else ""), flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        print("groupcoord: shutting down", flush=True)
        await server.stop(grace_s=5.0)

    from groupcoord.coordinator.runtime.auth import AuthConfigError
    from groupcoord.coordinator.runtime.kafka_log import StateTopicError
    from groupcoord.coordinator.runtime.log_frames import LogCorruptError

    try:
        asyncio.run(main())
    except (StateTopicError, LogCorruptError, AuthConfigError) as e:  # AuthConfigError: a TLS file not PEM
        print(f"groupcoord: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a port taken between the check and the bind, or a state dir we cannot write
        print(f"groupcoord: {e}", file=sys.stderr)
        return 1
    finally:
        for cleanup in cleanups:
            cleanup()
    return 0


def _front_end_usable(front_end: str) -> None:
    """The server's own choice of front end, made before anything starts: --front-end native refuses a missing
    build in one line."""
    from groupcoord.coordinator.runtime.native_server import choose_front_end
    try:
        choose_front_end(front_end)
    except (ValueError, RuntimeError) as e:
        raise CliError(str(e)) from None


def _web_url(options: Any, port: int) -> str:
    host = options.http_host if options.http_host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    return f"{'https' if options.tls is not None else 'http'}://{f'[{host}]' if ':' in host else host}:{port}/"


def _security_options(args: argparse.Namespace) -> dict[str, Any]:
    """The TLS, token and ACL options of `serve`, read and checked before anything starts."""
    from groupcoord.coordinator.runtime.acl import AclError, load_acls
    from groupcoord.coordinator.runtime.auth import AuthConfigError, TlsOptions, TokenStore

    if (args.tls_cert is None) != (args.tls_key is None):
        raise CliError("--tls-cert and --tls-key go together")
    if args.tls_client_ca and not args.tls_cert:
        raise CliError("--tls-client-ca needs TLS: give --tls-cert and --tls-key")
    authenticated = bool(args.tls_client_ca or args.auth_tokens)
    if authenticated != bool(args.acl_file):
        raise CliError("--acl-file needs --tls-client-ca or --auth-tokens (who is calling), and those need "
                       "--acl-file (what they may do; an empty file denies everything)")
    out: dict[str, Any] = {"health_port": args.health_port}
    try:
        if args.tls_cert:
            out["tls"] = TlsOptions.from_files(Path(args.tls_cert), Path(args.tls_key),
                                               Path(args.tls_client_ca) if args.tls_client_ca else None)
        if args.auth_tokens:
            out["tokens"] = TokenStore.load(Path(args.auth_tokens))
        if args.acl_file:
            load_acls(Path(args.acl_file))
            out["acl_file"] = Path(args.acl_file)
    except AclError as e:
        raise CliError(f"--acl-file {args.acl_file}: {e}") from None
    except AuthConfigError as e:
        raise CliError(str(e)) from None
    return out


# --- admin commands ---------------------------------------------------------------------------------------
class _Stub:
    """The generated stub, with every call's gRPC failure turned into one `CliError` line."""

    def __init__(self, server: str, credentials: Any = None) -> None:
        from groupcoord.clients.credentials import NO_CREDENTIALS
        from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
        from groupcoord.wire.v1 import share_pb2_grpc as spb_grpc
        from groupcoord.wire.v1 import streams_pb2_grpc

        self.server = server
        channel = (credentials or NO_CREDENTIALS).channel(server, options=[
            ("grpc.max_receive_message_length", ADMIN_MAX_RESPONSE_BYTES)])
        self._stub = pb_grpc.GroupCoordinatorStub(channel)
        self._share = spb_grpc.ShareGroupCoordinatorStub(channel)
        self._streams = streams_pb2_grpc.StreamsGroupCoordinatorStub(channel)

    def __getattr__(self, method: str) -> Any:
        import grpc

        call = (getattr(self._streams, method) if method.startswith("StreamsGroup")
                else getattr(self._stub, method, None) or getattr(self._share, method))

        def invoke(request: Any) -> Any:
            try:
                return call(request, timeout=ADMIN_TIMEOUT_S)
            except grpc.RpcError as e:
                code = e.code() if isinstance(e, grpc.Call) else None
                if code is grpc.StatusCode.UNAVAILABLE:
                    raise CliError(f"cannot reach the coordinator at {self.server} (is it running? --server "
                                   "sets the address)") from None
                if code is grpc.StatusCode.UNAUTHENTICATED:
                    raise CliError(f"{self.server} refused the credentials: {_short(e.details() or '', 200)} "
                                   "(--tls-cert/--tls-key, or --token / $GROUPCOORD_TOKEN)") from None
                if code is grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise CliError(f"no answer from the coordinator at {self.server} within {ADMIN_TIMEOUT_S} s")\
                        from None
                details = e.details() if isinstance(e, grpc.Call) else str(e)
                raise CliError(f"{self.server}: {code.name if code else 'error'}: {_short(details or '', 200)}")\
                    from None
        return invoke


def _stub(args: argparse.Namespace) -> Any:
    from groupcoord.clients.credentials import Credentials

    try:
        credentials = Credentials.from_files(args.tls_ca, args.tls_cert, args.tls_key, args.token)
    except (OSError, ValueError) as e:
        raise CliError(f"credentials: {e}") from None
    return _Stub(args.server, credentials)


def _table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _tps(tps: Any) -> str:
    return " ".join(f"{t.topic_name or t.topic_id[:8]}:{','.join(map(str, t.partitions))}" for t in tps) or "-"


def cmd_groups(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    from groupcoord.wire.v1 import coordinator_pb2 as pb

    if getattr(args, "run", None) is not None:  # describe, reset-offsets, delete-offsets: cli_groups.py
        return int(args.run(args))
    stub = _stub(args)
    if args.groups_cmd == "list":
        resp = stub.ListGroups(pb.ListGroupsRequest(states_filter=args.state or [], types_filter=args.type or []))
        if args.json:
            print(json.dumps(MessageToDict(resp, preserving_proto_field_name=True), indent=2))
        else:
            print(_table([[g.group_id, g.group_type, g.group_state] for g in resp.groups], ["GROUP", "TYPE", "STATE"]))
        return 1 if resp.error_code else 0
    if args.groups_cmd == "delete":
        resp = stub.DeleteGroups(pb.DeleteGroupsRequest(group_ids=args.group))
        rc = 0
        for r in resp.results:
            print(f"{r.group_id}: " + ("deleted" if not r.error_code else f"error {r.error_code}: {r.error_message}"))
            rc |= int(bool(r.error_code))
        return rc
    raise AssertionError(args.groups_cmd)


def cmd_config(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    from groupcoord.wire.v1 import coordinator_pb2 as pb

    stub = _stub(args)
    if args.config_cmd == "get":
        resp = stub.DescribeGroupConfigs(pb.DescribeGroupConfigsRequest(group_ids=[args.group]))
        if args.json:
            print(json.dumps(MessageToDict(resp, preserving_proto_field_name=True), indent=2))
            return 0
        r = resp.results[0]
        if r.error_code:
            print(f"error {r.error_code}: {r.error_message}")
            return 1
        print(_table([[c.name, c.value or "(not set)", "default" if c.is_default else "group override"]
                      for c in r.configs], ["NAME", "VALUE", "SOURCE"]))
        return 0
    if args.config_cmd == "set":
        req = pb.AlterGroupConfigsRequest(group_id=args.group, validate_only=args.validate_only)
        for name, value in _parse_set(args.pairs).items():
            req.configs.add(name=name, value=value)
        for name in args.delete or []:
            req.configs.add(name=name)
        resp = stub.AlterGroupConfigs(req)
        if resp.error_code:
            print(f"error {resp.error_code}: {resp.error_message}")
            return 1
        print("validated" if args.validate_only else "updated")
        return 0
    raise AssertionError(args.config_cmd)


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
                        "(default): native unless it is not built")
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
    s.set_defaults(fn=cmd_serve)

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

    cli_groups.add_parsers(gsub, server, cmd_groups)
    gx = gsub.add_parser("delete", help="delete empty groups and their committed offsets",
                         parents=[server])
    gx.add_argument("group", nargs="+")
    g.set_defaults(fn=cmd_groups)

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
    c.set_defaults(fn=cmd_config)

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
