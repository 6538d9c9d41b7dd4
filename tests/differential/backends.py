"""The two coordinators under comparison, behind one interface: Kafka's (over the Kafka protocol) and
groupcoord's (over gRPC). Requests are Kafka-schema dicts (snake_case field names, topics by *name*);
each backend turns them into its own wire form and returns the response normalised to one shape:
topic ids become names, partitions are sorted, proto3's "" for an absent nullable string becomes None.
Member ids are left raw; the script maps them to aliases (Kafka and groupcoord generate different ones).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import grpc

from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.differential.kafka_wire import KafkaConnection

Msg = dict[str, Any]


class Backend(Protocol):
    name: str
    topic_ids: dict[str, str]  # topic name -> id (canonical UUID text), the same on both sides

    def call(self, conn: str, api: str, req: Msg) -> Msg: ...
    def close(self) -> None: ...


def _tps(items: list[Msg] | None, id_to_name: Mapping[str, str]) -> list[tuple[str, list[int]]] | None:
    if items is None:
        return None
    out = [(id_to_name.get(str(t["topic_id"]), f"?{t['topic_id']}"), sorted(t["partitions"])) for t in items]
    return sorted(tp for tp in out if tp[1] or True)


def _union(a: list[tuple[str, list[int]]] | None,
           b: list[tuple[str, list[int]]] | None) -> list[tuple[str, list[int]]]:
    merged: dict[str, set[int]] = {}
    for t, ps in (a or []) + (b or []):
        merged.setdefault(t, set()).update(ps)
    return sorted((t, sorted(ps)) for t, ps in merged.items())


# --- Kafka ------------------------------------------------------------------------------------------------

class KafkaBackend:
    """Kafka's own group coordinator: one connection per member alias (a parked JoinGroup blocks its
    connection), all to the single broker, which is every group's coordinator."""

    name = "kafka"

    def __init__(self, bootstrap: str, jar: Path, topic_ids: Mapping[str, uuid.UUID]) -> None:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self._addr = (host, int(port))
        self._jar = jar
        self._name_to_id = dict(topic_ids)
        self._id_to_name = {str(v): k for k, v in topic_ids.items()}
        self.topic_ids = {k: str(v) for k, v in topic_ids.items()}
        self._conns: dict[str, KafkaConnection] = {}
        self._lock = threading.Lock()

    def _conn(self, alias: str) -> KafkaConnection:
        with self._lock:
            if alias not in self._conns:
                self._conns[alias] = KafkaConnection(*self._addr, self._jar, client_id="differential")
            return self._conns[alias]

    def close(self) -> None:
        for c in self._conns.values():
            c.close()

    def call(self, conn: str, api: str, req: Msg) -> Msg:
        c = self._conn(conn)
        if api == "ConsumerGroupHeartbeat":
            r = dict(req)
            if r.get("topic_partitions") is not None:
                r["topic_partitions"] = [{"topic_id": self._name_to_id[t], "partitions": p}
                                         for t, p in r["topic_partitions"]]
            resp = c.call(api, r)
            a = resp["assignment"]
            return {"error_code": resp["error_code"], "member_id": resp["member_id"] or None,
                    "member_epoch": resp["member_epoch"], "heartbeat_interval_ms": resp["heartbeat_interval_ms"],
                    "assignment": None if a is None else _tps(a["topic_partitions"], self._id_to_name)}
        if api == "ConsumerGroupDescribe":
            resp = c.call(api, {"group_ids": req["group_ids"]})
            return {"groups": [self._described(g) for g in resp["groups"]]}
        if api == "OffsetCommit":
            resp = c.call(api, req)
            return {"topics": sorted((t["name"], sorted((p["partition_index"], p["error_code"])
                                                        for p in t["partitions"])) for t in resp["topics"])}
        if api == "OffsetFetch":
            g = {"group_id": req["group_id"], "member_id": req.get("member_id"),
                 "member_epoch": req.get("member_epoch", -1), "topics": req.get("topics")}
            resp = c.call(api, {"groups": [g], "require_stable": req.get("require_stable", False)})
            (group,) = resp["groups"]
            return {"error_code": group["error_code"], "topics": _fetched(group["topics"])}
        if api == "JoinGroup":
            resp = c.call(api, req)
            return {k: resp[k] for k in ("error_code", "generation_id", "protocol_type", "protocol_name", "leader",
                                         "skip_assignment", "member_id")} | {
                "members": [(m["member_id"], m["group_instance_id"], bytes(m["metadata"])) for m in resp["members"]]}
        if api == "SyncGroup":
            resp = c.call(api, req)
            return {k: resp[k] for k in ("error_code", "protocol_type", "protocol_name")} | {
                "assignment": bytes(resp["assignment"])}
        if api == "Heartbeat":
            return {"error_code": c.call(api, req)["error_code"]}
        if api == "LeaveGroup":
            resp = c.call(api, req)
            return {"error_code": resp["error_code"],
                    "members": [(m["member_id"], m["group_instance_id"], m["error_code"]) for m in resp["members"]]}
        if api == "DescribeGroups":
            resp = c.call(api, {"groups": req["groups"]})
            return {"groups": [{"error_code": g["error_code"], "group_id": g["group_id"],
                                "group_state": g["group_state"], "protocol_type": g["protocol_type"],
                                "protocol_data": g["protocol_data"],
                                "members": [(m["member_id"], m["group_instance_id"], bytes(m["member_metadata"]),
                                             bytes(m["member_assignment"])) for m in g["members"]]}
                               for g in resp["groups"]]}
        if api == "ListGroups":
            resp = c.call(api, req)
            return {"error_code": resp["error_code"],
                    "groups": sorted((g["group_id"], g["protocol_type"], g["group_state"], g["group_type"])
                                     for g in resp["groups"])}
        if api == "AlterGroupConfigs":
            return self._alter_group_configs(c, req["group_id"], req["configs"])
        if api == "FindCoordinator":
            resp = c.call(api, {"key_type": 0, "coordinator_keys": req["coordinator_keys"]})
            return {"coordinators": [(x["key"], x["error_code"]) for x in resp["coordinators"]]}
        raise ValueError(api)

    def _alter_group_configs(self, c: KafkaConnection, group_id: str, configs: dict[str, str]) -> Msg:
        """IncrementalAlterConfigs on the GROUP resource (type 32) goes through the controller; the group
        coordinator sees it once the broker has applied the metadata, so wait until DescribeConfigs shows it."""
        resp = c.call("IncrementalAlterConfigs", {"resources": [{
            "resource_type": 32, "resource_name": group_id,
            "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]}],
            "validate_only": False})
        code = resp["responses"][0]["error_code"]
        deadline = time.monotonic() + 30
        while code == 0:
            d = c.call("DescribeConfigs", {"resources": [{"resource_type": 32, "resource_name": group_id,
                                                          "configuration_keys": list(configs)}]})
            seen = {x["name"]: x["value"] for x in d["results"][0]["configs"]}
            if all(seen.get(k) == v for k, v in configs.items()):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"Kafka did not apply {configs} to {group_id} in 30 s")
            time.sleep(0.02)
        return {"error_code": code}

    def _described(self, g: Msg) -> Msg:
        return {"error_code": g["error_code"], "group_id": g["group_id"], "group_state": g["group_state"],
                "group_epoch": g["group_epoch"], "assignment_epoch": g["assignment_epoch"],
                "assignor_name": g["assignor_name"],
                "members": [{"member_id": m["member_id"], "instance_id": m["instance_id"], "rack_id": m["rack_id"],
                             "member_epoch": m["member_epoch"],
                             "subscribed_topic_names": sorted(m["subscribed_topic_names"]),
                             "subscribed_topic_regex": m["subscribed_topic_regex"],
                             "assignment": _tps(m["assignment"]["topic_partitions"], self._id_to_name),
                             "target_assignment": _tps(m["target_assignment"]["topic_partitions"],
                                                       self._id_to_name)}
                            for m in g["members"]]}


def _fetched(topics: list[Msg]) -> list[Any]:
    return sorted((t["name"], sorted((p["partition_index"], p["committed_offset"], p["committed_leader_epoch"],
                                      p["metadata"], p["error_code"]) for p in t["partitions"]))
                  for t in topics)


# --- groupcoord -------------------------------------------------------------------------------------------

class GroupcoordBackend:
    """groupcoord over real gRPC on loopback, with the broker's topic ids (its Kafka metadata source)."""

    name = "groupcoord"

    def __init__(self, address: str, topic_ids: Mapping[str, uuid.UUID]) -> None:
        self._channel = grpc.insecure_channel(address)
        self._stub = pb_grpc.GroupCoordinatorStub(self._channel)
        self._name_to_id = {k: str(v) for k, v in topic_ids.items()}
        self._id_to_name = {str(v): k for k, v in topic_ids.items()}
        self.topic_ids = dict(self._name_to_id)

    def close(self) -> None:
        self._channel.close()

    def call(self, conn: str, api: str, req: Msg) -> Msg:  # noqa: C901, PLR0911, PLR0912 - one branch per API
        s = self._stub
        if api == "ConsumerGroupHeartbeat":
            r = pb.ConsumerGroupHeartbeatRequest(group_id=req["group_id"], member_id=req.get("member_id", ""),
                                                 member_epoch=req["member_epoch"])
            for k in ("instance_id", "rack_id", "subscribed_topic_regex", "server_assignor"):
                if req.get(k) is not None:
                    setattr(r, k, req[k])
            if req.get("rebalance_timeout_ms", -1) != -1:
                r.rebalance_timeout_ms = req["rebalance_timeout_ms"]
            if req.get("subscribed_topic_names") is not None:
                r.subscribed_topic_names.values.extend(req["subscribed_topic_names"])
            if req.get("topic_partitions") is not None:
                r.topic_partitions.SetInParent()
                for t, p in req["topic_partitions"]:
                    r.topic_partitions.topics.add(topic_id=self._name_to_id[t], partitions=p)
            resp = s.ConsumerGroupHeartbeat(r, timeout=30)
            a = [{"topic_id": t.topic_id, "partitions": list(t.partitions)} for t in resp.assignment.topic_partitions]
            return {"error_code": resp.error_code, "member_id": resp.member_id or None,
                    "member_epoch": resp.member_epoch, "heartbeat_interval_ms": resp.heartbeat_interval_ms,
                    "assignment": _tps(a, self._id_to_name) if resp.HasField("assignment") else None}
        if api == "ConsumerGroupDescribe":
            resp = s.DescribeGroups(pb.DescribeGroupsRequest(group_ids=req["group_ids"]), timeout=30)
            return {"groups": [self._described(g) for g in resp.groups]}
        if api == "OffsetCommit":
            r = pb.OffsetCommitRequest(group_id=req["group_id"],
                                       generation_id_or_member_epoch=req.get("generation_id_or_member_epoch", -1),
                                       member_id=req.get("member_id", ""))
            if req.get("group_instance_id") is not None:
                r.group_instance_id = req["group_instance_id"]
            for t in req["topics"]:
                topic = r.topics.add(name=t["name"])
                for p in t["partitions"]:
                    part = topic.partitions.add(partition_index=p["partition_index"],
                                                committed_offset=p["committed_offset"],
                                                committed_leader_epoch=p.get("committed_leader_epoch", -1))
                    if p.get("committed_metadata") is not None:
                        part.committed_metadata = p["committed_metadata"]
            resp = s.OffsetCommit(r, timeout=30)
            return {"topics": sorted((t.name, sorted((p.partition_index, p.error_code) for p in t.partitions))
                                     for t in resp.topics)}
        if api == "OffsetFetch":
            r = pb.OffsetFetchRequest(group_id=req["group_id"], member_id=req.get("member_id") or "",
                                      member_epoch=req.get("member_epoch", -1),
                                      require_stable=req.get("require_stable", False))
            if req.get("topics") is not None:
                r.topics.SetInParent()
                for t in req["topics"]:
                    r.topics.topics.add(name=t["name"], partition_indexes=t["partition_indexes"])
            resp = s.OffsetFetch(r, timeout=30)
            topics = [{"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "committed_offset": p.committed_offset,
                 "committed_leader_epoch": p.committed_leader_epoch, "metadata": p.metadata,
                 "error_code": p.error_code} for p in t.partitions]} for t in resp.topics]
            return {"error_code": resp.error_code, "topics": _fetched(topics)}
        if api == "JoinGroup":
            r = pb.JoinGroupRequest(group_id=req["group_id"], session_timeout_ms=req["session_timeout_ms"],
                                    rebalance_timeout_ms=req.get("rebalance_timeout_ms", -1),
                                    member_id=req["member_id"], protocol_type=req["protocol_type"],
                                    reason=req.get("reason") or "")
            if req.get("group_instance_id") is not None:
                r.group_instance_id = req["group_instance_id"]
            for p in req["protocols"]:
                r.protocols.add(name=p["name"], metadata=p["metadata"])
            resp = s.JoinGroup(r, timeout=60)
            return {"error_code": resp.error_code, "generation_id": resp.generation_id,
                    "protocol_type": resp.protocol_type if resp.HasField("protocol_type") else None,
                    "protocol_name": resp.protocol_name if resp.HasField("protocol_name") else None,
                    "leader": resp.leader, "skip_assignment": resp.skip_assignment, "member_id": resp.member_id,
                    "members": [(m.member_id, m.group_instance_id if m.HasField("group_instance_id") else None,
                                 bytes(m.metadata)) for m in resp.members]}
        if api == "SyncGroup":
            r = pb.SyncGroupRequest(group_id=req["group_id"], generation_id=req["generation_id"],
                                    member_id=req["member_id"])
            for k in ("group_instance_id", "protocol_type", "protocol_name"):
                if req.get(k) is not None:
                    setattr(r, k, req[k])
            for a in req.get("assignments", []):
                r.assignments.add(member_id=a["member_id"], assignment=a["assignment"])
            resp = s.SyncGroup(r, timeout=60)
            return {"error_code": resp.error_code,
                    "protocol_type": resp.protocol_type if resp.HasField("protocol_type") else None,
                    "protocol_name": resp.protocol_name if resp.HasField("protocol_name") else None,
                    "assignment": bytes(resp.assignment)}
        if api == "Heartbeat":
            r = pb.HeartbeatRequest(group_id=req["group_id"], generation_id=req["generation_id"],
                                    member_id=req["member_id"])
            if req.get("group_instance_id") is not None:
                r.group_instance_id = req["group_instance_id"]
            return {"error_code": s.Heartbeat(r, timeout=30).error_code}
        if api == "LeaveGroup":
            r = pb.LeaveGroupRequest(group_id=req["group_id"])
            for m in req["members"]:
                ident = r.members.add(member_id=m["member_id"], reason=m.get("reason") or "")
                if m.get("group_instance_id") is not None:
                    ident.group_instance_id = m["group_instance_id"]
            resp = s.LeaveGroup(r, timeout=30)
            return {"error_code": resp.error_code,
                    "members": [(m.member_id, m.group_instance_id if m.HasField("group_instance_id") else None,
                                 m.error_code) for m in resp.members]}
        if api == "DescribeGroups":
            resp = s.DescribeGroups(pb.DescribeGroupsRequest(group_ids=req["groups"]), timeout=30)
            return {"groups": [{"error_code": g.error_code, "group_id": g.group_id, "group_state": g.group_state,
                                "protocol_type": g.protocol_type, "protocol_data": g.assignor_name,
                                "members": [(m.member_id, m.instance_id if m.HasField("instance_id") else None,
                                             bytes(m.member_metadata), bytes(m.member_assignment))
                                            for m in g.members]}
                               for g in resp.groups]}
        if api == "ListGroups":
            resp = s.ListGroups(pb.ListGroupsRequest(states_filter=req.get("states_filter", []),
                                                     types_filter=req.get("types_filter", [])), timeout=30)
            return {"error_code": resp.error_code,
                    "groups": sorted((g.group_id, g.protocol_type, g.group_state, g.group_type)
                                     for g in resp.groups)}
        if api == "AlterGroupConfigs":
            r = pb.AlterGroupConfigsRequest(group_id=req["group_id"])
            for k, v in req["configs"].items():
                r.configs.add(name=k, value=v)
            return {"error_code": s.AlterGroupConfigs(r, timeout=30).error_code}
        if api == "FindCoordinator":
            resp = s.FindCoordinator(pb.FindCoordinatorRequest(keys=req["coordinator_keys"]), timeout=30)
            return {"coordinators": [(c.key, c.error_code) for c in resp.coordinators]}
        raise ValueError(api)

    def _described(self, g: Any) -> Msg:
        def tps(items: Any) -> list[tuple[str, list[int]]] | None:
            return _tps([{"topic_id": t.topic_id, "partitions": list(t.partitions)} for t in items],
                        self._id_to_name)

        return {"error_code": g.error_code, "group_id": g.group_id, "group_state": g.group_state,
                "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
                "assignor_name": g.assignor_name,
                "members": [{"member_id": m.member_id,
                             "instance_id": m.instance_id if m.HasField("instance_id") else None,
                             "rack_id": m.rack_id if m.HasField("rack_id") else None,
                             "member_epoch": m.member_epoch,
                             "subscribed_topic_names": sorted(m.subscribed_topic_names),
                             "subscribed_topic_regex": m.subscribed_topic_regex
                             if m.HasField("subscribed_topic_regex") else None,
                             # Kafka's Assignment is what the member holds: pending revocation included
                             "assignment": _union(tps(m.assignment), tps(m.partitions_pending_revocation)),
                             "target_assignment": tps(m.target_assignment)}
                            for m in g.members]}
