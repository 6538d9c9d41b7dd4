"""bench/tonic_echo/heartbeat.proto is the heartbeat part of the wire API, copied for the compiled echo
control: its messages must stay those of proto/ (same text), its RPCs those of the GroupCoordinator service."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def blocks(text: str) -> dict[str, str]:
    return {m.group(1): m.group(0) for m in re.finditer(r"^message (\w+) \{.*?^\}", text, re.M | re.S)}


def test_the_tonic_echo_proto_is_the_wire_apis_heartbeat_part() -> None:
    api = (REPO / "proto" / "groupcoord" / "wire" / "v1" / "coordinator.proto").read_text()
    subset = (REPO / "bench" / "tonic_echo" / "heartbeat.proto").read_text()
    assert "package groupcoord.v1;" in subset and "service GroupCoordinator {" in subset
    copied = blocks(subset)
    assert set(copied) >= {"ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse"}
    assert {name: blocks(api).get(name) for name in copied} == copied
    for rpc in re.findall(r"^\s*rpc .*;$", subset, re.M):
        assert rpc.strip() in api
