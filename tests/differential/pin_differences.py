"""Re-pins the differences: plays every scenario on a fresh broker, labels each difference with its README id
(D1, D2, ...) and rewrites tests/differential/known_differences.py. Run it after a deliberate change, then
review the diff of that file entry by entry (an entry labelled D? is new and needs a decision):

    python -m tests.differential.pin_differences
"""

from __future__ import annotations

import pprint
from pathlib import Path

import tests.differential.conftest as differential_conftest
from groupcoord.kafka_broker import KafkaBroker
from tests.differential import scenarios  # noqa: F401 - registers the scenarios
from tests.differential.harness import SCENARIOS, run_pair, trace_diffs

KNOWN_FILE = Path(__file__).with_name("known_differences.py")

# Scenario -> the one listed difference it shows (besides D1, which many error answers show).
BY_SCENARIO = {
    "join_with_empty_member_id_is_invalid_in_v1": "D2",
    "join_without_owned_list_is_invalid": "D3",
    "empty_subscription_gets_nothing": "D4",
    "regex_subscription_is_resolved": "D4",
    "first_join_with_assignor_offload": "D4",
    "heartbeat_with_previous_epoch_and_matching_owned_is_accepted": "D6",
    "commit_at_an_old_epoch_is_stale": "D7",
    "describe_unknown_groups": "D8",
    "consumer_group_states_are_upper_case": "D8",
    "classic_static_member_rejoins_with_new_member_id": "D11",
    "classic_join_to_a_consumer_group": "D12",
    "consumer_describe_of_a_classic_group": "D13",
    "join_with_topic_names_and_regex": "D15",
}


def classify(name: str, path: str) -> str:
    if path.endswith("assignment_epoch") and name in ("last_member_leaves_and_group_is_empty",
                                                      "static_member_leaves_for_good"):
        return "D5"
    if name == "classic_second_member_triggers_rebalance":
        return "D9" if path.endswith("group_state") else "D10"
    if name in BY_SCENARIO:
        return BY_SCENARIO[name]
    if path.endswith((".member_id", ".member_epoch")):
        return "D1"
    return "D?"


def main() -> None:
    known = {}
    total = 0
    with KafkaBroker(1) as broker:
        fixture = differential_conftest.differential_env.__wrapped__(broker)  # type: ignore[attr-defined]
        env = next(fixture)
        try:
            for name in sorted(SCENARIOS):
                kafka, ours = run_pair(SCENARIOS[name], [env.kafka, env.groupcoord], env.topics)
                compared, diffs = trace_diffs(kafka, ours)
                total += compared
                if diffs:
                    known[name] = [(path, theirs, mine, classify(name, path)) for path, theirs, mine in diffs]
        finally:
            fixture.close()
    print(f"{len(SCENARIOS)} scenarios, {total} fields compared, {sum(map(len, known.values()))} differences "
          f"in {len(known)} scenarios")
    head = KNOWN_FILE.read_text().split("Pin = ")[0]
    prefix = "KNOWN: dict[str, list[Pin]] = "
    KNOWN_FILE.write_text(
        head + "Pin = tuple[str, Any, Any, str]  # (step.field path, Kafka's value, groupcoord's value, id)\n\n"
        + prefix + pprint.pformat(known, width=118 - len(prefix), sort_dicts=True) + "\n")


if __name__ == "__main__":
    main()
