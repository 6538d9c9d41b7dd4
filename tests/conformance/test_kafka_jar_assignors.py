"""`range` and `uniform` against Kafka 4.4's own assignor classes, run from the broker's jars.

Random groups (seeded, so every run is the same) go through Kafka's RangeAssignor and UniformAssignor
(`kafka_jar/AssignorOracle.java`, compiled against the jars `groupcoord.kafka_broker.install()` provides)
and through ours; the assignments must be identical, errors included (a subscription to a topic that
does not exist). Chains feed each result back as the next current assignment (ours as returned, views
included; Kafka's as plain maps), with joins, leaves and subscription changes between steps.

Kept inside what both sides define the same way: member ids written in id order (Kafka's member HashMap
breaks bucket ties by insertion, ours by id) and at most 12 partitions per topic (a member's partitions
are then visited in ascending order by Kafka's `HashSet<Integer>` too; see the README).
"""

from __future__ import annotations

import base64
import json
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groupcoord.assignors.api import (
    AssignorError,
    GroupAssignment,
    GroupSpec,
    MemberSpec,
    StaticTopicDescriber,
    SubscriptionType,
)
from groupcoord.assignors.range import RangeAssignor
from groupcoord.assignors.uniform import UniformAssignor
from groupcoord.kafka_broker import install

SOURCE = Path(__file__).with_name("kafka_jar") / "AssignorOracle.java"
Case = tuple[str, SubscriptionType | None, dict[str, int], dict[str, MemberSpec]]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    libs = install()
    out = tmp_path_factory.mktemp("oracle")
    subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", f"{libs}/*", str(SOURCE)], check=True,
                   capture_output=True, timeout=120)
    yield ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", f"{out}:{libs}/*", "AssignorOracle"]


def kafka_answers(command: list[str], cases: list[Case]) -> list[dict[str, Any]]:
    text = "\n---\n".join(case_text(c) for c in cases) + "\n---\n"
    done = subprocess.run(command, input=text, capture_output=True, text=True, check=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == len(cases), done.stderr[-2000:]
    return [json.loads(line) for line in lines]


def case_text(case: Case) -> str:
    name, kind, counts, members = case
    lines = [f"assignor {name}"] + ([f"type {kind.value}"] if kind else [])
    lines += [f"topic {t} {c}" for t, c in counts.items()]
    for m, s in sorted(members.items()):
        subs = ",".join(sorted(s.subscribed_topic_ids)) or "-"
        owned = ";".join(f"{t}={'.'.join(map(str, sorted(ps)))}" for t, ps in s.assigned_partitions.items() if ps)
        lines.append(f"member {m} {s.instance_id or '-'} {subs} {owned or '-'}")
    return "\n".join(lines)


def ours(case: Case) -> tuple[dict[str, Any], GroupAssignment | None]:
    name, kind, counts, members = case
    assignor = RangeAssignor() if name == "range" else UniformAssignor()
    group = GroupSpec.of(members) if kind is None else GroupSpec(members, kind)
    try:
        out = assignor.assign(group, StaticTopicDescriber(counts))
    except AssignorError:
        return {"error": "PartitionAssignorException"}, None
    plain = {m: {t: sorted(ps) for t, ps in sorted(a.items()) if ps} for m, a in out.items()}
    return {m: a for m, a in plain.items() if a}, out


def topic_id(rng: random.Random) -> str:
    return base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("=")


def random_case(rng: random.Random, name: str, hetero: bool) -> Case:
    topics = {topic_id(rng): rng.choice((0, *range(1, 13))) for _ in range(rng.randint(1, 5))}
    ids = list(topics)
    shared = frozenset(rng.sample(ids, rng.randint(1, len(ids))))
    members: dict[str, MemberSpec] = {}
    instances = iter(rng.sample(range(10), 10))
    for i in sorted(rng.sample(range(100), rng.randint(1, 6))):
        subs = frozenset(rng.sample(ids, rng.randint(1, len(ids)))) if hetero else shared
        if rng.random() < 0.05:
            subs = subs | {topic_id(rng)}  # a topic that does not exist
        static = name == "range" and rng.random() < 0.5
        members[f"m{i:02d}"] = MemberSpec(subs, {}, instance_id=f"i{next(instances)}" if static else None)
    owner = {}
    if rng.random() < 0.7:
        for t, c in topics.items():
            for p in range(c):
                if rng.random() < 0.7:
                    owner[(t, p)] = rng.choice(sorted(members))
    current: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    for (t, p), m in owner.items():
        current[m].setdefault(t, set()).add(p)
    members = {m: MemberSpec(s.subscribed_topic_ids, {t: frozenset(ps) for t, ps in current[m].items()},
                             instance_id=s.instance_id) for m, s in members.items()}
    kind = SubscriptionType.HETEROGENEOUS if not hetero and name == "uniform" and rng.random() < 0.3 else None
    return name, kind, topics, members


@pytest.mark.parametrize("name", ["range", "uniform"])
@pytest.mark.parametrize("hetero", [False, True])
def test_random_groups_get_kafkas_assignment(oracle: list[str], name: str, hetero: bool) -> None:
    rng = random.Random(f"{name}-{hetero}")
    cases = [random_case(rng, name, hetero) for _ in range(250)]
    for case, kafka in zip(cases, kafka_answers(oracle, cases), strict=True):
        assert ours(case)[0] == kafka, case_text(case)


@pytest.mark.parametrize("hetero", [False, True])
def test_results_fed_back_through_joins_and_leaves_get_kafkas_assignment(oracle: list[str], hetero: bool) -> None:
    """Chains are played on our side first (each step needs our previous result); Kafka answers every
    step's input at once."""
    rng = random.Random(f"chain-{hetero}")
    cases: list[Case] = []
    answers: list[dict[str, Any]] = []
    for _ in range(50):
        name, kind, topics, members = random_case(rng, "uniform", hetero)
        ids = [t for t in topics if t in {t for s in members.values() for t in s.subscribed_topic_ids}]
        if len(ids) != len(topics) or any(not s.subscribed_topic_ids <= set(topics) for s in members.values()):
            continue
        members = {m: MemberSpec(s.subscribed_topic_ids) for m, s in members.items()}
        for step in range(5):
            case = (name, kind, topics, members)
            answer, out = ours(case)
            cases.append(case)
            answers.append(answer)
            assert out is not None
            members = {m: MemberSpec(s.subscribed_topic_ids, out[m]) for m, s in members.items()}
            subs = list({s.subscribed_topic_ids for s in members.values()})
            move = rng.random()
            if move < 0.35:
                members[f"n{step}{rng.randint(0, 9)}"] = MemberSpec(rng.choice(subs))
            elif move < 0.6 and len(members) > 1:
                del members[rng.choice(sorted(members))]
            elif move < 0.8 and hetero:
                m = rng.choice(sorted(members))
                members[m] = MemberSpec(frozenset(rng.sample(ids, rng.randint(1, len(ids)))),
                                        members[m].assigned_partitions)
    assert len(cases) > 100
    for case, answer, kafka in zip(cases, answers, kafka_answers(oracle, cases), strict=True):
        assert answer == kafka, case_text(case)
