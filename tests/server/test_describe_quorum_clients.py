"""kafka-python's KafkaAdminClient.describe_metadata_quorum (DescribeQuorum, 55) gets a clear
error, not a hang or a traceback: kafkapy's brokers keep their metadata in a store (in memory or
ZooKeeper), not in a Raft quorum, so there is no quorum to describe. Kafka's ZooKeeper-mode broker
does not serve DescribeQuorum either (its spec's listeners are "broker" and "controller", not
"zkBroker", at 3.9.0); so ApiVersions leaves it out, also when emulating 4.0's KRaft broker (whose
table kafkapy clips to what it implements), and the client refuses before sending anything."""

from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import IncompatibleBrokerVersion

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.protocol.api_keys import ApiKey


@pytest.mark.parametrize("config", [{}, {"kafka.version": "4.0"}], ids=["default", "4.0"])
def test_describe_metadata_quorum_is_refused_clearly(config: dict[str, str]) -> None:
    with Broker(config) as broker:
        with SimpleClient(broker.bootstrap_servers) as client:
            advertised = client.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                                 "client_software_version": "1"})
        assert ApiKey.DESCRIBE_QUORUM not in {entry.api_key for entry in advertised.api_keys}
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10_000)
        try:
            with pytest.raises(IncompatibleBrokerVersion,
                               match="does not support the 'DescribeQuorumRequest'"):
                admin.describe_metadata_quorum()
            assert admin.describe_cluster()["brokers"]  # the client goes on working
        finally:
            admin.close()
