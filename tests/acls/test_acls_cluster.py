"""ACLs are the cluster's: what one broker creates or deletes, every other broker sees (through the
store's change notifications), in process on one MemoryStore and across ZooKeeper sessions, where
the znodes are Kafka's."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from kazoo.client import KazooClient

from kafkapy import Broker
from kafkapy.acls.model import AclOperation, AclPermissionType, PatternType, ResourceType
from kafkapy.client import SimpleClient
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import wait_until

ACL_CONFIG = {"authorizer.class.name": "acl", "super.users": "User:ANONYMOUS"}
EVERYTHING = {"resource_type_filter": ResourceType.ANY, "resource_name_filter": None,
              "pattern_type_filter": PatternType.ANY, "principal_filter": None, "host_filter": None,
              "operation": AclOperation.ANY, "permission_type": AclPermissionType.ANY}
CREATIONS = [
    {"resource_type": ResourceType.TOPIC, "resource_name": "orders",
     "resource_pattern_type": PatternType.LITERAL, "principal": "User:alice", "host": "*",
     "operation": AclOperation.READ, "permission_type": AclPermissionType.ALLOW},
    {"resource_type": ResourceType.GROUP, "resource_name": "app-",
     "resource_pattern_type": PatternType.PREFIXED, "principal": "User:bob", "host": "10.0.0.1",
     "operation": AclOperation.DESCRIBE_CONFIGS, "permission_type": AclPermissionType.DENY},
]


def described(address: str) -> set[tuple[Any, ...]]:
    with SimpleClient(address) as client:
        body = client.request(ApiKey.DESCRIBE_ACLS, 3, EVERYTHING)
    assert body["error_code"] == ErrorCode.NONE
    return {(r["resource_type"], r["resource_name"], r["pattern_type"], a["principal"], a["host"],
             a["operation"], a["permission_type"]) for r in body["resources"] for a in r["acls"]}


EXPECTED = {(c["resource_type"], c["resource_name"], c["resource_pattern_type"], c["principal"], c["host"],
             c["operation"], c["permission_type"]) for c in CREATIONS}


def create_here_see_there(here: str, there: str) -> None:
    with SimpleClient(here) as client:
        results = client.request(ApiKey.CREATE_ACLS, 3, {"creations": CREATIONS})["results"]
    assert [r["error_code"] for r in results] == [ErrorCode.NONE, ErrorCode.NONE]
    wait_until(lambda: described(there) == EXPECTED, what="the other broker sees the new ACLs")
    with SimpleClient(there) as client:
        [result] = client.request(ApiKey.DELETE_ACLS, 3, {"filters": [EVERYTHING]})["filter_results"]
    assert len(result["matching_acls"]) == 2
    wait_until(lambda: described(here) == set(), what="the first broker sees them deleted")


def test_two_brokers_in_one_process_share_the_acls() -> None:
    with Broker(ACL_CONFIG, brokers=2) as cluster:
        first, second = cluster.bootstrap_servers.split(",")
        create_here_see_there(first, second)


@contextlib.contextmanager
def kazoo(connect: str) -> Iterator[KazooClient]:
    client = KazooClient(hosts=connect)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def test_two_brokers_on_zookeeper_share_the_acls_at_kafkas_znodes(zk_connect: str) -> None:
    config = {**ACL_CONFIG, "zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": 6000}
    with Broker({**config, "broker.id": 1}) as one, Broker({**config, "broker.id": 2}) as two, \
            kazoo(zk_connect) as raw:  # the brokers made the chroot
        with SimpleClient(one.bootstrap_servers) as client:
            client.request(ApiKey.CREATE_ACLS, 3, {"creations": CREATIONS})
        wait_until(lambda: described(two.bootstrap_servers) == EXPECTED, what="broker 2 sees broker 1's ACLs")
        assert json.loads(raw.get("/kafka-acl/Topic/orders")[0]) == {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
        assert json.loads(raw.get("/kafka-acl-extended/prefixed/Group/app-")[0]) == {"version": 1, "acls": [
            {"principal": "User:bob", "permissionType": "Deny", "operation": "DescribeConfigs",
             "host": "10.0.0.1"}]}
        assert raw.get_children("/kafka-acl-changes") and raw.get_children("/kafka-acl-extended-changes")
        create_here_see_there(two.bootstrap_servers, one.bootstrap_servers)
        assert raw.exists("/kafka-acl/Topic/orders") is None  # no ACLs left: the node goes, as Kafka's
