"""Assembles a running coordinator: shard + runtime + gRPC server (with health and reflection) + metrics.

`CoordinatorServer` is used by `groupcoord serve` and by tests; `ServerThread` runs one on a private event
loop in a background thread, so synchronous code (tests, benchmarks, the demo) can start and stop it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc
from prometheus_client import start_http_server

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.shard import GroupCoordinatorShard, LagProvider
from groupcoord.coordinator.runtime.acl import AclFileWatcher, Authorizer
from groupcoord.coordinator.runtime.auth import TlsOptions, TokenStore
from groupcoord.coordinator.runtime.counts import shard_counts
from groupcoord.coordinator.runtime.executor import BackgroundExecutor
from groupcoord.coordinator.runtime.kafka_log import KafkaRecordLog
from groupcoord.coordinator.runtime.kafka_state_options import KafkaStateOptions, parse_host_port
from groupcoord.coordinator.runtime.log import FileLog
from groupcoord.coordinator.runtime.metrics import CoordinatorCollector, CoordinatorMetrics
from groupcoord.coordinator.runtime.native_server import NativeServer, choose_front_end
from groupcoord.coordinator.runtime.pipeline import Pipeline
from groupcoord.coordinator.runtime.ports import MetadataSource, RecordSink
from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime
from groupcoord.coordinator.runtime.service import GroupCoordinatorService
from groupcoord.coordinator.runtime.sharding import PartitionOwnership
from groupcoord.coordinator.runtime.share_service import ShareGroupService
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.coordinator.runtime.streams_service import StreamsService
from groupcoord.coordinator.runtime.topic_creation import StaticTopicCreator
from groupcoord.coordinator.runtime.web import WebView
from groupcoord.coordinator.runtime.workers import StaticOwnership, WorkerLayout
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import share_pb2 as spb
from groupcoord.wire.v1 import streams_pb2

log = logging.getLogger("groupcoord.server")

SERVICE = pb.DESCRIPTOR.services_by_name["GroupCoordinator"]
SHARE_SERVICE = spb.DESCRIPTOR.services_by_name["ShareGroupCoordinator"]
STREAMS_SERVICE = streams_pb2.DESCRIPTOR.services_by_name["StreamsGroupCoordinator"]
SERVICE_NAME, SHARE_SERVICE_NAME, STREAMS_SERVICE_NAME = (
    SERVICE.full_name, SHARE_SERVICE.full_name, STREAMS_SERVICE.full_name)


@dataclass
class ServerOptions:
    listen: str = "127.0.0.1:50051"
    metrics_port: int | None = None  # None: no metrics endpoint; 0: any free port
    metrics_host: str = "127.0.0.1"
    config: BrokerConfig = field(default_factory=BrokerConfig.from_mapping)
    metadata_source: MetadataSource | None = None
    lag_provider: LagProvider | None = None
    sink: RecordSink | None = None
    metadata_poll_s: float = 1.0
    state_dir: Path | None = None  # persist records here (FileLog); None: in memory only
    # persist records in a Kafka topic instead, and share the groups with every instance using the same topic
    kafka_state: KafkaStateOptions | None = None
    advertised_listener: str | None = None  # HOST:PORT clients reach this instance on; default: the listen address
    workers: WorkerLayout | None = None  # one of `serve --workers N`: serve only this worker's groups
    extensions: list[Callable[[CoordinatorRuntime, grpc.aio.Server], None]] = field(default_factory=list)
    # extra gauges: name -> (help, read), e.g. the age of the Kafka metadata and lag snapshots
    gauges: dict[str, tuple[str, Callable[[], float]]] = field(default_factory=dict)
    tls: TlsOptions | None = None  # serve TLS (and require client certificates when it has a client CA)
    # authorization on (deny by default): the ACLs of this file, re-read when it changes; needs an
    # authentication mode (client certificates or tokens)
    acl_file: Path | None = None
    acl_reload_interval_s: float = 1.0
    tokens: TokenStore | None = None  # bearer tokens (`authorization: Bearer <token>`) -> principals
    health_port: int | None = None  # also serve gRPC health (only) in plaintext here, for probes without certs
    http_port: int | None = None  # the web view, its JSON API and /metrics (coordinator/runtime/web.py); 0: any
    http_host: str = "127.0.0.1"
    # creates streams groups' missing internal topics; None: in memory over a static metadata source, else none
    topic_creator: Any = None
    # "auto" (native where it is built, unless client certificates are required: grpcio), "grpcio" (grpc.aio) or
    # "native": the compiled front end (native/frontend, coordinator/runtime/native_server.py)
    front_end: str = "auto"


def transport_queue_options(config: BrokerConfig) -> list[tuple[str, int]]:
    """gRPC's queue of calls not yet taken up, sized by queued.max.requests: a burst of joins (every member of
    a restarted coordinator at once) waits there instead of being refused. Soft and hard limit alike, so no
    call is refused at random below the size (gRPC refuses with a rising probability between the two)."""
    queued = config["queued.max.requests"]
    options = [("grpc.server.max_pending_requests", queued), ("grpc.server.max_pending_requests_hard_limit", queued)]
    if config["groupcoord.grpc.max.concurrent.streams"]:
        options.append(("grpc.max_concurrent_streams", config["groupcoord.grpc.max.concurrent.streams"]))
    return options


class CoordinatorServer:
    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.port = 0
        self.metrics_port: int | None = None
        self._server: grpc.aio.Server | None = None
        self._metrics_http: Any = None
        self.runtime: CoordinatorRuntime | None = None
        self.health = health.aio.HealthServicer()
        self.log: FileLog | None = None
        self.kafka_log: KafkaRecordLog | None = None
        self.ownership: PartitionOwnership | None = None
        self.authorizer: Authorizer | None = None
        self.acl_watcher: AclFileWatcher | None = None
        self.health_port: int | None = None
        self._health_server: grpc.aio.Server | None = None
        self.web: WebView | None = None
        self.http_port: int | None = None
        self.front_end = options.front_end  # who serves gRPC once started: "grpcio" or "native"

    async def start(self) -> None:
        """Process-wide settings (the GC's, the switch interval) are `groupcoord serve`'s (cli_serve.py), not the
        library's: a server built in a test or an application leaves them as they are."""
        o = self.options
        # Before anything starts: a native front end asked for and not built is refused in one line.
        self.front_end, why = choose_front_end(o.front_end, o.tls)
        log.info("gRPC served by %s (%s)", "the native front end" if self.front_end == "native" else "grpcio", why)
        metrics = CoordinatorMetrics(o.config["group.coordinator.background.threads"])
        for assignor in o.config["group.consumer.assignors"]:
            metrics.assignor_time.touch(assignor)
        image = o.metadata_source.snapshot() if o.metadata_source is not None else None
        shard = GroupCoordinatorShard(o.config, lambda: str(uuid.uuid4()), lag_provider=o.lag_provider)
        if image is not None:
            shard.metadata = image
        executor = BackgroundExecutor(o.config["group.coordinator.background.threads"], metrics,
                                      o.config["group.coordinator.background.executor"],
                                      o.config["group.coordinator.background.niceness"],
                                      o.config["group.coordinator.background.idle.scheduling"])
        sink = o.sink
        if o.kafka_state is not None:
            if o.state_dir is not None or (sink is not None and not isinstance(sink, KafkaRecordLog)):
                raise ValueError("kafka_state keeps the records in Kafka: set no state_dir, and a sink only if it "
                                 "is a KafkaRecordLog")
            self.kafka_log = sink if isinstance(sink, KafkaRecordLog) else o.kafka_state.record_log()
            sink = self.kafka_log
            await asyncio.to_thread(self.kafka_log.start)
        if o.state_dir is not None and sink is None:
            sink = FileLog(o.state_dir, o.config["groupcoord.log.fsync"], o.config["groupcoord.log.fsync.interval.ms"])
        if isinstance(sink, FileLog):
            self.log = sink
            sink.on_flush = metrics.log_flush_time.observe
        runtime = CoordinatorRuntime(shard, metrics, executor, sink, o.metadata_source, o.metadata_poll_s)
        runtime.topic_creator = o.topic_creator
        if o.topic_creator is None and isinstance(o.metadata_source, StaticMetadataSource):
            runtime.topic_creator = StaticTopicCreator(o.metadata_source)
        if self.log is not None:
            runtime.snapshot_every = o.config["groupcoord.log.snapshot.records"]
        self.runtime = runtime
        if self.kafka_log is not None and o.kafka_state is not None:
            # Routing from the first request on: until Kafka assigns partitions, every group is NOT_COORDINATOR.
            runtime.router = self.ownership = PartitionOwnership(runtime, self.kafka_log, o.kafka_state)
            metrics.gauges.update(self.ownership.gauges())
        if o.workers is not None:
            runtime.router = StaticOwnership(o.workers)
        metrics.gauges.update(o.gauges)

        def not_serving(_: Exception) -> None:
            asyncio.ensure_future(self.health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.NOT_SERVING))
            asyncio.ensure_future(self.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING))

        runtime.on_failure.append(not_serving)
        metrics.register(CoordinatorCollector(metrics, functools.partial(shard_counts, runtime)))

        # The transport's bounds come first: a request over socket.request.max.bytes is refused by gRPC
        # (RESOURCE_EXHAUSTED) before a byte of it is parsed; responses are bounded the same way.
        c = o.config
        server: Any = grpc.aio.server(options=[
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", c["socket.request.max.bytes"]),
            ("grpc.max_send_message_length", c["groupcoord.response.max.bytes"]),
            *transport_queue_options(c),
        ], maximum_concurrent_rpcs=c["groupcoord.max.concurrent.requests"] or None) if self.front_end == "grpcio" else \
            NativeServer(c["socket.request.max.bytes"], c["groupcoord.response.max.bytes"],
                         c["groupcoord.max.concurrent.requests"], c["groupcoord.grpc.max.concurrent.streams"])
        if o.acl_file is not None:
            if o.tokens is None and (o.tls is None or o.tls.client_ca is None):
                raise ValueError("an ACL file needs an authentication mode: client certificates or tokens")
            self.authorizer = Authorizer()
            self.acl_watcher = AclFileWatcher(o.acl_file, self.authorizer, o.acl_reload_interval_s)
            self.acl_watcher.start()
            log.info("authorization on: %d ACLs from %s", len(self.authorizer.acls), o.acl_file)
        if o.tokens is not None and o.tls is None:
            log.warning("bearer tokens over plaintext: anyone on the network path can read and replay them; "
                        "serve TLS (--tls-cert, --tls-key)")
        pipeline = Pipeline(self.authorizer, o.tokens)
        pipeline.add(server, GroupCoordinatorService(runtime), SERVICE)
        pipeline.add(server, ShareGroupService(runtime), SHARE_SERVICE)
        pipeline.add(server, StreamsService(runtime), STREAMS_SERVICE)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        # The asyncio servicer on either front end (`enable_server_reflection` picks the thread-pool one for any
        # server that is not a grpc.aio.Server, and the native front end runs handlers on this loop).
        reflection_pb2_grpc.add_ServerReflectionServicer_to_server(reflection.aio.ReflectionServicer(
            (SERVICE_NAME, SHARE_SERVICE_NAME, STREAMS_SERVICE_NAME,
             health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME)), server)
        for extend in o.extensions:
            extend(runtime, server)
        try:
            if o.tls is None:
                self.port = server.add_insecure_port(o.listen)
            elif self.front_end == "native":  # from the PEM files: grpc's credentials cannot be read back
                self.port = server.add_tls_port(o.listen, o.tls)
            else:
                self.port = server.add_secure_port(o.listen, o.tls.server_credentials())
        except RuntimeError:  # grpc's "Failed to bind": the port is taken or the address is not ours
            self.port = 0
        if self.port == 0:
            raise OSError(f"cannot listen on {o.listen}: the address is in use or not available")
        host = o.listen.rsplit(":", 1)[0].strip("[]") or "127.0.0.1"
        runtime.advertised = ("127.0.0.1" if host in ("0.0.0.0", "::", "") else host, self.port)
        if o.advertised_listener:
            runtime.advertised = parse_host_port(o.advertised_listener)
        if o.metrics_port is not None:  # before serving: a taken metrics port must not leave a half-started server
            try:
                http_server, _thread = start_http_server(o.metrics_port, addr=o.metrics_host,
                                                         registry=metrics.registry)
            except OSError as e:
                raise OSError(f"cannot serve metrics on {o.metrics_host}:{o.metrics_port}: {e.strerror}") from None
            self._metrics_http = http_server
            self.metrics_port = http_server.server_port
        if o.health_port is not None:
            await self._start_health_server(o.health_port)
        if o.http_port is not None:
            self.web = WebView(runtime, metrics.registry, o.http_host, o.http_port, tokens=o.tokens,
                               authorizer=self.authorizer, tls=o.tls)
            self.http_port = await self.web.start()
        await server.start()  # serving already: requests get COORDINATOR_LOAD_IN_PROGRESS until loaded
        self._server = server
        report = await runtime.start(self.log.load if self.log is not None else None)
        # Worker processes are started (warmed) only once the state loaded: a server that stops at load (a corrupt
        # log) must not leave a forkserver child starting against a parent that is already gone.
        executor.start()
        if report is not None:
            log.info("loaded %s: snapshot %d (%d records) + %d log records in %.2f s%s", o.state_dir,
                     report.snapshot_generation, report.snapshot_records, report.log_records, report.seconds,
                     f"; dropped a torn tail of {report.truncated_bytes} bytes" if report.truncated_bytes else "")
        if self.ownership is not None:
            self.ownership.start(runtime.advertised)
        await self.health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
        await self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        log.info("groupcoord serving on %s (port %d), metrics on %s", o.listen, self.port,
                 self.metrics_port if self.metrics_port is not None else "-")

    async def _start_health_server(self, port: int) -> None:
        """Health alone, in plaintext, on the listen host: with client certificates required on the main port,
        a probe would otherwise need a certificate."""
        health_server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        health_pb2_grpc.add_HealthServicer_to_server(self.health, health_server)
        host = self.options.listen.rsplit(":", 1)[0]
        try:
            self.health_port = health_server.add_insecure_port(f"{host}:{port}")
        except RuntimeError:
            self.health_port = 0
        if self.health_port == 0:
            raise OSError(f"cannot serve health on {host}:{port}: the address is in use or not available")
        await health_server.start()
        self._health_server = health_server

    async def stop(self, grace_s: float = 2.0) -> None:
        """Graceful: report NOT_SERVING, finish in-flight RPCs within `grace_s`, then stop the runtime."""
        await self.health.enter_graceful_shutdown()
        if self.ownership is not None:
            # Leave the coordinators' group first and answer (NOT_COORDINATOR: clients find the new owner) until
            # others have claimed the partitions; not a grace period in which this instance refuses calls and
            # no other one owns its groups yet.
            held = sorted(self.ownership.owned())
            await asyncio.to_thread(self.ownership.stop)
            await asyncio.to_thread(self.ownership.wait_claimed_elsewhere, held, grace_s)
        if self.acl_watcher is not None:
            self.acl_watcher.stop()
        if self._health_server is not None:
            await self._health_server.stop(0)
        if self.web is not None:
            await self.web.stop()
        if self._server is not None:
            await self._server.stop(grace_s)
        if self.runtime is not None:
            await self.runtime.stop()
        if self.kafka_log is not None:
            await asyncio.to_thread(self.kafka_log.close)
        if self._metrics_http is not None:
            self._metrics_http.shutdown()
            self._metrics_http.server_close()
        if self.log is not None:
            self.log.close()

    async def wait(self) -> None:
        assert self._server is not None
        await self._server.wait_for_termination()


class ServerThread:
    """A CoordinatorServer on its own event loop thread: `start()` blocks until it serves, `stop()` joins."""

    def __init__(self, options: ServerOptions) -> None:
        self.server = CoordinatorServer(options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="groupcoord-server", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def start(self) -> ServerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=30)
        return self

    def call(self, coro: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=timeout)

    def stop(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.server.stop(0.5), self._loop).result(timeout=30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
