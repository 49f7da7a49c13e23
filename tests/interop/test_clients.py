"""Real Kafka clients against a kafkapy broker each test starts: kafka-python, confluent-kafka
(librdkafka), aiokafka and kcat. No mocks: what these clients accept is what users will get.

Every client call has a bounded timeout (10-30 s), so a broker that stops answering fails a test
quickly instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from typing import Any

import pytest

from kafkapy.embedded import Broker
from kafkapy.server.core import PROTOCOL_HISTORY, PROTOCOL_VERSION
from kafkapy.testing import BrokerFactory

TIMEOUT_S = 10
TIMEOUT_MS = TIMEOUT_S * 1000


def host_port(broker: Broker) -> tuple[str, int]:
    host, _, port = broker.bootstrap_servers.rpartition(":")
    return host, int(port)


def cluster_id(broker: Broker) -> str:
    assert broker.runtime is not None
    return broker.runtime.store.cluster_id()


# --- kafka-python ---------------------------------------------------------------------------

def kafka_python_admin(broker: Broker) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, client_id="kafkapy-interop",
                            request_timeout_ms=TIMEOUT_MS, bootstrap_timeout_ms=TIMEOUT_MS)


def test_kafka_python_describe_cluster(kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory(broker_id=4, broker_rack="r1")
    admin = kafka_python_admin(broker)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    host, port = host_port(broker)
    assert described["cluster_id"] == cluster_id(broker)
    assert described["controller_id"] == 4
    assert [(b["broker_id"], b["host"], b["port"], b["rack"]) for b in described["brokers"]] == [
        (4, host, port, "r1")]


def test_kafka_python_api_versions_without_private_keys(kafka_broker_factory: BrokerFactory) -> None:
    from kafka.protocol.api_key import ApiKey

    broker = kafka_broker_factory(advertise_private_api_keys=False)
    admin = kafka_python_admin(broker)
    try:
        versions = admin.api_versions()
    finally:
        admin.close()
    public = {ApiKey(key): (low, high) for key, low, high in PROTOCOL_HISTORY[PROTOCOL_VERSION] if key < 1000}
    assert versions == public and ApiKey.Metadata in versions


def test_kafka_python_api_versions_rejects_private_keys_by_default(kafka_broker: Broker) -> None:
    """The documented caveat: advertise.private.api.keys=true (the default) lists BrokerMetadata
    (1010), and kafka-python 3.0's KafkaAdminClient.api_versions() turns every advertised key into
    its ApiKey enum, so it raises ValueError. Connecting and describe_cluster() still work: the
    client keeps the raw numbers internally and only the enum conversion fails."""
    admin = kafka_python_admin(kafka_broker)
    try:
        assert admin.describe_cluster()["brokers"][0]["broker_id"] == kafka_broker.broker_id
        with pytest.raises(ValueError, match="1010"):
            admin.api_versions()
    finally:
        admin.close()


# --- confluent-kafka (librdkafka) -------------------------------------------------------------

def test_confluent_kafka_list_topics(kafka_broker_factory: BrokerFactory) -> None:
    from confluent_kafka.admin import AdminClient

    broker = kafka_broker_factory(broker_id=5)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "socket.timeout.ms": TIMEOUT_MS,
                         "log_level": 3})
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    host, port = host_port(broker)
    assert metadata.cluster_id == cluster_id(broker)
    assert metadata.controller_id == 5
    assert {k: (b.id, b.host, b.port) for k, b in metadata.brokers.items()} == {5: (5, host, port)}
    assert metadata.topics == {}


def test_confluent_kafka_describe_cluster(kafka_broker_factory: BrokerFactory) -> None:
    from confluent_kafka.admin import AdminClient

    broker = kafka_broker_factory(broker_id=6)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "socket.timeout.ms": TIMEOUT_MS,
                         "log_level": 3})
    described = admin.describe_cluster(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S * 2)
    host, port = host_port(broker)
    assert described.cluster_id == cluster_id(broker)
    assert described.controller is not None and described.controller.id == 6
    assert [(n.id, n.host, n.port) for n in described.nodes] == [(6, host, port)]


# --- aiokafka --------------------------------------------------------------------------------

def test_aiokafka_bootstrap_and_describe_cluster() -> None:
    from aiokafka import AIOKafkaClient
    from aiokafka.admin import AIOKafkaAdminClient

    async def scenario() -> None:
        async with Broker({"broker.id": 9}) as broker:  # on this test's own loop
            host, port = host_port(broker)
            client = AIOKafkaClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=TIMEOUT_MS)
            try:
                await client.bootstrap()
                assert [(b.nodeId, b.host, b.port) for b in client.cluster.brokers()] == [(9, host, port)]
                assert client.cluster.controller is not None and client.cluster.controller.nodeId == 9
            finally:
                await client.close()

            admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers,
                                        request_timeout_ms=TIMEOUT_MS)
            await admin.start()
            try:
                described = await admin.describe_cluster()
            finally:
                await admin.close()
            assert described["cluster_id"] == cluster_id(broker)
            assert described["controller_id"] == 9
            assert [(b["node_id"], b["host"], b["port"]) for b in described["brokers"]] == [(9, host, port)]

    asyncio.run(asyncio.wait_for(scenario(), timeout=TIMEOUT_S * 3))


# --- kcat ------------------------------------------------------------------------------------

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.mark.skipif(KCAT is None, reason="KCAT NOT INSTALLED (`apt-get install kcat`, or `make install` "
                                         "as root): kcat -L interop test SKIPPED")
def test_kcat_metadata_listing(kafka_broker_factory: BrokerFactory) -> None:
    assert KCAT is not None
    broker = kafka_broker_factory(broker_id=7)
    host, port = host_port(broker)
    result = subprocess.run([KCAT, "-L", "-J", "-b", broker.bootstrap_servers, "-m", str(TIMEOUT_S)],
                            capture_output=True, text=True, timeout=TIMEOUT_S * 3)
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    assert listing["brokers"] == [{"id": 7, "name": f"{host}:{port}"}]
    assert listing["controllerid"] == 7
    assert listing["originating_broker"]["id"] == 7
    assert listing["topics"] == []
