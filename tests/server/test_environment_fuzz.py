"""Fuzzing serve --env: any KAFKA_* variables (names by the image's rule, values of any text) give
settings, or ConfigError in one line naming the variable or setting; never another exception. The
image's name rule is total: every variable names a setting."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from kafkapy.server.config import BrokerConfig, ConfigError
from kafkapy.server.environment import setting_name, settings_from_environment

_NAME_PARTS = st.sampled_from(["KAFKA_", "_", "__", "___", "LISTENERS", "ADVERTISED", "SSL", "CLIENT", "AUTH",
                               "KEYSTORE", "FILENAME", "CREDENTIALS", "TRUSTSTORE", "PROCESS", "ROLES",
                               "NODE", "ID", "NUM", "PARTITIONS", "OPTS", "VERSION", "x", "é", "1"])
_NAMES = st.lists(_NAME_PARTS, min_size=1, max_size=5).map(lambda parts: "KAFKA_" + "".join(parts)) | \
    st.sampled_from(["KAFKA_ADVERTISED_LISTENERS", "KAFKA_LISTENERS", "KAFKA_PROCESS_ROLES",
                     "KAFKA_SSL_CLIENT_AUTH", "KAFKA_SSL_KEYSTORE_FILENAME", "KAFKA_SSL_KEY_CREDENTIALS",
                     "KAFKA_SSL_KEYSTORE_CREDENTIALS", "KAFKA_SSL_TRUSTSTORE_FILENAME",
                     "KAFKA_SSL_TRUSTSTORE_CREDENTIALS", "KAFKA_HEAP_OPTS"])
_VALUES = st.sampled_from(["", "1", "-1", "²", "controller", "broker", "required", "requested", "none",
                           "PLAINTEXT://h:9092", "SSL://:9093,PLAINTEXT://h:1", "ks.jks", "../ks.jks",
                           "missing", "creds", "bad", ".", "a\\", "\\u00e9", "=", "#", "!"]) | \
    st.text(max_size=8)


@given(st.dictionaries(_NAMES | st.sampled_from(["CLUSTER_ID", "PATH"]), _VALUES, max_size=5),
       st.none() | st.dictionaries(st.sampled_from(["listeners", "node.id", "zookeeper.connect"]),
                                   _VALUES, max_size=2))
@example({"KAFKA_ADVERTISED_LISTENERS": "SSL://h:1", "KAFKA_SSL_KEY_CREDENTIALS": "bad"}, None)
def test_any_environment_is_settings_or_one_line(environ: dict[str, str],
                                                 file: dict[str, str] | None) -> None:
    with tempfile.TemporaryDirectory() as secrets:
        (Path(secrets) / "creds").write_text("secret\n")
        (Path(secrets) / "bad").write_bytes(b"\xff\xfe")  # a credentials file that is not UTF-8
        try:
            settings = settings_from_environment(environ, file, secrets)
        except ConfigError as refused:
            assert str(refused) and "\n" not in str(refused)
            return
    try:
        BrokerConfig.build(settings)
    except ConfigError as refused:
        assert str(refused) and "\n" not in str(refused)


@given(_NAMES)
def test_every_variable_names_a_setting(variable: str) -> None:
    name = setting_name(variable)
    assert name == name.lower()
    if "__" not in variable:
        assert name == variable[len("KAFKA_"):].lower().replace("_", ".")
