"""Every broker config key, declared once (Kafka 3.9 name, type, default, validator, importance, dynamic scope,
topic-level synonym).

The loader, DescribeConfigs, AlterConfigs and the topic config layer all read this table; nothing else names a
default. Keys marked `ignored=True` are accepted so a stock Kafka server.properties loads, but this broker does not
act on them (see IGNORED_KEYS).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.config.types import (
    DOUBLE_MAX, INT_MAX, LONG_MAX, ConfigType, Dynamic, Importance, Validator, at_least, between, list_of, one_of,
)

T = ConfigType
H, M, L = Importance.HIGH, Importance.MEDIUM, Importance.LOW
RO, PB, CW = Dynamic.READ_ONLY, Dynamic.PER_BROKER, Dynamic.CLUSTER_WIDE

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")
DEFAULT_SECURITY_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"


def inter_broker_protocol_version(name: str, value: Any) -> None:
    """Kafka's IBP forms ("3.9", "3.9-IV0", "2.6", "0.10.2-IV0"); anything else stops start-up."""
    from broker.config.ibp import InterBrokerProtocolVersion
    try:
        InterBrokerProtocolVersion.parse(str(value))
    except ValueError:
        from broker.config.types import ConfigError
        raise ConfigError(name, value, f"Version {value} is not a valid version") from None


def required_acks(name: str, value: Any) -> None:
    """[-1, 1]"""
    if value not in (-1, 1):
        from broker.config.types import ConfigError
        raise ConfigError(name, value, "must be -1 (all in-sync replicas) or 1")


def replica_selector(name: str, value: Any) -> None:
    """Only the selectors this broker implements; another class would silently change who serves reads."""
    allowed = ("org.apache.kafka.common.replica.RackAwareReplicaSelector",
               "org.apache.kafka.common.replica.LeaderSelector")
    if value is not None and str(value).strip() not in allowed:
        from broker.config.types import ConfigError
        raise ConfigError(name, value, f"Unsupported replica selector; use one of {', '.join(allowed)}")


def non_empty_string(name: str, value: Any) -> None:
    """non-empty string"""
    if value is not None and str(value) == "":
        from broker.config.types import ConfigError
        raise ConfigError(name, value, "String must be non-empty")


def remote_thread_pool_size(name: str, value: Any) -> None:
    """-1 or [1,...]"""
    if value is not None and (value < -1 or value == 0):
        from broker.config.types import ConfigError
        raise ConfigError(name, value, "Value can be -1 or greater than 0")


@dataclass(frozen=True)
class ConfigDef:
    """One broker key. `default` is already typed (None = Kafka's null default)."""

    name: str
    type: ConfigType
    default: Any
    importance: Importance
    doc: str
    validator: Validator | None = None
    dynamic: Dynamic = Dynamic.READ_ONLY
    topic_synonym: str | None = None
    ignored: bool = False

    @property
    def sensitive(self) -> bool:
        return self.type == ConfigType.PASSWORD


_DEFS: list[ConfigDef] = [
    # --- identity, listeners, ZooKeeper
    ConfigDef("broker.id", T.INT, -1, H, "Broker id; -1 asks ZooKeeper for a generated id."),
    ConfigDef("broker.id.generation.enable", T.BOOLEAN, True, M, "Generate broker ids from /brokers/seqid."),
    ConfigDef("reserved.broker.max.id", T.INT, 1000, M, "Generated ids start above this.", at_least(0)),
    ConfigDef("broker.rack", T.STRING, None, M, "Rack of the broker (rack-aware assignment)."),
    # Kafka updates the three listener keys per broker at run time; this broker binds and secures its listeners
    # from server.properties only, so AlterConfigs refuses them (broker/config/dynamic_rules.py)
    ConfigDef("listeners", T.STRING, "PLAINTEXT://:9092", H, "Comma list of NAME://host:port to bind."),
    ConfigDef("advertised.listeners", T.STRING, None, H, "Listeners published in ZooKeeper; default listeners."),
    ConfigDef("listener.security.protocol.map", T.STRING, DEFAULT_SECURITY_PROTOCOL_MAP, L,
              "Listener name -> security protocol."),
    ConfigDef("inter.broker.listener.name", T.STRING, None, M, "Listener used between brokers."),
    ConfigDef("security.inter.broker.protocol", T.STRING, "PLAINTEXT", M, "Protocol used between brokers.",
              one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    ConfigDef("zookeeper.connect", T.STRING, None, H, "host:port[,host:port][/chroot] of ZooKeeper."),
    ConfigDef("zookeeper.session.timeout.ms", T.INT, 18000, H, "ZooKeeper session timeout."),
    ConfigDef("zookeeper.connection.timeout.ms", T.INT, None, H,
              "Max wait to connect to ZooKeeper; default zookeeper.session.timeout.ms."),
    ConfigDef("zookeeper.max.in.flight.requests", T.INT, 10, H,
              "Most pipelined ZooKeeper requests unanswered at once (the controller's bulk reads and writes).",
              at_least(1)),
    ConfigDef("zookeeper.set.acl", T.BOOLEAN, False, H, "Use secure ACLs on znodes.", ignored=True),
    ConfigDef("inter.broker.protocol.version", T.STRING, "3.9-IV0", M,
              "Inter-broker protocol version: AlterPartition from 2.7, AllocateProducerIds from 3.0.",
              inter_broker_protocol_version),
    ConfigDef("log.message.format.version", T.STRING, "3.0-IV1", M, "Deprecated in 3.x.", None, RO,
              "message.format.version", ignored=True),
    # --- topics
    ConfigDef("num.partitions", T.INT, 1, M, "Default partitions for auto-created topics.", at_least(1)),
    ConfigDef("default.replication.factor", T.INT, 1, M, "Default replication factor for auto-created topics."),
    ConfigDef("auto.create.topics.enable", T.BOOLEAN, True, H, "Create topics on metadata requests."),
    ConfigDef("delete.topic.enable", T.BOOLEAN, True, H, "Allow DeleteTopics."),
    ConfigDef("min.insync.replicas", T.INT, 1, H, "Replicas needed for acks=all.", at_least(1), CW,
              "min.insync.replicas"),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, False, H, "Allow out-of-ISR leaders.", None, CW,
              "unclean.leader.election.enable"),
    # --- sockets and requests
    ConfigDef("message.max.bytes", T.INT, 1048588, H, "Largest record batch accepted.", at_least(0), CW,
              "max.message.bytes"),
    ConfigDef("socket.request.max.bytes", T.INT, 104857600, H, "Largest request frame.", at_least(1)),
    ConfigDef("socket.send.buffer.bytes", T.INT, 102400, H, "SO_SNDBUF; -1 = OS default."),
    ConfigDef("socket.receive.buffer.bytes", T.INT, 102400, H, "SO_RCVBUF; -1 = OS default."),
    ConfigDef("socket.listen.backlog.size", T.INT, 1024, M,
              "Connections the kernel queues until accepted. Default 1024, not Kafka's 50: Kafka accepts on a "
              "thread of its own, this broker on its event loop between requests, so storms wait in the queue.",
              at_least(1)),
    ConfigDef("connections.max.idle.ms", T.LONG, 600000, M, "Close idle connections after this."),
    ConfigDef("max.connections", T.INT, INT_MAX, M, "Max connections per broker.", at_least(0), CW),
    ConfigDef("max.connections.per.ip", T.INT, INT_MAX, M, "Max connections per IP.", at_least(0), CW),
    ConfigDef("fetch.max.bytes", T.INT, 57671680, M, "Max bytes in one fetch response.", at_least(1024)),
    ConfigDef("max.incremental.fetch.session.cache.slots", T.INT, 1000, M, "Incremental fetch sessions kept.",
              at_least(0)),
    ConfigDef("queued.max.requests", T.INT, 500, H, "Request queue size.", at_least(1), ignored=True),
    ConfigDef("num.network.threads", T.INT, 3, H, "Network threads (asyncio here).", at_least(1), CW,
              ignored=True),
    ConfigDef("num.io.threads", T.INT, 8, H, "Request handler threads.", at_least(1), CW, ignored=True),
    ConfigDef("background.threads", T.INT, 10, H, "Background threads.", at_least(1), CW, ignored=True),
    ConfigDef("num.replica.fetchers", T.INT, 1, H, "Replica fetchers per source broker.", at_least(1), CW),
    ConfigDef("num.recovery.threads.per.data.dir", T.INT, 1, H,
              "Threads per log dir loading (and after a crash recovering) the logs at start-up.", at_least(1), CW),
    ConfigDef("quota.window.num", T.INT, 11, L, "Samples kept for client quotas.", at_least(1)),
    ConfigDef("quota.window.size.seconds", T.INT, 1, L, "Time span of each quota sample.", at_least(1)),
    ConfigDef("replication.quota.window.num", T.INT, 11, L, "Samples kept for replication quotas.", at_least(1)),
    ConfigDef("replication.quota.window.size.seconds", T.INT, 1, L, "Time span of each replication quota sample.",
              at_least(1)),
    ConfigDef("alter.log.dirs.replication.quota.window.num", T.INT, 11, L,
              "Samples kept for alter log dirs replication quotas.", at_least(1)),
    ConfigDef("alter.log.dirs.replication.quota.window.size.seconds", T.INT, 1, L,
              "Time span of each alter log dirs replication quota sample.", at_least(1)),
    # dynamic-only broker quotas (Kafka's QuotaConfigs.brokerQuotaConfigs); Long.MAX_VALUE = unthrottled
    ConfigDef("leader.replication.throttled.rate", T.LONG, LONG_MAX, M,
              "Bytes/s a leader serves to followers for the replicas in leader.replication.throttled.replicas.",
              at_least(0), CW),
    ConfigDef("follower.replication.throttled.rate", T.LONG, LONG_MAX, M,
              "Bytes/s a follower fetches for the replicas in follower.replication.throttled.replicas.",
              at_least(0), CW),
    ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", T.LONG, LONG_MAX, M,
              "Bytes/s copied when moving replicas between log directories of this broker.", at_least(0), CW),
    # --- log layout and segments
    ConfigDef("log.dirs", T.STRING, None, H, "Comma list of log directories; overrides log.dir."),
    ConfigDef("log.dir", T.STRING, "/tmp/kafka-logs", H, "Log directory when log.dirs is unset."),
    ConfigDef("log.segment.bytes", T.INT, 1073741824, H, "Segment size before roll.", at_least(14), CW,
              "segment.bytes"),
    ConfigDef("log.roll.ms", T.LONG, None, H, "Roll after this; overrides log.roll.hours.", None, CW, "segment.ms"),
    ConfigDef("log.roll.hours", T.INT, 168, H, "Roll after this many hours.", at_least(1), RO, "segment.ms"),
    ConfigDef("log.roll.jitter.ms", T.LONG, None, H, "Roll jitter; overrides log.roll.jitter.hours.", None, CW,
              "segment.jitter.ms"),
    ConfigDef("log.roll.jitter.hours", T.INT, 0, H, "Roll jitter in hours.", at_least(0), RO, "segment.jitter.ms"),
    ConfigDef("log.retention.ms", T.LONG, None, H, "Retention time; -1 = forever; overrides minutes/hours.", None,
              CW, "retention.ms"),
    ConfigDef("log.retention.minutes", T.INT, None, H, "Retention in minutes; overrides hours.", None, RO,
              "retention.ms"),
    ConfigDef("log.retention.hours", T.INT, 168, H, "Retention in hours.", None, RO, "retention.ms"),
    ConfigDef("log.retention.bytes", T.LONG, -1, H, "Retention size per partition; -1 = unlimited.", None, CW,
              "retention.bytes"),
    ConfigDef("log.retention.check.interval.ms", T.LONG, 300000, M, "How often retention runs.", at_least(1)),
    ConfigDef("log.local.retention.bytes", T.LONG, -2, M,
              "Tiered storage: local bytes kept per partition once tiered; -2 = retention.bytes.", at_least(-2), CW, "local.retention.bytes"),
    ConfigDef("log.local.retention.ms", T.LONG, -2, M,
              "Tiered storage: local retention time once tiered; -2 = retention.ms.", at_least(-2), CW, "local.retention.ms"),
    ConfigDef("log.index.interval.bytes", T.INT, 4096, M, "Bytes between offset index entries.", at_least(0), CW,
              "index.interval.bytes"),
    ConfigDef("log.index.size.max.bytes", T.INT, 10485760, M, "Max index file size.", at_least(4), CW,
              "segment.index.bytes"),
    ConfigDef("log.flush.interval.messages", T.LONG, LONG_MAX, H, "fsync after this many messages.", at_least(1),
              CW, "flush.messages"),
    ConfigDef("log.flush.interval.ms", T.LONG, None, H, "fsync after this long; default scheduler interval.",
              None, CW, "flush.ms"),
    ConfigDef("log.flush.scheduler.interval.ms", T.LONG, LONG_MAX, H, "How often the flusher checks logs."),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", T.INT, 60000, H, "Recovery point checkpoint interval.",
              at_least(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", T.INT, 60000, H,
              "Log start offset checkpoint interval.", at_least(0)),
    ConfigDef("log.preallocate", T.BOOLEAN, False, M, "Preallocate segment files.", None, CW, "preallocate"),
    ConfigDef("log.segment.delete.delay.ms", T.LONG, 60000, H, "Delay before deleting a segment file.", at_least(0),
              CW, "file.delete.delay.ms"),
    ConfigDef("log.initial.task.delay.ms", T.LONG, 30000, L, "Delay before the first retention run.", at_least(0)),
    ConfigDef("log.message.timestamp.type", T.STRING, "CreateTime", M, "CreateTime or LogAppendTime.",
              one_of(*TIMESTAMP_TYPES), CW, "message.timestamp.type"),
    ConfigDef("log.message.timestamp.difference.max.ms", T.LONG, LONG_MAX, M,
              "Deprecated: the before/after limit where those are left at their default.",
              at_least(0), CW, "message.timestamp.difference.max.ms"),
    ConfigDef("log.message.timestamp.before.max.ms", T.LONG, LONG_MAX, M, "Max age of a record timestamp.",
              at_least(0), CW, "message.timestamp.before.max.ms"),
    ConfigDef("log.message.timestamp.after.max.ms", T.LONG, LONG_MAX, M, "Max future skew of a record timestamp.",
              at_least(0), CW, "message.timestamp.after.max.ms"),
    ConfigDef("log.message.downconversion.enable", T.BOOLEAN, True, L, "Down-convert for old fetch versions.", None,
              CW, "message.downconversion.enable", ignored=True),
    ConfigDef("compression.type", T.STRING, "producer", H, "Final compression of a topic.",
              one_of(*COMPRESSION_TYPES), CW, "compression.type"),
    ConfigDef("compression.gzip.level", T.INT, -1, M, "gzip level.", between(-1, 9), CW, "compression.gzip.level",
              ignored=True),
    ConfigDef("compression.lz4.level", T.INT, 9, M, "lz4 level.", between(1, 17), CW, "compression.lz4.level",
              ignored=True),
    ConfigDef("compression.zstd.level", T.INT, 3, M, "zstd level.", between(-131072, 22), CW,
              "compression.zstd.level", ignored=True),
    ConfigDef("log.cleanup.policy", T.LIST, ["delete"], M, "delete and/or compact.", list_of(*CLEANUP_POLICIES), CW,
              "cleanup.policy"),
    # --- log cleaner
    ConfigDef("log.cleaner.enable", T.BOOLEAN, True, M, "Run the log cleaner (compaction)."),
    ConfigDef("log.cleaner.threads", T.INT, 1, M, "Cleaner threads.", at_least(0), CW),
    ConfigDef("log.cleaner.io.max.bytes.per.second", T.DOUBLE, DOUBLE_MAX, M, "Cleaner I/O throttle.", None, CW),
    ConfigDef("log.cleaner.dedupe.buffer.size", T.LONG, 134217728, M, "Cleaner offset map memory.", None, CW),
    ConfigDef("log.cleaner.io.buffer.size", T.INT, 524288, M, "Cleaner I/O buffer.", at_least(0), CW),
    ConfigDef("log.cleaner.io.buffer.load.factor", T.DOUBLE, 0.9, M, "Cleaner offset map load factor.", None, CW),
    ConfigDef("log.cleaner.backoff.ms", T.LONG, 15000, M, "Cleaner sleep when idle.", at_least(0), CW),
    ConfigDef("log.cleaner.min.cleanable.ratio", T.DOUBLE, 0.5, M, "Dirty ratio that triggers cleaning.",
              between(0, 1), CW, "min.cleanable.dirty.ratio"),
    ConfigDef("log.cleaner.delete.retention.ms", T.LONG, 86400000, M, "How long tombstones are kept.", at_least(0),
              CW, "delete.retention.ms"),
    ConfigDef("log.cleaner.min.compaction.lag.ms", T.LONG, 0, M, "Min age before compaction.", at_least(0), CW,
              "min.compaction.lag.ms"),
    ConfigDef("log.cleaner.max.compaction.lag.ms", T.LONG, LONG_MAX, M, "Max age before forced compaction.",
              at_least(1), CW, "max.compaction.lag.ms"),
    # --- replication and leadership
    ConfigDef("replica.lag.time.max.ms", T.LONG, 30000, H, "Followers behind this long leave the ISR."),
    ConfigDef("replica.fetch.max.bytes", T.INT, 1048576, M, "Per-partition replica fetch size.", at_least(0)),
    ConfigDef("replica.fetch.wait.max.ms", T.INT, 500, M, "Replica fetch max wait."),
    ConfigDef("replica.fetch.min.bytes", T.INT, 1, H, "Replica fetch min bytes."),
    ConfigDef("replica.fetch.response.max.bytes", T.INT, 10485760, M, "Replica fetch response size.", at_least(0)),
    ConfigDef("replica.fetch.backoff.ms", T.INT, 1000, M, "Backoff after a replica fetch error.", at_least(0)),
    ConfigDef("replica.socket.timeout.ms", T.INT, 30000, H, "Replica fetch socket timeout."),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", T.LONG, 5000, H, "HW checkpoint interval."),
    ConfigDef("replica.selector.class", T.STRING, None, M,
              "Replica selector for fetch from follower (KIP-392): RackAwareReplicaSelector or LeaderSelector.",
              replica_selector),
    ConfigDef("controller.socket.timeout.ms", T.INT, 30000, M, "Timeout of controller-to-broker requests."),
    ConfigDef("request.timeout.ms", T.INT, 30000, M, "Timeout of broker-to-controller requests."),
    ConfigDef("auto.leader.rebalance.enable", T.BOOLEAN, True, H, "Move leadership back to preferred replicas."),
    ConfigDef("leader.imbalance.check.interval.seconds", T.LONG, 300, H, "Preferred leader check interval.",
              at_least(1)),
    ConfigDef("leader.imbalance.per.broker.percentage", T.INT, 10, H, "Allowed leader imbalance."),
    ConfigDef("controlled.shutdown.enable", T.BOOLEAN, True, M, "Move leadership away before shutdown."),
    ConfigDef("controlled.shutdown.max.retries", T.INT, 3, M, "Controlled shutdown attempts."),
    ConfigDef("controlled.shutdown.retry.backoff.ms", T.LONG, 5000, M, "Backoff between attempts."),
    # --- group coordinator and __consumer_offsets
    ConfigDef("offsets.topic.num.partitions", T.INT, 50, H, "Partitions of __consumer_offsets.", at_least(1)),
    ConfigDef("offsets.topic.replication.factor", T.SHORT, 3, H, "Replication of __consumer_offsets.",
              at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", T.INT, 104857600, H, "Segment size of __consumer_offsets.",
              at_least(1)),
    ConfigDef("offsets.topic.compression.codec", T.INT, 0, H, "Compression of offset commits."),
    ConfigDef("offsets.load.buffer.size", T.INT, 5242880, H, "Read size when loading offsets.", at_least(1)),
    ConfigDef("offsets.retention.minutes", T.INT, 10080, H, "Keep offsets of empty groups this long.",
              at_least(1)),
    ConfigDef("offsets.retention.check.interval.ms", T.LONG, 600000, H, "Offset expiry check interval.",
              at_least(1)),
    ConfigDef("offsets.commit.timeout.ms", T.INT, 5000, H, "Offset commit replication wait.", at_least(1)),
    ConfigDef("offset.metadata.max.bytes", T.INT, 4096, H, "Largest metadata string of an offset commit."),
    ConfigDef("offsets.commit.required.acks", T.SHORT, -1, H, "acks of offset commit appends (deprecated).",
              required_acks),
    ConfigDef("group.initial.rebalance.delay.ms", T.INT, 3000, M, "Wait for more members on a new group."),
    ConfigDef("group.min.session.timeout.ms", T.INT, 6000, M, "Smallest session timeout allowed."),
    ConfigDef("group.max.session.timeout.ms", T.INT, 1800000, M, "Largest session timeout allowed."),
    ConfigDef("group.max.size", T.INT, INT_MAX, M, "Max members per group.", at_least(1)),
    # --- transactions and producer ids
    ConfigDef("transaction.state.log.num.partitions", T.INT, 50, H, "Partitions of __transaction_state.",
              at_least(1)),
    ConfigDef("transaction.state.log.replication.factor", T.SHORT, 3, H, "Replication of __transaction_state.",
              at_least(1)),
    ConfigDef("transaction.state.log.min.isr", T.INT, 2, H, "min.insync.replicas of __transaction_state.",
              at_least(1)),
    ConfigDef("transaction.state.log.segment.bytes", T.INT, 104857600, H, "Segment size of __transaction_state.",
              at_least(1)),
    ConfigDef("transaction.state.log.load.buffer.size", T.INT, 5242880, L, "Read size when loading.", at_least(1)),
    ConfigDef("transaction.max.timeout.ms", T.INT, 900000, H, "Largest transaction timeout.", at_least(1)),
    ConfigDef("transactional.id.expiration.ms", T.INT, 604800000, H, "Expire idle transactional ids.",
              at_least(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, 10000, L,
              "Timed-out transaction check interval.", at_least(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, 3600000, L,
              "Expired transactional id check interval.", at_least(1)),
    ConfigDef("transaction.partition.verification.enable", T.BOOLEAN, True, L,
              "Leaders verify a transactional produce with the coordinator first (KIP-890).", dynamic=CW),
    ConfigDef("producer.id.expiration.ms", T.INT, 86400000, L, "Expire idle producer ids.", at_least(1), CW),
    ConfigDef("producer.id.expiration.check.interval.ms", T.INT, 600000, L, "Producer id expiry check interval.",
              at_least(1)),
    # --- security (listener-prefixed overrides: listener.name.<listener>.<key>, see config/listener_security.py).
    #     Keys this broker does not honour stop start-up (config/security_keys.py); none is dynamic here.
    ConfigDef("ssl.protocol", T.STRING, "TLSv1.3", H, "TLS protocol of the SSLContext."),
    ConfigDef("ssl.enabled.protocols", T.LIST, ["TLSv1.2", "TLSv1.3"], M, "TLS versions accepted."),
    ConfigDef("ssl.keystore.type", T.STRING, "JKS", M, "Keystore format: JKS, PKCS12 or PEM."),
    ConfigDef("ssl.keystore.location", T.STRING, None, H, "Keystore file."),
    ConfigDef("ssl.keystore.password", T.PASSWORD, None, H, "Keystore password."),
    ConfigDef("ssl.key.password", T.PASSWORD, None, H, "Key password."),
    ConfigDef("ssl.keystore.key", T.PASSWORD, None, H, "PEM private key (inline)."),
    ConfigDef("ssl.keystore.certificate.chain", T.PASSWORD, None, H, "PEM certificate chain (inline)."),
    ConfigDef("ssl.truststore.type", T.STRING, "JKS", M, "Truststore format: JKS, PKCS12 or PEM."),
    ConfigDef("ssl.truststore.location", T.STRING, None, H, "Truststore file."),
    ConfigDef("ssl.truststore.password", T.PASSWORD, None, H, "Truststore password."),
    ConfigDef("ssl.truststore.certificates", T.PASSWORD, None, H, "PEM trusted certificates (inline)."),
    ConfigDef("ssl.client.auth", T.STRING, "none", M, "Client certificates: none, requested or required.",
              one_of("none", "requested", "required")),
    ConfigDef("ssl.cipher.suites", T.LIST, [], L, "Cipher suites (IANA names); empty = the defaults."),
    ConfigDef("ssl.endpoint.identification.algorithm", T.STRING, "https", L,
              "Host name verification of the peer's certificate (client side)."),
    ConfigDef("ssl.principal.mapping.rules", T.STRING, "DEFAULT", L, "DN -> principal name rules."),
    ConfigDef("ssl.keymanager.algorithm", T.STRING, "SunX509", L, "Java key manager algorithm (informational).",
              one_of("SunX509", "PKIX", "NewSunX509")),
    ConfigDef("ssl.trustmanager.algorithm", T.STRING, "PKIX", L, "Java trust manager algorithm (informational).",
              one_of("PKIX", "SunX509")),
    ConfigDef("sasl.enabled.mechanisms", T.LIST, ["GSSAPI"], M, "SASL mechanisms enabled on SASL listeners."),
    ConfigDef("sasl.mechanism.inter.broker.protocol", T.STRING, "GSSAPI", M, "SASL mechanism between brokers."),
    ConfigDef("sasl.jaas.config", T.PASSWORD, None, M, "JAAS login context (use listener-prefixed forms)."),
    ConfigDef("sasl.server.max.receive.size", T.INT, 524288, L, "Largest SASL token before authentication."),
    ConfigDef("connections.max.reauth.ms", T.LONG, 0, M, "Session lifetime before re-authentication (KIP-368).",
              at_least(0)),
    ConfigDef("connection.failed.authentication.delay.ms", T.INT, 100, L,
              "Delay before answering a failed authentication.", at_least(0)),
    ConfigDef("authorizer.class.name", T.STRING, "", L, "Authorizer class."),
    ConfigDef("principal.builder.class", T.CLASS,
              "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", M,
              "Principal builder."),
    ConfigDef("super.users", T.STRING, None, M, "Semicolon-separated principals allowed everything."),
    ConfigDef("allow.everyone.if.no.acl.found", T.BOOLEAN, False, M,
              "AclAuthorizer: allow a resource that has no ACL at all."),
    ConfigDef("delegation.token.secret.key", T.PASSWORD, None, M, "Secret that signs delegation tokens."),
    ConfigDef("delegation.token.master.key", T.PASSWORD, None, L, "Deprecated name of the token secret."),
    ConfigDef("delegation.token.max.lifetime.ms", T.LONG, 604800000, M, "Longest token lifetime.", at_least(1)),
    ConfigDef("delegation.token.expiry.time.ms", T.LONG, 86400000, M, "Token renew interval.", at_least(1)),
    ConfigDef("delegation.token.expiry.check.interval.ms", T.LONG, 3600000, L, "Expired token scan interval.",
              at_least(1)),
    ConfigDef("max.connections.per.ip.overrides", T.STRING, "", M, "ip:count,... per-IP connection limits.",
              dynamic=CW),
    ConfigDef("max.connection.creation.rate", T.INT, INT_MAX, M, "New connections per second per listener.",
              at_least(0), CW),
    ConfigDef("metric.reporters", T.LIST, [], L, "Metric reporter classes.", dynamic=CW, ignored=True),
    # --- tiered storage (KIP-405; Kafka's RemoteLogManagerConfig), run by broker/replica/tiered_storage.py. The keys
    #     still marked ignored have no meaning here (Java class paths).
    ConfigDef("remote.log.storage.system.enable", T.BOOLEAN, False, M,
              "Tiered storage on this broker (KIP-405): the RemoteLogManager copies rolled segments of topics with "
              "remote.storage.enable=true to the RemoteStorageManager and serves reads from there."),
    ConfigDef("remote.log.storage.manager.class.name", T.STRING, None, M,
              "RemoteStorageManager: Kafka's org.apache.kafka.server.log.remote.storage.LocalTieredStorage (the "
              "built-in local-directory one) or broker.storage.remote.S3RemoteStorageManager.", non_empty_string),
    ConfigDef("remote.log.storage.manager.class.path", T.STRING, None, M,
              "Class path of the RemoteStorageManager (Java only; no meaning for the built-in ones).", ignored=True),
    ConfigDef("remote.log.storage.manager.impl.prefix", T.STRING, "rsm.config.", M,
              "Prefix of the keys passed to the RemoteStorageManager.", non_empty_string),
    ConfigDef("remote.log.metadata.manager.class.name", T.STRING,
              "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager", M,
              "RemoteLogMetadataManager: the topic-based one (__remote_log_metadata), the only one built in.",
              non_empty_string),
    ConfigDef("remote.log.metadata.manager.class.path", T.STRING, None, M,
              "Class path of the RemoteLogMetadataManager (Java only).", ignored=True),
    ConfigDef("remote.log.metadata.manager.impl.prefix", T.STRING, "rlmm.config.", M,
              "Prefix of the keys passed to the RemoteLogMetadataManager.", non_empty_string),
    ConfigDef("remote.log.metadata.manager.listener.name", T.STRING, None, M,
              "Listener the metadata manager's clients use to reach the local broker.", non_empty_string,
              ignored=True),
    ConfigDef("remote.log.metadata.custom.metadata.max.bytes", T.INT, 128, L,
              "Largest custom metadata a RemoteStorageManager may return for a copied segment.", at_least(0),
              ignored=True),
    ConfigDef("remote.log.index.file.cache.total.size.bytes", T.LONG, 1073741824, L,
              "Disk space of the cache of indexes fetched from remote storage (RemoteIndexCache).", at_least(1), CW),
    ConfigDef("remote.log.manager.thread.pool.size", T.INT, 10, M,
              "Deprecated: threads of the follower tasks, and the copier and expiration pools' size when those are "
              "-1.", at_least(1)),
    ConfigDef("remote.log.manager.copier.thread.pool.size", T.INT, -1, M,
              "Threads copying segments to remote storage; -1 = remote.log.manager.thread.pool.size.",
              remote_thread_pool_size),
    ConfigDef("remote.log.manager.expiration.thread.pool.size", T.INT, -1, M,
              "Threads expiring remote segments; -1 = remote.log.manager.thread.pool.size.", remote_thread_pool_size),
    ConfigDef("remote.log.manager.task.interval.ms", T.LONG, 30000, L,
              "Fixed delay between two runs of a partition's copy, expiration or follower task.", at_least(1)),
    ConfigDef("remote.log.manager.copy.max.bytes.per.second", T.LONG, LONG_MAX, M,
              "Copy quota of the broker, bytes/s.", at_least(1), CW),
    ConfigDef("remote.log.manager.copy.quota.window.num", T.INT, 11, M, "Samples kept for the copy quota.",
              at_least(1)),
    ConfigDef("remote.log.manager.copy.quota.window.size.seconds", T.INT, 1, M,
              "Time span of each copy quota sample.", at_least(1)),
    ConfigDef("remote.log.manager.fetch.max.bytes.per.second", T.LONG, LONG_MAX, M,
              "Remote read quota of the broker, bytes/s.", at_least(1), CW),
    ConfigDef("remote.log.manager.fetch.quota.window.num", T.INT, 11, M, "Samples kept for the fetch quota.",
              at_least(1)),
    ConfigDef("remote.log.manager.fetch.quota.window.size.seconds", T.INT, 1, M,
              "Time span of each fetch quota sample.", at_least(1)),
    ConfigDef("remote.log.reader.threads", T.INT, 10, M, "Threads reading remote segments for fetches.",
              at_least(1)),
    ConfigDef("remote.log.reader.max.pending.tasks", T.INT, 100, M, "Remote reads queued before refusing more.",
              at_least(1)),
    ConfigDef("remote.fetch.max.wait.ms", T.INT, 500, M,
              "Longest wait of a fetch parked on a remote read (DelayedRemoteFetch).", at_least(1), CW),
    # --- project-only keys (Kafka has none of these): the vendor prefix "broker." followed by a word Kafka's own
    # broker.* keys (broker.id, broker.rack, ...) never use
    ConfigDef("broker.metrics.prometheus.port", T.INT, None, M,
              "Project-only: port of the Prometheus metrics endpoint (docs/metrics.md); null = no endpoint, "
              "0 = any free port.", between(0, 65535)),
    ConfigDef("broker.metrics.prometheus.host", T.STRING, "", L,
              "Project-only: address the Prometheus metrics endpoint binds; empty = every interface."),
    ConfigDef("broker.fd.reserve", T.INT, -1, M,
              "Project-only: file descriptors new client connections may never take, kept for ZooKeeper, "
              "replication, the controller and log segments (the inter-broker listener may use half of them); "
              "-1 = 5% of the open file limit, at least 256 (docs/descriptors.md).", at_least(-1), PB),
    ConfigDef("broker.storage.segment.file.cache.size", T.INT, 1024, M,
              "Project-only: most inactive segment data files held open at once (opened on demand beyond it).",
              at_least(16)),
]

BROKER_CONFIGS: dict[str, ConfigDef] = {}
for _d in _DEFS:
    assert _d.name not in BROKER_CONFIGS, _d.name
    BROKER_CONFIGS[_d.name] = _d

#: Keys accepted (no warning) but not acted on by this broker.
IGNORED_KEYS: frozenset[str] = frozenset(d.name for d in _DEFS if d.ignored)

#: topic key -> broker keys in precedence order (Kafka's ServerTopicConfigSynonyms); the unit factor converts the
#: broker value into the topic unit (ms).
TOPIC_SYNONYMS: dict[str, list[tuple[str, int]]] = {}
for _d in _DEFS:
    if _d.topic_synonym:
        factor = 3_600_000 if _d.name.endswith(".hours") else 60_000 if _d.name.endswith(".minutes") else 1
        TOPIC_SYNONYMS.setdefault(_d.topic_synonym, []).append((_d.name, factor))
# log.flush.interval.ms falls back to the scheduler interval, as KafkaConfig does.
TOPIC_SYNONYMS["flush.ms"].append(("log.flush.scheduler.interval.ms", 1))
