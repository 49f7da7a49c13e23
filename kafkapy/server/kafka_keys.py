"""Kafka's broker config keys that kafkapy accepts and does not act on.

Kafka defines about 340 broker settings (ServerConfigs, ReplicationConfigs, SocketServerConfigs,
ZkConfigs, KRaftConfigs, GroupCoordinatorConfig, ShareCoordinatorConfig, TransactionLogConfig,
RemoteLogManagerConfig, BrokerSecurityConfigs, MetricConfigs, QuotaConfig, ... merged into
AbstractKafkaConfig.CONFIG_DEF). A test author passes kafkapy the server.properties or the
docker-compose settings they use for Kafka; every key of them is Kafka's, so none should be
reported unknown. The keys kafkapy acts on are declared where they act (server/config.py's
CORE_KEYS and each module's ``config_keys``); the rest are here, a table of Kafka's facts: name,
type, default, update mode (DynamicBrokerConfig: read-only, per-broker, cluster-wide) and
validator (the bounds or choices of its ConfigDef entry), each with why kafkapy has no use for it.
They are taken quietly, typed and held to Kafka's validators as its ConfigDef holds them, listed
by DescribeConfigs with Kafka's default, and the dynamic ones can be altered (stored, described,
without effect), as Kafka would take them.

Facts are those of the Kafka source snapshot of Oct 2024 (Kafka 4.0 in the making: the 3.x set,
ZooKeeper's keys included, with 4.0's defaults), and the three keys 3.9 still had (marked); the
defaults that depend on the JVM are those of OpenJDK 17.
"""

from __future__ import annotations

from typing import Any, Final

from kafkapy.validators import AtLeast, Between, HostPorts, MinusOneOr, NonEmptyString, Validator

__all__ = ["CLUSTER_WIDE", "INERT_TABLE", "KAFKA_INTERNAL_KEYS", "LISTENER_ONLY_KEYS", "PER_BROKER",
           "READ_ONLY", "TLS_STORE_TABLE", "UPDATE_MODES"]

READ_ONLY, PER_BROKER, CLUSTER_WIDE = "read-only", "per-broker", "cluster-wide"  # Kafka's update modes

# Why kafkapy has no use for a key (the key's documentation in DescribeConfigs and the docs).
THREADS = ("A thread or queue size: kafkapy serves every connection, request and log from one asyncio "
           "loop.")
ZOOKEEPER = ("A ZooKeeper client setting kafkapy's client (kazoo) does not take: it uses zookeeper.connect "
             "and the session and connection timeouts only.")
KRAFT = ("KRaft's (controller quorum, metadata log): kafkapy keeps metadata in memory, in its own journal "
         "under metadata.log.dir, or in ZooKeeper.")
TIERED = "Tiered storage, which kafkapy has not."
SSL = ("Java's TLS (providers, algorithms, principal mapping): kafkapy's TLS listeners take PEM key and "
       "trust stores (ssl.keystore.*, ssl.truststore.*) or PEM files (ssl.certfile, ssl.keyfile, "
       "ssl.cafile).")
SASL = ("Kerberos (GSSAPI) or a SASL client's login: kafkapy serves PLAIN, SCRAM and OAUTHBEARER and logs "
        "in to no one.")
INTER_BROKER_SASL = ("The SASL mechanism of broker-to-broker connections: kafkapy's brokers do not "
                     "authenticate to each other.")
METRICS = "Java metrics (reporters, JMX, sampling): kafkapy serves its metrics at metrics.listener."
REPLICATION = ("Follower fetching between brokers: kafkapy's replicas share one log (or, with log.dirs, are "
               "not copied), so nothing fetches.")
CLEANER = "The log cleaner's memory and I/O budget: kafkapy's cleaner has none to size."
VERSION = "A ZooKeeper-era version pin: kafka.version chooses the Kafka release kafkapy serves as."
TOKENS = "Delegation tokens and dynamic password encoding, which kafkapy does not serve."
NETWORK = ("A setting of Kafka's network layer (connection setup, a control-plane listener, the accept "
           "backlog) that kafkapy's asyncio listeners do not have.")
VERSIONLESS_IDS = "Kafka's switch for generated broker ids: kafkapy generates one whenever broker.id is -1."
INTER_BROKER_CLIENT = ("A timeout of Kafka's broker-to-broker (or controller-to-broker) clients; kafkapy's "
                       "have their own.")
MUTATION_QUOTA = ("The sampling of controller mutation quotas (KIP-599): kafkapy stores "
                  "controller_mutation_rate quotas but does not enforce them.")
SHUTDOWN = ("Controlled shutdown: a stopping kafkapy broker's partitions move when the controller sees "
            "it leave.")
UNSTABLE = "Kafka's switch for unreleased APIs and features: kafkapy serves what it implements."
PURGATORY = "A purge interval of Kafka's delayed-operation purgatories: kafkapy's waits end by themselves."
COORDINATOR_WRITES = "A coordinator's write batching or timeout: kafkapy's coordinators append in-process."
NEW_COORDINATOR = "Kafka's switch for the new group coordinator: kafkapy has one coordinator."
DOWNCONVERSION = ("Kafka 3.x's switch for down-converting fetches: kafkapy always converts "
                  "(docs/dataplane.md).")
SCHEDULER = "Kafka's delay of its periodic log tasks: kafkapy runs them from the start."
SHARE_ALWAYS = ("Kafka's early-access switch for share groups: kafkapy serves them always "
                "(docs/share-groups.md).")
SHARE_LIMITS = "A share group limit kafkapy does not enforce."
COMPRESSION_CODEC = "The codec of a coordinator topic's batches: kafkapy writes them uncompressed."
PLUGIN = "A Java plugin class, which kafkapy cannot load."
PRINCIPALS = "A Java principal builder: kafkapy's principals are User:<name> (docs/security.md)."

# Kafka's validators that need a word of their own (the rest are written in the rows)
_POOL_SIZE = MinusOneOr(1, None, "Value can be -1 or greater than 0")  # RemoteLogManagerConfig's
_LOG_OVERHEAD = 12  # Records.LOG_OVERHEAD: the metadata log's segment size bound

# (name, Kafka's type, Kafka's default, why kafkapy has no use for it, Kafka's update mode, Kafka's
# validator). server/config.py makes them ConfigKeys, marked not acted on, held to the validator at
# start and in an alter; this module imports only the validators' vocabulary (kafkapy/validators.py).
# Kafka's validators it leaves out: the MetadataVersion check of inter.broker.protocol.version and
# log.message.format.version (which versions it takes depends on the release emulated).
INERT_TABLE: Final[tuple[tuple[str, str, Any, str, str, Validator | None], ...]] = (
    ('remote.log.storage.system.enable', 'boolean', False, TIERED, READ_ONLY, None),
    ('remote.log.storage.manager.impl.prefix', 'string', 'rsm.config.', TIERED, READ_ONLY, NonEmptyString()),
    ('remote.log.metadata.manager.impl.prefix', 'string', 'rlmm.config.',
     TIERED, READ_ONLY, NonEmptyString()),
    ('remote.log.storage.manager.class.name', 'string', None, TIERED, READ_ONLY, NonEmptyString()),
    ('remote.log.storage.manager.class.path', 'string', None, TIERED, READ_ONLY, None),
    ('remote.log.metadata.manager.class.name', 'string',
     'org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager',
     TIERED, READ_ONLY, NonEmptyString()),
    ('remote.log.metadata.manager.class.path', 'string', None, TIERED, READ_ONLY, None),
    ('remote.log.metadata.manager.listener.name', 'string', None, TIERED, READ_ONLY, NonEmptyString()),
    ('remote.log.metadata.custom.metadata.max.bytes', 'int', 128, TIERED, READ_ONLY, AtLeast(0)),
    ('remote.log.index.file.cache.total.size.bytes', 'long', 1073741824, TIERED, CLUSTER_WIDE, AtLeast(1)),
    ('remote.log.manager.thread.pool.size', 'int', 10, THREADS, READ_ONLY, AtLeast(1)),
    ('remote.log.manager.copier.thread.pool.size', 'int', -1, THREADS, READ_ONLY, _POOL_SIZE),
    ('remote.log.manager.expiration.thread.pool.size', 'int', -1, THREADS, READ_ONLY, _POOL_SIZE),
    ('remote.log.manager.task.interval.ms', 'long', 30000, TIERED, READ_ONLY, AtLeast(1)),
    ('remote.log.manager.task.retry.backoff.ms', 'long', 500, TIERED, READ_ONLY, AtLeast(1)),
    ('remote.log.manager.task.retry.backoff.max.ms', 'long', 30000, TIERED, READ_ONLY, AtLeast(1)),
    ('remote.log.manager.task.retry.jitter', 'double', 0.2, TIERED, READ_ONLY, Between(0, 0.5)),
    ('remote.log.reader.threads', 'int', 10, THREADS, READ_ONLY, AtLeast(1)),
    ('remote.log.reader.max.pending.tasks', 'int', 100, TIERED, READ_ONLY, AtLeast(1)),
    ('remote.log.manager.copy.max.bytes.per.second', 'long', 9223372036854775807,
     TIERED, CLUSTER_WIDE, AtLeast(1)),
    ('remote.log.manager.copy.quota.window.num', 'int', 11, TIERED, READ_ONLY, AtLeast(1)),
    ('remote.log.manager.copy.quota.window.size.seconds', 'int', 1, TIERED, READ_ONLY, AtLeast(1)),
    ('remote.log.manager.fetch.max.bytes.per.second', 'long', 9223372036854775807,
     TIERED, CLUSTER_WIDE, AtLeast(1)),
    ('remote.log.manager.fetch.quota.window.num', 'int', 11, TIERED, READ_ONLY, AtLeast(1)),
    ('remote.log.manager.fetch.quota.window.size.seconds', 'int', 1, TIERED, READ_ONLY, AtLeast(1)),
    ('remote.fetch.max.wait.ms', 'int', 500, TIERED, CLUSTER_WIDE, AtLeast(1)),
    ('remote.list.offsets.request.timeout.ms', 'long', 30000, TIERED, CLUSTER_WIDE, AtLeast(1)),
    ('zookeeper.set.acl', 'boolean', False, ZOOKEEPER, READ_ONLY, None),
    ('zookeeper.max.in.flight.requests', 'int', 10, ZOOKEEPER, READ_ONLY, AtLeast(1)),
    ('zookeeper.ssl.client.enable', 'boolean', False, ZOOKEEPER, READ_ONLY, None),
    ('zookeeper.clientCnxnSocket', 'string', None, ZOOKEEPER, READ_ONLY, None),
    ('zookeeper.ssl.keystore.location', 'string', None, ZOOKEEPER, READ_ONLY, None),
    ('zookeeper.ssl.keystore.password', 'password', None, ZOOKEEPER, READ_ONLY, None),
    ('zookeeper.ssl.keystore.type', 'string', None, ZOOKEEPER, READ_ONLY, None),
    ('zookeeper.ssl.truststore.location', 'string', None, ZOOKEEPER, READ_ONLY, None),
    ('zookeeper.ssl.truststore.password', 'password', None, ZOOKEEPER, READ_ONLY, None),
    ('zookeeper.ssl.truststore.type', 'string', None, ZOOKEEPER, READ_ONLY, None),
    ('zookeeper.ssl.protocol', 'string', 'TLSv1.2', ZOOKEEPER, READ_ONLY, None),
    ('zookeeper.ssl.enabled.protocols', 'list', None, ZOOKEEPER, READ_ONLY, None),
    ('zookeeper.ssl.cipher.suites', 'list', None, ZOOKEEPER, READ_ONLY, None),
    ('zookeeper.ssl.endpoint.identification.algorithm', 'string', 'HTTPS', ZOOKEEPER, READ_ONLY, None),
    ('zookeeper.ssl.crl.enable', 'boolean', False, ZOOKEEPER, READ_ONLY, None),
    ('zookeeper.ssl.ocsp.enable', 'boolean', False, ZOOKEEPER, READ_ONLY, None),
    ('broker.id.generation.enable', 'boolean', True, VERSIONLESS_IDS, READ_ONLY, None),
    ('num.io.threads', 'int', 8, THREADS, CLUSTER_WIDE, AtLeast(1)),
    ('num.replica.alter.log.dirs.threads', 'int', None, THREADS, READ_ONLY, None),
    ('background.threads', 'int', 10, THREADS, CLUSTER_WIDE, AtLeast(1)),
    ('request.timeout.ms', 'int', 30000, INTER_BROKER_CLIENT, READ_ONLY, None),
    ('socket.connection.setup.timeout.ms', 'long', 10000, NETWORK, READ_ONLY, None),
    ('socket.connection.setup.timeout.max.ms', 'long', 30000, NETWORK, READ_ONLY, None),
    ('early.start.listeners', 'string', None, KRAFT, READ_ONLY, None),
    ('controlled.shutdown.max.retries', 'int', 3, SHUTDOWN, READ_ONLY, None),
    ('controlled.shutdown.retry.backoff.ms', 'long', 5000, SHUTDOWN, READ_ONLY, None),
    ('controlled.shutdown.enable', 'boolean', True, SHUTDOWN, READ_ONLY, None),
    ('unstable.api.versions.enable', 'boolean', False, UNSTABLE, READ_ONLY, None),
    ('unstable.feature.versions.enable', 'boolean', False, UNSTABLE, READ_ONLY, None),
    ('metadata.log.max.snapshot.interval.ms', 'long', 3600000, KRAFT, READ_ONLY, AtLeast(0)),
    ('initial.broker.registration.timeout.ms', 'int', 60000, KRAFT, READ_ONLY, None),
    ('broker.heartbeat.interval.ms', 'int', 2000, KRAFT, READ_ONLY, None),
    ('broker.session.timeout.ms', 'int', 9000, KRAFT, READ_ONLY, None),
    ('sasl.mechanism.controller.protocol', 'string', 'GSSAPI', SASL, READ_ONLY, None),
    ('metadata.log.segment.bytes', 'int', 1073741824, KRAFT, READ_ONLY, AtLeast(_LOG_OVERHEAD)),
    ('metadata.log.segment.min.bytes', 'int', 8388608, KRAFT, READ_ONLY, AtLeast(_LOG_OVERHEAD)),
    ('metadata.log.segment.ms', 'long', 604800000, KRAFT, READ_ONLY, None),
    ('metadata.max.retention.bytes', 'long', 104857600, KRAFT, READ_ONLY, None),
    ('metadata.max.retention.ms', 'long', 604800000, KRAFT, READ_ONLY, None),
    ('metadata.max.idle.interval.ms', 'int', 500, KRAFT, READ_ONLY, AtLeast(0)),
    ('server.max.startup.time.ms', 'long', 9223372036854775807, KRAFT, READ_ONLY, AtLeast(0)),
    ('zookeeper.metadata.migration.enable', 'boolean', False, ZOOKEEPER, READ_ONLY, None),
    ('eligible.leader.replicas.enable', 'boolean', False, KRAFT, READ_ONLY, None),
    ('zookeeper.metadata.migration.min.batch.size', 'int', 200, ZOOKEEPER, READ_ONLY, AtLeast(1)),
    ('control.plane.listener.name', 'string', None, NETWORK, READ_ONLY, None),
    ('socket.listen.backlog.size', 'int', 50, NETWORK, READ_ONLY, AtLeast(1)),
    ('queued.max.requests', 'int', 500, THREADS, READ_ONLY, AtLeast(1)),
    ('queued.max.request.bytes', 'long', -1, THREADS, READ_ONLY, None),
    ('controller.socket.timeout.ms', 'int', 30000, INTER_BROKER_CLIENT, READ_ONLY, None),
    ('replica.lag.time.max.ms', 'long', 30000, REPLICATION, READ_ONLY, None),
    ('replica.socket.timeout.ms', 'int', 30000, REPLICATION, READ_ONLY, None),
    ('replica.socket.receive.buffer.bytes', 'int', 65536, REPLICATION, READ_ONLY, None),
    ('replica.fetch.max.bytes', 'int', 1048576, REPLICATION, READ_ONLY, AtLeast(0)),
    ('replica.fetch.wait.max.ms', 'int', 500, REPLICATION, READ_ONLY, None),
    ('replica.fetch.backoff.ms', 'int', 1000, REPLICATION, READ_ONLY, AtLeast(0)),
    ('replica.fetch.min.bytes', 'int', 1, REPLICATION, READ_ONLY, None),
    ('replica.fetch.response.max.bytes', 'int', 10485760, REPLICATION, READ_ONLY, AtLeast(0)),
    ('num.replica.fetchers', 'int', 1, REPLICATION, CLUSTER_WIDE, None),
    ('fetch.purgatory.purge.interval.requests', 'int', 1000, PURGATORY, READ_ONLY, None),
    ('producer.purgatory.purge.interval.requests', 'int', 1000, PURGATORY, READ_ONLY, None),
    ('delete.records.purgatory.purge.interval.requests', 'int', 1, PURGATORY, READ_ONLY, None),
    ('unclean.leader.election.interval.ms', 'long', 300000, REPLICATION, READ_ONLY, AtLeast(1)),
    ('inter.broker.protocol.version', 'string', '3.9-IV0', VERSION, READ_ONLY, None),
    ('group.coordinator.threads', 'int', 1, THREADS, READ_ONLY, AtLeast(1)),
    ('group.coordinator.append.linger.ms', 'int', 10, COORDINATOR_WRITES, READ_ONLY, AtLeast(0)),
    ('group.coordinator.new.enable', 'boolean', True, NEW_COORDINATOR, READ_ONLY, None),
    ('offsets.commit.timeout.ms', 'int', 5000, COORDINATOR_WRITES, READ_ONLY, AtLeast(1)),
    ('offsets.commit.required.acks', 'short', -1, COORDINATOR_WRITES, READ_ONLY, None),  # 3.x; gone in 4.0
    ('log.cleaner.threads', 'int', 1, THREADS, CLUSTER_WIDE, AtLeast(0)),
    ('log.cleaner.io.max.bytes.per.second', 'double', 1.7976931348623157e+308, CLEANER, CLUSTER_WIDE, None),
    ('log.cleaner.dedupe.buffer.size', 'long', 134217728, CLEANER, CLUSTER_WIDE, None),
    ('log.cleaner.io.buffer.size', 'int', 524288, CLEANER, CLUSTER_WIDE, AtLeast(0)),
    ('log.cleaner.io.buffer.load.factor', 'double', 0.9, CLEANER, CLUSTER_WIDE, None),
    ('num.recovery.threads.per.data.dir', 'int', 1, THREADS, CLUSTER_WIDE, AtLeast(1)),
    ('log.message.format.version', 'string', '3.0-IV1', VERSION, READ_ONLY, None),
    ('log.message.downconversion.enable', 'boolean', True, DOWNCONVERSION, READ_ONLY, None),
    ('log.dir.failure.timeout.ms', 'long', 30000, KRAFT, READ_ONLY, AtLeast(1)),
    ('log.initial.task.delay.ms', 'long', 30000, SCHEDULER, READ_ONLY, AtLeast(0)),
    ('group.share.enable', 'boolean', False, SHARE_ALWAYS, READ_ONLY, None),
    ('share.fetch.max.fetch.records', 'int', 2147483647, SHARE_LIMITS, READ_ONLY, None),
    ('group.share.max.groups', 'short', 10, SHARE_LIMITS, READ_ONLY, Between(1, 100)),
    ('share.fetch.purgatory.purge.interval.requests', 'int', 1000, PURGATORY, READ_ONLY, None),
    ('share.coordinator.threads', 'int', 1, THREADS, READ_ONLY, AtLeast(1)),
    ('share.coordinator.state.topic.compression.codec', 'int', 0, COMPRESSION_CODEC, READ_ONLY, None),
    ('share.coordinator.append.linger.ms', 'int', 10, COORDINATOR_WRITES, READ_ONLY, AtLeast(0)),
    ('share.coordinator.write.timeout.ms', 'int', 5000, COORDINATOR_WRITES, READ_ONLY, AtLeast(1)),
    ('controller.quorum.voters', 'list', '', KRAFT, READ_ONLY, HostPorts(with_ids=True)),
    ('controller.quorum.bootstrap.servers', 'list', '', KRAFT, READ_ONLY, HostPorts(with_ids=False)),
    ('controller.quorum.election.timeout.ms', 'int', 1000, KRAFT, READ_ONLY, None),
    ('controller.quorum.fetch.timeout.ms', 'int', 2000, KRAFT, READ_ONLY, None),
    ('controller.quorum.election.backoff.max.ms', 'int', 1000, KRAFT, READ_ONLY, None),
    ('controller.quorum.append.linger.ms', 'int', 25, KRAFT, READ_ONLY, None),
    ('controller.quorum.request.timeout.ms', 'int', 2000, KRAFT, READ_ONLY, None),
    ('controller.quorum.retry.backoff.ms', 'int', 20, KRAFT, READ_ONLY, None),
    ('metrics.num.samples', 'int', 2, METRICS, READ_ONLY, AtLeast(1)),
    ('metrics.sample.window.ms', 'long', 30000, METRICS, READ_ONLY, AtLeast(1)),
    ('metric.reporters', 'list', 'org.apache.kafka.common.metrics.JmxReporter', METRICS, CLUSTER_WIDE, None),
    ('metrics.recording.level', 'string', 'INFO', METRICS, READ_ONLY, None),
    ('kafka.metrics.reporters', 'list', '', METRICS, READ_ONLY, None),
    ('kafka.metrics.polling.interval.secs', 'int', 10, METRICS, READ_ONLY, AtLeast(1)),
    ('auto.include.jmx.reporter', 'boolean', True, METRICS, READ_ONLY, None),  # 3.x; gone in 4.0
    ('replication.quota.window.num', 'int', 11, REPLICATION, READ_ONLY, AtLeast(1)),
    ('alter.log.dirs.replication.quota.window.num', 'int', 11, REPLICATION, READ_ONLY, AtLeast(1)),
    ('controller.quota.window.num', 'int', 11, MUTATION_QUOTA, READ_ONLY, AtLeast(1)),
    ('replication.quota.window.size.seconds', 'int', 1, REPLICATION, READ_ONLY, AtLeast(1)),
    ('alter.log.dirs.replication.quota.window.size.seconds', 'int', 1, REPLICATION, READ_ONLY, AtLeast(1)),
    ('controller.quota.window.size.seconds', 'int', 1, MUTATION_QUOTA, READ_ONLY, AtLeast(1)),
    ('client.quota.callback.class', 'class', None, PLUGIN, READ_ONLY, None),
    ('security.providers', 'string', None, SSL, READ_ONLY, None),
    ('principal.builder.class', 'class',
     'org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder', PRINCIPALS, PER_BROKER,
     None),
    ('ssl.principal.mapping.rules', 'string', 'DEFAULT', SSL, READ_ONLY, None),
    ('ssl.allow.dn.changes', 'boolean', False, SSL, READ_ONLY, None),
    ('ssl.allow.san.changes', 'boolean', False, SSL, READ_ONLY, None),
    ('ssl.protocol', 'string', 'TLSv1.3', SSL, PER_BROKER, None),
    ('ssl.provider', 'string', None, SSL, PER_BROKER, None),
    ('ssl.enabled.protocols', 'list', 'TLSv1.2,TLSv1.3', SSL, PER_BROKER, None),
    ('ssl.keymanager.algorithm', 'string', 'SunX509', SSL, PER_BROKER, None),
    ('ssl.trustmanager.algorithm', 'string', 'PKIX', SSL, PER_BROKER, None),
    ('ssl.endpoint.identification.algorithm', 'string', 'https', SSL, PER_BROKER, None),
    ('ssl.secure.random.implementation', 'string', None, SSL, PER_BROKER, None),
    ('ssl.cipher.suites', 'list', '', SSL, PER_BROKER, None),
    ('ssl.engine.factory.class', 'class', None, SSL, PER_BROKER, None),
    ('sasl.mechanism.inter.broker.protocol', 'string', 'GSSAPI', INTER_BROKER_SASL, PER_BROKER, None),
    ('sasl.server.callback.handler.class', 'class', None, SASL, READ_ONLY, None),
    ('sasl.kerberos.principal.to.local.rules', 'list', 'DEFAULT', SASL, PER_BROKER, None),
    ('sasl.client.callback.handler.class', 'class', None, SASL, READ_ONLY, None),
    ('sasl.login.class', 'class', None, SASL, READ_ONLY, None),
    ('sasl.login.callback.handler.class', 'class', None, SASL, READ_ONLY, None),
    ('sasl.kerberos.service.name', 'string', None, SASL, PER_BROKER, None),
    ('sasl.kerberos.kinit.cmd', 'string', '/usr/bin/kinit', SASL, PER_BROKER, None),
    ('sasl.kerberos.ticket.renew.window.factor', 'double', 0.8, SASL, PER_BROKER, None),
    ('sasl.kerberos.ticket.renew.jitter', 'double', 0.05, SASL, PER_BROKER, None),
    ('sasl.kerberos.min.time.before.relogin', 'long', 60000, SASL, PER_BROKER, None),
    ('sasl.login.refresh.window.factor', 'double', 0.8, SASL, PER_BROKER, None),
    ('sasl.login.refresh.window.jitter', 'double', 0.05, SASL, PER_BROKER, None),
    ('sasl.login.refresh.min.period.seconds', 'short', 60, SASL, PER_BROKER, None),
    ('sasl.login.refresh.buffer.seconds', 'short', 300, SASL, PER_BROKER, None),
    ('sasl.login.connect.timeout.ms', 'int', None, SASL, READ_ONLY, None),
    ('sasl.login.read.timeout.ms', 'int', None, SASL, READ_ONLY, None),
    ('sasl.login.retry.backoff.max.ms', 'long', 10000, SASL, READ_ONLY, None),
    ('sasl.login.retry.backoff.ms', 'long', 100, SASL, READ_ONLY, None),
    ('sasl.oauthbearer.token.endpoint.url', 'string', None, SASL, READ_ONLY, None),
    ('delegation.token.secret.key', 'password', None, TOKENS, READ_ONLY, None),
    ('delegation.token.master.key', 'password', None, TOKENS, READ_ONLY, None),  # 3.x; gone in 4.0
    ('delegation.token.max.lifetime.ms', 'long', 604800000, TOKENS, READ_ONLY, AtLeast(1)),
    ('delegation.token.expiry.time.ms', 'long', 86400000, TOKENS, READ_ONLY, AtLeast(1)),
    ('delegation.token.expiry.check.interval.ms', 'long', 3600000, TOKENS, READ_ONLY, AtLeast(1)),
    ('password.encoder.secret', 'password', None, TOKENS, READ_ONLY, None),
    ('password.encoder.old.secret', 'password', None, TOKENS, READ_ONLY, None),
    ('password.encoder.keyfactory.algorithm', 'string', None, TOKENS, READ_ONLY, None),
    ('password.encoder.cipher.algorithm', 'string', 'AES/CBC/PKCS5Padding', TOKENS, READ_ONLY, None),
    ('password.encoder.key.length', 'int', 128, TOKENS, READ_ONLY, AtLeast(8)),
    ('password.encoder.iterations', 'int', 4096, TOKENS, READ_ONLY, AtLeast(1024)),)

# Kafka's key and trust store keys, which kafkapy's TLS listeners read (PEM stores only, KIP-651:
# kafkapy.server.tls_stores); kept here for their Kafka facts (types, defaults, update modes).
TLS_STORES = ("A TLS listener's key or trust store, read at start: PEM (KIP-651) or PKCS12 (not Java's JKS "
              "format). An alteration at run "
              "time is stored and described, as Kafka's per-listener reconfiguration, but the listener "
              "keeps the certificates it started with.")
TLS_STORE_TABLE: Final[tuple[tuple[str, str, Any, str, str, Validator | None], ...]] = (
    ('ssl.keystore.type', 'string', 'JKS', TLS_STORES, PER_BROKER, None),
    ('ssl.keystore.location', 'string', None, TLS_STORES, PER_BROKER, None),
    ('ssl.keystore.password', 'password', None, TLS_STORES, PER_BROKER, None),
    ('ssl.key.password', 'password', None, TLS_STORES, PER_BROKER, None),
    ('ssl.keystore.key', 'password', None, TLS_STORES, PER_BROKER, None),
    ('ssl.keystore.certificate.chain', 'password', None, TLS_STORES, PER_BROKER, None),
    ('ssl.truststore.type', 'string', 'JKS', TLS_STORES, PER_BROKER, None),
    ('ssl.truststore.location', 'string', None, TLS_STORES, PER_BROKER, None),
    ('ssl.truststore.password', 'password', None, TLS_STORES, PER_BROKER, None),
    ('ssl.truststore.certificates', 'password', None, TLS_STORES, PER_BROKER, None),
)

UPDATE_MODES: dict[str, str] = {name: mode for name, _, _, _, mode, _ in (*INERT_TABLE, *TLS_STORE_TABLE)}
# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only with a listener prefix
# (listener.name.<l>.ssl.keystore.location), never by their plain names.
LISTENER_ONLY_KEYS: frozenset[str] = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"})
# Kafka's defineInternal keys: known, but DescribeConfigs lists them only when they are set.
KAFKA_INTERNAL_KEYS: frozenset[str] = frozenset({
    'remote.log.manager.task.retry.backoff.ms',
    'remote.log.manager.task.retry.backoff.max.ms',
    'remote.log.manager.task.retry.jitter',
    'unstable.api.versions.enable',
    'unstable.feature.versions.enable',
    'metadata.log.segment.min.bytes',
    'server.max.startup.time.ms',
    'zookeeper.metadata.migration.min.batch.size',
    'unclean.leader.election.interval.ms',
    'group.coordinator.new.enable',
    'log.initial.task.delay.ms',
    'group.share.enable',
    'share.fetch.max.fetch.records',
})
