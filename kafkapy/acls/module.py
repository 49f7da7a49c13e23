"""The ACL module: DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), versions 1-3.

The APIs manage the ACLs of the configured authorizer (Kafka's Authorizer.acls, createAcls,
deleteAcls), so they answer SECURITY_DISABLED unless that is the ACL authorizer
(``authorizer.class.name=acl``: kafkapy.acls.authorizer). Kafka's authorization comes first:
DESCRIBE on the CLUSTER to describe, ALTER on the CLUSTER to create or delete
(CLUSTER_AUTHORIZATION_FAILED).

Bad bindings are answered, never raised: a creation with an UNKNOWN or ANY resource type, a
pattern type other than LITERAL or PREFIXED, an UNKNOWN or ANY operation or permission, an empty
name, a CLUSTER named other than ``kafka-cluster`` or a principal not ``Type:name`` gets
INVALID_REQUEST in its own result; a filter with an UNKNOWN part gets INVALID_REQUEST (DeleteAcls:
in its own result; DescribeAcls: for the request). Wire codes Kafka does not know read as UNKNOWN.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from kafkapy.acls.authorizer import AclAuthorizer, bindings_of
from kafkapy.acls.model import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkapy.errors import ErrorCode
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import CLUSTER_RESOURCE
from kafkapy.server.config import ConfigKey
from kafkapy.server.modules import ApiHandler, Module, RequestContext

if TYPE_CHECKING:
    from kafkapy.server.services import BrokerServices

__all__ = ["AclsModule"]

# v0 (removed in Kafka 4.0, KIP-896) has no pattern types: its patterns and filters are LITERAL, so
# a v0 client neither sets nor sees a PREFIXED ACL, as with Kafka 2.8-3.9.
VERSIONS = VersionRange(0, 3)
#: Kafka's messages: CreateAcls and DeleteAcls word it differently from DescribeAcls.
SECURITY_DISABLED_MESSAGE = "No Authorizer is configured."
DESCRIBE_SECURITY_DISABLED_MESSAGE = "No Authorizer is configured on the broker"


def binding_of(item: Mapping[str, Any], pattern_key: str) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.from_code(item["resource_type"]), item["resource_name"],
                        PatternType.from_code(item.get(pattern_key, PatternType.LITERAL))),
        item["principal"], item["host"], AclOperation.from_code(item["operation"]),
        AclPermissionType.from_code(item["permission_type"]))


def filter_of(item: Mapping[str, Any]) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.from_code(item["resource_type_filter"]), item["resource_name_filter"],
        PatternType.from_code(item.get("pattern_type_filter", PatternType.LITERAL)), item["principal_filter"],
        item["host_filter"],
        AclOperation.from_code(item["operation"]), AclPermissionType.from_code(item["permission_type"]))


class AclsModule(Module):
    name = "acls"
    config_keys: ClassVar[tuple[ConfigKey, ...]] = (
        ConfigKey("allow.everyone.if.no.acl.found", "boolean", False,
                  "With authorizer.class.name=acl: allow an operation on a resource that no ACL applies "
                  "to (Kafka's default, false, denies it)."),
    )

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)

    def apis(self) -> Mapping[int, ApiHandler]:
        return {ApiKey.DESCRIBE_ACLS: ApiHandler(VERSIONS, self.describe_acls),
                ApiKey.CREATE_ACLS: ApiHandler(VERSIONS, self.create_acls),
                ApiKey.DELETE_ACLS: ApiHandler(VERSIONS, self.delete_acls)}

    def _allowed(self, ctx: RequestContext, operation: str) -> bool:
        conn = ctx.connection
        return self.services.authorizer.authorize(conn.principal, conn.client_address[0], operation,
                                                  "CLUSTER", CLUSTER_RESOURCE)

    def _acl_authorizer(self) -> AclAuthorizer | None:
        authorizer = self.services.authorizer
        return authorizer if isinstance(authorizer, AclAuthorizer) else None

    # --- DescribeAcls --------------------------------------------------------------------------

    def describe_acls(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        def error(code: ErrorCode, message: str | None) -> dict[str, Any]:
            return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "resources": []}

        if not self._allowed(ctx, "DESCRIBE"):
            return error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        authorizer = self._acl_authorizer()
        if authorizer is None:
            return error(ErrorCode.SECURITY_DISABLED, DESCRIBE_SECURITY_DISABLED_MESSAGE)
        acl_filter = filter_of(request.body)
        try:
            acl_filter.validate()
        except InvalidAcl as exc:
            return error(ErrorCode.INVALID_REQUEST, str(exc))
        resources = [{"resource_type": pattern.resource_type, "resource_name": pattern.name,
                      "pattern_type": pattern.pattern_type,
                      "acls": [{"principal": b.principal, "host": b.host, "operation": b.operation,
                                "permission_type": b.permission} for b in bindings]}
                     for pattern, bindings in bindings_of(authorizer.acls(acl_filter)).items()]
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "resources": resources}

    # --- CreateAcls ----------------------------------------------------------------------------

    async def create_acls(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        creations = request.body.get("creations") or []

        def everyone(code: ErrorCode, message: str | None) -> dict[str, Any]:
            return {"throttle_time_ms": 0,
                    "results": [{"error_code": code, "error_message": message} for _ in creations]}

        if not self._allowed(ctx, "ALTER"):
            return everyone(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        authorizer = self._acl_authorizer()
        if authorizer is None:
            return everyone(ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE)
        outcomes = await authorizer.create_acls([binding_of(c, "resource_pattern_type") for c in creations])
        results: list[dict[str, Any]] = []
        for outcome in outcomes:
            if outcome is None:
                results.append({"error_code": ErrorCode.NONE, "error_message": None})
            elif isinstance(outcome, InvalidAcl):
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(outcome)})
            else:
                self.services.log.warning("CreateAcls failed: %s", outcome)
                results.append({"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": str(outcome)})
        return {"throttle_time_ms": 0, "results": results}

    # --- DeleteAcls ----------------------------------------------------------------------------

    async def delete_acls(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        filters = request.body.get("filters") or []

        def everyone(code: ErrorCode, message: str | None) -> dict[str, Any]:
            return {"throttle_time_ms": 0, "filter_results": [
                {"error_code": code, "error_message": message, "matching_acls": []} for _ in filters]}

        if not self._allowed(ctx, "ALTER"):
            return everyone(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        authorizer = self._acl_authorizer()
        if authorizer is None:
            return everyone(ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE)
        outcomes = await authorizer.delete_acls([filter_of(f) for f in filters])
        results = []
        for outcome in outcomes:
            if isinstance(outcome, InvalidAcl):
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(outcome),
                                "matching_acls": []})
            elif isinstance(outcome, Exception):
                self.services.log.warning("DeleteAcls failed: %s", outcome)
                results.append({"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": str(outcome),
                                "matching_acls": []})
            else:
                results.append({"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": [
                    {"error_code": ErrorCode.NONE, "error_message": None,
                     "resource_type": b.pattern.resource_type, "resource_name": b.pattern.name,
                     "pattern_type": b.pattern.pattern_type, "principal": b.principal, "host": b.host,
                     "operation": b.operation, "permission_type": b.permission} for b in outcome]})
        return {"throttle_time_ms": 0, "filter_results": results}
