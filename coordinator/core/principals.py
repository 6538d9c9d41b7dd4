"""Who owns a member: the authenticated principal that joined it.

With authentication on, the runtime puts the caller's principal (`User:alice`) in every request; the member
records the principal that joined it (in memory and in its persisted record). A request that names a member
joined by another principal is answered as if the member did not exist (UNKNOWN_MEMBER_ID, with the same
message), so that it learns nothing a DescribeGroups would not tell it and cannot leave, commit or heartbeat
as that member. `None` on either side (authentication off, or a member joined before it was turned on) skips
the check.
"""

from __future__ import annotations

from groupcoord.coordinator.core.errors import CoordinatorError, Errors


def principal_may_act(owner: str | None, principal: str | None) -> bool:
    return owner is None or principal is None or owner == principal


def check_member_principal(owner: str | None, principal: str | None, member_id: str, group_id: str) -> None:
    if not principal_may_act(owner, principal):
        raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
