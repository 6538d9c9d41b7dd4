"""The consumer embedded protocol, as the clients import it: the encoding lives in `assignors.consumer_protocol`
(pure, shared with the coordinator core, which decodes classic members' subscriptions in mixed groups)."""

from assignors.consumer_protocol import (
    ASSIGNMENT_VERSION,
    PROTOCOL_TYPE,
    SUBSCRIPTION_VERSION,
    Assignment,
    ProtocolDecodeError,
    Subscription,
    TopicPartition,
    decode_assignment,
    decode_subscription,
    decode_version,
    encode_assignment,
    encode_subscription,
)

__all__ = [
    "ASSIGNMENT_VERSION", "PROTOCOL_TYPE", "SUBSCRIPTION_VERSION", "Assignment", "ProtocolDecodeError", "Subscription",
    "TopicPartition", "decode_assignment", "decode_subscription", "decode_version", "encode_assignment",
    "encode_subscription",
]
