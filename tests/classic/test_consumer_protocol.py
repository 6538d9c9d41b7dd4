"""The consumer embedded protocol's versioned encoding (Kafka's bytes), and the leader-election payload."""

from __future__ import annotations

import pytest

from groupcoord.clients.consumer_protocol import (
    Assignment,
    ProtocolDecodeError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from groupcoord.clients.leader_election import decode_identity, encode_identity

FULL = Subscription(("orders", "audit"), b"\x01\x02", (("orders", 3), ("orders", 1), ("audit", 0)), 7, "rack-a")


def test_a_version_0_subscription_is_kafkas_bytes() -> None:
    encoded = encode_subscription(Subscription(("t",)), version=0)
    assert encoded == b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"


def test_a_version_0_assignment_is_kafkas_bytes() -> None:
    encoded = encode_assignment(Assignment((("t", 1), ("t", 0)), b"u"), version=0)
    assert encoded == (b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x02"
                       + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01u")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_each_subscription_version_round_trips_the_fields_it_has(version: int) -> None:
    decoded = decode_subscription(encode_subscription(FULL, version))
    assert decoded.topics == FULL.topics and decoded.user_data == FULL.user_data
    assert decoded.owned_partitions == ((("audit", 0), ("orders", 1), ("orders", 3)) if version >= 1 else ())
    assert decoded.generation == (7 if version >= 2 else -1)
    assert decoded.rack_id == ("rack-a" if version >= 3 else None)


def test_a_newer_version_with_fields_appended_is_read_by_an_older_reader() -> None:
    newer = b"\x00\x07" + encode_subscription(FULL)[2:] + b"\x00\x00\x00\x2a future field"
    assert decode_subscription(newer) == decode_subscription(encode_subscription(FULL))
    assignment = b"\x00\x05" + encode_assignment(Assignment((("t", 0),)))[2:] + b"more"
    assert decode_assignment(assignment).partitions == (("t", 0),)


def test_truncated_or_negative_versions_are_decode_errors() -> None:
    encoded = encode_subscription(FULL)
    for bad in (encoded[:-3], b"\xff\xff" + encoded[2:], b"\x00"):
        with pytest.raises(ProtocolDecodeError):
            decode_subscription(bad)


def test_an_empty_assignment_from_the_coordinator_means_no_partitions() -> None:
    assert decode_assignment(b"") == Assignment(())


def test_the_leader_election_payload_round_trips_and_tolerates_appended_fields() -> None:
    assert decode_identity(encode_identity("10.0.0.7:9000")) == "10.0.0.7:9000"
    assert decode_identity(b"\x00\x01" + encode_identity("x")[2:] + b"later") == "x"
    with pytest.raises(ValueError):
        decode_identity(b"\x00")
