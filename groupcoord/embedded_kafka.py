"""An embedded Kafka for tests and demos: librdkafka's mock cluster, driven through ctypes.

Why this and not a real broker: the confluent-kafka wheel already bundles librdkafka, and librdkafka contains
a mock cluster that speaks the real Kafka wire protocol on 127.0.0.1 ports. Clients in this process, in
Spark workers and in other coordinators connect to it with an ordinary `bootstrap.servers`, so the code
under test is the code that runs against a real cluster. It needs no JVM, no network and starts in
milliseconds. It lives as long as the process that created it.

What the mock does and does not do (checked against the librdkafka bundled with confluent-kafka 2.16.1):
  - produce, fetch, Metadata, ListOffsets, OffsetCommit/OffsetFetch work;
  - DescribeTopics / DescribeCluster need a controller; the mock reports none until
    `rd_kafka_mock_set_controller_id` is called, so this wrapper sets one (broker 1) on start;
  - CreateTopics, CreatePartitions and DeleteRecords are not supported through the Admin API: topics are
    created and deleted here (`create_topic`, `delete_topic`); a partition count cannot be changed in place,
    only by deleting and re-creating the topic (which gives it a new topic id, as in Kafka);
  - fault injection: brokers down/up, round-trip time, error codes pushed per API key, partition leaders,
    broker racks (reported in Metadata and DescribeTopics/DescribeCluster).

The mock API is marked experimental by librdkafka (no ABI guarantee), which is why every function gets
explicit argtypes/restype and why the library is located next to the installed confluent_kafka package
rather than anywhere on the system: the signatures here were checked against that copy.

Command line (for other processes: Spark workers, other coordinators, tests)::

    python -m groupcoord.embedded_kafka --brokers 3 --topic orders:12 --topic events:4

prints the bootstrap servers as the first line on stdout and serves until SIGTERM, SIGINT or EOF on
stdin (when stdin is a pipe or a terminal), so a parent that dies takes the cluster with it.
"""

from __future__ import annotations

import argparse
import ctypes
import enum
import glob
import importlib.util
import os
import signal
import stat
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType

__all__ = ["ApiKey", "EmbeddedKafka", "EmbeddedKafkaError", "find_librdkafka", "main"]

_LIBRDKAFKA_ENV = "GROUPCOORD_LIBRDKAFKA"
_RD_KAFKA_PRODUCER = 0  # rd_kafka_type_t
_RD_KAFKA_CONF_OK = 0  # rd_kafka_conf_res_t
_ERRSTR_SIZE = 512


class EmbeddedKafkaError(RuntimeError):
    """The mock cluster could not be started or refused an operation."""


class ApiKey(enum.IntEnum):
    """Kafka protocol API keys, for `push_request_errors`."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68


def _candidate_libraries() -> Iterator[Path]:
    override = os.environ.get(_LIBRDKAFKA_ENV)
    if override:
        yield Path(override)
        return
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is None or not spec.submodule_search_locations:
        return
    for location in spec.submodule_search_locations:
        package_dir = Path(location)
        # manylinux wheels (auditwheel) put vendored libraries in `<package>.libs` beside the package;
        # macOS wheels (delocate) put them in `<package>/.dylibs`.
        patterns = [
            str(package_dir.parent / "confluent_kafka.libs" / "librdkafka*.so*"),
            str(package_dir / ".dylibs" / "librdkafka*.dylib"),
        ]
        for pattern in patterns:
            yield from (Path(p) for p in sorted(glob.glob(pattern)))


def find_librdkafka() -> Path:
    """The librdkafka shared library bundled with the installed confluent-kafka wheel.

    Set GROUPCOORD_LIBRDKAFKA to a path to use another copy (e.g. a confluent-kafka built against a
    system librdkafka, which has no bundled copy).
    """
    for path in _candidate_libraries():
        if path.is_file():
            return path
    raise EmbeddedKafkaError(
        "cannot find librdkafka: looked for confluent_kafka.libs/librdkafka*.so* and "
        f"confluent_kafka/.dylibs/librdkafka*.dylib next to the installed confluent_kafka package; "
        f"install the confluent-kafka wheel or set {_LIBRDKAFKA_ENV} to the library's path"
    )


class _Lib:
    """The librdkafka functions used here, each with its C signature declared (see module docstring)."""

    def __init__(self, path: Path) -> None:
        try:
            dll = ctypes.CDLL(str(path))
        except OSError as exc:
            raise EmbeddedKafkaError(f"cannot load librdkafka from {path}: {exc}") from exc
        vp, cp, i32, i16 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int16
        err_t = ctypes.c_int  # rd_kafka_resp_err_t is a C enum

        def fn(name: str, restype: object, *argtypes: object) -> ctypes._NamedFuncPointer:
            try:
                f = getattr(dll, name)
            except AttributeError as exc:
                raise EmbeddedKafkaError(
                    f"{path} does not export {name}: this librdkafka has no mock cluster "
                    "(built without it, or too old)"
                ) from exc
            f.restype = restype
            f.argtypes = argtypes
            return f

        self.version_str = fn("rd_kafka_version_str", cp)
        self.err2name = fn("rd_kafka_err2name", cp, err_t)
        self.err2str = fn("rd_kafka_err2str", cp, err_t)
        self.conf_new = fn("rd_kafka_conf_new", vp)
        self.conf_set = fn("rd_kafka_conf_set", ctypes.c_int, vp, cp, cp, cp, ctypes.c_size_t)
        self.conf_destroy = fn("rd_kafka_conf_destroy", None, vp)
        self.new = fn("rd_kafka_new", vp, ctypes.c_int, vp, cp, ctypes.c_size_t)
        self.destroy = fn("rd_kafka_destroy", None, vp)
        self.cluster_new = fn("rd_kafka_mock_cluster_new", vp, vp, ctypes.c_int)
        self.cluster_destroy = fn("rd_kafka_mock_cluster_destroy", None, vp)
        self.cluster_bootstraps = fn("rd_kafka_mock_cluster_bootstraps", cp, vp)
        self.set_controller_id = fn("rd_kafka_mock_set_controller_id", err_t, vp, i32)
        self.topic_create = fn("rd_kafka_mock_topic_create", err_t, vp, cp, ctypes.c_int, ctypes.c_int)
        self.topic_delete = fn("rd_kafka_mock_topic_delete", err_t, vp, cp)
        self.broker_set_down = fn("rd_kafka_mock_broker_set_down", err_t, vp, i32)
        self.broker_set_up = fn("rd_kafka_mock_broker_set_up", err_t, vp, i32)
        self.broker_set_rtt = fn("rd_kafka_mock_broker_set_rtt", err_t, vp, i32, ctypes.c_int)
        self.broker_set_rack = fn("rd_kafka_mock_broker_set_rack", err_t, vp, i32, cp)
        self.partition_set_leader = fn("rd_kafka_mock_partition_set_leader", err_t, vp, cp, i32, i32)
        # The plain rd_kafka_mock_push_request_errors is variadic, which ctypes cannot call portably;
        # the _array variant takes the same errors as a C array.
        self.push_request_errors_array = fn(
            "rd_kafka_mock_push_request_errors_array", None, vp, i16, ctypes.c_size_t, ctypes.POINTER(err_t)
        )
        self.clear_request_errors = fn("rd_kafka_mock_clear_request_errors", None, vp, i16)

    def describe(self, err: int) -> str:
        name = self.err2name(err) or b"?"
        text = self.err2str(err) or b""
        return f"{name.decode()} ({err}): {text.decode()}"


_lib_lock = threading.Lock()
_lib: _Lib | None = None


def _load() -> _Lib:
    global _lib
    with _lib_lock:
        if _lib is None:
            _lib = _Lib(find_librdkafka())
        return _lib


class EmbeddedKafka:
    """A running mock Kafka cluster; use as a context manager or call `close()`.

    Broker ids are 1..brokers. Every method may be called from any thread (librdkafka hands each mock
    operation to the cluster's own thread).
    """

    def __init__(
        self,
        brokers: int = 1,
        *,
        topics: Mapping[str, int] | None = None,
        controller_id: int = 1,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be >= 1, got {brokers}")
        if not 1 <= controller_id <= brokers:
            raise ValueError(f"controller_id must be a broker id in 1..{brokers}, got {controller_id}")
        self._lib = _load()
        self._lock = threading.Lock()
        self._rk: int | None = None
        self._mc: int | None = None
        self.brokers = brokers
        self._rk = self._new_handle()
        mc = self._lib.cluster_new(self._rk, brokers)
        if not mc:
            self._lib.destroy(self._rk)
            self._rk = None
            raise EmbeddedKafkaError(f"rd_kafka_mock_cluster_new failed to start {brokers} broker(s)")
        self._mc = mc
        raw = self._lib.cluster_bootstraps(mc)
        self._bootstrap_servers = raw.decode() if raw else ""
        try:
            # Without a controller the mock answers DescribeTopics/DescribeCluster with no controller and
            # the Admin client waits until its timeout ("Failed while waiting for controller").
            self._check(self._lib.set_controller_id(mc, controller_id), f"set controller {controller_id}")
            for name, partitions in (topics or {}).items():
                self.create_topic(name, partitions)
        except BaseException:
            self.close()
            raise

    def _new_handle(self) -> int:
        conf = self._lib.conf_new()
        if not conf:
            raise EmbeddedKafkaError("rd_kafka_conf_new returned NULL (out of memory?)")
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        # The handle only hosts the mock cluster and never connects anywhere; level 4 (warning) hides
        # the notice that it has no bootstrap.servers, which would otherwise confuse every log reader.
        if self._lib.conf_set(conf, b"log_level", b"4", errstr, _ERRSTR_SIZE) != _RD_KAFKA_CONF_OK:
            self._lib.conf_destroy(conf)
            raise EmbeddedKafkaError(f"rd_kafka_conf_set(log_level) failed: {errstr.value.decode()}")
        rk = self._lib.new(_RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_SIZE)
        if not rk:
            self._lib.conf_destroy(conf)  # rd_kafka_new owns conf only when it succeeds
            raise EmbeddedKafkaError(f"rd_kafka_new failed: {errstr.value.decode() or 'no reason given'}")
        return int(rk)

    # --- lifecycle ------------------------------------------------------------------------------------
    def __enter__(self) -> EmbeddedKafka:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Destroy the cluster, then the handle it was created on. Safe to call twice."""
        with self._lock:
            mc, rk = self._mc, self._rk
            self._mc = self._rk = None
        if mc is not None:
            self._lib.cluster_destroy(mc)
        if rk is not None:
            self._lib.destroy(rk)

    @property
    def closed(self) -> bool:
        return self._mc is None

    @property
    def bootstrap_servers(self) -> str:
        """Comma-separated host:port of every broker, for a client's `bootstrap.servers`."""
        return self._bootstrap_servers

    # --- topics ---------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, replication_factor: int = 1) -> None:
        """Create a topic (the mock has no CreateTopics API). Raises if it already exists."""
        if partitions < 1:
            raise ValueError(f"topic {name!r}: partitions must be >= 1, got {partitions}")
        if not 1 <= replication_factor <= self.brokers:
            raise ValueError(
                f"topic {name!r}: replication_factor must be in 1..{self.brokers} (the broker count), "
                f"got {replication_factor}"
            )
        err = self._lib.topic_create(self._cluster(), name.encode(), partitions, replication_factor)
        self._check(err, f"create topic {name!r} with {partitions} partition(s)")

    def delete_topic(self, name: str) -> None:
        """Delete a topic. With `create_topic` this is the only way to change a partition count."""
        self._check(self._lib.topic_delete(self._cluster(), name.encode()), f"delete topic {name!r}")

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move a partition's leadership (-1: leaderless). The mock creates the topic if it is missing."""
        err = self._lib.partition_set_leader(self._cluster(), topic.encode(), partition, broker_id)
        self._check(err, f"set leader of {topic}-{partition} to broker {broker_id}")

    # --- brokers --------------------------------------------------------------------------------------
    def set_broker_down(self, broker_id: int) -> None:
        """Disconnect the broker and refuse new connections (-1: all brokers); leaders do not move."""
        self._check(self._lib.broker_set_down(self._cluster(), broker_id), f"set broker {broker_id} down")

    def set_broker_up(self, broker_id: int) -> None:
        """Accept connections again (-1: all brokers)."""
        self._check(self._lib.broker_set_up(self._cluster(), broker_id), f"set broker {broker_id} up")

    def set_broker_rtt(self, broker_id: int, ms: int) -> None:
        """Delay every response of the broker by `ms` (-1: all brokers)."""
        self._check(self._lib.broker_set_rtt(self._cluster(), broker_id, ms), f"set broker {broker_id} rtt")

    def set_broker_rack(self, broker_id: int, rack: str) -> None:
        """The rack reported for the broker in Metadata/DescribeTopics/DescribeCluster (-1: all brokers)."""
        err = self._lib.broker_set_rack(self._cluster(), broker_id, rack.encode())
        self._check(err, f"set rack of broker {broker_id} to {rack!r}")

    # --- request errors -------------------------------------------------------------------------------
    def push_request_errors(self, api_key: int, *error_codes: int) -> None:
        """Make the next len(error_codes) requests with `api_key` (cluster-wide) fail, in order, with
        these Kafka error codes (e.g. `KafkaError.NOT_LEADER_FOR_PARTITION`; `KafkaError._TRANSPORT`
        makes the broker drop the connection instead)."""
        if not error_codes:
            raise ValueError("push_request_errors needs at least one error code")
        errors = (ctypes.c_int * len(error_codes))(*error_codes)
        self._lib.push_request_errors_array(self._cluster(), api_key, len(error_codes), errors)

    def clear_request_errors(self, api_key: int) -> None:
        """Drop errors pushed for `api_key` that no request has consumed yet."""
        self._lib.clear_request_errors(self._cluster(), api_key)

    # --- helpers --------------------------------------------------------------------------------------
    def _cluster(self) -> int:
        mc = self._mc
        if mc is None:
            raise EmbeddedKafkaError("the embedded Kafka cluster is closed")
        return mc

    def _check(self, err: int, what: str) -> None:
        if err != 0:
            raise EmbeddedKafkaError(f"embedded Kafka: {what} failed: {self._lib.describe(err)}")

    def __repr__(self) -> str:
        state = "closed" if self.closed else self._bootstrap_servers
        return f"EmbeddedKafka(brokers={self.brokers}, {state})"


# --- command line -----------------------------------------------------------------------------------
def _parse_broker_rack(value: str) -> tuple[int, str]:
    broker, sep, rack = value.partition(":")
    if not sep or not rack or not broker.strip().lstrip("-").isdigit():
        raise argparse.ArgumentTypeError(f"expected BROKER_ID:RACK (e.g. 1:us-east-1a), got {value!r}")
    return int(broker), rack


def _parse_topic(value: str) -> tuple[str, int]:
    # Imported here: the flag format is shared with the coordinator's --topic, parsed in one place.
    from groupcoord.coordinator.runtime.static_metadata import parse_topic_flag

    try:
        return parse_topic_flag(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _stdin_is_watchable() -> bool:
    """Watch stdin for EOF only when it is a pipe, socket or terminal: a parent that started us with
    stdin=/dev/null (or a file) would otherwise stop the cluster the moment it starts."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or sys.stdin.isatty()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m groupcoord.embedded_kafka",
        description="Serve a mock Kafka cluster (librdkafka) on 127.0.0.1. Prints bootstrap.servers as the "
        "first stdout line; stops on SIGTERM, SIGINT or EOF on stdin (if stdin is a pipe or terminal).",
    )
    parser.add_argument("--brokers", type=int, default=1, help="number of brokers (default 1)")
    parser.add_argument(
        "--topic", action="append", type=_parse_topic, default=[], metavar="NAME:PARTITIONS",
        help="create a topic; repeat for more",
    )
    parser.add_argument(
        "--replication-factor", type=int, default=1, help="replication factor of --topic topics"
    )
    parser.add_argument(
        "--broker-rack", action="append", type=_parse_broker_rack, default=[], metavar="ID:RACK",
        help="rack of a broker; repeat for more",
    )
    parser.add_argument("--ignore-stdin", action="store_true", help="do not stop on EOF on stdin")
    args = parser.parse_args(argv)

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    try:
        kafka = EmbeddedKafka(args.brokers)
    except (EmbeddedKafkaError, ValueError) as exc:
        print(f"embedded_kafka: {exc}", file=sys.stderr)
        return 1
    with kafka:
        try:
            for name, partitions in args.topic:
                kafka.create_topic(name, partitions, args.replication_factor)
            for broker_id, rack in args.broker_rack:
                kafka.set_broker_rack(broker_id, rack)
        except (EmbeddedKafkaError, ValueError) as exc:
            print(f"embedded_kafka: {exc}", file=sys.stderr)
            return 1
        print(kafka.bootstrap_servers, flush=True)

        if not args.ignore_stdin and _stdin_is_watchable():

            stdin_fd = sys.stdin.fileno()

            def wait_for_eof() -> None:
                # os.read on the raw descriptor, not sys.stdin: a daemon thread blocked inside the buffered
                # reader holds its lock, and interpreter shutdown after SIGTERM then aborts the process.
                try:
                    while os.read(stdin_fd, 65536):
                        pass
                except OSError:
                    pass
                finally:
                    stop.set()

            threading.Thread(target=wait_for_eof, name="stdin-eof", daemon=True).start()

        while not stop.wait(0.5):  # a timed wait keeps the main thread responsive to signals
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
