#!/usr/bin/env bash
# Installs Spark's own Kafka source, org.apache.spark:spark-sql-kafka-0-10_2.13 at SPARK_VERSION, with its
# runtime dependencies, from Maven Central into .cache/spark-kafka-<version>/libs (git-ignored). Only the first
# run downloads; later runs see the marker and return at once. Needs Java 17+ and Maven.
# groupcoord/spark_kafka_jars.py calls it with the installed PySpark's version (and, when Maven Central has no
# such release, with the newest one it has).
#
#   SPARK_VERSION=4.2.0 scripts/spark-kafka-jars.sh     # install if missing, print the libs folder
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="${SPARK_VERSION:?set SPARK_VERSION, e.g. 4.2.0}"
HOME_DIR="$ROOT/.cache/spark-kafka-$VERSION"
LIBS="$HOME_DIR/libs"
MARKER="$HOME_DIR/installed"

if [ -f "$MARKER" ]; then
  echo "$LIBS"
  exit 0
fi
for tool in java mvn; do
  command -v "$tool" >/dev/null 2>&1 || { echo "spark-kafka-jars: $tool is not on PATH (needs Java 17+ and Maven)" >&2; exit 1; }
done
mkdir -p "$HOME_DIR"
exec 9>"$HOME_DIR/.lock"
flock 9
if [ ! -f "$MARKER" ]; then
  started=$(date +%s)
  rm -rf "$LIBS" "$LIBS.partial"
  echo "spark-kafka-jars: resolving spark-sql-kafka-0-10_2.13:$VERSION from Maven Central" >&2
  mvn -q -B -U -Dstyle.color=never -f "$ROOT/spark-kafka/pom.xml" -Dspark.version="$VERSION" dependency:copy-dependencies \
    -DoutputDirectory="$LIBS.partial" -DincludeScope=runtime >"$HOME_DIR/mvn.log" 2>&1 \
    || { tail -5 "$HOME_DIR/mvn.log" >&2; echo "spark-kafka-jars: mvn failed for $VERSION (log: $HOME_DIR/mvn.log)" >&2; exit 1; }
  test -f "$LIBS.partial/spark-sql-kafka-0-10_2.13-$VERSION.jar" || { echo "spark-kafka-jars: the jar is missing after mvn" >&2; exit 1; }
  mv "$LIBS.partial" "$LIBS"
  echo "$VERSION" >"$MARKER"
  echo "spark-kafka-jars: installed spark-sql-kafka $VERSION ($(ls "$LIBS" | wc -l) jars) in $(( $(date +%s) - started )) s" >&2
fi
echo "$LIBS"
