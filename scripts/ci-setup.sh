#!/usr/bin/env bash
# The tools `make test` needs beyond PyPI, installing only what is missing (the Makefile's `setup` step runs it
# before the tests, so nothing is installed by a test):
# - for tests/deploy: `docker-compose config` validates docker-compose.yml. There is no Docker engine on the CI
#   machines; Debian's docker-compose package needs none for `config`.
# - for tests/realkafka: Java 17 and Maven, which scripts/kafka-broker.sh uses to fetch and run Kafka.
# - for tests/web: Debian's chromium, which Playwright drives headless (no `playwright install` download).
set -euo pipefail
PACKAGES=()
command -v docker-compose >/dev/null 2>&1 || PACKAGES+=(docker-compose)
command -v java >/dev/null 2>&1 || PACKAGES+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || PACKAGES+=(maven)
command -v chromium >/dev/null 2>&1 || PACKAGES+=(chromium)
if [ ${#PACKAGES[@]} -eq 0 ]; then
  echo "ci-setup: docker-compose, java, mvn and chromium are installed; nothing to do"
  exit 0
fi
echo "ci-setup: installing ${PACKAGES[*]} from Debian (apt-get; a minute or two the first time)"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ci-setup: ${PACKAGES[*]} missing and apt-get is not available; install them by hand" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo -n"
  else
    echo "ci-setup: ${PACKAGES[*]} missing and installing them needs root (or sudo)" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
for tool in docker-compose java mvn chromium; do
  command -v "$tool" >/dev/null 2>&1 || { echo "ci-setup: $tool is still missing after apt-get" >&2; exit 1; }
done
echo "ci-setup: installed ${PACKAGES[*]} in ${SECONDS} s"
