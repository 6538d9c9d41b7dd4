"""`groupcoord serve`: read and check every option before anything starts, build the server, run it until
SIGTERM or SIGINT.

Kept apart from cli.py (the parsers and `main`) and cli_admin.py (the commands that call a running server):
serving is the one command that owns a process, so its checks (ports free, front end usable, TLS and ACL
files readable), its `--workers` split and its process-wide tuning live here together.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import sys
import tomllib
from pathlib import Path
from typing import Any

from groupcoord.cli_base import CliError, _parse_set, _short


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
        _front_end_usable(args.front_end, security)
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


def _front_end_usable(front_end: str, security: dict[str, Any]) -> None:
    """The server's own choice of front end, made before anything starts: --front-end native refuses a missing
    build in one line."""
    from groupcoord.coordinator.runtime.native_server import choose_front_end
    try:
        choose_front_end(front_end, security.get("tls"))
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

