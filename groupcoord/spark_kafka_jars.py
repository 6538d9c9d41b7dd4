"""Spark's own Kafka source (``spark.readStream.format("kafka")``) for the installed PySpark, from Maven Central.

PySpark's wheel does not ship ``spark-sql-kafka-0-10``. `kafka_source_jars()` installs it once through the
project's pom (spark-kafka/pom.xml, run by scripts/spark-kafka-jars.sh into .cache/spark-kafka-<version>/libs)
and returns the jars to pass as ``spark.jars``: the connector, its token provider, kafka-clients and
commons-pool2; the rest of its dependencies (Scala, lz4, snappy, Hadoop's client...) are PySpark's own, and
a second copy of them on the class path is dropped.

The version is the installed PySpark's. Maven Central (as reached from these machines, November 2026) has no
Spark 4.3.0 artifacts, while PyPI has pyspark 4.3.0: then the newest connector release Central has,
`FALLBACK_VERSION`, is used, and `KafkaSourceJars.version` says so. The connector talks to Spark through its
DataSource V2 API; 4.2.0's reads, streams, offsets and headers were checked against PySpark 4.3.0 by the
option parity tests (tests/spark/test_option_parity.py).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FALLBACK_VERSION", "KafkaSourceJars", "SparkKafkaJarsError", "kafka_source_jars"]

FALLBACK_VERSION = "4.2.0"
_CHECKOUT = Path(__file__).resolve().parents[1]
_SCRIPT = _CHECKOUT / "scripts" / "spark-kafka-jars.sh"
_RETRY_MISSING_S = 86_400.0  # a release Central lacked is asked for again after a day
_ARTIFACT = re.compile(r"^(?P<name>.+?)-\d[^-]*(?:-[A-Za-z0-9.]+)?\.jar$")


class SparkKafkaJarsError(RuntimeError):
    """The connector could not be installed; the message carries Maven's output."""


@dataclass(frozen=True, slots=True)
class KafkaSourceJars:
    version: str  # the connector's version
    pyspark_version: str
    jars: tuple[str, ...]  # for spark.jars

    @property
    def matches_pyspark(self) -> bool:
        return self.version == self.pyspark_version


def _artifact(jar: str) -> str:
    m = _ARTIFACT.match(jar)
    return m.group("name") if m else jar


def _install(version: str) -> Path:
    done = subprocess.run(["bash", str(_SCRIPT)], env={**os.environ, "SPARK_VERSION": version},
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SparkKafkaJarsError(f"installing spark-sql-kafka-0-10 {version} failed:\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


@functools.lru_cache(maxsize=1)
def kafka_source_jars() -> KafkaSourceJars:
    """The connector's jars for ``spark.jars``, installed on first use (seconds; later calls read the cache)."""
    import pyspark

    pyspark_version = pyspark.__version__
    missing = _CHECKOUT / ".cache" / f"spark-kafka-{pyspark_version}" / "unavailable"
    fresh_miss = missing.is_file() and time.time() - missing.stat().st_mtime < _RETRY_MISSING_S
    try:
        if fresh_miss and pyspark_version != FALLBACK_VERSION:
            raise SparkKafkaJarsError(f"spark-sql-kafka-0-10 {pyspark_version} was not on Maven Central recently")
        libs, version = _install(pyspark_version), pyspark_version
    except SparkKafkaJarsError:
        if pyspark_version == FALLBACK_VERSION:
            raise
        if not fresh_miss:
            missing.parent.mkdir(parents=True, exist_ok=True)
            missing.write_text("not on Maven Central; asked again a day later\n")
        libs, version = _install(FALLBACK_VERSION), FALLBACK_VERSION
    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).resolve().parent / "jars").glob("*.jar")}
    jars = tuple(str(p) for p in sorted(libs.glob("*.jar")) if _artifact(p.name) not in shipped)
    if not any("spark-sql-kafka-0-10" in j for j in jars):
        raise SparkKafkaJarsError(f"no spark-sql-kafka-0-10 jar in {libs}")
    return KafkaSourceJars(version, pyspark_version, jars)
