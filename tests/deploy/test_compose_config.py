"""`docker-compose config` accepts docker-compose.yml (Debian's docker-compose; no Docker engine needed)."""

from __future__ import annotations

import shutil
import subprocess
from xml.etree import ElementTree

import yaml

from groupcoord.kafka_broker import KAFKA_VERSION
from tests.deploy.files import COMPOSE_FILE, REPO, compose

SETUP = REPO / "scripts" / "ci-setup.sh"


def docker_compose() -> str:
    """The docker-compose binary, installed by scripts/ci-setup.sh when missing."""
    found = shutil.which("docker-compose")
    if found is None:
        result = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=600)
        found = shutil.which("docker-compose")
        assert found is not None, (
            "docker-compose is not installed and scripts/ci-setup.sh could not install it "
            f"(exit {result.returncode}): {result.stderr.strip()[-2000:]}\n"
            "Run scripts/ci-setup.sh as root (it runs apt-get install docker-compose) before the tests.")
    return found


def test_docker_compose_config_validates_the_compose_file() -> None:
    result = subprocess.run([docker_compose(), "--file", str(COMPOSE_FILE), "--project-directory", str(REPO),
                             "config"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"docker-compose config failed:\n{result.stderr}"
    normalized = yaml.safe_load(result.stdout)
    assert set(normalized["services"]) == set(compose()["services"])


def test_compose_runs_kafka_the_coordinator_prometheus_grafana_and_a_spark_driver() -> None:
    services = compose()["services"]
    assert {"kafka", "groupcoord", "prometheus", "grafana", "spark-driver"} <= set(services)
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert services["groupcoord"]["build"]["dockerfile"] == "Dockerfile"
    assert services["spark-driver"]["build"]["dockerfile"] == "Dockerfile.spark"


def test_every_image_is_pinned_to_a_version() -> None:
    for name, svc in compose()["services"].items():
        image = svc.get("image", "")
        if "build" in svc:
            continue
        assert ":" in image and not image.endswith(":latest"), f"service {name}: pin the image version ({image!r})"


def test_compose_runs_the_kafka_version_the_real_broker_tests_run() -> None:
    """docker-compose.yml, kafka-broker/pom.xml and groupcoord.kafka_broker name one Kafka release."""
    pom = ElementTree.parse(REPO / "kafka-broker" / "pom.xml").getroot()
    ns = "{http://maven.apache.org/POM/4.0.0}"
    pom_version = pom.findtext(f"{ns}properties/{ns}kafka.version")
    assert pom_version == KAFKA_VERSION
    images = {svc["image"] for svc in compose()["services"].values()
              if svc.get("image", "").startswith("apache/kafka:")}
    assert images == {f"apache/kafka:{KAFKA_VERSION}"}
