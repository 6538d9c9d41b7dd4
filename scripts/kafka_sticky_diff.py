"""Differential check of `cooperative-sticky` against Kafka's own CooperativeStickyAssignor.

    python scripts/kafka_sticky_diff.py [--cases N] [--seed S] [--jar kafka-clients.jar --jar slf4j-api.jar]

Generates random classic groups (ids of several shapes, so Kafka's HashMap order varies; generations
-1..3; overlapping claims), runs each through Kafka's assignor (KafkaStickyOracle.java, compiled with
javac against the kafka-clients jar) and through ours, and prints how many answers differ. Groups where
every member subscribes to the same topics must agree exactly. With different subscriptions Kafka runs
its general algorithm, which ours does not reproduce: those are counted, and so are the rounds where
Kafka gives a partition to a member other than its single newest claimant (issue 12's safety rule,
which ours enforces). Needs a JDK; not part of the test suite.
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from groupcoord.assignors.classic import ClassicSubscription  # noqa: E402
from groupcoord.assignors.cooperative_sticky import CooperativeStickyAssignor  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafka_sticky_oracle")
Case = tuple[dict[str, int], dict[str, ClassicSubscription]]


def default_jars() -> list[str]:
    m2 = os.path.expanduser("~/.m2/repository")
    kafka = sorted(glob.glob(f"{m2}/org/apache/kafka/kafka-clients/*/kafka-clients-*.jar"))
    slf4j = sorted(glob.glob(f"{m2}/org/slf4j/slf4j-api/*/slf4j-api-*.jar"))
    return kafka[-1:] + slf4j[-1:]


def random_case(rng: random.Random) -> Case:
    big = rng.random() < 0.3  # past 12 members the HashMap table grows: another iteration order
    topics = [f"topic{i}" for i in range(rng.randint(1, 4))]
    counts = {t: rng.randint(1, 30 if big else 8) for t in topics}
    shape = rng.choice(["consumer{}", "c{}", "consumer-{}-{}", "m{}x"])
    n = rng.randint(1, 40 if big else 8)
    ids = list(dict.fromkeys(shape.format(rng.randint(0, 40), rng.randint(0, 999)) for _ in range(n)))
    same = rng.random() < 0.7
    common = sorted(rng.sample(topics, rng.randint(1, len(topics))))
    every = [(t, p) for t in topics for p in range(counts[t])]
    subs = {}
    for m in ids:
        mine = common if same else sorted(rng.sample(topics, rng.randint(1, len(topics))))
        owned = rng.sample(every, rng.randint(0, min(len(every), 12 if big else 5)))
        generation = rng.choice([-1, 1, 2, 2, 3])
        # a v0/v1 subscription: no generation field, cooperative-sticky's user data carries it
        user_data = rng.choice([1, 2, 3]).to_bytes(4, "big") if generation == -1 and rng.random() < 0.5 else b""
        subs[m] = ClassicSubscription(tuple(mine), tuple(owned), generation, user_data=user_data)
    used = {t for s in subs.values() for t in s.topics}
    return {t: c for t, c in counts.items() if t in used}, subs


def encode(cases: list[Case]) -> str:
    lines = []
    for counts, subs in cases:
        lines.append("case")
        lines += [f"topic {t} {c}" for t, c in counts.items()]
        for m, s in subs.items():
            owned = ",".join(f"{t}:{p}" for t, p in s.owned_partitions) or "-"
            user_gen = int.from_bytes(s.user_data, "big", signed=True) if s.user_data else "-"
            lines.append(f"member {m} {s.generation} {','.join(s.topics) or '-'} {owned} {user_gen}")
        lines.append("end")
    return "\n".join(lines) + "\n"


def decode(text: str) -> list[dict[str, set[tuple[str, int]]]]:
    out: list[dict[str, set[tuple[str, int]]]] = [{}]
    for line in text.splitlines():
        if line == "end":
            out.append({})
            continue
        m, parts = line.split(" ")
        pairs = [] if parts == "-" else [p.rsplit(":", 1) for p in parts.split(",")]
        out[-1][m] = {(t, int(p)) for t, p in pairs}
    return out[:-1]


def generation(s: ClassicSubscription) -> int:
    if s.generation >= 0 or len(s.user_data) < 4:
        return max(s.generation, -1)
    return int.from_bytes(s.user_data[:4], "big", signed=True)


def newest_claimant(subs: dict[str, ClassicSubscription], tp: tuple[str, int]) -> str | None:
    gens = sorted((generation(s), m) for m, s in subs.items() if tp in s.owned_partitions)
    if not gens or (len(gens) > 1 and gens[-1][0] == gens[-2][0]):
        return None
    return gens[-1][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--jar", action="append", help="classpath entries (default: newest in ~/.m2)")
    args = parser.parse_args()
    cp = os.pathsep.join(args.jar or default_jars())
    rng = random.Random(args.seed)
    cases = [random_case(rng) for _ in range(args.cases)]
    with tempfile.TemporaryDirectory() as build:
        subprocess.run(["javac", "-d", build, "-cp", cp, os.path.join(HERE, "KafkaStickyOracle.java")], check=True)
        done = subprocess.run(["java", "-cp", os.pathsep.join([build, cp]), "KafkaStickyOracle"],
                              input=encode(cases), capture_output=True, text=True, check=True)
    kafka = decode(done.stdout)
    ours = CooperativeStickyAssignor()
    tally = {kind: {"cases": 0, "kafka unsafe": 0, "differ": 0, "differ where kafka is safe": 0}
             for kind in ("same", "different")}
    for (counts, subs), want in zip(cases, kafka, strict=True):
        got = {m: set(ps) for m, ps in ours.assign(counts, subs).items()}
        kind = "same" if len({frozenset(s.topics) for s in subs.values()}) == 1 else "different"
        unsafe = any(newest_claimant(subs, tp) != m for m, ps in want.items() for tp in ps
                     if any(tp in s.owned_partitions for mm, s in subs.items() if mm != m))
        # Kafka's general path can move a partition back to a previous owner that no longer subscribes it
        unsafe |= any(t not in subs[m].topics for m, ps in want.items() for t, _ in ps)
        row = tally[kind]
        row["cases"] += 1
        row["kafka unsafe"] += unsafe
        row["differ"] += got != want
        row["differ where kafka is safe"] += got != want and not unsafe
        if kind == "same" and got != want and not unsafe:
            print("DIFF", counts, subs, "\n  kafka", want, "\n  ours ", got)
    print("kafka unsafe: Kafka hands a partition another member claims to someone other than its single")
    print("newest claimant (by generation as Kafka's member data reads it), or a partition of a topic the")
    print("member does not subscribe; ours does neither")
    for kind, row in tally.items():
        print(f"{kind} subscriptions: " + ", ".join(f"{k} {v}" for k, v in row.items()))


if __name__ == "__main__":
    main()
