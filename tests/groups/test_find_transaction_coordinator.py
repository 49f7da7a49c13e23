"""FindCoordinator with key type TRANSACTION, the groups module's half of the seam
(kafkapy/server/txn_coordinator.py): the transaction coordinator names the broker, the groups
module answers with its endpoint on the request's listener, after DESCRIBE on the TransactionalId."""

from __future__ import annotations

from typing import Any

import pytest

import kafkapy.assembly
from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import wait_until
from kafkapy.transactions import TransactionsModule


def find_transaction(client: SimpleClient, *keys: str, version: int = 4) -> list[dict[str, Any]]:
    if version >= 4:
        answer = client.request(ApiKey.FIND_COORDINATOR, version,
                                {"key_type": CoordinatorKeyType.TRANSACTION, "coordinator_keys": list(keys)})
        return list(answer["coordinators"])
    (key,) = keys
    answer = client.request(ApiKey.FIND_COORDINATOR, version,
                            {"key": key, "key_type": CoordinatorKeyType.TRANSACTION})
    return [{"key": key, **answer}]


@pytest.mark.parametrize("version", [1, 3, 4, 6])
def test_the_transaction_coordinator_is_named_on_the_requests_listener(version: int) -> None:
    with Broker({"broker.id": 1, "transaction.state.log.num.partitions": 3}) as broker, \
            SimpleClient(broker.bootstrap_servers) as client:
        # The first ask makes __transaction_state and answers once it is in the broker's view
        # (Kafka answers that one COORDINATOR_NOT_AVAILABLE).
        assert find_transaction(client, "tx", version=version)[0]["error_code"] == ErrorCode.NONE
        port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
        keys = ("tx", "other") if version >= 4 else ("tx",)
        found = find_transaction(client, *keys, version=version)
        assert [(c["key"], c["error_code"], c["node_id"], c["port"]) for c in found] == \
            [(key, ErrorCode.NONE, 1, port) for key in keys]


def test_an_empty_transactional_id_is_an_invalid_request_beside_good_keys() -> None:
    with Broker({"broker.id": 1, "transaction.state.log.num.partitions": 3}) as broker, \
            SimpleClient(broker.bootstrap_servers) as client:
        wait_until(lambda: find_transaction(client, "tx")[0]["error_code"] == ErrorCode.NONE,
                   what="a transaction coordinator")
        found = find_transaction(client, "tx", "")
        assert [c["error_code"] for c in found] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST]


def test_describe_on_the_transactional_id_is_needed() -> None:
    config = {"broker.id": 1, "authorizer.class.name": "allowlist", "allowlist.rules": ""}
    with Broker(config) as broker, SimpleClient(broker.bootstrap_servers) as client:
        (found,) = find_transaction(client, "tx")
        assert found["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert found["node_id"] == -1


def test_without_a_transaction_coordinator_the_answer_is_coordinator_not_available(
        monkeypatch: pytest.MonkeyPatch) -> None:
    without = tuple(cls for cls in kafkapy.assembly.DEFAULT_MODULES if cls is not TransactionsModule)
    monkeypatch.setattr(kafkapy.assembly, "DEFAULT_MODULES", without)
    with Broker({"broker.id": 1}) as broker, SimpleClient(broker.bootstrap_servers) as client:
        assert broker.runtime is not None
        assert not any(isinstance(m, TransactionsModule) for m in broker.runtime.modules)
        (found,) = find_transaction(client, "tx")
        assert found["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
