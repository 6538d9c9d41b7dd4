"""A gRPC health probe for container health checks (the image's HEALTHCHECK, compose, Kubernetes exec probes).

    python -m groupcoord.healthcheck --address 127.0.0.1:50051 [--service groupcoord.v1.GroupCoordinator]

Asks `grpc.health.v1.Health/Check` once and exits 0 when the service is SERVING, 1 for anything else:
NOT_SERVING (graceful shutdown, or the coordinator failed stop after a log error), an unknown service, no
answer within `--timeout`, or a usage error. Docker reserves exit code 2 for health checks, so argparse's usage
error (2) is reported as 1 too. It ships in the package so that the image needs no extra binary
(grpc_health_probe) and the probe speaks exactly the health service the server registers.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from groupcoord.wire.v1 import coordinator_pb2 as pb

__all__ = ["DEFAULT_ADDRESS", "SERVICE_NAME", "build_parser", "check", "main"]

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["GroupCoordinator"].full_name
DEFAULT_ADDRESS = "127.0.0.1:50051"
EXIT_HEALTHY = 0
EXIT_UNHEALTHY = 1


def check(address: str, service: str = SERVICE_NAME, timeout_s: float = 3.0) -> tuple[bool, str]:
    """(serving?, what to print). One RPC, no retries: the container runtime already retries the probe."""
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            resp = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.RpcError as e:
            code = e.code() if isinstance(e, grpc.Call) else None
            name = code.name if code is not None else "ERROR"
            details = e.details() if isinstance(e, grpc.Call) else str(e)
            return False, f"{address} {service or '(server)'}: {name}: {details}"
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
    return resp.status == health_pb2.HealthCheckResponse.SERVING, f"{address} {service or '(server)'}: {status}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m groupcoord.healthcheck",
                                description="Exit 0 when the coordinator's gRPC health service says SERVING, else 1.")
    p.add_argument("--address", default=DEFAULT_ADDRESS, help=f"coordinator HOST:PORT (default {DEFAULT_ADDRESS})")
    p.add_argument("--service", default=SERVICE_NAME,
                   help=f"service to check (default {SERVICE_NAME}; '' = the whole server)")
    p.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for the answer (default 3)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help exits 0; a usage error must not exit 2 (reserved by Docker)
        return EXIT_HEALTHY if e.code in (0, None) else EXIT_UNHEALTHY
    if args.timeout <= 0:
        print("--timeout must be positive", file=sys.stderr)
        return EXIT_UNHEALTHY
    serving, message = check(args.address, args.service, args.timeout)
    print(message, file=sys.stdout if serving else sys.stderr)
    return EXIT_HEALTHY if serving else EXIT_UNHEALTHY


if __name__ == "__main__":
    sys.exit(main())
