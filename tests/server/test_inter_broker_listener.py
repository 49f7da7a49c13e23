"""security.inter.broker.protocol: Kafka's other way to name the inter-broker listener."""

from __future__ import annotations

import re

import pytest

from kafkapy.embedded import Broker
from kafkapy.server.config import ConfigError


def test_security_inter_broker_protocol_names_the_inter_broker_listener() -> None:
    listeners = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
    sasl = {"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="secret";'}
    chosen = {"listeners": listeners, **sasl, "security.inter.broker.protocol": "SASL_PLAINTEXT"}
    with Broker(chosen) as broker:
        assert broker.runtime is not None and broker.runtime.inter_broker_listener == "SASL_PLAINTEXT"
    with Broker({"listeners": listeners, **sasl}) as broker:  # unset: the PLAINTEXT one
        assert broker.runtime is not None and broker.runtime.inter_broker_listener == "PLAINTEXT"
    with pytest.raises(ConfigError, match=re.escape("Only one of inter.broker.listener.name and "
                                                    "security.inter.broker.protocol should be set.")):
        with Broker({"listeners": listeners, **sasl, "inter.broker.listener.name": "PLAINTEXT",
                     "security.inter.broker.protocol": "PLAINTEXT"}):
            pass
    with pytest.raises(ConfigError, match=r"must be a listener name defined in advertised\.listeners"), \
            Broker({"security.inter.broker.protocol": "SSL"}):
        pass
