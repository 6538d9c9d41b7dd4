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
from groupcoord.coordinator.core.consumer.effects import RegexRunEnded, RegexRunStarted
from groupcoord.coordinator.core.consumer.group import ConsumerGroup, RegexResolutionInflight
from groupcoord.coordinator.core.consumer.staged import Staged
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


def maybe_resolve(shard: GroupCoordinatorShard, group: ConsumerGroup, now: int, result: Result[Any],
                  staged: Staged | None = None, ended: RegexRunEnded | None = None) -> None:
    """Start a resolution when one is due: of the group as `staged` leaves it when given, and as if `ended` (the
    run the operation ends) were applied."""
    if ended is None and group.regex_inflight is not None:
        return
    regexes = staged.regexes() if staged is not None else group.regexes()
    if not regexes:
        return
    resolved = staged.resolved_regexes() if staged is not None else group.resolved_regexes
    image_seen = ended.image if ended is not None else group.regex_image_seen
    refreshed_ms = ended.now if ended is not None else group.regex_refreshed_ms
    if (all(rx in resolved for rx in regexes)
            and image_seen is shard.metadata
            and now - refreshed_ms < int(shard.config["group.consumer.regex.refresh.interval.ms"])):
        return
    run_id = next(shard._run_ids)
    result.memory.append(RegexRunStarted(group.group_id, RegexResolutionInflight(run_id, shard.metadata)))
    result.tasks.append(RegexResolution(group.group_id, run_id, tuple(sorted(regexes)),
                                        tuple(shard.metadata.by_name)))


def on_resolution_complete(shard: GroupCoordinatorShard, completion: RegexResolutionCompletion,
                           now: int) -> Result[None]:
    """Pure: what the run's end changes besides its records is `RegexRunEnded`, applied with them."""
    result: Result[None] = Result(None)
    group = shard.groups.get(completion.group_id)
    if not isinstance(group, ConsumerGroup) or group.regex_inflight is None \
            or group.regex_inflight.run_id != completion.run_id:
        return result  # the group was deleted (and maybe recreated) meanwhile
    ended = RegexRunEnded(group.group_id, completion.run_id, group.regex_inflight.image, now)
    result.memory.append(ended)
    staged = Staged(shard, result, group)
    subscribed = group.regexes()
    for regex, topics in sorted(completion.resolved.items()):
        if regex in subscribed and group.resolved_regexes.get(regex) != topics:
            staged.write(ConsumerGroupRegularExpression(group.group_id, regex, tuple(sorted(topics)), now))
    if result.records and group.members:
        new_hash = consumer_assignment.subscription_hash(shard, staged)
        if new_hash != staged.metadata_hash:
            staged.write(ConsumerGroupMetadata(group.group_id, max(staged.group_epoch + 1, FIRST_GROUP_EPOCH),
                                               new_hash))
            shard.stats.metadata_bumps += 1
    # A regex subscribed while this ran, or metadata that moved on meanwhile: resolve again.
    maybe_resolve(shard, group, now, result, staged, ended)
    return result


def drop_unused(staged: Staged) -> None:
    """Tombstone the resolutions of regexes no member subscribes to once the operation's records apply."""
    subscribed = staged.regexes()
    for regex in sorted(staged.resolved_regexes() - subscribed):
        staged.write(ConsumerGroupRegularExpressionTombstone(staged.group_id, regex))
