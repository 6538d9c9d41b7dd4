# syntax=docker/dockerfile:1
# The coordinator image: `groupcoord serve` on 0.0.0.0:50051 (gRPC) with Prometheus metrics on :9464.
#
#   docker build -t groupcoord .
#   docker run --rm -p 50051:50051 -p 9464:9464 groupcoord serve --listen 0.0.0.0:50051 \
#       --metrics-port 9464 --metrics-host 0.0.0.0 --topic orders:12
#
# Debian bookworm for both images: Dockerfile.spark needs its openjdk-17 package, which trixie no longer has.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: the package and its dependencies into a virtualenv -------------------------------------------
FROM ${PYTHON_IMAGE} AS build
# A compiler only for wheels missing on this platform (hdrhistogram has none for arm64); never shipped.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY pyproject.toml README.md ./
COPY groupcoord ./groupcoord
COPY coordinator ./coordinator
COPY assignors ./assignors
COPY clients ./clients
COPY wire ./wire
RUN pip install --upgrade pip \
 && pip install . \
 && python -c "import groupcoord.cli, groupcoord.healthcheck, groupcoord.coordinator.runtime.server"

# --- runtime: the virtualenv only, as a non-root user -----------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
RUN groupadd --system --gid 10001 groupcoord \
 && useradd --system --uid 10001 --gid groupcoord --home-dir /home/groupcoord --create-home \
      --shell /usr/sbin/nologin groupcoord \
 && install -d -o groupcoord -g groupcoord /var/lib/groupcoord
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
USER groupcoord
WORKDIR /home/groupcoord
# 50051: gRPC (GroupCoordinator, grpc.health.v1.Health, reflection); 9464: Prometheus /metrics.
EXPOSE 50051 9464
# `serve` sets health SERVING once the state is loaded, NOT_SERVING on SIGTERM or after a log failure.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-m", "groupcoord.healthcheck", "--address", "127.0.0.1:50051", "--timeout", "3"]
ENTRYPOINT ["groupcoord"]
CMD ["serve", "--listen", "0.0.0.0:50051", "--metrics-port", "9464", "--metrics-host", "0.0.0.0"]
