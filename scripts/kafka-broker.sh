#!/usr/bin/env bash
# Installs the Apache Kafka broker the real-broker tests run (tests/realkafka): the jars of
# org.apache.kafka:kafka_2.13 and its runtime dependencies, from Maven Central, into
# .cache/kafka-<version>/libs (git-ignored). Only the first run downloads; later runs see the marker and
# return at once. Needs Java 17+ and Maven. `make test` and .ci/run call it; the pytest fixtures call it too
# when the cache is missing (groupcoord/kafka_broker.py).
#
#   scripts/kafka-broker.sh            # install if missing, print the libs folder
#   KAFKA_VERSION=4.3.0 scripts/kafka-broker.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="${KAFKA_VERSION:-4.4.0}"
HOME_DIR="${GROUPCOORD_KAFKA_HOME:-$ROOT/.cache/kafka-$VERSION}"
LIBS="$HOME_DIR/libs"
MARKER="$HOME_DIR/installed"

if [ -f "$MARKER" ]; then
  echo "$LIBS"
  exit 0
fi
for tool in java mvn; do
  command -v "$tool" >/dev/null 2>&1 || { echo "kafka-broker: $tool is not on PATH (needs Java 17+ and Maven)" >&2; exit 1; }
done
mkdir -p "$HOME_DIR"
# One installer at a time: parallel test sessions of one checkout share the cache.
exec 9>"$HOME_DIR/.lock"
flock 9
if [ ! -f "$MARKER" ]; then
  started=$(date +%s)
  rm -rf "$LIBS" "$LIBS.partial"
  mvn -q -B -Dstyle.color=never -f "$ROOT/kafka-broker/pom.xml" -Dkafka.version="$VERSION" dependency:copy-dependencies \
    -DoutputDirectory="$LIBS.partial" -DincludeScope=runtime >"$HOME_DIR/mvn.log" 2>&1 \
    || { cat "$HOME_DIR/mvn.log" >&2; echo "kafka-broker: mvn failed (log above)" >&2; exit 1; }
  test -f "$LIBS.partial/kafka_2.13-$VERSION.jar" || { echo "kafka-broker: kafka_2.13-$VERSION.jar missing after mvn" >&2; exit 1; }
  mv "$LIBS.partial" "$LIBS"
  echo "$VERSION" >"$MARKER"
  echo "kafka-broker: installed Kafka $VERSION ($(ls "$LIBS" | wc -l) jars) in $(( $(date +%s) - started )) s" >&2
fi
echo "$LIBS"
