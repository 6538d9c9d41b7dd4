"""The Grafana dashboard queries only metrics (and labels) that a running coordinator actually serves.

The coordinator runs as the compose file configures it (same `groupcoord serve` flags), with two local
substitutions: loopback ports instead of the container's, and the embedded Kafka (`--embedded-kafka`) in
place of the `kafka` service, so that the Kafka-only gauges (metadata and lag snapshot ages) exist too.
A member joins and heartbeats so that every label set (groups by state, heartbeats by error) has samples.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.deploy.files import (
    DASHBOARD_FILE,
    DATASOURCES_DIR,
    argv,
    dashboard_targets,
    flag,
    groupcoord_argv,
    load_yaml,
    parse_promql,
    service,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

Samples = dict[str, list[dict[str, str]]]  # sample name -> label sets


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local_serve_command(grpc_port: int, metrics_port: int, state_dir: Path) -> list[str]:
    """The compose coordinator's argv with loopback ports, a temporary state dir and the embedded Kafka."""
    topics = argv(service("topics").get("entrypoint")) + argv(service("topics")["command"])
    topic = f"{flag(topics, '--topic')}:{flag(topics, '--partitions')}"
    replace = {"--listen": f"127.0.0.1:{grpc_port}", "--metrics-port": str(metrics_port),
               "--metrics-host": "127.0.0.1", "--state-dir": str(state_dir), "--http-port": "0",
               "--http-host": "127.0.0.1"}
    out: list[str] = []
    args = iter(groupcoord_argv()[1:])
    for arg in args:
        if arg in replace:
            out += [arg, replace[arg]]
            next(args)
        elif arg == "--bootstrap-servers":
            out += ["--embedded-kafka", "--topic", topic]
            next(args)
        else:
            out.append(arg)
    assert "--embedded-kafka" in out, "the compose coordinator must read Kafka (--bootstrap-servers)"
    return out


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(dict(sample.labels))
    return samples


def join_and_heartbeat(address: str, group: str, topic: str) -> None:
    with grpc.insecure_channel(address) as channel:
        grpc.channel_ready_future(channel).result(timeout=30)
        stub = pb_grpc.GroupCoordinatorStub(channel)
        member_id, epoch = str(uuid.uuid4()), 0
        for _ in range(5):
            req = pb.ConsumerGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=epoch)
            if epoch == 0:
                req.rebalance_timeout_ms = 30000
                req.subscribed_topic_names.values.append(topic)
                req.topic_partitions.SetInParent()
            resp = stub.ConsumerGroupHeartbeat(req, timeout=10)
            assert resp.error_code == 0, resp.error_message
            epoch = resp.member_epoch
            time.sleep(0.2)
        # one rejected heartbeat, so that the by-error counter has more than one label value
        resp = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=str(uuid.uuid4()), member_epoch=7), timeout=10)
        assert resp.error_code != 0


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Samples]:
    grpc_port, metrics_port = free_port(), free_port()
    command = local_serve_command(grpc_port, metrics_port, tmp_path_factory.mktemp("state"))
    proc = subprocess.Popen([sys.executable, "-m", "groupcoord", *command],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        topic = flag(argv(service("spark-driver")["command"]), "--topic")
        join_and_heartbeat(f"127.0.0.1:{grpc_port}", flag(argv(service("spark-driver")["command"]), "--group"),
                           topic)
        wanted = ("group_coordinator_groups", "group_coordinator_consumer_group_heartbeats_total",
                  "groupcoord_kafka_lag_snapshot_age_seconds", "groupcoord_kafka_metadata_age_seconds")
        deadline = time.monotonic() + 30
        while True:
            scraped = scrape(metrics_port)
            if all(scraped.get(name) for name in wanted) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        yield scraped
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        assert proc.returncode == 0, out


def dashboard() -> dict[str, Any]:
    data = json.loads(DASHBOARD_FILE.read_text())
    assert isinstance(data, dict)
    return data


def queries() -> list[tuple[str, dict[str, Any]]]:
    found = dashboard_targets(dashboard())
    assert found, "the dashboard has no queries"
    return found


def test_every_metric_the_dashboard_queries_is_served_by_the_coordinator(samples: Samples) -> None:
    missing = {(title, name) for title, target in queries() for name in parse_promql(target["expr"]).metrics
               if name not in samples}
    assert not missing, f"not in a scrape of the coordinator: {sorted(missing)}; served: {sorted(samples)}"


def test_every_label_the_dashboard_filters_on_exists_with_a_matching_value(samples: Samples) -> None:
    for title, target in queries():
        for selector in parse_promql(target["expr"]).selectors:
            for label, op, value in selector.matchers:
                values = {labels[label] for labels in samples.get(selector.metric, []) if label in labels}
                assert values, f"{title}: {selector.metric} has no label {label!r}"
                if op == "=":
                    assert value in values, f"{title}: {selector.metric}{{{label}={value!r}}} matches nothing"
                if op == "=~":
                    unmatched = [alt for alt in value.split("|") if not any(re.fullmatch(alt, v) for v in values)]
                    assert not unmatched, f"{title}: {selector.metric}{{{label}=~...}}: {unmatched} match nothing"


def test_every_label_the_dashboard_groups_by_or_names_in_a_legend_exists_on_its_metrics(samples: Samples) -> None:
    for title, target in queries():
        query = parse_promql(target["expr"])
        labels = {label for name in query.metrics for labels in samples.get(name, []) for label in labels}
        assert query.grouping_labels <= labels, f"{title}: groups by {query.grouping_labels - labels}, not served"
        legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
        available = query.grouping_labels if query.grouping_labels else labels
        assert legend <= available, f"{title}: legend names {legend - available}, absent from the result"


def test_dashboard_charts_latencies_idle_ratios_groups_rebalances_assignor_runs_heartbeats_and_lag_age() -> None:
    queried = {name for _title, target in queries() for name in parse_promql(target["expr"]).metrics}
    required = {
        *(f"group_coordinator_{kind}_{what}_time_ms{suffix}" for kind in ("event", "background")
          for what in ("queue", "processing") for suffix in ("", "_max")),
        "group_coordinator_thread_idle_ratio_avg", "group_coordinator_background_thread_idle_ratio_avg",
        "group_coordinator_groups", "group_coordinator_rebalances_total", "group_coordinator_assignor_runs_total",
        "group_coordinator_assignor_runs_skipped_total", "group_coordinator_consumer_group_heartbeats_total",
        "groupcoord_kafka_lag_snapshot_age_seconds",
        # the histograms, aggregated over instances
        *(f"group_coordinator_{name}_seconds_bucket" for name in (
            "request_latency", "event_queue_time", "event_processing_time", "background_queue_time",
            "background_processing_time", "assignor_time", "log_flush_time")),
    }
    assert not required - queried, f"no panel for {sorted(required - queried)}"
    by_state = [parse_promql(t["expr"]) for _title, t in queries()
                if "group_coordinator_groups" in parse_promql(t["expr"]).metrics]
    assert any("state" in q.grouping_labels for q in by_state), "groups must be shown by state"


def test_dashboard_queries_use_the_provisioned_prometheus_datasource() -> None:
    uids = {ds["uid"] for f in sorted(DATASOURCES_DIR.glob("*.yml")) for ds in load_yaml(f)["datasources"]
            if ds["type"] == "prometheus"}
    assert len(uids) == 1
    for title, target in queries():
        assert target["datasource"] == {"type": "prometheus", "uid": next(iter(uids))}, title
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"


def test_promql_scanner_finds_metric_selectors_not_functions_keywords_or_labels() -> None:
    q = parse_promql('sum by (mode, type) (rate(a_total{x="1", y=~"p|q"}[$__rate_interval])) / on (z) b_max'
                     ' + histogram_quantile(0.99, c) and ignoring(w) d offset 5m')
    assert q.metrics == {"a_total", "b_max", "c", "d"}
    assert q.grouping_labels == {"mode", "type", "z", "w"}
    assert q.selectors[0].matchers == (("x", "=", "1"), ("y", "=~", "p|q"))
