#!/usr/bin/env bash
# Installs one Maven artifact with its runtime dependencies from Maven Central into HOME_DIR/libs (git-ignored),
# once: later runs see HOME_DIR/installed and return at once. Prints the libs folder. Needs Java 17+ and Maven.
# The installers of the project's Java parts call it (scripts/kafka-broker.sh, scripts/spark-kafka-jars.sh).
#
#   scripts/maven-libs.sh NAME POM VERSION_PROPERTY VERSION HOME_DIR EXPECTED_JAR
set -euo pipefail
NAME="$1" POM="$2" PROPERTY="$3" VERSION="$4" HOME_DIR="$5" EXPECTED="$6"
LIBS="$HOME_DIR/libs"
MARKER="$HOME_DIR/installed"

if [ -f "$MARKER" ]; then
  echo "$LIBS"
  exit 0
fi
for tool in java mvn; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$NAME: $tool is not on PATH (needs Java 17+ and Maven)" >&2; exit 1; }
done
mkdir -p "$HOME_DIR"
# One installer at a time: parallel test sessions of one checkout share the cache.
exec 9>"$HOME_DIR/.lock"
flock 9
if [ ! -f "$MARKER" ]; then
  started=$(date +%s)
  rm -rf "$LIBS" "$LIBS.partial"
  echo "$NAME: resolving $EXPECTED and its dependencies from Maven Central" >&2
  mvn -q -B -U -Dstyle.color=never -f "$POM" -D"$PROPERTY=$VERSION" dependency:copy-dependencies \
    -DoutputDirectory="$LIBS.partial" -DincludeScope=runtime >"$HOME_DIR/mvn.log" 2>&1 \
    || { tail -20 "$HOME_DIR/mvn.log" >&2; echo "$NAME: mvn failed for $VERSION (log: $HOME_DIR/mvn.log)" >&2; exit 1; }
  test -f "$LIBS.partial/$EXPECTED" || { echo "$NAME: $EXPECTED is missing after mvn" >&2; exit 1; }
  mv "$LIBS.partial" "$LIBS"
  echo "$VERSION" >"$MARKER"
  echo "$NAME: installed $VERSION ($(ls "$LIBS" | wc -l) jars) in $(( $(date +%s) - started )) s" >&2
fi
echo "$LIBS"
