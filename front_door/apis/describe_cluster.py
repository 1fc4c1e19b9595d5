"""DescribeCluster (key 60, v0-v2, KIP-700): the admin client's view of the cluster — the front door's
nodes, the cluster id and the controller, as Metadata gives them. No node is fenced (v2). As in Kafka, no
ACL is needed to ask; the cluster's authorized operations, when asked with an authorizer configured, need
DESCRIBE on the cluster (0 without)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from front_door import access
from front_door.api_keys import ApiKey
from front_door.apis.metadata import AUTHORIZED_OPERATIONS_OMITTED
from front_door.apis.registry import Acl, Api, register
from front_door.context import CLUSTER_ID, Context
from front_door.network.messages import NO_THROTTLE, build, response_module
from front_door.network.wire import Request
from front_door.security.acls import CLUSTER_NAME, AclOperation, ResourceType

BROKERS_ENDPOINT = 1  # `EndpointType.BROKER`; a controller endpoint (2) is for KRaft controllers


async def handle(ctx: Context, request: Request) -> Any:
    module = response_module(ApiKey.DESCRIBE_CLUSTER, request.api_version)
    endpoint = getattr(request.body, "endpoint_type", BROKERS_ENDPOINT)
    if endpoint != BROKERS_ENDPOINT:  # KafkaApis: only brokers answer for the broker endpoint type
        return build(module.DescribeClusterResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.unsupported_endpoint_type,
                     error_message="The front door has no controller endpoints", endpoint_type=endpoint,
                     cluster_id=CLUSTER_ID, controller_id=-1, brokers=(),
                     cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
    # AuthHelper.computeDescribeClusterResponse: anyone may describe the cluster; its authorized operations,
    # when asked, need DESCRIBE on it (0 without)
    operations = AUTHORIZED_OPERATIONS_OMITTED
    if request.body.include_cluster_authorized_operations:
        operations = access.authorized_operations(ctx, request, ResourceType.CLUSTER, CLUSTER_NAME) \
            if access.authorize_cluster(ctx, request, AclOperation.DESCRIBE) else 0
    brokers = tuple(build(module.DescribeClusterBroker, broker_id=n.node_id, host=n.host, port=n.port, rack=None,
                          is_fenced=False) for n in ctx.brokers())
    return build(module.DescribeClusterResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 error_message=None, endpoint_type=endpoint, cluster_id=CLUSTER_ID, controller_id=ctx.controller_id(),
                 brokers=brokers, cluster_authorized_operations=operations)


API = register(Api(ApiKey.DESCRIBE_CLUSTER, (0, 2), handle, acls=(Acl(AclOperation.DESCRIBE, ResourceType.CLUSTER),)))
