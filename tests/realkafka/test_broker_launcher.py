"""The launcher of the real Kafka broker for tests."""

from __future__ import annotations

from groupcoord.kafka_broker import new_cluster_id


def test_a_kraft_cluster_id_never_starts_with_a_dash_that_the_storage_tool_would_read_as_an_option() -> None:
    ids = [new_cluster_id() for _ in range(2000)]  # about 31 of 2,000 plain ids would start with "-"
    assert all(not i.startswith("-") and len(i) == 22 for i in ids)
