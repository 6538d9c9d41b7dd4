#!/usr/bin/env bash
# Installs the Apache Kafka broker the real-broker tests run (tests/realkafka): the jars of
# org.apache.kafka:kafka_2.13 and its runtime dependencies, from Maven Central, into
# .cache/kafka-<version>/libs (git-ignored), through scripts/maven-libs.sh. `make setup` (run by `make test`)
# calls it; no test does.
#
#   scripts/kafka-broker.sh            # install if missing, print the libs folder
#   KAFKA_VERSION=4.3.0 scripts/kafka-broker.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="${KAFKA_VERSION:-4.4.0}"
exec bash "$ROOT/scripts/maven-libs.sh" kafka-broker "$ROOT/kafka-broker/pom.xml" kafka.version "$VERSION" \
  "${GROUPCOORD_KAFKA_HOME:-$ROOT/.cache/kafka-$VERSION}" "kafka_2.13-$VERSION.jar"
