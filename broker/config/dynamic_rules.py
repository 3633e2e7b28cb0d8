"""Which dynamic broker configs AlterConfigs and IncrementalAlterConfigs accept, with Kafka 3.9's answers.

Kafka 3.9 (ZooKeeper mode) checks a BROKER resource's new dynamic config set, the whole set legacy AlterConfigs
sends or the stored set with IncrementalAlterConfigs' operations applied, in this order (ConfigAdminManager.preprocess,
DynamicBrokerConfig.validate, ZkAdminManager.alterBrokerConfigs); every refusal but the last two is INVALID_REQUEST:

1. Kafka's static keys (KafkaConfig keys outside DynamicConfig.Broker): ``Cannot update these configs dynamically``;
2. the SSL key/trust store keys without a ``listener.name.<l>.`` prefix: ``These security configs can be dynamically
   updated only per-listener using the listener prefix``;
3. the value types and validators of the dynamic keys (a listener-prefixed key is checked as its base key);
4. at the cluster default (resource name ""), the per-broker keys and listener-prefixed keys: ``Cannot update these
   configs at default cluster level, broker id must be specified``;
5. what the reconfigurable components refuse (``Invalid value <exception> for configuration Invalid dynamic
   configuration``): thread pools growing past double or shrinking below half, a changed non-reloadable key of an
   existing listener when a listener config changes;
6. when persisting (not with validate_only), INVALID_CONFIG: a password key (name ending in a dynamic password
   key) at the default level, or anywhere without ``password.encoder.secret`` (this broker has none).

Any other key, a custom one included, is accepted, stored in ``/config/brokers/<id>`` or ``<default>`` and
described (a key Kafka cannot type is sensitive, its value hidden). One refusal is this broker's own, after all of
Kafka's (the project rule: never silently ignore a key that protects data or access): the listener, TLS and SASL
keys Kafka reconfigures at run time (``listeners``, ``advertised.listeners``, ``listener.security.protocol.map``,
``ssl.*``, ``sasl.enabled.mechanisms``, ``sasl.jaas.config``, ``principal.builder.class``, their
``listener.name.<l>.`` forms and per-listener connection limits) are read here only from server.properties at
start-up, so setting or changing them dynamically is refused (INVALID_REQUEST) rather than stored and ignored.
The Kerberos and login-refresh tuning keys (``sasl.kerberos.*``, ``sasl.login.refresh.*``) are accepted and stored:
they tune mechanisms this broker cannot run (GSSAPI and OAUTHBEARER are refused at start-up), so they protect nothing
and weaken nothing here. Tiered storage's dynamic keys (``remote.fetch.max.wait.ms``, the copy/fetch quotas, the
index cache size, ``log.local.retention.*``) are broker keys of defs.py, dynamic cluster-wide as in Kafka; they tune
tiered storage, which a broker here never runs (``remote.log.storage.system.enable=true`` stops start-up).

The key tables below were taken from Kafka 3.9.1's jar (``KafkaConfig.configKeys``, ``DynamicConfig.Broker``,
``DynamicBrokerConfig.dynamicConfigUpdateModes``).
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from broker.config.defs import BROKER_CONFIGS
from broker.config.jvm_collections import resolved_properties_order, scala_immutable_set, scala_mutable_hash_set
from broker.config.types import (
    ConfigEntry, ConfigError, ConfigSource, ConfigSynonym, ConfigType, Dynamic, Validator, parse_value,
    to_string,
)
from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.config.kafka_config import KafkaConfig

log = logging.getLogger(__name__)
T = ConfigType

# ------------------------------------------------------------------------------------------- Kafka 3.9.1's tables
_KAFKA_TYPES_TEXT = {
    T.BOOLEAN: """
        auto.create.topics.enable auto.include.jmx.reporter auto.leader.rebalance.enable
        broker.id.generation.enable controlled.shutdown.enable delete.topic.enable
        eligible.leader.replicas.enable group.coordinator.new.enable group.share.enable log.cleaner.enable
        log.message.downconversion.enable log.preallocate remote.log.storage.system.enable ssl.allow.dn.changes
        ssl.allow.san.changes transaction.partition.verification.enable unclean.leader.election.enable
        unstable.api.versions.enable unstable.feature.versions.enable zookeeper.metadata.migration.enable
        zookeeper.set.acl zookeeper.ssl.client.enable zookeeper.ssl.crl.enable zookeeper.ssl.ocsp.enable
    """,
    T.CLASS: """
        alter.config.policy.class.name client.quota.callback.class create.topic.policy.class.name
        principal.builder.class sasl.client.callback.handler.class sasl.login.callback.handler.class
        sasl.login.class sasl.server.callback.handler.class ssl.engine.factory.class
    """,
    T.DOUBLE: """
        log.cleaner.io.buffer.load.factor log.cleaner.io.max.bytes.per.second log.cleaner.min.cleanable.ratio
        remote.log.manager.task.retry.jitter sasl.kerberos.ticket.renew.jitter
        sasl.kerberos.ticket.renew.window.factor sasl.login.refresh.window.factor
        sasl.login.refresh.window.jitter
    """,
    T.INT: """
        alter.log.dirs.replication.quota.window.num alter.log.dirs.replication.quota.window.size.seconds
        background.threads broker.heartbeat.interval.ms broker.id broker.session.timeout.ms
        compression.gzip.level compression.lz4.level compression.zstd.level
        connection.failed.authentication.delay.ms controlled.shutdown.max.retries
        controller.quorum.append.linger.ms controller.quorum.election.backoff.max.ms
        controller.quorum.election.timeout.ms controller.quorum.fetch.timeout.ms
        controller.quorum.request.timeout.ms controller.quorum.retry.backoff.ms controller.quota.window.num
        controller.quota.window.size.seconds controller.socket.timeout.ms default.replication.factor
        delete.records.purgatory.purge.interval.requests fetch.max.bytes fetch.purgatory.purge.interval.requests
        group.consumer.heartbeat.interval.ms group.consumer.max.heartbeat.interval.ms
        group.consumer.max.session.timeout.ms group.consumer.max.size group.consumer.min.heartbeat.interval.ms
        group.consumer.min.session.timeout.ms group.consumer.session.timeout.ms
        group.coordinator.append.linger.ms group.coordinator.threads group.initial.rebalance.delay.ms
        group.max.session.timeout.ms group.max.size group.min.session.timeout.ms
        group.share.delivery.count.limit group.share.heartbeat.interval.ms group.share.max.heartbeat.interval.ms
        group.share.max.record.lock.duration.ms group.share.max.session.timeout.ms
        group.share.min.heartbeat.interval.ms group.share.min.record.lock.duration.ms
        group.share.min.session.timeout.ms group.share.partition.max.record.locks
        group.share.record.lock.duration.ms group.share.session.timeout.ms
        initial.broker.registration.timeout.ms kafka.metrics.polling.interval.secs
        leader.imbalance.per.broker.percentage log.cleaner.io.buffer.size log.cleaner.threads
        log.flush.offset.checkpoint.interval.ms log.flush.start.offset.checkpoint.interval.ms
        log.index.interval.bytes log.index.size.max.bytes log.retention.hours log.retention.minutes
        log.roll.hours log.roll.jitter.hours log.segment.bytes max.connection.creation.rate max.connections
        max.connections.per.ip max.incremental.fetch.session.cache.slots max.request.partition.size.limit
        message.max.bytes metadata.log.segment.bytes metadata.log.segment.min.bytes
        metadata.max.idle.interval.ms metrics.num.samples min.insync.replicas node.id num.io.threads
        num.network.threads num.partitions num.recovery.threads.per.data.dir num.replica.alter.log.dirs.threads
        num.replica.fetchers offset.metadata.max.bytes offsets.commit.timeout.ms offsets.load.buffer.size
        offsets.retention.minutes offsets.topic.compression.codec offsets.topic.num.partitions
        offsets.topic.segment.bytes password.encoder.iterations password.encoder.key.length
        producer.id.expiration.check.interval.ms producer.id.expiration.ms
        producer.purgatory.purge.interval.requests queued.max.requests quota.window.num
        quota.window.size.seconds remote.fetch.max.wait.ms remote.log.manager.copier.thread.pool.size
        remote.log.manager.copy.quota.window.num remote.log.manager.copy.quota.window.size.seconds
        remote.log.manager.expiration.thread.pool.size remote.log.manager.fetch.quota.window.num
        remote.log.manager.fetch.quota.window.size.seconds remote.log.manager.thread.pool.size
        remote.log.metadata.custom.metadata.max.bytes remote.log.reader.max.pending.tasks
        remote.log.reader.threads replica.fetch.backoff.ms replica.fetch.max.bytes replica.fetch.min.bytes
        replica.fetch.response.max.bytes replica.fetch.wait.max.ms replica.socket.receive.buffer.bytes
        replica.socket.timeout.ms replication.quota.window.num replication.quota.window.size.seconds
        request.timeout.ms reserved.broker.max.id sasl.login.connect.timeout.ms sasl.login.read.timeout.ms
        sasl.oauthbearer.clock.skew.seconds sasl.server.max.receive.size socket.listen.backlog.size
        socket.receive.buffer.bytes socket.request.max.bytes socket.send.buffer.bytes telemetry.max.bytes
        transaction.abort.timed.out.transaction.cleanup.interval.ms transaction.max.timeout.ms
        transaction.remove.expired.transaction.cleanup.interval.ms transaction.state.log.load.buffer.size
        transaction.state.log.min.isr transaction.state.log.num.partitions transaction.state.log.segment.bytes
        transactional.id.expiration.ms zookeeper.connection.timeout.ms zookeeper.max.in.flight.requests
        zookeeper.metadata.migration.min.batch.size zookeeper.session.timeout.ms
    """,
    T.LIST: """
        controller.quorum.bootstrap.servers controller.quorum.voters group.consumer.assignors
        group.coordinator.rebalance.protocols kafka.metrics.reporters log.cleanup.policy metric.reporters
        process.roles sasl.enabled.mechanisms sasl.kerberos.principal.to.local.rules
        sasl.oauthbearer.expected.audience ssl.cipher.suites ssl.enabled.protocols zookeeper.ssl.cipher.suites
        zookeeper.ssl.enabled.protocols
    """,
    T.LONG: """
        connections.max.idle.ms connections.max.reauth.ms controlled.shutdown.retry.backoff.ms
        delegation.token.expiry.check.interval.ms delegation.token.expiry.time.ms
        delegation.token.max.lifetime.ms leader.imbalance.check.interval.seconds log.cleaner.backoff.ms
        log.cleaner.dedupe.buffer.size log.cleaner.delete.retention.ms log.cleaner.max.compaction.lag.ms
        log.cleaner.min.compaction.lag.ms log.dir.failure.timeout.ms log.flush.interval.messages
        log.flush.interval.ms log.flush.scheduler.interval.ms log.initial.task.delay.ms
        log.local.retention.bytes log.local.retention.ms log.message.timestamp.after.max.ms
        log.message.timestamp.before.max.ms log.message.timestamp.difference.max.ms log.retention.bytes
        log.retention.check.interval.ms log.retention.ms log.roll.jitter.ms log.roll.ms
        log.segment.delete.delay.ms metadata.log.max.record.bytes.between.snapshots
        metadata.log.max.snapshot.interval.ms metadata.log.segment.ms metadata.max.retention.bytes
        metadata.max.retention.ms metrics.sample.window.ms offsets.retention.check.interval.ms
        queued.max.request.bytes remote.log.index.file.cache.total.size.bytes
        remote.log.manager.copy.max.bytes.per.second remote.log.manager.fetch.max.bytes.per.second
        remote.log.manager.task.interval.ms remote.log.manager.task.retry.backoff.max.ms
        remote.log.manager.task.retry.backoff.ms replica.high.watermark.checkpoint.interval.ms
        replica.lag.time.max.ms sasl.kerberos.min.time.before.relogin sasl.login.retry.backoff.max.ms
        sasl.login.retry.backoff.ms sasl.oauthbearer.jwks.endpoint.refresh.ms
        sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
        server.max.startup.time.ms socket.connection.setup.timeout.max.ms socket.connection.setup.timeout.ms
        unclean.leader.election.interval.ms
    """,
    T.PASSWORD: """
        delegation.token.master.key delegation.token.secret.key password.encoder.old.secret
        password.encoder.secret sasl.jaas.config ssl.key.password ssl.keystore.certificate.chain
        ssl.keystore.key ssl.keystore.password ssl.truststore.certificates ssl.truststore.password
        zookeeper.ssl.keystore.password zookeeper.ssl.truststore.password
    """,
    T.SHORT: """
        group.share.max.groups group.share.max.size offsets.commit.required.acks
        offsets.topic.replication.factor sasl.login.refresh.buffer.seconds sasl.login.refresh.min.period.seconds
        transaction.state.log.replication.factor
    """,
    T.STRING: """
        advertised.listeners authorizer.class.name broker.rack compression.type control.plane.listener.name
        controller.listener.names early.start.listeners group.consumer.migration.policy
        inter.broker.listener.name inter.broker.protocol.version listener.security.protocol.map listeners
        log.dir log.dirs log.message.format.version log.message.timestamp.type max.connections.per.ip.overrides
        metadata.log.dir metrics.recording.level password.encoder.cipher.algorithm
        password.encoder.keyfactory.algorithm remote.log.metadata.manager.class.name
        remote.log.metadata.manager.class.path remote.log.metadata.manager.impl.prefix
        remote.log.metadata.manager.listener.name remote.log.storage.manager.class.name
        remote.log.storage.manager.class.path remote.log.storage.manager.impl.prefix replica.selector.class
        sasl.kerberos.kinit.cmd sasl.kerberos.service.name sasl.mechanism.controller.protocol
        sasl.mechanism.inter.broker.protocol sasl.oauthbearer.expected.issuer sasl.oauthbearer.jwks.endpoint.url
        sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name sasl.oauthbearer.token.endpoint.url
        security.inter.broker.protocol security.providers ssl.client.auth ssl.endpoint.identification.algorithm
        ssl.keymanager.algorithm ssl.keystore.location ssl.keystore.type ssl.principal.mapping.rules
        ssl.protocol ssl.provider ssl.secure.random.implementation ssl.trustmanager.algorithm
        ssl.truststore.location ssl.truststore.type zookeeper.clientCnxnSocket zookeeper.connect
        zookeeper.ssl.endpoint.identification.algorithm zookeeper.ssl.keystore.location
        zookeeper.ssl.keystore.type zookeeper.ssl.protocol zookeeper.ssl.truststore.location
        zookeeper.ssl.truststore.type
    """,
}
#: Every KafkaConfig key of Kafka 3.9.1 and its type.
KAFKA_KEY_TYPES: Dict[str, ConfigType] = {n: t for t, text in _KAFKA_TYPES_TEXT.items() for n in text.split()}

#: DynamicConfig.Broker's keys in its ConfigDef's order (the order Kafka validates values in): the three broker
#: quota keys, then KafkaConfig's dynamic keys.
KAFKA_DYNAMIC_KEYS: Tuple[str, ...] = tuple("""
    leader.replication.throttled.rate follower.replication.throttled.rate
    replica.alter.log.dirs.io.max.bytes.per.second metric.reporters log.cleaner.min.compaction.lag.ms
    log.flush.interval.messages log.local.retention.ms principal.builder.class log.flush.interval.ms
    log.cleaner.io.buffer.size ssl.engine.factory.class sasl.kerberos.ticket.renew.window.factor
    min.insync.replicas ssl.truststore.certificates num.recovery.threads.per.data.dir ssl.keystore.type
    compression.lz4.level log.cleanup.policy transaction.partition.verification.enable
    sasl.mechanism.inter.broker.protocol ssl.truststore.password log.roll.jitter.ms
    sasl.kerberos.principal.to.local.rules log.preallocate max.connections.per.ip
    ssl.endpoint.identification.algorithm background.threads message.max.bytes num.io.threads
    sasl.login.refresh.buffer.seconds remote.log.manager.fetch.max.bytes.per.second max.connection.creation.rate
    remote.log.index.file.cache.total.size.bytes ssl.truststore.type log.index.interval.bytes
    log.cleaner.backoff.ms log.segment.bytes ssl.truststore.location ssl.keystore.password
    log.message.timestamp.after.max.ms log.segment.delete.delay.ms log.cleaner.max.compaction.lag.ms
    num.replica.fetchers log.message.timestamp.before.max.ms compression.type log.retention.ms
    max.connections.per.ip.overrides log.message.timestamp.difference.max.ms sasl.login.refresh.window.factor
    sasl.login.refresh.min.period.seconds ssl.client.auth log.cleaner.delete.retention.ms log.cleaner.threads
    sasl.kerberos.kinit.cmd ssl.secure.random.implementation log.cleaner.io.max.bytes.per.second
    log.cleaner.min.cleanable.ratio sasl.kerberos.service.name sasl.kerberos.ticket.renew.jitter
    ssl.trustmanager.algorithm log.local.retention.bytes log.retention.bytes num.network.threads
    ssl.key.password sasl.jaas.config log.message.timestamp.type ssl.keystore.key
    sasl.kerberos.min.time.before.relogin compression.gzip.level max.connections compression.zstd.level
    log.message.downconversion.enable listener.security.protocol.map ssl.protocol ssl.keystore.certificate.chain
    listeners ssl.enabled.protocols ssl.provider ssl.keystore.location producer.id.expiration.ms log.roll.ms
    ssl.cipher.suites sasl.enabled.mechanisms unclean.leader.election.enable log.cleaner.io.buffer.load.factor
    remote.log.manager.copy.max.bytes.per.second log.index.size.max.bytes ssl.keymanager.algorithm
    remote.fetch.max.wait.ms advertised.listeners sasl.login.refresh.window.jitter
    log.cleaner.dedupe.buffer.size
""".split())

#: DynamicBrokerConfig.PerBrokerConfigs: settable for one broker id only.
KAFKA_PER_BROKER: frozenset = frozenset("""
    advertised.listeners listener.security.protocol.map listeners principal.builder.class
    sasl.enabled.mechanisms sasl.jaas.config sasl.kerberos.kinit.cmd sasl.kerberos.min.time.before.relogin
    sasl.kerberos.principal.to.local.rules sasl.kerberos.service.name sasl.kerberos.ticket.renew.jitter
    sasl.kerberos.ticket.renew.window.factor sasl.login.refresh.buffer.seconds
    sasl.login.refresh.min.period.seconds sasl.login.refresh.window.factor sasl.login.refresh.window.jitter
    sasl.mechanism.inter.broker.protocol ssl.cipher.suites ssl.client.auth ssl.enabled.protocols
    ssl.endpoint.identification.algorithm ssl.engine.factory.class ssl.key.password ssl.keymanager.algorithm
    ssl.keystore.certificate.chain ssl.keystore.key ssl.keystore.location ssl.keystore.password
    ssl.keystore.type ssl.protocol ssl.provider ssl.secure.random.implementation ssl.trustmanager.algorithm
    ssl.truststore.certificates ssl.truststore.location ssl.truststore.password ssl.truststore.type
""".split())

#: DynamicConfig.Broker.nonDynamicProps: refused as "Cannot update these configs dynamically".
KAFKA_STATIC: frozenset = frozenset(KAFKA_KEY_TYPES) - frozenset(KAFKA_DYNAMIC_KEYS)

#: DynamicBrokerConfig.DynamicSecurityConfigs (SslConfigs.RECONFIGURABLE_CONFIGS): only with a listener prefix.
DYNAMIC_SECURITY_CONFIGS: frozenset = frozenset({
    "ssl.keystore.type", "ssl.truststore.location", "ssl.keystore.certificate.chain", "ssl.keystore.password",
    "ssl.key.password", "ssl.keystore.location", "ssl.keystore.key", "ssl.truststore.password",
    "ssl.truststore.certificates", "ssl.truststore.type"})
#: DynamicBrokerConfig.ClusterLevelListenerConfigs: listener-prefixed forms allowed at the default level.
CLUSTER_LEVEL_LISTENER_CONFIGS: frozenset = frozenset({"max.connections", "max.connection.creation.rate",
                                                       "num.network.threads"})
#: DynamicListenerConfig.ReconfigurableConfigs: a change to one of these has Kafka re-check its listeners.
LISTENER_RECONFIGURABLE_CONFIGS: frozenset = (
    (KAFKA_PER_BROKER - {"ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates"})
    | CLUSTER_LEVEL_LISTENER_CONFIGS)
#: Listener configs an existing listener takes at run time (DynamicSecurityConfigs, SocketServer's and
#: DataPlaneAcceptor's ListenerReconfigurableConfigs); any other listener-prefixed change needs a restart.
LISTENER_RELOADABLE_CONFIGS: frozenset = DYNAMIC_SECURITY_CONFIGS | CLUSTER_LEVEL_LISTENER_CONFIGS
#: DynamicBrokerConfig.DynamicPasswordConfigs: a key whose name ends in one of these is a password.
DYNAMIC_PASSWORD_CONFIGS: Tuple[str, ...] = tuple(sorted(
    k for k in KAFKA_DYNAMIC_KEYS if KAFKA_KEY_TYPES.get(k) == T.PASSWORD))
#: DynamicBrokerConfig.ListenerMechanismConfigs: listener.name.<l>.<mechanism>.<one of these>.
LISTENER_MECHANISM_CONFIGS: Tuple[str, ...] = ("sasl.jaas.config", "sasl.login.callback.handler.class",
                                               "sasl.login.class", "sasl.server.callback.handler.class",
                                               "connections.max.reauth.ms")
#: BrokerDynamicThreadPool's keys: changed values must stay within half and double the current one.
THREAD_POOL_CONFIGS: Tuple[str, ...] = ("num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                                        "background.threads")
_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)", re.DOTALL)


def _kafka_gzip_level(name: str, value: Any) -> None:
    """[1,...,9] or -1"""
    if value is not None and value != -1 and not 1 <= value <= 9:
        raise ConfigError(name, value, "Value must be between 1 and 9 or equal to -1")


def _no_check(name: str, value: Any) -> None:
    """(none)"""


#: Where Kafka's ConfigDef validator differs from this broker's table (the value checks of step 3 are Kafka's).
_KAFKA_VALIDATORS: Dict[str, Validator] = {
    "compression.gzip.level": _kafka_gzip_level, "num.replica.fetchers": _no_check,
    "ssl.keymanager.algorithm": _no_check, "ssl.trustmanager.algorithm": _no_check}


@dataclass(frozen=True)
class KafkaOnlyKey:
    """A dynamic Kafka key this broker has no use for (typed and described as Kafka does)."""

    type: ConfigType
    default: Any
    doc: str
    validator: Optional[Validator] = None


_KERBEROS = "Kerberos login tuning (Kafka's dynamic key; stored, never used: this broker does not run GSSAPI)."
_REFRESH = ("SASL login refresh tuning (Kafka's dynamic key; stored, never used: this broker runs no OAUTHBEARER or "
            "Kerberos login).")
_JAVA_ONLY = "Java TLS plug-in (Kafka's dynamic key; refused here, at start-up and dynamically)."
#: Kafka's dynamic keys missing from BROKER_CONFIGS.
KAFKA_ONLY_DYNAMIC: Dict[str, KafkaOnlyKey] = {
    "sasl.kerberos.kinit.cmd": KafkaOnlyKey(T.STRING, "/usr/bin/kinit", _KERBEROS),
    "sasl.kerberos.min.time.before.relogin": KafkaOnlyKey(T.LONG, 60000, _KERBEROS),
    "sasl.kerberos.principal.to.local.rules": KafkaOnlyKey(T.LIST, ["DEFAULT"], _KERBEROS),
    "sasl.kerberos.service.name": KafkaOnlyKey(T.STRING, None, _KERBEROS),
    "sasl.kerberos.ticket.renew.jitter": KafkaOnlyKey(T.DOUBLE, 0.05, _KERBEROS),
    "sasl.kerberos.ticket.renew.window.factor": KafkaOnlyKey(T.DOUBLE, 0.8, _KERBEROS),
    "sasl.login.refresh.buffer.seconds": KafkaOnlyKey(T.SHORT, 300, _REFRESH),
    "sasl.login.refresh.min.period.seconds": KafkaOnlyKey(T.SHORT, 60, _REFRESH),
    "sasl.login.refresh.window.factor": KafkaOnlyKey(T.DOUBLE, 0.8, _REFRESH),
    "sasl.login.refresh.window.jitter": KafkaOnlyKey(T.DOUBLE, 0.05, _REFRESH),
    "ssl.engine.factory.class": KafkaOnlyKey(T.CLASS, None, _JAVA_ONLY),
    "ssl.provider": KafkaOnlyKey(T.STRING, None, _JAVA_ONLY),
    "ssl.secure.random.implementation": KafkaOnlyKey(T.STRING, None, _JAVA_ONLY),
}

# ------------------------------------------------------------------------------------------- this broker's keys
#: This broker's own keys that only server.properties sets (Kafka has no such keys, so it would store them).
OURS_STATIC: frozenset = frozenset(k for k, d in BROKER_CONFIGS.items()
                                   if d.dynamic == Dynamic.READ_ONLY and k not in KAFKA_KEY_TYPES)
#: This broker's own per-broker dynamic keys.
OURS_PER_BROKER: frozenset = frozenset(k for k, d in BROKER_CONFIGS.items()
                                       if d.dynamic == Dynamic.PER_BROKER and k not in KAFKA_KEY_TYPES)
#: Tuning of logins this broker cannot run (GSSAPI, OAUTHBEARER): accepted, stored, never used.
INERT_SECURITY_PREFIXES: Tuple[str, ...] = ("sasl.kerberos.", "sasl.login.refresh.")
#: Kafka's per-broker keys it reconfigures at run time that this broker reads only from server.properties.
NOT_DYNAMIC_HERE: frozenset = frozenset(k for k in KAFKA_PER_BROKER if not k.startswith(INERT_SECURITY_PREFIXES))


def listener_base(name: str) -> Optional[str]:
    """``<key>`` of ``listener.name.<listener>.<key>`` (Kafka's ListenerConfigRegex), else None."""
    m = _LISTENER_CONFIG.fullmatch(name)
    return m.group(1) if m else None


def _not_dynamic_here(name: str) -> bool:
    """Whether this broker refuses to set ``name`` dynamically (see the module docstring)."""
    base = listener_base(name)
    if base is None:
        return name in NOT_DYNAMIC_HERE
    if base.startswith(INERT_SECURITY_PREFIXES):
        return False
    return (base.startswith(("ssl.", "sasl.")) or base.endswith(LISTENER_MECHANISM_CONFIGS)
            or base in ("principal.builder.class", "max.connections", "max.connection.creation.rate"))


def is_password_config(name: str) -> bool:
    """DynamicBrokerConfig.isPasswordConfig: the name ends in a dynamic password key."""
    return name.endswith(DYNAMIC_PASSWORD_CONFIGS)


def synonym_names(name: str) -> List[str]:
    """DynamicBrokerConfig.brokerConfigSynonyms(name, matchListenerOverride = true) for a key outside the
    broker's synonym groups: a listener-prefixed key and its base (a mechanism config's base without the
    mechanism)."""
    base = listener_base(name)
    if base is None:
        return [name]
    mechanism = next((m for m in LISTENER_MECHANISM_CONFIGS if base.endswith(m)), None)
    return [name, mechanism or base]


def config_type(name: str) -> Optional[ConfigType]:
    """KafkaConfig.configType: the key's own type, else its synonyms' (None: unknown, so described as sensitive)."""
    for n in synonym_names(name):
        t = KAFKA_KEY_TYPES.get(n) or (BROKER_CONFIGS[n].type if n in BROKER_CONFIGS else None)
        if t is not None:
            return t
    return None


def _type_and_check(name: str) -> Tuple[Optional[ConfigType], Optional[Validator]]:
    if name in BROKER_CONFIGS:
        d = BROKER_CONFIGS[name]
        return d.type, _KAFKA_VALIDATORS.get(name, d.validator)
    k = KAFKA_ONLY_DYNAMIC.get(name)
    return (k.type, k.validator) if k else (None, None)


def default_string(name: str) -> Optional[str]:
    """ConfigDef.convertToString of a key's default (None when the key has none or is unknown)."""
    if name in BROKER_CONFIGS:
        d = BROKER_CONFIGS[name]
        return to_string(d.type, d.default)
    k = KAFKA_ONLY_DYNAMIC.get(name)
    return to_string(k.type, k.default) if k else None


class Refused(Exception):
    """A refused resource: the error code and message of its AlterConfigs result."""

    def __init__(self, code: int, message: Optional[str]) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _invalid_dynamic(reason: str) -> Refused:
    """A reconfigurable's refusal, as DynamicBrokerConfig.processReconfiguration wraps it
    (``new ConfigException("Invalid dynamic configuration", e)`` is the (name, value) constructor)."""
    return Refused(ErrorCode.INVALID_REQUEST, f"Invalid value org.apache.kafka.common.config.ConfigException: {reason} "
                                              f"for configuration Invalid dynamic configuration")


# ------------------------------------------------------------------------------------------- IncrementalAlterConfigs
def apply_incremental(current: Mapping[str, str], ops: Iterable[Any]) -> Dict[str, str]:
    """ConfigAdminManager.prepareIncrementalConfigs for a broker resource (SET, DELETE, APPEND, SUBTRACT; values
    already checked for null). Appending to or subtracting from a key KafkaConfig does not define fails as Kafka
    fails (a Scala map lookup: UNKNOWN_SERVER_ERROR without a message)."""
    props = dict(current)
    for op in ops:
        name, kind, value = op.name, op.config_operation, op.value
        if kind == 0:
            props[name] = value  # an existing key keeps its place in the Properties
        elif kind == 1:
            props.pop(name, None)
        else:
            if name not in KAFKA_KEY_TYPES:
                raise Refused(ErrorCode.UNKNOWN_SERVER_ERROR, None)
            if KAFKA_KEY_TYPES[name] != T.LIST:
                verb = "append" if kind == 2 else "subtract"
                raise Refused(ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {name}")
            old = props.get(name)
            if old is None:
                old = default_string(name)
            if kind == 2:
                items = _java_split(old) if old else []
                items = items + [v for v in _java_split(value) if v not in items]
            else:
                items = _java_split(old or "")
                for v in _java_split(value):  # Scala's List.diff: one occurrence per occurrence
                    if v in items:
                        items.remove(v)
            props[name] = ",".join(items)
    return props


def _java_split(text: str) -> List[str]:
    """Java's ``String.split(",")``: trailing empty strings dropped (but "" gives [""])."""
    parts = text.split(",")
    if text == "":
        return [""]
    while parts and parts[-1] == "":
        parts.pop()
    return parts


# ------------------------------------------------------------------------------------------- checks
def _check_types(props: Mapping[str, str], order: Sequence[str]) -> None:
    """DynamicBrokerConfig.validateConfigTypes: the dynamic keys' values (a listener-prefixed key as its base),
    in DynamicConfig.Broker's order, then this broker's own dynamic keys."""
    base: Dict[str, str] = {}
    for k in order:
        base[listener_base(k) or k] = props[k]
    for name in KAFKA_DYNAMIC_KEYS + tuple(sorted(OURS_PER_BROKER)):
        if name not in base:
            continue
        ctype, check = _type_and_check(name)
        if ctype is None:
            continue
        try:
            value = parse_value(name, ctype, base[name])
            if check is not None:
                check(name, value)
        except ConfigError as exc:
            raise Refused(ErrorCode.INVALID_REQUEST, str(exc)) from None


def _per_broker_keys(order: Sequence[str]) -> List[str]:
    """DynamicBrokerConfig.perBrokerConfigs: per-broker keys, then listener-prefixed ones not cluster-level."""
    first = [k for k in order if k in KAFKA_PER_BROKER or k in OURS_PER_BROKER]
    second = [k for k in order if (b := listener_base(k)) is not None and b not in CLUSTER_LEVEL_LISTENER_CONFIGS]
    return list(dict.fromkeys(first + second))


def _effective(cfg: "KafkaConfig", per_broker: Optional[Mapping[str, str]],
               default: Optional[Mapping[str, str]]) -> Dict[str, str]:
    out = dict(cfg.originals)
    out.update(cfg.dynamic_cluster_default if default is None else default)
    out.update(cfg.dynamic_per_broker if per_broker is None else per_broker)
    return out


def _int_value(eff: Mapping[str, str], name: str) -> int:
    raw = eff.get(name)
    return int(str(raw).strip()) if raw is not None else int(BROKER_CONFIGS[name].default)


def _thread_count(name: str, new: int, old: int) -> None:
    """DynamicThreadPool / DataPlaneAcceptor.validateReconfiguration."""
    if new == old:
        return
    msg = f"Dynamic thread count update validation failed for {name}={new}"
    if new <= 0:
        raise _invalid_dynamic(f"{msg}, value should be at least 1")
    if new < old // 2:
        raise _invalid_dynamic(f"{msg}, value should be at least half the current value {old}")
    if new > old * 2:
        raise _invalid_dynamic(f"{msg}, value should not be greater than double the current value {old}")


def _check_reconfigurables(cfg: "KafkaConfig", new: Dict[str, str], cur: Dict[str, str]) -> None:
    """What Kafka's reconfigurable components refuse (DynamicBrokerConfig.processReconfiguration): each existing
    listener's network thread count, the broker's thread pools, and a dynamic key of an existing listener that the
    listener cannot take at run time (checked, as Kafka does, only when some listener config changes)."""
    changed = {k for k in set(new) | set(cur) if new.get(k) != cur.get(k)}
    if not changed:
        return
    listeners = [e.listener_name for e in cfg.listeners]
    for name in listeners:  # DataPlaneAcceptor (a ListenerReconfigurable): num.network.threads of the listener
        key = f"listener.name.{name.lower()}.num.network.threads"
        if new.get(key, new.get("num.network.threads")) != cur.get(key, cur.get("num.network.threads")):
            old_v = _int_value(cur, key if key in cur else "num.network.threads")
            _thread_count("num.network.threads", _int_value(new, key if key in new else "num.network.threads"),
                          old_v)
    if changed & set(THREAD_POOL_CONFIGS):  # BrokerDynamicThreadPool
        for name in THREAD_POOL_CONFIGS:
            _thread_count(name, _int_value(new, name), _int_value(cur, name))
    if changed & LISTENER_RECONFIGURABLE_CONFIGS:  # DynamicListenerConfig
        for name in listeners:
            prefix = f"listener.name.{name.lower()}."

            def immutable(eff: Mapping[str, str]) -> Dict[str, str]:
                return {k[len(prefix):]: v for k, v in eff.items() if k.startswith(prefix) and len(k) > len(prefix)
                        and k[len(prefix):] not in LISTENER_RELOADABLE_CONFIGS}

            # Kafka compares with the server's KafkaConfig through AbstractConfig.originalsWithPrefix(prefix, strip),
            # which KafkaConfig does not route to its current config: the server.properties keys alone
            if immutable(new) != immutable(cfg.originals):
                raise _invalid_dynamic(f"Configs cannot be updated dynamically for existing listener "
                                       f"ListenerName({name}), restart broker or create a new listener for update")


def validate(props: Mapping[str, str], per_broker: bool, cfg: "KafkaConfig") -> None:
    """Kafka's checks of a broker resource's new dynamic set (steps 1-5 of the module docstring), in Kafka's order,
    ``props`` in the order its keys went into Kafka's Properties. Raises Refused (INVALID_REQUEST)."""
    order = resolved_properties_order(props)
    static = [k for k in order if k in KAFKA_STATIC or k in OURS_STATIC]
    if static:
        raise Refused(ErrorCode.INVALID_REQUEST,
                      f"Cannot update these configs dynamically: {scala_immutable_set(static)}")
    unprefixed = [k for k in order if k in DYNAMIC_SECURITY_CONFIGS]
    if unprefixed:
        raise Refused(ErrorCode.INVALID_REQUEST, "These security configs can be dynamically updated only per-listener "
                      f"using the listener prefix: {scala_mutable_hash_set(unprefixed)}")
    _check_types(props, order)
    if not per_broker and (keys := _per_broker_keys(order)):
        raise Refused(ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, broker id must "
                      f"be specified: {scala_immutable_set(keys)}")
    applied = applicable(props)
    new = _effective(cfg, applied, None) if per_broker else _effective(cfg, None, applied)
    _check_reconfigurables(cfg, new, _effective(cfg, None, None))


def check_persistable(props: Mapping[str, str], per_broker: bool, resource_name: str) -> None:
    """DynamicBrokerConfig.toPersistentProps: a password key cannot be stored at the default level, and needs
    ``password.encoder.secret`` (which this broker does not have) per broker. Raises Refused (INVALID_CONFIG)."""
    if any(is_password_config(k) for k in props):
        reason = "Password encoder secret not configured" if per_broker else \
            "Password config can be defined only at broker level"
        resource = f"ConfigResource(type=BROKER, name='{resource_name}')"
        raise Refused(ErrorCode.INVALID_CONFIG, f"Invalid config value for resource {resource}: {reason}")


def check_applied_here(props: Mapping[str, str], stored: Mapping[str, str]) -> None:
    """This broker's own refusal (after all of Kafka's): listener, TLS and SASL keys set or changed dynamically.
    Removing one, or sending it back unchanged, is allowed. Raises Refused (INVALID_REQUEST)."""
    refused = [k for k in resolved_properties_order(props) if _not_dynamic_here(k) and stored.get(k) != props[k]]
    if refused:
        raise Refused(ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: "
                      f"{scala_immutable_set(refused)} (this broker applies listener, TLS and SASL settings from "
                      f"server.properties, at start-up only)")


def applicable(props: Mapping[str, str]) -> Dict[str, str]:
    """The part of a stored dynamic set this broker applies: without the keys it reads only from server.properties
    (stored by Kafka or an older version of this broker; never applied, so never less protected than the file)."""
    return {k: v for k, v in props.items() if not _not_dynamic_here(k)}


def from_persistent(stored: Mapping[str, str], per_broker: bool) -> Tuple[Dict[str, str], List[str]]:
    """DynamicBrokerConfig.fromPersistentProps: the stored set without what Kafka ignores in it (invalid values,
    static keys, unprefixed key/trust store keys, per-broker keys at the default level, passwords it cannot decode:
    all of them here, without a password encoder); the second item is Kafka's error lines for what was dropped."""
    props = dict(stored)
    errors: List[str] = []
    invalid = []
    for k, v in props.items():
        try:
            _check_types({k: v}, [k])
        except Refused:
            invalid.append(k)
    if invalid:
        errors.append(f"Dynamic {'broker' if per_broker else 'default cluster'} config contains invalid values in: "
                      f"{scala_immutable_set(invalid)}, these configs will be ignored")

    def drop(keys: List[str], message: str, mutable: bool = False) -> None:
        if keys:
            for k in keys:
                props.pop(k, None)
            errors.append(f"{message}: {scala_mutable_hash_set(keys) if mutable else scala_immutable_set(keys)}")

    for k in invalid:
        props.pop(k, None)
    order = resolved_properties_order(props)
    drop([k for k in order if k in KAFKA_STATIC or k in OURS_STATIC],
         "Non-dynamic configs configured in ZooKeeper will be ignored")
    drop([k for k in order if k in DYNAMIC_SECURITY_CONFIGS],
         "Security configs can be dynamically updated only using listener prefix, base configs will be ignored",
         mutable=True)
    if not per_broker:
        drop(_per_broker_keys(resolved_properties_order(props)),
             "Per-broker configs defined at default cluster level will be ignored")
    for k in [k for k in props if is_password_config(k)]:
        props.pop(k)
        errors.append(f"Dynamic password config {k} could not be decoded, ignoring.")
    return props, errors


def layer_to_apply(stored: Mapping[str, str], per_broker: bool, what: str) -> Dict[str, str]:
    """The dynamic layer a broker applies from a stored set (start-up and change notifications), logging what it
    leaves out as Kafka does, and the listener, TLS and SASL keys this broker reads only from server.properties."""
    kept, errors = from_persistent(stored, per_broker)
    for line in errors:
        log.error("%s", line)
    applied = applicable(kept)
    skipped = [k for k in kept if k not in applied]
    if skipped:
        log.error("Dynamic %s configs that this broker applies only from server.properties will be ignored: %s",
                  what, ", ".join(skipped))
    return applied


def redacted(props: Mapping[str, str]) -> str:
    """``{k=v, ...}`` for a log line, the values of keys Kafka would describe as sensitive (passwords and keys it
    cannot type) redacted as Kafka's ConfigUtils.configMapToRedactedString does."""
    def shown(k: str, v: str) -> str:
        t = config_type(k)
        return "(redacted)" if t is None or t == T.PASSWORD else v
    return "{" + ", ".join(f"{k}={shown(k, v)}" for k, v in sorted(props.items())) + "}"


# ------------------------------------------------------------------------------------------- DescribeConfigs
def extra_broker_entries(cfg: "KafkaConfig") -> List[ConfigEntry]:
    """DescribeConfigs entries, as Kafka's ConfigHelper gives them, for the keys of a broker's layers (dynamic
    per-broker and default, server.properties) that BROKER_CONFIGS does not list: custom keys (sensitive, type
    UNKNOWN, read-only), listener-prefixed keys (typed as their base key, with its synonyms), and Kafka's dynamic
    keys this broker accepts but has no use for (Kerberos and login refresh tuning), set or not."""
    layers: List[Tuple[Mapping[str, Any], ConfigSource]] = [
        (cfg.dynamic_per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (cfg.dynamic_cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (cfg.originals, ConfigSource.STATIC_BROKER_CONFIG)]
    names = dict.fromkeys([k for layer, _ in layers for k in layer if k not in BROKER_CONFIGS]
                          + [k for k in KAFKA_ONLY_DYNAMIC if not _not_dynamic_here(k)])
    out = []
    for name in sorted(names):
        ctype = config_type(name)
        sensitive = ctype is None or ctype == T.PASSWORD
        synonyms: List[ConfigSynonym] = []
        for layer, source in layers:
            for n in synonym_names(name):
                if n in layer:
                    synonyms.append(ConfigSynonym(n, None if sensitive else str(layer[n]), source))
        for n in synonym_names(name):
            default = default_string(n)
            if default is not None:
                synonyms.append(ConfigSynonym(n, None if sensitive else default, ConfigSource.DEFAULT_CONFIG))
        while synonyms and synonyms[0].name != name:
            synonyms.pop(0)
        raw = next((str(layer[name]) for layer, _ in layers if name in layer), default_string(name))
        value: Optional[str] = None
        if not sensitive and raw is not None:
            value = raw
            known = KAFKA_ONLY_DYNAMIC.get(name)
            if known is not None:  # a defined key: Kafka shows its parsed value
                try:
                    value = to_string(known.type, parse_value(name, known.type, raw))
                except ConfigError:
                    pass
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        doc = KAFKA_ONLY_DYNAMIC[name].doc if name in KAFKA_ONLY_DYNAMIC else None
        out.append(ConfigEntry(name, value, source, sensitive, name not in KAFKA_DYNAMIC_KEYS, ctype or T.UNKNOWN,
                               tuple(synonyms), doc))
    return out


__all__ = ["Refused", "apply_incremental", "validate", "check_persistable", "check_applied_here", "applicable",
           "from_persistent", "layer_to_apply", "extra_broker_entries", "redacted", "is_password_config",
           "listener_base", "KAFKA_KEY_TYPES", "KAFKA_DYNAMIC_KEYS", "KAFKA_STATIC", "KAFKA_PER_BROKER",
           "KAFKA_ONLY_DYNAMIC"]
