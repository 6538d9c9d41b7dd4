"""`docker-compose config` accepts docker-compose.yml (Debian's docker-compose; no Docker engine needed)."""

from __future__ import annotations

import shutil
import subprocess
from xml.etree import ElementTree

import yaml

from groupcoord.kafka_broker import KAFKA_VERSION
from tests.deploy.files import COMPOSE_FILE, REPO, compose


def docker_compose() -> str:
    """Debian's docker-compose binary. `make test` installs it first (its `setup` step runs scripts/ci-setup.sh);
    a test never installs anything itself."""
    found = shutil.which("docker-compose")
    assert found is not None, ("docker-compose is not installed: run `make setup` (scripts/ci-setup.sh apt-installs "
                               "Debian's docker-compose; `make test` runs it first)")
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
