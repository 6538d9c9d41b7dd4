"""The exactly-once counting scenario (counting.py) on a Spark standalone cluster: a master and two workers
started from the installed PySpark (groupcoord.spark_cluster), drivers with ``--master spark://...``, so each
driver's reads run in executors: JVMs of their own, started by a worker, in the worker's working directory,
with Python workers that know only what the driver shipped them (the source's options and tasks, the
interpreter, ``spark.executorEnv.PYTHONPATH``).

One cluster serves the module. Each worker offers 2 cores and each driver takes 1 (``--cores-max 1``), so the
three drivers of the scenario each get an executor. c starts its Spark with a and b and joins the group when b
is asked to leave (``prestart_c``): the scenario is the same, with one Spark start-up less to wait for.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from groupcoord import spark_cluster as spark_cluster_module
from groupcoord.child_processes import free_ports
from groupcoord.embedded_kafka import EmbeddedKafka
from groupcoord.spark_cluster import SparkStandaloneCluster

from .conftest import LaunchDriver
from .counting import count_through_a_clean_leave_and_a_crash

pytestmark = [pytest.mark.spark, pytest.mark.timeout(480)]

# The executors' JVMs get what tests/conftest.py gives the drivers' (SPARK_SUBMIT_OPTS): C1 and the serial GC.
EXECUTOR_JAVA_OPTIONS = "spark.executor.extraJavaOptions=-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


@pytest.fixture(scope="module")
def spark_cluster() -> Iterator[SparkStandaloneCluster]:
    with SparkStandaloneCluster(2, cores=2, memory="1g") as cluster:
        yield cluster


def test_every_record_is_published_once_on_a_standalone_cluster_through_a_clean_leave_and_a_crash(
        kafka: EmbeddedKafka, launch_driver: LaunchDriver, spark_cluster: SparkStandaloneCluster) -> None:
    counted = count_through_a_clean_leave_and_a_crash(
        kafka, launch_driver, "--master", spark_cluster.master_url, "--cores-max", "1", "--executor-memory", "512m",
        "--conf", EXECUTOR_JAVA_OPTIONS, prestart_c=True)

    apps = [*spark_cluster.state().get("activeapps", []), *spark_cluster.state().get("completedapps", [])]
    names = sorted(app["name"] for app in apps)
    executors = {path.parent.parent.name for path in spark_cluster.executor_logs()}
    print(f"cluster: {len(apps)} applications {names}, executors in {len(executors)} of them; "
          f"the crashed driver's staged batch: {counted.crashed_batch} records")
    # every driver ran as an application of the cluster, with executors of its own (they read the records)
    assert {"groupcoord-a", "groupcoord-b", "groupcoord-c"} <= set(names)
    assert len(executors) >= 3


def test_the_cluster_uses_the_ports_the_master_bound_when_another_process_took_the_picked_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Between `free_ports`' pick and the master's bind, another process took the master's port and its web UI
    port (seen once under load). Spark then binds the next free port for each and says so in its log; the
    workers must be pointed at the port the master bound, and the state read from the UI it bound."""
    taken: list[socket.socket] = []
    held: list[int] = []

    def pick_then_lose_the_masters_ports(n: int) -> list[int]:
        ports = free_ports(n)
        for port in ports[:2]:  # the master's RPC port and its web UI port, as SparkStandaloneCluster orders them
            holder = socket.socket()
            holder.bind(("127.0.0.1", port))
            holder.listen()  # accepts connections and never answers: a process that is not the master
            taken.append(holder)
            held.append(port)
        return ports

    monkeypatch.setattr(spark_cluster_module, "free_ports", pick_then_lose_the_masters_ports)
    try:
        with SparkStandaloneCluster(1, cores=1, memory="512m") as cluster:
            state = cluster.state()
    finally:
        for holder in taken:
            holder.close()

    master_port, web_port = urlsplit(cluster.master_url).port, urlsplit(cluster.web_url).port
    print(f"picked and taken: {sorted(held)}; the master bound {master_port} and its UI {web_port}")
    assert master_port not in held and web_port not in held
    assert state["url"] == cluster.master_url  # the state is this master's, read from its own UI
    assert [w["state"] for w in state["workers"]] == ["ALIVE"]
