"""DescribeAcls, CreateAcls and DeleteAcls on the wire, every version served: Kafka's answers for
good and bad bindings, and a fuzz through the server path (any codes, any strings, truncated
bodies): each binding or filter is answered NONE or INVALID_REQUEST, never a traceback, and the
broker goes on serving."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from error_log import ErrorCollector
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy import Broker
from kafkapy.acls.model import AclOperation, AclPermissionType, PatternType, ResourceType
from kafkapy.client import SimpleClient
from kafkapy.errors import ErrorCode
from kafkapy.protocol import encode_request
from kafkapy.protocol.api_keys import ApiKey

VERSIONS = (1, 2, 3)
int8 = st.integers(-128, 127)
texts = st.one_of(st.sampled_from(["", "*", "User:alice", "User:*", "kafka-cluster", "orders", "alice", "a/b",
                                   ".."]), st.text(max_size=12))


@pytest.fixture(scope="module")
def broker(errors: ErrorCollector) -> Iterator[Broker]:
    """The ACL authorizer; the plaintext listener's principal, User:ANONYMOUS, is a super user."""
    with Broker({"authorizer.class.name": "acl", "super.users": "User:ANONYMOUS"}) as b:
        yield b


def creation(resource_type: int, name: str, pattern: int, principal: str, host: str, operation: int,
             permission: int) -> dict[str, Any]:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": host, "operation": operation, "permission_type": permission}


def acl_filter(resource_type: int = ResourceType.ANY, name: str | None = None,
               pattern: int = PatternType.ANY, principal: str | None = None, host: str | None = None,
               operation: int = AclOperation.ANY,
               permission: int = AclPermissionType.ANY) -> dict[str, Any]:
    return {"resource_type_filter": resource_type, "resource_name_filter": name,
            "pattern_type_filter": pattern, "principal_filter": principal, "host_filter": host,
            "operation": operation, "permission_type": permission}


READ_ORDERS = creation(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)


@pytest.mark.parametrize("version", VERSIONS)
def test_create_describe_delete_every_version(broker: Broker, version: int) -> None:
    bad = [creation(ResourceType.TOPIC, "t", PatternType.MATCH, "User:a", "*", AclOperation.READ,
                    AclPermissionType.ALLOW),  # MATCH is for filters
           creation(ResourceType.ANY, "t", PatternType.LITERAL, "User:a", "*", AclOperation.READ,
                    AclPermissionType.ALLOW),
           creation(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:a", "*", AclOperation.ANY,
                    AclPermissionType.ALLOW),
           creation(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:a", "*", 99, AclPermissionType.ALLOW),
           creation(ResourceType.CLUSTER, "other", PatternType.LITERAL, "User:a", "*", AclOperation.ALTER,
                    AclPermissionType.ALLOW),
           creation(ResourceType.TOPIC, "", PatternType.LITERAL, "User:a", "*", AclOperation.READ,
                    AclPermissionType.ALLOW),
           creation(ResourceType.GROUP, "a/b", PatternType.LITERAL, "User:a", "*", AclOperation.READ,
                    AclPermissionType.ALLOW)]  # no node of Kafka's tree can be called so
    with SimpleClient(broker.bootstrap_servers) as client:
        created = client.request(ApiKey.CREATE_ACLS, version, {"creations": [READ_ORDERS, *bad]})
        codes = [r["error_code"] for r in created["results"]]
        assert codes == [ErrorCode.NONE] + [ErrorCode.INVALID_REQUEST] * len(bad)
        assert all(r["error_message"] for r in created["results"][1:])
        described = client.request(ApiKey.DESCRIBE_ACLS, version, acl_filter(name="orders"))
        assert described["error_code"] == ErrorCode.NONE
        assert described["resources"] == [{"resource_type": ResourceType.TOPIC, "resource_name": "orders",
                                           "pattern_type": PatternType.LITERAL, "acls": [
                                               {"principal": "User:alice", "host": "*",
                                                "operation": AclOperation.READ,
                                                "permission_type": AclPermissionType.ALLOW}]}]
        unknown = client.request(ApiKey.DESCRIBE_ACLS, version, acl_filter(operation=AclOperation.UNKNOWN))
        assert unknown["error_code"] == ErrorCode.INVALID_REQUEST and unknown["resources"] == []
        deleted = client.request(ApiKey.DELETE_ACLS, version, {"filters": [
            acl_filter(ResourceType.TOPIC, "orders", PatternType.MATCH),
            acl_filter(pattern=PatternType.UNKNOWN)]})
        [matched, refused] = deleted["filter_results"]
        assert matched["error_code"] == ErrorCode.NONE
        assert [(m["resource_name"], m["principal"], m["operation"]) for m in matched["matching_acls"]] == [
            ("orders", "User:alice", AclOperation.READ)]
        assert refused["error_code"] == ErrorCode.INVALID_REQUEST and refused["matching_acls"] == []
        assert client.request(ApiKey.DESCRIBE_ACLS, version, acl_filter())["resources"] == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(version=st.sampled_from(VERSIONS),
       creations=st.lists(st.builds(creation, int8, texts, int8, texts, texts, int8, int8), max_size=4),
       filters=st.lists(st.builds(acl_filter, int8, st.one_of(st.none(), texts), int8,
                                  st.one_of(st.none(), texts), st.one_of(st.none(), texts), int8, int8),
                        min_size=1, max_size=3))
def test_any_binding_or_filter_is_answered(broker: Broker, errors: ErrorCollector, version: int,
                                           creations: list[dict[str, Any]],
                                           filters: list[dict[str, Any]]) -> None:
    with SimpleClient(broker.bootstrap_servers) as client:
        created = client.request(ApiKey.CREATE_ACLS, version, {"creations": creations})
        assert len(created["results"]) == len(creations)
        answered = {ErrorCode.NONE, ErrorCode.INVALID_REQUEST}
        assert {r["error_code"] for r in created["results"]} <= answered
        described = client.request(ApiKey.DESCRIBE_ACLS, version, filters[0])
        assert described["error_code"] in (ErrorCode.NONE, ErrorCode.INVALID_REQUEST)
        deleted = client.request(ApiKey.DELETE_ACLS, version, {"filters": filters})
        assert len(deleted["filter_results"]) == len(filters)
        assert {r["error_code"] for r in deleted["filter_results"]} <= answered
        client.request(ApiKey.DELETE_ACLS, version, {"filters": [acl_filter()]})  # the next starts empty
    assert errors.messages == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from([ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS]),
       version=st.sampled_from(VERSIONS), cut=st.integers(0, 40), tail=st.binary(max_size=8))
def test_a_truncated_or_garbled_body_closes_only_its_connection(broker: Broker, errors: ErrorCollector,
                                                                key: ApiKey, version: int, cut: int,
                                                                tail: bytes) -> None:
    body: dict[str, Any] = {ApiKey.DESCRIBE_ACLS: acl_filter(name="orders"),
                            ApiKey.CREATE_ACLS: {"creations": [READ_ORDERS]},
                            ApiKey.DELETE_ACLS: {"filters": [acl_filter(name="nothing")]}}[key]
    frame = encode_request(key, version, 7, "fuzz", body)
    garbled = frame[:len(frame) - cut] + tail
    host, _, port = broker.bootstrap_servers.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(garbled)) + garbled)
        sock.shutdown(socket.SHUT_WR)  # then the broker answers what it can, and closes
        try:
            while sock.recv(65536):
                pass
        except ConnectionResetError:
            pass
    with SimpleClient(broker.bootstrap_servers) as client:  # the broker goes on serving
        assert client.request(ApiKey.DESCRIBE_ACLS, 3, acl_filter())["error_code"] == ErrorCode.NONE
    assert errors.messages == []


def test_an_ipv6_client_is_matched_by_the_host_as_java_writes_it() -> None:
    """Kafka compares an ACL's host with InetAddress.getHostAddress(), which writes IPv6 without
    compression: a client on ::1 is 0:0:0:0:0:0:0:1, and an ACL for host ``::1`` never counts."""
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,V6://[::1]:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,V6:PLAINTEXT",
              "authorizer.class.name": "acl", "allow.everyone.if.no.acl.found": "true"}

    def cluster_acl(host: str, operation: int) -> dict[str, Any]:
        return creation(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:ANONYMOUS", host,
                        operation, AclPermissionType.ALLOW)

    with Broker(config) as b, SimpleClient(b.listeners["PLAINTEXT"]) as v4, \
            SimpleClient(b.listeners["V6"]) as v6:
        # no CLUSTER ACL yet: allow.everyone.if.no.acl.found lets the first ones in
        created = v4.request(ApiKey.CREATE_ACLS, 3, {"creations": [
            cluster_acl("127.0.0.1", AclOperation.ALL), cluster_acl("::1", AclOperation.DESCRIBE)]})
        assert [r["error_code"] for r in created["results"]] == [ErrorCode.NONE] * 2
        assert v6.request(ApiKey.DESCRIBE_ACLS, 3, acl_filter())["error_code"] == \
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        created = v4.request(ApiKey.CREATE_ACLS, 3, {"creations": [
            cluster_acl("0:0:0:0:0:0:0:1", AclOperation.DESCRIBE)]})
        assert created["results"][0]["error_code"] == ErrorCode.NONE
        assert v6.request(ApiKey.DESCRIBE_ACLS, 3, acl_filter())["error_code"] == ErrorCode.NONE
