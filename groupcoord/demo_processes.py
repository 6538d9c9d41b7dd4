"""The demo's moving parts outside the group: the skewed producer thread and the coordinator subprocess
(`groupcoord.demo` and `groupcoord.demo_share` start them; Spark tests reuse the producer)."""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["CoordinatorProcess", "SkewedProducer", "free_port"]


# --- the producer ----------------------------------------------------------------------------------------------
class SkewedProducer:
    """Produces to every partition of a topic on a thread, partition `p` at `rate * weight[p]` records/s.

    Weights follow 1/rank (Zipf, exponent `skew`), with ranks shuffled by `seed` so that hot partitions are
    spread over the partition numbers rather than stacked at the low ones (which would handicap `range`).
    Keys are drawn from `keys` distinct values, so per-key aggregates have something to count.
    """

    def __init__(self, bootstrap_servers: str, topic: str, partitions: int, rate: float, *, skew: float = 1.0,
                 keys: int = 100, value_bytes: int = 64, seed: int = 7) -> None:
        from confluent_kafka import Producer

        rng = random.Random(seed)
        ranks = list(range(1, partitions + 1))
        rng.shuffle(ranks)
        raw = [1.0 / r**skew for r in ranks]
        total = sum(raw)
        self.topic = topic
        self.weights = [w / total for w in raw]
        self.rate = rate
        self.keys = [f"key-{i:03d}".encode() for i in range(keys)]
        self.value = b"x" * value_bytes
        self.produced = [0] * partitions
        self.errors = 0
        self._producer: Any = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 20,
                                   "client.id": "groupcoord-demo-producer", "log.connection.close": False})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-producer", daemon=True)
        self._rng = random.Random(seed + 1)

    def start(self) -> SkewedProducer:
        self._thread.start()
        return self

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors += 1

    def _run(self) -> None:
        owed = [0.0] * len(self.weights)
        last = time.monotonic()
        while not self._stop.wait(0.02):
            now = time.monotonic()
            dt, last = now - last, now
            for p, w in enumerate(self.weights):
                owed[p] += self.rate * w * dt
                n = int(owed[p])
                owed[p] -= n
                for _ in range(n):
                    key = self.keys[self._rng.randrange(len(self.keys))]
                    self._producer.produce(self.topic, key=key, value=self.value, partition=p,
                                           on_delivery=self._on_delivery)
                self.produced[p] += n
            self._producer.poll(0)

    def stop(self) -> None:
        """Stop producing and wait until every record is acknowledged."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        if self._producer is not None:
            self._producer.flush(30)
            self._producer = None  # destroyed now, not when collected: it must not outlive the cluster


# --- the coordinator subprocess ----------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class CoordinatorProcess:
    """``groupcoord serve`` as a child process; its output goes to `log_path`."""

    def __init__(self, bootstrap_servers: str, log_path: Path, settings: Mapping[str, Any]) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        argv = [sys.executable, "-m", "groupcoord", "serve", "--listen", self.address,
                "--bootstrap-servers", bootstrap_servers, "--metadata-refresh-ms", "1000", "--lag-refresh-ms", "1000"]
        for k, v in settings.items():
            argv += ["--set", f"{k}={v}"]
        self._log = open(log_path, "ab")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        deadline = time.monotonic() + timeout_s
        with grpc.insecure_channel(self.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the coordinator exited with code {self.proc.returncode}")
                try:
                    resp = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
                    if resp.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.RpcError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the coordinator did not serve on {self.address} within {timeout_s:.0f} s")
                time.sleep(0.2)

    def stop(self, timeout_s: float = 15.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
