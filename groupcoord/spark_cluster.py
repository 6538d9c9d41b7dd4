"""A Spark standalone cluster on loopback, from the installed PySpark: one master and N workers.

Why: local mode runs the driver and its executors in one JVM, and their Python workers inherit the driver's
environment and working directory. A user's cluster does not: executors are JVMs the workers start, with the
workers' environment, in a working directory of their own (``WORK_DIR/app-.../N``), and their Python workers
only know what the driver ships them. Tests, the demo and the benchmarks run drivers against this cluster
(``--master spark://127.0.0.1:PORT``) so that whatever the groupcoord source ships to executors is proved to
work there.

What runs, exactly as Spark's ``sbin/start-master.sh`` and ``start-worker.sh`` would start it, but in the
foreground and owned by this process (``spark-class`` from PySpark's own ``bin/``):

- ``spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port P --webui-port W``
- per worker ``spark-class org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --cores C --memory M
  --work-dir DIR spark://127.0.0.1:P``

The ports are picked free (`free_ports`), but another process can take one between the pick and the bind; Spark
then binds the next free port and only says so in its log (``Service 'MasterUI' could not bind on port X.
Attempting port X+1``). So the master URL and the UI are read from the master's own ``Successfully started
service 'sparkMaster' | 'MasterUI' on port N`` lines, and the workers start once the master has said them. A
worker whose ports moved needs nothing: it registers with the master under the ports it bound.

The daemons get a small heap (``SPARK_DAEMON_MEMORY``), C1 and the serial GC, and die with this process
(PR_SET_PDEATHSIG through ``setpriv``). Their environment is this process's minus ``PYTHONPATH`` and
``PYSPARK_*``: a driver must not be helped by what happens to be set where the cluster was started.

Command line, for a cluster to run drivers against by hand::

    python -m groupcoord.spark_cluster --workers 2

prints the master URL and serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from groupcoord.child_processes import die_with_parent, free_ports

__all__ = ["SparkClusterError", "SparkStandaloneCluster", "main", "spark_class"]

_START_TIMEOUT_S = 120.0
# Spark's Utils.startServiceOnPort, once a service is bound (after any "Attempting port X+1").
_STARTED_SERVICE = re.compile(r"Successfully started service '(\w+)' on port (\d+)")
_DAEMON_JAVA_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true"
# Variables a worker would pass on to its executors and their Python workers: a cluster started by hand has
# none of them, so neither does this one.
_SCRUBBED = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_CONF_DIR", "SPARK_LOCAL_DIRS")


class SparkClusterError(RuntimeError):
    """The cluster did not start; the message carries the daemons' own output."""


def spark_class() -> Path:
    """``bin/spark-class`` of the installed PySpark (it finds SPARK_HOME from there)."""
    import pyspark

    path = Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"
    if not path.is_file():
        raise SparkClusterError(f"{path} is missing: is pyspark installed from its wheel?")
    return path


class SparkStandaloneCluster:
    """A master and `workers` workers of `cores` cores and `memory` each; a context manager, or call `close()`.

    `master_url` is what drivers pass as ``--master``; `web_url` is the master's UI (its ``/json/`` lists
    workers and applications). Each executor's stdout/stderr stays in ``work_dir/<app>/<executor>/``.
    """

    def __init__(self, workers: int = 2, *, cores: int = 1, memory: str = "1g",
                 daemon_memory: str = "256m", work_dir: Path | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._own_dir = work_dir is None
        self.dir = Path(tempfile.mkdtemp(prefix="spark-cluster-")) if work_dir is None else Path(work_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.work_dir = self.dir / "work"
        self._procs: list[subprocess.Popen[bytes]] = []
        self.workers = workers
        started = time.monotonic()
        master_port, web_port, *worker_ports = free_ports(2 + 2 * workers)
        self.master_url = self.web_url = ""  # the ports the master says it bound, not the ports picked
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
        env.update({"SPARK_DAEMON_MEMORY": daemon_memory, "SPARK_DAEMON_JAVA_OPTS": _DAEMON_JAVA_OPTS,
                    "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_WORKER_DIR": str(self.work_dir)})
        try:
            self._start("master", env, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                        "--port", str(master_port), "--webui-port", str(web_port))
            bound = self._wait_started("master", ("sparkMaster", "MasterUI"), started + _START_TIMEOUT_S)
            self.master_url = f"spark://127.0.0.1:{bound['sparkMaster']}"
            self.web_url = f"http://127.0.0.1:{bound['MasterUI']}"
            for i in range(workers):
                port, web = worker_ports[2 * i], worker_ports[2 * i + 1]
                self._start(f"worker-{i + 1}", env, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                            "--port", str(port), "--webui-port", str(web), "--cores", str(cores),
                            "--memory", memory, "--work-dir", str(self.work_dir), self.master_url)
            self._wait_ready(started + _START_TIMEOUT_S)
            self.start_seconds = time.monotonic() - started
        except BaseException:
            self.close()
            raise

    def _start(self, name: str, env: dict[str, str], main_class: str, *args: str) -> None:
        log = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 - the child owns it
        try:
            self._procs.append(subprocess.Popen(
                die_with_parent([str(spark_class()), main_class, *args]), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env, cwd=str(self.dir)))
        finally:
            log.close()

    @property
    def pids(self) -> tuple[int, ...]:
        """The daemons' process ids (executors are their children)."""
        return tuple(p.pid for p in self._procs)

    def state(self) -> dict[str, Any]:
        """The master's ``/json/``: workers, cores, memory, active and completed applications."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as reply:
            return dict(json.loads(reply.read()))

    def _check_running(self) -> None:
        for i, proc in enumerate(self._procs):
            if proc.poll() is not None:
                name = "master" if i == 0 else f"worker-{i}"
                raise SparkClusterError(f"the Spark {name} exited ({proc.returncode}):\n{self.output(name)}")

    def _wait_started(self, name: str, services: tuple[str, ...], deadline: float) -> dict[str, int]:
        """The port each of `services` bound, from the daemon's log: a port picked free may have been taken by
        then, and Spark moves on to the next one without failing."""
        while True:
            self._check_running()
            try:
                log = (self.dir / f"{name}.log").read_text(errors="replace")
            except OSError:
                log = ""
            bound = {service: int(port) for service, port in _STARTED_SERVICE.findall(log)}
            if all(service in bound for service in services):
                return bound
            if time.monotonic() > deadline:
                raise SparkClusterError(f"the Spark {name} did not start {', '.join(services)} in "
                                        f"{_START_TIMEOUT_S:.0f} s:\n{self.output(name)}")
            time.sleep(0.1)

    def _wait_ready(self, deadline: float) -> None:
        """Ready when the master lists every worker ALIVE."""
        while True:
            self._check_running()
            try:
                alive = sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")
            except OSError:
                alive = -1
            if alive >= self.workers:
                return
            if time.monotonic() > deadline:
                raise SparkClusterError(f"{alive} of {self.workers} Spark workers alive after "
                                        f"{_START_TIMEOUT_S:.0f} s:\n{self.output('master')}")
            time.sleep(0.3)

    def output(self, name: str, tail: int = 4000) -> str:
        """The last `tail` characters a daemon printed ("master", "worker-1", ...)."""
        try:
            return (self.dir / f"{name}.log").read_text(errors="replace")[-tail:]
        except OSError:
            return "(no output)"

    def executor_logs(self) -> list[Path]:
        """Every executor's stderr so far (``work/<app>/<id>/stderr``), for a test that failed."""
        return sorted(self.work_dir.glob("*/*/stderr"))

    def close(self) -> None:
        """Workers first (they kill their executors), then the master; SIGKILL what does not exit in 15 s."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self._procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self._procs.clear()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> SparkStandaloneCluster:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SparkStandaloneCluster({self.master_url}, {self.workers} workers)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m groupcoord.spark_cluster", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--cores", type=int, default=1, help="cores each worker offers (default 1)")
    p.add_argument("--memory", default="1g", help="memory each worker offers to executors (default 1g)")
    args = p.parse_args(argv)
    stop = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with SparkStandaloneCluster(args.workers, cores=args.cores, memory=args.memory) as cluster:
        print(f"{cluster.master_url} (UI {cluster.web_url}; {args.workers} workers of {args.cores} core(s), "
              f"{args.memory}; started in {cluster.start_seconds:.1f} s)", flush=True)
        while not stop:
            time.sleep(0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
