"""Broker settings from the environment, as the apache/kafka Docker image reads them (``serve --env``).

A docker-compose file or a testcontainers set-up configures the image with variables: every
``KAFKA_*`` but the image's own (its JVM and log4j options) is a broker setting, and ``CLUSTER_ID``
the id the image formats its storage with. The image's rule (KafkaDockerWrapper, with KAFKA-17911's
fix that strips only the leading ``KAFKA_``): drop the prefix, lower-case, then ``_`` is ``.``,
``___`` is ``-`` and ``__`` is ``_`` (``KAFKA_LISTENER_NAME_SSL__INTERNAL_...`` is
``listener.name.ssl_internal....``). The settings are appended to the mounted server.properties as
``key=value`` lines, so they win over the file and are read as a .properties file reads them; with
neither settings nor a file the image runs its default file, Kafka's config/kraft/server.properties.
Before that its scripts derive ``KAFKA_LISTENERS`` from ``KAFKA_ADVERTISED_LISTENERS`` (each host
made 0.0.0.0) when it is unset, unless the process is a controller only, and, with an SSL listener
advertised, the key and trust stores' locations and passwords from the files its
``KAFKA_SSL_*_FILENAME`` and ``KAFKA_SSL_*_CREDENTIALS`` name under /etc/kafka/secrets.

``kafkapy serve`` reads the environment only when asked (``--env``): the image is a container whose
environment is its compose file's, where a shell's holds ``KAFKA_*`` variables meant for other
programs (an application's ``KAFKA_BOOTSTRAP_SERVERS``, Kubernetes' ``KAFKA_PORT`` for a service
named kafka) that would silently reconfigure the broker.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from kafkapy.server.config import ConfigError, parse_properties

__all__ = ["IMAGE_DEFAULT_CLUSTER_ID", "IMAGE_DEFAULT_SETTINGS", "settings_from_environment"]

PREFIX: Final = "KAFKA_"
# The image's own variables, which are not broker settings (KafkaDockerWrapper's ExcludeServerPropsEnv).
EXCLUDED: Final = frozenset({
    "KAFKA_VERSION", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_LOG4J_LOGGERS",
    "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME"})
CLUSTER_ID_VARIABLE: Final = "CLUSTER_ID"
# The image's configureDefaults: the cluster id its storage is formatted with when CLUSTER_ID is unset.
IMAGE_DEFAULT_CLUSTER_ID: Final = "5L6g3nShT-eMCtK--X86sw"
# The image's default server.properties (Kafka's config/kraft/server.properties): its listener and
# KRaft settings, the ones that differ from kafkapy's defaults. Its log.dirs (/tmp/kraft-combined-logs)
# is left out, so records stay in memory, and its socket buffer sizes too (docs/broker.md says why).
IMAGE_DEFAULT_SETTINGS: Final[Mapping[str, str]] = {
    "process.roles": "broker,controller", "node.id": "1", "controller.quorum.voters": "1@localhost:9093",
    "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "inter.broker.listener.name": "PLAINTEXT",
    "advertised.listeners": "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,"
                                      "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
}


# The image's configure script: with an SSL listener advertised, the key store (and, with client
# authentication, the trust store) are files named by variables under its secrets directory, and their
# passwords the contents of files named likewise ($(cat file): trailing newlines dropped).
SECRETS_DIRECTORY: Final = "/etc/kafka/secrets"
_KEY_STORE_SECRETS: Final = (("KAFKA_SSL_KEYSTORE_FILENAME", "KAFKA_SSL_KEYSTORE_LOCATION", False),
                             ("KAFKA_SSL_KEY_CREDENTIALS", "KAFKA_SSL_KEY_PASSWORD", True),
                             ("KAFKA_SSL_KEYSTORE_CREDENTIALS", "KAFKA_SSL_KEYSTORE_PASSWORD", True))
_TRUST_STORE_SECRETS: Final = (("KAFKA_SSL_TRUSTSTORE_FILENAME", "KAFKA_SSL_TRUSTSTORE_LOCATION", False),
                               ("KAFKA_SSL_TRUSTSTORE_CREDENTIALS", "KAFKA_SSL_TRUSTSTORE_PASSWORD", True))


def setting_name(variable: str) -> str:
    """The broker key of a ``KAFKA_*`` variable, by the image's rule (in its order of replacements)."""
    return (variable[len(PREFIX):].lower()
            .replace("_", ".").replace("...", "-").replace("..", "_"))


def settings_from_environment(environ: Mapping[str, str], file_settings: Mapping[str, str] | None,
                              secrets: str = SECRETS_DIRECTORY) -> dict[str, str]:
    """The settings of the image given ``environ`` and the server.properties it was given (None: no
    file): the file's, then the environment's over them, read as that file reads them; with neither,
    the image's default file's. The cluster id is CLUSTER_ID, else the image's default, unless
    ZooKeeper is to hold it (zookeeper.connect: Kafka's broker on ZooKeeper reads it from there)."""
    variables = {name: value for name, value in environ.items()
                 if name.startswith(PREFIX) and name not in EXCLUDED}
    if ("KAFKA_LISTENERS" not in variables and variables.get("KAFKA_ADVERTISED_LISTENERS")
            and variables.get("KAFKA_PROCESS_ROLES") != "controller"):
        # the image's configure script: listen on every interface at the advertised ports
        advertised = variables["KAFKA_ADVERTISED_LISTENERS"]
        variables["KAFKA_LISTENERS"] = re.sub(r"://[^:]*:", "://0.0.0.0:", advertised)
    variables.update(_ssl_secrets(variables, Path(secrets)))
    lines = "".join(f"{setting_name(name)}={value}\n" for name, value in variables.items())
    from_environment = parse_properties(lines, "the KAFKA_* environment variables")
    if not from_environment and not file_settings:
        settings = dict(IMAGE_DEFAULT_SETTINGS)
    else:
        settings = {**(file_settings or {}), **from_environment}
    cluster_id = environ.get(CLUSTER_ID_VARIABLE) or None
    if cluster_id is None and "zookeeper.connect" not in settings:
        cluster_id = IMAGE_DEFAULT_CLUSTER_ID
    if cluster_id is not None and "cluster.id" not in settings:
        settings["cluster.id"] = cluster_id
    return settings


def _ssl_secrets(variables: Mapping[str, str], secrets: Path) -> dict[str, str]:
    """The store locations and passwords the image's configure script exports from its secrets
    directory, for the variables that name them (a PEM store, set directly, needs none of them)."""
    if "SSL://" not in variables.get("KAFKA_ADVERTISED_LISTENERS", ""):
        return {}
    named = list(_KEY_STORE_SECRETS)
    if any(word in variables.get("KAFKA_SSL_CLIENT_AUTH", "") for word in ("required", "requested")):
        named += _TRUST_STORE_SECRETS
    exported = {}
    for variable, target, read in named:
        if not variables.get(variable):
            continue
        path = secrets / variables[variable]
        if not read:
            exported[target] = str(path)
            continue
        try:
            exported[target] = path.read_text(encoding="utf-8").rstrip("\n")
        except OSError as exc:
            raise ConfigError(f"{variable}: cannot read {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:  # a password kafkapy would pass on mangled: refused, not guessed at
            raise ConfigError(f"{variable}: cannot read {path}: not UTF-8 text") from None
    return exported
