"""The consumer embedded protocol, as the clients import it.

The encoding lives in `groupcoord.assignors.consumer_protocol`
(pure, shared with the coordinator core, which decodes classic members' subscriptions in mixed groups)."""

from groupcoord.assignors.consumer_protocol import (
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
