"""The log's records keep their bytes: a record written by an older build encodes, and so loads, exactly as it did.

Each pair is a record and its encoding as captured from the build that wrote it (one per shape a field can take:
an optional left out or set empty, empty partition sets, a config map); a change to the codec that moves a byte
fails here before it strands a state directory or topic that still holds the old bytes."""

from __future__ import annotations

from typing import Any

import pytest

from groupcoord.coordinator.core import records as r
from groupcoord.coordinator.runtime.record_codec import decode, encode

GOLDEN: list[tuple[Any, str]] = [
    (r.ConsumerGroupMetadata('g', 5, 123456789),
     "08011201675207080510959aef3a"),
    (r.ConsumerGroupMetadata('g', 0, 0),
     "08011201675200"),
    (r.ConsumerGroupMemberMetadata('g', 'm1', 'i1', 'r1', 'c', 'h', ('a', 'b'), 're.*', 'uniform', 30000, 'User:a'),
     "08011201671a026d315a330a026d31120269311a0272312201632a01683201613201623a0472652e2a4207756e69666f726d"
     "48b0ea015206557365723a61"),
    (r.ConsumerGroupMemberMetadata('g', 'm1', None, None, '', '', (), None, None, 0, None),
     "08011201671a026d315a040a026d31"),
    (r.ConsumerGroupMemberMetadata('g', 'm1', '', '', 'c', 'h', ('a',), '', '', 1, ''),
     "08011201671a026d315a190a026d3112001a002201632a01683201613a00420048015200"),
    (r.ConsumerGroupTargetAssignmentMember('g', 'm1',
                                           {'t2': frozenset([1, 3]), 't1': frozenset(), 't0': frozenset([0])}),
     "08011201671a026d3162170a026d3112070a02743012010012080a02743212020103"),
    (r.ConsumerGroupTargetAssignmentMember('g', 'm1', {}),
     "08011201671a026d3162040a026d31"),
    (r.ConsumerGroupTargetAssignmentMetadata('g', 7, 1700000000000),
     "08011201676a0908071080d095ffbc31"),
    (r.ConsumerGroupCurrentMemberAssignment('g', 'm1', 7, 6, 'STABLE', {'t1': {2: 3, 0: 5}, 't0': {}},
                                            {'t3': frozenset([1]), 't4': frozenset()}),
     "08011201671a026d3172270a026d31100718062206535441424c452a0c0a027431120200021a02050332070a027433120101"),
    (r.ConsumerGroupCurrentMemberAssignment('g', 'm1', 0, 0, '', {}, {}),
     "08011201671a026d3172040a026d31"),
    (r.OffsetCommit('g', 't', 3, 100, -1, 'meta', 1234),
     "080112016722017428037a1b0a01741003186420ffffffffffffffffff012a046d65746130d209"),
    (r.OffsetCommit('g', '', 0, 0, 0, '', 0),
     "08011201677a00"),
    (r.GroupConfig('g', {'consumer.session.timeout.ms': 50000}),
     "08011201678201260a240a1b636f6e73756d65722e73657373696f6e2e74696d656f75742e6d7312053530303030"),
    (r.GroupConfig('g', {}),
     "0801120167820100"),
    (r.ConsumerGroupMetadataTombstone('g'),
     "0801120167f201100a0e67726f75705f6d65746164617461"),
    (r.ConsumerGroupMemberMetadataTombstone('g', 'm1'),
     "08011201671a026d31f201110a0f6d656d6265725f6d65746164617461"),
    (r.ConsumerGroupTargetAssignmentMemberTombstone('g', 'm1'),
     "08011201671a026d31f2010f0a0d7461726765745f6d656d626572"),
    (r.ConsumerGroupCurrentMemberAssignmentTombstone('g', 'm1'),
     "08011201671a026d31f201140a1263757272656e745f61737369676e6d656e74"),
    (r.OffsetCommitTombstone('g', 't', 3),
     "08011201672201742803f2010f0a0d6f66667365745f636f6d6d6974"),
    (r.GroupEmptySince('g', 5),
     "08011201678a01340a0f47726f7570456d70747953696e636512217b2267726f75705f6964223a2267222c2274696d657374"
     "616d705f6d73223a357d"),
    (r.ConsumerGroupRegularExpression('g', 're.*', ('a', 'b'), 9),
     "08011201678a01650a1e436f6e73756d657247726f7570526567756c617245787072657373696f6e12437b2267726f75705f"
     "6964223a2267222c227265676578223a2272652e2a222c2274696d657374616d705f6d73223a392c22746f70696373223a5b"
     "2261222c2262225d7d"),
]


@pytest.mark.parametrize(("record", "golden"), GOLDEN, ids=[type(rec).__name__ for rec, _ in GOLDEN])
def test_a_record_encodes_to_the_bytes_older_builds_wrote(record: Any, golden: str) -> None:
    assert encode(record).hex() == golden


@pytest.mark.parametrize(("record", "golden"), GOLDEN, ids=[type(rec).__name__ for rec, _ in GOLDEN])
def test_the_bytes_older_builds_wrote_decode_to_the_record(record: Any, golden: str) -> None:
    assert encode(decode(bytes.fromhex(golden))).hex() == golden


def test_a_config_map_of_several_entries_reads_back_with_its_types() -> None:
    record = r.GroupConfig("g", {"consumer.session.timeout.ms": 50000, "consumer.assignor.offload.enable": True,
                                 "streams.rack.aware.assignment.tags": ["a", "b"]})
    assert decode(encode(record)) == record
