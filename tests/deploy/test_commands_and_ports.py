"""Every command in the Dockerfiles and docker-compose.yml parses with the code's own parser, and the ports agree.

A flag renamed in `groupcoord serve` or a port changed in one place only would otherwise surface as a
container that exits or a Prometheus target that is down, on a machine with a Docker engine, much later.
"""

from __future__ import annotations

import argparse
import re
import tomllib
from typing import Any

import pytest

from groupcoord import healthcheck
from groupcoord.assignors import server_assignor_names
from groupcoord.cli import build_parser
from groupcoord.clients import spark_driver
from groupcoord.coordinator.core.config import BrokerConfig
from tests.deploy.files import (
    REPO,
    argv,
    bind_mounts,
    compose,
    container_ports,
    dockerfile,
    dockerignore_patterns,
    dockerignored,
    environment,
    flag,
    groupcoord_argv,
    host_port,
    load_yaml,
    service,
)

DOCKERFILES = ("Dockerfile", "Dockerfile.spark")


def parse_serve(command: list[str]) -> argparse.Namespace:
    """`groupcoord <command>` as the real CLI parses it; fails the test (not the process) on a bad flag."""
    assert command, "empty groupcoord command"
    try:
        args = build_parser().parse_args(command)
    except SystemExit as e:
        pytest.fail(f"groupcoord rejects {command}: exit {e.code}")
    assert args.cmd == "serve", f"expected `groupcoord serve ...`, got {command}"
    return args


def parse_healthcheck(command: list[str]) -> argparse.Namespace:
    assert command[:3] == ["python", "-m", "groupcoord.healthcheck"], f"not the shipped probe: {command}"
    try:
        return healthcheck.build_parser().parse_args(command[3:])
    except SystemExit as e:
        pytest.fail(f"groupcoord.healthcheck rejects {command}: exit {e.code}")


def compose_healthcheck(svc: dict[str, Any]) -> list[str]:
    test = argv(svc["healthcheck"]["test"])
    assert test[0] == "CMD", f"use the exec form ['CMD', ...] so no shell is needed: {test}"
    return test[1:]


def serve_args() -> argparse.Namespace:
    full = groupcoord_argv()
    assert full[0] == "groupcoord", f"the coordinator container must run the groupcoord CLI: {full}"
    return parse_serve(full[1:])


def set_flags(args: argparse.Namespace) -> dict[str, str]:
    return dict(item.split("=", 1) for item in args.set or [])


# --- the coordinator image --------------------------------------------------------------------------------
def test_image_entrypoint_is_the_groupcoord_console_script_of_the_package() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["groupcoord"] == "groupcoord.cli:main"
    entrypoint = dockerfile("Dockerfile").last("ENTRYPOINT")
    assert entrypoint is not None and entrypoint.exec_form() == ["groupcoord"]


def test_image_default_command_parses_and_serves_grpc_and_metrics_on_all_interfaces() -> None:
    cmd = dockerfile("Dockerfile").last("CMD")
    assert cmd is not None
    args = parse_serve(cmd.exec_form())
    assert host_port(args.listen) == ("0.0.0.0", 50051)
    assert (args.metrics_host, args.metrics_port) == ("0.0.0.0", 9464)


def test_image_exposes_the_ports_its_command_listens_on() -> None:
    df = dockerfile("Dockerfile")
    cmd = df.last("CMD")
    assert cmd is not None
    args = parse_serve(cmd.exec_form())
    exposed = {int(p.split("/")[0]) for i in df.final if i.keyword == "EXPOSE" for p in i.args.split()}
    assert exposed == {host_port(args.listen)[1], args.metrics_port}


def test_image_healthcheck_probes_the_grpc_port_of_its_command_with_a_timeout() -> None:
    df = dockerfile("Dockerfile")
    cmd, check = df.last("CMD"), df.last("HEALTHCHECK")
    assert cmd is not None and check is not None
    probe = parse_healthcheck(check.exec_form())
    assert host_port(probe.address) == ("127.0.0.1", host_port(parse_serve(cmd.exec_form()).listen)[1])
    assert probe.service == healthcheck.SERVICE_NAME
    timeout = re.search(r"--timeout=(\d+)s", check.args)
    assert timeout is not None and probe.timeout < int(timeout.group(1)), "probe must give up before Docker does"


@pytest.mark.parametrize("name", DOCKERFILES)
def test_images_run_as_a_non_root_user(name: str) -> None:
    user = dockerfile(name).last("USER")
    assert user is not None and user.args.split(":")[0] not in ("root", "0"), f"{name}: add a non-root USER"


@pytest.mark.parametrize("name", DOCKERFILES)
def test_images_are_multi_stage_on_python_3_11_slim(name: str) -> None:
    df = dockerfile(name)
    assert len(df.stages) >= 2, f"{name}: build in one stage, copy the virtualenv into the next"
    args = {a.args.split("=", 1)[0]: a.args.split("=", 1)[1] for a in df.all("ARG") if "=" in a.args}
    for stage in df.stages:
        base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], stage[0].args.split()[0])
        assert base.startswith("python:3.11-slim"), f"{name}: base {base}"
    assert any(i.keyword == "COPY" and "--from=build" in i.args for i in df.final)


def test_coordinator_image_installs_the_package_without_extras_and_spark_image_with_the_spark_extra() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "spark" in extras

    def installs(name: str) -> list[str]:
        return [m for i in dockerfile(name).all("RUN") for m in re.findall(r"pip install (\S+)", i.args)
                if not m.startswith("-")]

    assert installs("Dockerfile") == ["."]
    assert installs("Dockerfile.spark") == ['".[spark]"']


def test_spark_image_installs_java_17_from_a_debian_release_that_ships_it() -> None:
    df = dockerfile("Dockerfile.spark")
    runs = " ".join(i.args for i in df.final if i.keyword == "RUN")
    assert "openjdk-17-jre-headless" in runs
    arg = next(a.args for a in df.all("ARG") if a.args.startswith("PYTHON_IMAGE="))
    assert arg.endswith("-bookworm"), "openjdk-17 is in Debian bookworm, not in trixie (python:3.11-slim today)"


@pytest.mark.parametrize("name", DOCKERFILES)
def test_images_copy_only_sources_that_exist_and_are_not_dockerignored(name: str) -> None:
    patterns = dockerignore_patterns()
    copies = [i for i in dockerfile(name).all("COPY") if not i.args.startswith("--from")]
    assert copies
    for copy in copies:
        for source in copy.args.split()[:-1]:
            assert (REPO / source).exists(), f"{name}: COPY {source}: no such path"
            assert not dockerignored(source, patterns), f"{name}: COPY {source} is excluded by .dockerignore"


def test_dockerignore_keeps_local_state_and_tests_out_of_the_build_context() -> None:
    patterns = dockerignore_patterns()
    for path in (".venv/bin/python", ".git/HEAD", "tests/deploy/files.py", "demo-output/x.parquet",
                 "coordinator/core/__pycache__/shard.cpython-311.pyc", ".mypy_cache/x"):
        assert dockerignored(path, patterns), path
    for path in ("pyproject.toml", "README.md", "coordinator/core/shard.py", "groupcoord/wire/v1/coordinator_pb2.py"):
        assert not dockerignored(path, patterns), path


# --- docker-compose.yml: the coordinator ------------------------------------------------------------------
def test_compose_coordinator_command_parses_with_the_cli_and_uses_kafka() -> None:
    args = serve_args()
    kafka_host, kafka_port = host_port(args.bootstrap_servers)
    kafka_env = environment(service("kafka"))
    advertised = [host_port(listener.split("://", 1)[1])
                  for listener in kafka_env["KAFKA_ADVERTISED_LISTENERS"].split(",")]
    assert (kafka_host, kafka_port) in advertised, "the coordinator must use an address Kafka advertises"
    assert kafka_host in ("kafka", service("kafka").get("hostname")), "kafka:... is the service's DNS name"
    listeners = [host_port(listener.split("://", 1)[1])[1] for listener in kafka_env["KAFKA_LISTENERS"].split(",")]
    assert kafka_port in listeners
    assert not args.embedded_kafka and not args.topic


def test_compose_coordinator_configuration_is_valid_with_lag_sticky_as_the_default_assignor() -> None:
    args = serve_args()
    raw = set_flags(args)
    config = BrokerConfig.from_mapping(raw)  # raises ConfigError, as `serve` would exit 2
    assignors = config["group.consumer.assignors"]
    assert assignors[0] == "lag-sticky", "the first assignor is the default one"
    assert set(assignors) <= set(server_assignor_names())


def test_compose_coordinator_listens_on_all_interfaces_and_publishes_its_grpc_and_metrics_ports() -> None:
    args = serve_args()
    host, grpc_port = host_port(args.listen)
    assert host == "0.0.0.0" and args.metrics_host == "0.0.0.0", "other containers must reach both endpoints"
    assert {grpc_port, args.metrics_port} <= container_ports(service("groupcoord"))


def test_compose_coordinator_healthcheck_probes_its_grpc_port() -> None:
    probe = parse_healthcheck(compose_healthcheck(service("groupcoord")))
    assert host_port(probe.address) == ("127.0.0.1", host_port(serve_args().listen)[1])


def test_compose_coordinator_state_dir_is_a_volume() -> None:
    args = serve_args()
    assert args.state_dir, "without --state-dir a container restart loses every group and offset"
    targets = [str(v).split(":")[1] for v in service("groupcoord").get("volumes") or []]
    assert args.state_dir in targets
    owned = [i.args for i in dockerfile("Dockerfile").final if i.keyword == "RUN" and args.state_dir in i.args]
    assert owned, "the image must create the state dir owned by its non-root user"


# --- docker-compose.yml: Prometheus and Grafana -----------------------------------------------------------
def prometheus_config() -> dict[str, Any]:
    mounts = dict((target, source) for source, target in bind_mounts(service("prometheus")))
    source = mounts.get("/etc/prometheus/prometheus.yml")
    assert source is not None and source == REPO / "deploy" / "prometheus" / "prometheus.yml"
    data = load_yaml(source)
    assert isinstance(data, dict)
    return data


def test_prometheus_scrapes_the_coordinator_metrics_port_by_its_service_name() -> None:
    args = serve_args()
    jobs = prometheus_config()["scrape_configs"]
    targets = [t for job in jobs for sc in job.get("static_configs", []) for t in sc["targets"]]
    assert f"groupcoord:{args.metrics_port}" in targets
    job = next(j for j in jobs if f"groupcoord:{args.metrics_port}" in
               [t for sc in j.get("static_configs", []) for t in sc["targets"]])
    assert job.get("metrics_path", "/metrics") == "/metrics"


def test_grafana_datasource_points_at_the_prometheus_service_port() -> None:
    datasources = [ds for f in sorted((REPO / "deploy/grafana/provisioning/datasources").glob("*.yml"))
                   for ds in load_yaml(f)["datasources"]]
    assert [ds["url"] for ds in datasources if ds["type"] == "prometheus"] == ["http://prometheus:9090"]
    assert 9090 in container_ports(service("prometheus"))


def test_grafana_mounts_the_provisioning_and_the_dashboard_folder_its_provider_reads() -> None:
    mounts = {target: source for source, target in bind_mounts(service("grafana"))}
    assert mounts["/etc/grafana/provisioning"] == REPO / "deploy" / "grafana" / "provisioning"
    providers = [p for f in sorted((REPO / "deploy/grafana/provisioning/dashboards").glob("*.yml"))
                 for p in load_yaml(f)["providers"]]
    paths = {p["options"]["path"] for p in providers}
    assert paths and all(mounts.get(path) == REPO / "deploy" / "grafana" / "dashboards" for path in paths)
    home = environment(service("grafana")).get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    if home is not None:
        assert any(home == f"{path}/groupcoord.json" for path in paths)


def test_every_bind_mounted_host_path_exists() -> None:
    for name in compose()["services"]:
        for source, _target in bind_mounts(service(name)):
            assert source.exists(), f"service {name}: {source} does not exist"


# --- docker-compose.yml: Kafka topic, producer, Spark driver ----------------------------------------------
def topic_of(name: str) -> str:
    return flag(argv(service(name).get("entrypoint")) + argv(service(name)["command"]), "--topic")


def test_the_demo_topic_is_created_before_it_is_produced_to_or_read() -> None:
    topics = argv(service("topics")["entrypoint"]) + argv(service("topics")["command"])
    assert topics[0].endswith("kafka-topics.sh") and "--create" in topics
    assert environment(service("kafka")).get("KAFKA_AUTO_CREATE_TOPICS_ENABLE") == "false"
    assert topic_of("topics") == topic_of("producer")
    assert service("producer")["depends_on"]["topics"]["condition"] == "service_completed_successfully"
    assert flag(topics, "--bootstrap-server") == serve_args().bootstrap_servers


def test_producer_writes_to_the_kafka_address_the_coordinator_reads() -> None:
    producer = argv(service("producer")["entrypoint"]) + argv(service("producer")["command"])
    assert producer[0].endswith("kafka-producer-perf-test.sh")
    props = producer[producer.index("--producer-props") + 1:]
    assert f"bootstrap.servers={serve_args().bootstrap_servers}" in props


DRIVER = ["python", "-m", "groupcoord.clients.spark_driver"]


def spark_driver_services() -> list[str]:
    names = [name for name, svc in compose()["services"].items()
             if (argv(svc.get("entrypoint")) + argv(svc.get("command")))[:3] == DRIVER]
    assert "spark-driver" in names, "the compose file must run `python -m groupcoord.clients.spark_driver`"
    return names


def spark_driver_args(name: str) -> argparse.Namespace:
    """The driver's command as `groupcoord.clients.spark_driver`'s own parser reads it."""
    command = argv(service(name).get("entrypoint")) + argv(service(name)["command"])
    assert command[:3] == DRIVER, command
    try:
        return spark_driver.build_parser().parse_args(command[3:])
    except SystemExit as e:
        pytest.fail(f"groupcoord.clients.spark_driver rejects {command}: exit {e.code}")


@pytest.mark.parametrize("name", spark_driver_services())
def test_spark_driver_command_parses_with_the_driver_parser_and_reads_the_demo_topic(name: str) -> None:
    args = spark_driver_args(name)
    assert args.topic == [topic_of("topics")]


@pytest.mark.parametrize("name", spark_driver_services())
def test_spark_driver_reaches_the_coordinator_grpc_port_and_kafka_by_service_name(name: str) -> None:
    args, serve = spark_driver_args(name), serve_args()
    assert host_port(args.coordinator) == ("groupcoord", host_port(serve.listen)[1])
    assert args.bootstrap_servers == serve.bootstrap_servers
    depends = service(name)["depends_on"]
    assert depends["groupcoord"]["condition"] == "service_healthy"
    assert depends["topics"]["condition"] == "service_completed_successfully"


def test_spark_drivers_write_to_distinct_directories_on_a_volume() -> None:
    outputs = []
    for name in spark_driver_services():
        output = spark_driver_args(name).output
        targets = [str(v).split(":")[1] for v in service(name).get("volumes") or []]
        assert any(output == t or output.startswith(t.rstrip("/") + "/") for t in targets), (name, output)
        outputs.append(output)
    assert len(outputs) == len(set(outputs)), "drivers sharing an output dir overwrite each other's status files"


def test_spark_image_owns_the_output_volume_for_its_non_root_user() -> None:
    df = dockerfile("Dockerfile.spark")
    user = df.last("USER")
    assert user is not None
    volume_roots = {t for name in spark_driver_services()
                    for t in (str(v).split(":")[1] for v in service(name).get("volumes") or [])}
    for root in volume_roots:
        assert any(i.keyword == "RUN" and f"-o {user.args}" in i.args and root in i.args for i in df.final), root
