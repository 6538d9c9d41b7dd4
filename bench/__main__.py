"""`python -m bench` (or `make bench`): list the benchmarks and how to run each. Each prints its own table."""

from __future__ import annotations

BENCHMARKS = {
    "bench.core_bench": "steady heartbeats through the sans-I/O core alone (target >= 50,000/s on one core)",
    "bench.target_bench": "target assignments: bytes per partition at 1,000,000 partitions; one member joining a "
                          "1,000-member x 50,000-partition group through the core",
    "bench.heartbeat_cost": "server CPU per heartbeat: groupcoord vs a bare gRPC echo server vs Kafka 4.4's own "
                            "coordinator, driven by the Go load generator of bench/go/heartbeat (issue 30)",
    "bench.heartbeat_profile": "py-spy --native on groupcoord serve under the Go load: where a unary heartbeat's "
                               "time goes",
    "bench.heartbeat_bench": "heartbeats over real gRPC: 5,000 members in 50 groups, a 1,000-member group "
                             "rebalancing, offload on vs off (targets: >= 3,000/s, p99 <= 25 ms, <= 2x quiet p99)",
    "bench.offload_loop_bench": "event-loop CPU of one offloaded assignor run on a 10,000-member group, piece by "
                                "piece (snapshot, send, load, records)",
    "bench.assignors_bench": "assignor times and quality (uniform, range, lag, lag-sticky, cooperative-sticky)",
    "bench.classic_rebalance_bench": "a 1,000-member classic group completing a rebalance over real gRPC",
    "bench.spark_source_bench": "records/s through one Spark driver vs a plain confluent-kafka loop",
    "bench.spark_vs_kafka_source": "Spark's own Kafka source vs groupcoord's, alternated on a standalone cluster: "
                                   "records/s, latency p50/p99, driver and executor CPU, time to the first batch",
    "bench.spark_shared_topic": "two Spark applications on one topic: a consumer group and a share group through "
                                "groupcoord vs Spark's Kafka source (records per application, duplicates, lag)",
    "bench.durability_bench": "commits/s with fsync, start-up replay with and without snapshot",
    "bench.share_bench": "share groups: acquire/acknowledge records/s in ranges of 500 (core, gRPC), memory per "
                         "million in-flight offsets",
    "bench.streams_assignor_bench": "the streams sticky task assignor: 1,000 members x 10,000 tasks (fresh, steady, "
                                    "join, leave; stateless and stateful with a standby)",
    "bench.web_view_bench": "the web view with 1,000 groups: JSON size and build time, page load in headless "
                            "chromium",
    "bench.stale_epoch_bench": "stable members under fast churn against a slow coordinator: heartbeats given up, "
                               "FENCED_MEMBER_EPOCH answers, partitions lost",
    "bench.hostile_bench": "loop hold of the largest legal requests; another group's heartbeat p99 while they "
                           "and catastrophic regexes are sent (target p99 < 100 ms)",
}


def main() -> int:
    import importlib.util

    print("Benchmarks (each takes --quick for a short run and --help for its options):\n")
    for module, what in BENCHMARKS.items():
        present = importlib.util.find_spec(module) is not None
        print(f"  .venv/bin/python -m {module:<32} {what}{'' if present else '  [not present]'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
