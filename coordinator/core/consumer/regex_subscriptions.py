"""Regex subscriptions of consumer groups, resolved in the background (KIP-848; Kafka's
GroupMetadataManager.maybeUpdateRegularExpressions / handleRegularExpressionsResult).

A heartbeat never matches topics: it asks the runtime for a `RegexResolution` task when a subscribed regex is
new, the metadata image changed since the last resolution, or `group.consumer.regex.refresh.interval.ms`
passed; one resolution per group runs at a time. The result comes back as an operation that writes a
`ConsumerGroupRegularExpression` record per regex whose topics changed and bumps the group epoch when the
group's subscribed topics changed, so the next heartbeat computes the new target assignment. A regex no
member subscribes to any more is tombstoned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core.consumer import assignment as consumer_assignment
from groupcoord.coordinator.core.consumer.group import ConsumerGroup, RegexResolutionInflight
from groupcoord.coordinator.core.consumer.topic_regex import RegexResolution, RegexResolutionCompletion
from groupcoord.coordinator.core.modern.group import FIRST_GROUP_EPOCH
from groupcoord.coordinator.core.records import (
    ConsumerGroupMetadata,
    ConsumerGroupRegularExpression,
    ConsumerGroupRegularExpressionTombstone,
)
from groupcoord.coordinator.core.results import Result

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard


def maybe_resolve(shard: GroupCoordinatorShard, group: ConsumerGroup, now: int, result: Result[Any]) -> None:
    if group.regex_inflight is not None:
        return
    regexes = group.regexes()
    if not regexes:
        return
    if (all(rx in group.resolved_regexes for rx in regexes)
            and group.regex_image_seen is shard.metadata
            and now - group.regex_refreshed_ms < int(shard.config["group.consumer.regex.refresh.interval.ms"])):
        return
    run_id = next(shard._run_ids)
    group.regex_inflight = RegexResolutionInflight(run_id, shard.metadata)
    result.tasks.append(RegexResolution(group.group_id, run_id, tuple(sorted(regexes)),
                                        tuple(shard.metadata.by_name)))


def on_resolution_complete(shard: GroupCoordinatorShard, completion: RegexResolutionCompletion,
                           now: int) -> Result[None]:
    result: Result[None] = Result(None)
    group = shard.groups.get(completion.group_id)
    if not isinstance(group, ConsumerGroup) or group.regex_inflight is None \
            or group.regex_inflight.run_id != completion.run_id:
        return result  # the group was deleted (and maybe recreated) meanwhile
    group.regex_image_seen = group.regex_inflight.image
    group.regex_inflight = None
    group.regex_refreshed_ms = now
    subscribed = group.regexes()
    for regex, topics in sorted(completion.resolved.items()):
        if regex in subscribed and group.resolved_regexes.get(regex) != topics:
            shard._write(result, ConsumerGroupRegularExpression(group.group_id, regex, tuple(sorted(topics)), now))
    if result.records and group.members:
        new_hash = consumer_assignment.subscription_hash(shard, group)
        if new_hash != group.metadata_hash:
            shard._write(result, ConsumerGroupMetadata(group.group_id, max(group.group_epoch + 1, FIRST_GROUP_EPOCH),
                                                       new_hash))
            shard.stats.metadata_bumps += 1
    # A regex subscribed while this ran, or metadata that moved on meanwhile: resolve again.
    maybe_resolve(shard, group, now, result)
    return result


def drop_unused(shard: GroupCoordinatorShard, group: ConsumerGroup, result: Result[Any]) -> None:
    subscribed = group.regexes()
    for regex in sorted(set(group.resolved_regexes) - subscribed):
        shard._write(result, ConsumerGroupRegularExpressionTombstone(group.group_id, regex))
