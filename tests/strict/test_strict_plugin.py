"""Strict mode in the pytest plugin, seen from a fresh pytest run: a test whose client misuses the
protocol fails at teardown with each violation and its decoded request."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

QUICK = ("-p", "no:hypothesispytest", "-p", "no:randomly")

# A raw idempotent producer: one batch at sequence 0, then (when told to skip) one at sequence 5.
PRODUCER = """
    from kafkapy.client import SimpleClient
    from kafkapy.protocol.api_keys import ApiKey
    from kafkapy.protocol.records import build_record_batch


    def produce(broker, skip):
        broker.seed({"orders": {}})
        with SimpleClient(broker.bootstrap_servers, client_id="the-app") as client:
            pid = client.request(ApiKey.INIT_PRODUCER_ID, 4, {
                "transactional_id": None, "transaction_timeout_ms": 1, "producer_id": -1,
                "producer_epoch": -1}).producer_id
            codes = []
            for sequence in (0, 5 if skip else 1):
                batch = build_record_batch([(b"k", b"v")], producer_id=pid, producer_epoch=0,
                                           base_sequence=sequence)
                answer = client.request(ApiKey.PRODUCE, 9, {"acks": -1, "timeout_ms": 5000, "topic_data": [
                    {"name": "orders", "partition_data": [{"index": 0, "records": batch}]}]})
                codes.append(answer.responses[0].partition_responses[0].error_code)
            return codes
"""


def test_misuse_fails_a_strict_test_at_teardown_with_the_decoded_request(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PRODUCER + """
    import pytest


    @pytest.mark.kafka_strict
    def test_skips_sequences(kafka_broker):
        assert produce(kafka_broker, skip=True) == [0, 45]  # the broker answers; the test body passes


    @pytest.mark.kafka_strict
    def test_in_order(kafka_broker):
        assert produce(kafka_broker, skip=False) == [0, 0]


    def test_not_strict(kafka_broker):
        assert produce(kafka_broker, skip=True) == [0, 45]
    """)
    result = pytester.runpytest(*QUICK)
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines([
        "*ERROR at teardown of test_skips_sequences*",
        "*kafkapy strict mode: 1 protocol violation(s) on 127.0.0.1:*",
        "[[]out_of_order_sequence] Produce v9 #3 on PLAINTEXT-127.0.0.1:*from client 'the-app': orders-0: "
        "producer * (epoch 0) sent sequences 5-5, answered OUT_OF_ORDER_SEQUENCE_NUMBER*",
        "*expected: base sequence 1",
        "*request: {*'topic_data': [[]{'name': 'orders', 'partition_data': [[]{'index': 0, 'records': "
        "'<records: 1 record(s), producer * epoch 0, sequences 5-5, * bytes>'}]}]*",
    ])
    assert "test_in_order" not in result.stdout.str()
    assert "test_not_strict" not in result.stdout.str()


def test_the_ini_option_makes_every_test_strict_and_a_factory_opts_out(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nkafka_strict = true\n")
    pytester.makepyfile(PRODUCER + """
    def test_strict_by_ini(kafka_broker):
        produce(kafka_broker, skip=True)


    def test_opted_out(kafka_broker_factory):
        produce(kafka_broker_factory(strict=False), skip=True)


    def test_cleared(kafka_broker):
        produce(kafka_broker, skip=True)
        assert len(kafka_broker.violations) == 1
        kafka_broker.violations.clear()  # a test that provokes misuse on purpose forgets it
    """)
    result = pytester.runpytest(*QUICK)
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_strict_by_ini*"])
