"""DescribeGroups: state, protocol and members of groups (metadata only when Stable); a share
group is described with protocol type ``share`` and its members, without metadata."""

from __future__ import annotations

from bmq.broker.handlers.base import RequestContext
from bmq.coordinators.share import GROUP_TYPE_SHARE
from bmq.metadata.acls import Operation, ResourceType
from bmq.protocol.acl_operations import GROUP_OPERATIONS, authorized
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import DescribeGroupsRequest, DescribeGroupsResponse
from bmq.protocol.messages.describe_groups_response import DescribedGroup, DescribedGroupMember

# v6 reports an unknown group as GROUP_ID_NOT_FOUND (KIP-1043); before, as a Dead group.
NOT_FOUND_VERSION = 6


async def handle_describe_groups(ctx: RequestContext, request: DescribeGroupsRequest,
                                 version: int) -> DescribeGroupsResponse:
    described = []
    for group_id in request.groups:
        operations = authorized(
            ctx.operations(GROUP_OPERATIONS, ResourceType.GROUP, group_id),
            request.include_authorized_operations)
        result = DescribedGroup(group_id=group_id, authorized_operations=operations)
        described.append(result)
        if not ctx.authorize(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            result.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        error, summary = ctx.broker.groups.describe_group(group_id)
        share = ctx.broker.share.groups.groups.get(group_id)
        if summary is None and share is not None:
            result.group_state = share.state
            result.protocol_type = GROUP_TYPE_SHARE
            result.members = [
                DescribedGroupMember(member_id=m.member_id, client_id=m.client_id,
                                     client_host=m.client_host)
                for m in share.members.values()]
        elif summary is not None:
            result.group_state = summary.state
            result.protocol_type = summary.protocol_type
            result.protocol_data = summary.protocol_name
            result.members = [
                DescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id,
                    client_id=m.client_id, client_host=m.client_host,
                    member_metadata=m.metadata, member_assignment=m.assignment)
                for m in summary.members]
        elif error == ErrorCode.GROUP_ID_NOT_FOUND:
            result.group_state = "Dead"
            if version >= NOT_FOUND_VERSION:
                result.error_code = error
                result.error_message = f"Group {group_id} not found."
        else:
            result.error_code = error
    return DescribeGroupsResponse(groups=described)
