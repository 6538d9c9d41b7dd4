"""Several instances share the groups of one state topic; Kafka's consumer group decides who owns which partition.

FindCoordinator names the owner, the others answer NOT_COORDINATOR, the Python client follows; when an instance
stops or is killed its partitions move, the new owner replays them, members carry on there, offsets intact.
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from groupcoord.clients.group_member import GroupMember
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.embedded_kafka import EmbeddedKafka
from groupcoord.wire.v1 import coordinator_pb2 as pb

from .conftest import (
    FAST,
    PARTITIONS,
    STATE_TOPIC,
    TOPICS,
    AnyKafka,
    find_coordinator,
    free_port,
    group_ids_covering_every_partition,
    join,
    owned,
    owner_of,
    partitions_served,
    start_instance,
    stub,
    wait_for,
)


@pytest.fixture(scope="module")
def trio() -> Iterator[list[ServerThread]]:
    """Three in-process instances that have divided the six partitions among themselves."""
    with EmbeddedKafka(1, topics={STATE_TOPIC: PARTITIONS, **TOPICS}) as kafka:
        instances = [start_instance(kafka) for _ in range(3)]
        try:
            wait_for(lambda: partitions_served(instances) and all(owned(i) for i in instances),
                     "the three instances share the partitions")
            yield instances
        finally:
            for instance in instances:
                instance.stop()


def members_converged(members: list[GroupMember], partitions: int = TOPICS["orders"]) -> bool:
    """Every member has partitions, and together they hold each partition exactly once."""
    assignments = [m.assignment() for m in members]
    union: set[tuple[str, int]] = set().union(*assignments)
    return all(assignments) and sum(map(len, assignments)) == len(union) == partitions


def test_find_coordinator_names_the_owner_and_other_instances_answer_not_coordinator(
        trio: list[ServerThread]) -> None:
    for group_id in group_ids_covering_every_partition():
        owner = owner_of(trio, group_id)
        for instance in trio:
            channel, coordinator = stub(instance.address)
            try:
                found = find_coordinator(coordinator, group_id)
                assert (found.error_code, found.host, found.port) == (0, "127.0.0.1", owner.server.port)
                resp = join(coordinator, group_id, member_id=f"probe-{instance.server.port}")
                if instance is owner:
                    assert resp.error_code == 0
                else:
                    assert resp.error_code == 16, resp.error_message
                    assert "ask FindCoordinator" in resp.error_message
            finally:
                channel.close()


def test_the_python_client_follows_find_coordinator_from_any_instance_to_the_owner(trio: list[ServerThread]) -> None:
    group_id = "follow-me"
    owner = owner_of(trio, group_id)
    others = [i for i in trio if i is not owner]
    members = [GroupMember(others[0].address, group_id, ["orders"], rpc_timeout_s=5),  # knows only a non-owner
               GroupMember(",".join(i.address for i in [*others, owner]), group_id, ["orders"], rpc_timeout_s=5)]
    try:
        for m in members:
            m.start()
        wait_for(lambda: members_converged(members), "both members join the owner and share the partitions")
        assert members[0].commit_offsets({tp: 7 for tp in members[0].assignment()}) == {
            tp: 0 for tp in members[0].assignment()}
        assert members[1].fetch_offsets(members[0].assignment()) == {tp: 7 for tp in members[0].assignment()}
        channel, coordinator = stub(owner.address)
        described = coordinator.DescribeGroups(pb.DescribeGroupsRequest(group_ids=[group_id]), timeout=5).groups[0]
        channel.close()
        assert {m.member_id for m in described.members} == {m.member_id for m in members}
    finally:
        for m in members:
            m.close()


def test_partitions_handed_over_while_serving_bring_every_acknowledged_commit_to_the_new_owner(
        kafka: AnyKafka) -> None:
    """A joins alone, B joins later (the cooperative rebalance moves half the partitions while A keeps serving the
    rest), then A stops: each handoff must carry every commit A acknowledged."""
    second_address = f"127.0.0.1:{free_port()}"
    first = start_instance(kafka)
    running = [first]
    groups = group_ids_covering_every_partition()
    members = {g: GroupMember(f"{first.address},{second_address}", g, ["orders"], rpc_timeout_s=5) for g in groups}
    acked: dict[str, dict[tuple[str, int], int]] = {g: {} for g in groups}
    stop = threading.Event()
    counter = itertools.count(1)

    def commit_forever() -> None:
        while not stop.is_set():
            for g, m in members.items():
                offsets = {tp: next(counter) for tp in sorted(m.assignment())[:3]}
                try:
                    errors = m.commit_offsets(offsets) if offsets else {}
                except grpc.RpcError:
                    continue
                for tp, code in errors.items():
                    if code == 0:
                        acked[g][tp] = max(acked[g].get(tp, 0), offsets[tp])

    def commits_since(mark: int) -> bool:
        return all(max(a.values(), default=0) > mark for a in acked.values())

    committer = threading.Thread(target=commit_forever, daemon=True)
    try:
        wait_for(lambda: partitions_served([first]), "the first instance owns every partition")
        for m in members.values():
            m.start()
        committer.start()
        wait_for(lambda: commits_since(0), "every group commits")
        second = start_instance(kafka, listen=second_address)
        running.append(second)
        wait_for(lambda: partitions_served([first, second]) and bool(owned(second)) and bool(owned(first)),
                 "the second instance takes over some partitions")
        mark = next(counter)
        wait_for(lambda: commits_since(mark), "every group commits at its owner")
        running.remove(first)
        first.stop()
        wait_for(lambda: partitions_served([second]), "the second instance owns every partition")
        mark = next(counter)
        wait_for(lambda: commits_since(mark), "every group commits at the remaining instance")
        stop.set()
        committer.join(timeout=30)
        for g, m in members.items():
            fetched = m.fetch_offsets()
            lost = {tp: off for tp, off in acked[g].items() if fetched.get(tp, -1) < off}
            assert not lost, f"acknowledged commits of {g} lost in a handoff: {lost}"
    finally:
        stop.set()
        if committer.is_alive():
            committer.join(timeout=30)
        for m in members.values():
            m.close(leave=False)
        for instance in running:
            instance.stop()


# --- an instance killed with SIGKILL -------------------------------------------------------------------------------
def serve(bootstrap: str, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    settings = [arg for name, value in FAST.items() for arg in ("--set", f"{name}={value}")]
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "groupcoord", "--log-level", "WARNING", "serve", "--listen", f"127.0.0.1:{port}",
             "--bootstrap-servers", bootstrap, "--state-topic", STATE_TOPIC, "--state-partitions", str(PARTITIONS),
             "--state-session-timeout-ms", "3000", "--metadata-refresh-ms", "500", *settings],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)


def owner_port(addresses: list[str], group_id: str) -> int | None:
    """The owner every listed instance names for `group_id`, if they all agree and it serves the group."""
    answers = set()
    for address in addresses:
        channel, coordinator = stub(address)
        try:
            found = find_coordinator(coordinator, group_id)
            answers.add(found.port if found.error_code == 0 else None)
        except grpc.RpcError:
            answers.add(None)
        finally:
            channel.close()
    if len(answers) != 1 or None in answers:
        return None
    (port,) = answers
    channel, coordinator = stub(f"127.0.0.1:{port}")
    try:
        served = coordinator.OffsetFetch(pb.OffsetFetchRequest(group_id=group_id), timeout=5).error_code == 0
    except grpc.RpcError:
        served = False
    finally:
        channel.close()
    return port if served else None


def test_a_killed_instance_s_groups_move_to_the_survivors_whose_members_carry_on_with_offsets_intact(
        kafka: AnyKafka, tmp_path: Path) -> None:
    ports = [free_port() for _ in range(3)]
    addresses = [f"127.0.0.1:{p}" for p in ports]
    procs = {port: serve(kafka.bootstrap_servers, port, tmp_path / f"coordinator-{port}.log") for port in ports}
    groups = group_ids_covering_every_partition()
    members: dict[str, list[GroupMember]] = {}
    try:
        owners: dict[str, int | None] = {}

        def all_served_by_three() -> bool:
            owners.update({g: owner_port(addresses, g) for g in groups})
            return None not in owners.values() and len(set(owners.values())) == 3

        wait_for(all_served_by_three, "the three instances share the six partitions", timeout_s=40)
        members = {g: [GroupMember(",".join(addresses), g, ["orders"], rpc_timeout_s=3) for _ in range(2)]
                   for g in groups}
        for group_members in members.values():
            for m in group_members:
                m.start()
        wait_for(lambda: all(members_converged(ms) for ms in members.values()), "every group's members converge")
        committed: dict[str, dict[tuple[str, int], int]] = {}
        for n, (g, group_members) in enumerate(members.items()):
            committed[g] = {}
            for m in group_members:
                offsets = {tp: 1000 * n + tp[1] for tp in m.assignment()}
                assert set(m.commit_offsets(offsets).values()) == {0}
                committed[g].update(offsets)

        victim = owners[groups[0]]
        assert victim is not None
        moved = [g for g in groups if owners[g] == victim]
        os.kill(procs[victim].pid, signal.SIGKILL)
        procs.pop(victim).wait()
        survivors = [a for a in addresses if a != f"127.0.0.1:{victim}"]

        def moved_to_survivors() -> bool:
            now = {g: owner_port(survivors, g) for g in moved}
            return None not in now.values() and victim not in now.values()

        def carry_on(group_members: list[GroupMember]) -> bool:
            return members_converged(group_members) and all(m.status().last_error == 0 for m in group_members)

        wait_for(moved_to_survivors, "the survivors take over the killed instance's partitions", timeout_s=40)
        for g in moved:
            wait_for(functools.partial(carry_on, members[g]), f"the members of {g} carry on at the new owner")
            new_owner = owner_port(survivors, g)
            channel, coordinator = stub(f"127.0.0.1:{new_owner}")
            described = coordinator.DescribeGroups(pb.DescribeGroupsRequest(group_ids=[g]), timeout=5).groups[0]
            channel.close()
            assert {m.member_id for m in described.members} == {m.member_id for m in members[g]}
        for g in groups:
            assert members[g][0].fetch_offsets() == committed[g], f"offsets of {g} after the move"
    finally:
        for group_members in members.values():
            for m in group_members:
                m.close(leave=False)
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
