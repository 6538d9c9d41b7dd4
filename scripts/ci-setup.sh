#!/usr/bin/env bash
# CI set-up for tests/deploy: `docker-compose config` validates docker-compose.yml. There is no Docker engine
# on the CI machines; Debian's docker-compose package needs none for `config`. Installs it only if missing.
set -euo pipefail
if command -v docker-compose >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ci-setup: docker-compose is missing and apt-get is not available; install docker-compose by hand" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo -n"
  else
    echo "ci-setup: docker-compose is missing and installing it needs root (or sudo)" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
command -v docker-compose >/dev/null 2>&1
