"""The enums of error codes and API keys agree with Kafka's own lists as this machine has them."""

from __future__ import annotations

import inspect

import kafka.errors

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.catalogue import catalogue

# kafka-python spells a few codes by their pre-KIP names; Kafka's Errors enum renamed them.
_RENAMED = {6: "NOT_LEADER_FOR_PARTITION", 10: "MESSAGE_SIZE_TOO_LARGE", 0: "NO_ERROR", -1: "UNKNOWN",
            17: "INVALID_TOPIC", 39: "INVALID_REPLICATION_ASSIGNMENT"}


def test_every_kafka_python_error_code_has_its_name() -> None:
    known = {cls.errno: cls.message for _, cls in inspect.getmembers(kafka.errors, inspect.isclass)
             if issubclass(cls, kafka.errors.BrokerResponseError) and cls.errno is not None}
    assert len(known) > 120
    for number, name in known.items():
        code = ErrorCode(number)
        assert code.name == name or _RENAMED.get(number) == name, (number, name, code.name)


def test_api_keys_are_the_catalogues() -> None:
    assert {key.value for key in ApiKey} == set(catalogue())
    for key in ApiKey:
        assert key.name.replace("_", "") == catalogue()[key].name.upper()


def test_kafka_api_error_carries_its_code() -> None:
    error = KafkaApiError(ErrorCode.INVALID_REQUEST, "no topics")
    assert error.error_code == ErrorCode.INVALID_REQUEST == 42
    assert str(error) == "INVALID_REQUEST: no topics"
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable and not ErrorCode.INVALID_REQUEST.retriable
