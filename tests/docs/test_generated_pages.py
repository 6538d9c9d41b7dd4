"""The generated reference pages of docs/reference/ are what the code gives now (as tests/test_proto_drift.py does
for the protobuf code): a config, metric or proto comment changed without `make docs` fails here."""

from __future__ import annotations

from groupcoord import docsgen


def test_generated_reference_pages_match_the_code() -> None:
    stale = [str(p.relative_to(docsgen.REPO_ROOT)) for p in docsgen.stale()]
    assert not stale, f"{', '.join(stale)} drifted from the code: run `make docs`"


def test_reference_pages_cover_every_config_metric_and_rpc() -> None:
    from groupcoord.coordinator.core.config import BROKER_CONFIG_DEFS, GROUP_CONFIG_DEFS

    config = docsgen.configuration_page()
    assert all(f"`{name}`" in config for name in [*BROKER_CONFIG_DEFS, *GROUP_CONFIG_DEFS])
    assert "`group_coordinator_request_latency_seconds` | histogram | `operation`" in docsgen.metrics_page()
    grpc = docsgen.grpc_page()
    assert "| `ConsumerGroupHeartbeat` | `ConsumerGroupHeartbeatRequest` | `ConsumerGroupHeartbeatResponse` |" in grpc
    assert "RE2 syntax (Kafka's RE2/J), full match against topic names" in grpc
