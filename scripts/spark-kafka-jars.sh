#!/usr/bin/env bash
# Installs Spark's own Kafka source, org.apache.spark:spark-sql-kafka-0-10_2.13 at SPARK_VERSION, with its
# runtime dependencies, from Maven Central into .cache/spark-kafka-<version>/libs (git-ignored), through
# scripts/maven-libs.sh. groupcoord/spark_kafka_jars.py calls it with the installed PySpark's version (and, when
# Maven Central has no such release, with the newest one it has).
#
#   SPARK_VERSION=4.2.0 scripts/spark-kafka-jars.sh     # install if missing, print the libs folder
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="${SPARK_VERSION:?set SPARK_VERSION, e.g. 4.2.0}"
exec bash "$ROOT/scripts/maven-libs.sh" spark-kafka-jars "$ROOT/spark-kafka/pom.xml" spark.version "$VERSION" \
  "$ROOT/.cache/spark-kafka-$VERSION" "spark-sql-kafka-0-10_2.13-$VERSION.jar"
