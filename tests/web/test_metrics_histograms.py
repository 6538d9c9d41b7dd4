"""Prometheus histograms beside Kafka's quantile names, on /metrics of both --metrics-port and --http-port."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from groupcoord.clients.group_member import GroupMember
from tests.web.conftest import free_port, serve, stop, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

HISTOGRAMS = ("group_coordinator_event_queue_time_seconds", "group_coordinator_event_processing_time_seconds",
              "group_coordinator_background_queue_time_seconds",
              "group_coordinator_background_processing_time_seconds", "group_coordinator_request_latency_seconds",
              "group_coordinator_assignor_time_seconds", "group_coordinator_log_flush_time_seconds")


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def test_latency_histograms_have_cumulative_buckets_and_kafka_quantile_names_stay(tmp_path: Path) -> None:
    metrics_port = free_port()
    served = serve("--topic", "orders:4", "--metrics-port", str(metrics_port), "--state-dir", str(tmp_path / "s"))
    member = GroupMember(served.grpc, "hist", ["orders"]).start()
    try:
        wait_for(lambda: len(member.assignment()) == 4, what="the member owning the partitions")
        for url in (f"http://127.0.0.1:{metrics_port}/metrics", served.http + "/metrics"):
            samples = scrape(url)
            for name in HISTOGRAMS:
                assert name + "_bucket" in samples and name + "_count" in samples and name + "_sum" in samples, name
            # Kafka's names, as summaries with quantiles, are still served
            quantiles = {labels["quantile"] for labels, _ in samples["group_coordinator_event_queue_time_ms"]}
            assert quantiles == {"0.5", "0.95", "0.99", "0.999"}

            beats = [(labels, v) for labels, v in samples["group_coordinator_request_latency_seconds_bucket"]
                     if labels["operation"] == "ConsumerGroupHeartbeat"]
            bounds = [labels["le"] for labels, _ in beats]
            assert bounds[-1] == "+Inf" and len(bounds) == 18 and "0.001" in bounds
            counts = [v for _, v in beats]
            assert counts == sorted(counts), "buckets are cumulative"
            total = [v for labels, v in samples["group_coordinator_request_latency_seconds_count"]
                     if labels["operation"] == "ConsumerGroupHeartbeat"]
            assert counts[-1] == total[0] > 0

            assignor = {labels["assignor"]: v for labels, v in samples["group_coordinator_assignor_time_seconds_count"]}
            assert assignor["uniform"] >= 1 and assignor["range"] == 0  # range: configured, not run yet
            [(_, flushes)] = samples["group_coordinator_log_flush_time_seconds_count"]
            assert flushes >= 1
    finally:
        member.close()
        stop(served)
