"""The table of served APIs: (API key, handler, version range), and the collaborators each handler gets.

This is the one place that knows every collaborator of the API layer (:class:`ApiServices`);
each handler is bound to exactly the ones it names as keyword arguments, so no handler sees an
untyped "broker" object. ApiVersions is built from the resulting registry.

Access control: every handler that takes an ``authz`` keyword gets :attr:`ApiServices.authz`, and with an
authorizer configured the APIs Kafka authorizes as a whole are wrapped in their guard (``broker.api.access``);
without one the registry holds the bare handlers.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from broker.api import (alter_replica_log_dirs, api_versions, client_quotas, configs, create_partitions,
                        create_topics, delete_records, delete_topics, describe_cluster, describe_log_dirs,
                        describe_producers, fetch, init_producer_id, list_offsets, metadata, offset_for_leader_epoch,
                        produce)
from broker.api import (delete_groups, describe_groups, find_coordinator, heartbeat, join_group,  # group coordinator
                        leave_group, list_groups, offset_commit, offset_delete, offset_fetch, sync_group,
                        txn_offset_commit)
from broker.api import (allocate_producer_ids, alter_partition, alter_partition_reassignments,  # inter-broker
                        controlled_shutdown, elect_leaders, leader_and_isr, list_partition_reassignments,
                        stop_replica, update_features, update_metadata, write_txn_markers)
from broker.api import sasl_apis
from broker.api import consumer_group_describe, consumer_group_heartbeat, envelope  # as a 3.9 ZooKeeper-mode broker
from broker.api import (add_offsets_to_txn, add_partitions_to_txn, describe_transactions,  # transactions
                        end_txn, list_transactions)
from broker.api import access, acls  # authorization
from broker.api import delegation_tokens, user_scram_credentials  # SCRAM credentials, tokens
from broker.api.authz import Authz
from broker.api.metadata_answers import MetadataAnswers
from broker.api.registry import ApiRegistry
from broker.protocol.api import ApiKey

if TYPE_CHECKING:
    from broker.api.fetch_session import FetchSessionCache
    from broker.api.throttling import RequestThrottler
    from broker.cluster.client_quota_admin import ClientQuotaAdmin
    from broker.cluster.delegation_token_manager import DelegationTokenManager
    from broker.cluster.scram_credential_admin import ScramCredentialAdmin
    from broker.cluster.admin import AdminManager
    from broker.cluster.controller import KafkaController
    from broker.cluster.dynamic_config import DynamicConfigManager
    from broker.cluster.metadata_cache import MetadataCache
    from broker.config.dynamic import DynamicBrokerConfig
    from broker.coordinator.group.service import GroupCoordinator
    from broker.coordinator.producer_ids import ProducerIdManager
    from broker.coordinator.transaction.service import TransactionCoordinator
    from broker.quota.client_quota_manager import QuotaManagers
    from broker.replica.manager import ReplicaManager
    from broker.replica.produce_verification import ProduceVerification


@dataclass(frozen=True)
class ApiServices:
    """The broker's components that API handlers may use (built by ``server.py``)."""

    config: "DynamicBrokerConfig"
    metadata: "MetadataCache"
    replica_manager: "ReplicaManager"
    admin: "AdminManager"
    group_coordinator: "GroupCoordinator"
    producer_ids: "ProducerIdManager"
    fetch_sessions: "FetchSessionCache"
    controller: "KafkaController"
    dynamic_config: "DynamicConfigManager"
    #: this broker's current epoch (czxid of its registration): controller requests for an older one are stale
    broker_epoch: Callable[[], int]
    quotas: "QuotaManagers"
    throttler: "RequestThrottler"
    client_quotas: "ClientQuotaAdmin"
    #: access control (allows everything unless an authorizer is configured)
    authz: Authz = field(default_factory=Authz)
    #: users' SCRAM credentials in /config/users (None: Describe/AlterUserScramCredentials not served)
    scram_credentials: Optional["ScramCredentialAdmin"] = None
    #: delegation tokens (None: the four token APIs not served)
    delegation_tokens: Optional["DelegationTokenManager"] = None
    #: the transaction coordinator (None: the transaction APIs not served, transactional ids not coordinated)
    txn_coordinator: Optional["TransactionCoordinator"] = None
    #: KIP-890 verification of transactional produce (None: appends unverified)
    produce_verification: Optional["ProduceVerification"] = None


def build_registry(s: ApiServices) -> ApiRegistry:
    reg = ApiRegistry()

    def add(key: ApiKey, fn: Any, lo: int, hi: int, **collaborators: Any) -> None:
        if "authz" not in collaborators and "authz" in inspect.signature(fn).parameters:
            collaborators["authz"] = s.authz
        reg.register(key, key.name, lo, hi, access.guard(key, functools.partial(fn, **collaborators), s.authz))

    def mod(key: ApiKey, m: Any, **collaborators: Any) -> None:
        add(key, m.handle, m.MIN_VERSION, m.MAX_VERSION, **collaborators)

    rm, md, gc = s.replica_manager, s.metadata, s.group_coordinator
    mod(ApiKey.PRODUCE, produce, replica_manager=rm, metadata=md, verification=s.produce_verification)
    mod(ApiKey.FETCH, fetch, replica_manager=rm, metadata=md, fetch_sessions=s.fetch_sessions, throttler=s.throttler)
    mod(ApiKey.LIST_OFFSETS, list_offsets, replica_manager=rm)
    mod(ApiKey.METADATA, metadata, metadata=md, admin=s.admin, config=s.config, answers=MetadataAnswers(md))
    mod(ApiKey.API_VERSIONS, api_versions, registry=reg)
    mutations = s.quotas.controller_mutation
    mod(ApiKey.CREATE_TOPICS, create_topics, admin=s.admin, config=s.config, controller=s.controller,
        mutation_quota=mutations)
    mod(ApiKey.DELETE_TOPICS, delete_topics, admin=s.admin, metadata=md, controller=s.controller, config=s.config,
        mutation_quota=mutations)
    mod(ApiKey.DELETE_RECORDS, delete_records, replica_manager=rm)
    mod(ApiKey.INIT_PRODUCER_ID, init_producer_id, producer_ids=s.producer_ids, txn_coordinator=s.txn_coordinator)
    mod(ApiKey.OFFSET_FOR_LEADER_EPOCH, offset_for_leader_epoch, replica_manager=rm)
    mod(ApiKey.DESCRIBE_LOG_DIRS, describe_log_dirs, replica_manager=rm, config=s.config)
    mod(ApiKey.ALTER_REPLICA_LOG_DIRS, alter_replica_log_dirs, replica_manager=rm)
    mod(ApiKey.CREATE_PARTITIONS, create_partitions, admin=s.admin, controller=s.controller, metadata=md,
        mutation_quota=mutations)
    add(ApiKey.DESCRIBE_CLIENT_QUOTAS, client_quotas.describe, client_quotas.DESCRIBE_MIN, client_quotas.DESCRIBE_MAX,
        admin=s.client_quotas)
    add(ApiKey.ALTER_CLIENT_QUOTAS, client_quotas.alter, client_quotas.ALTER_MIN, client_quotas.ALTER_MAX,
        admin=s.client_quotas)
    mod(ApiKey.DESCRIBE_CLUSTER, describe_cluster, metadata=md)
    mod(ApiKey.DESCRIBE_PRODUCERS, describe_producers, replica_manager=rm)
    # group coordinator (classic protocol)
    mod(ApiKey.FIND_COORDINATOR, find_coordinator, coordinator=gc, metadata=md, txn_coordinator=s.txn_coordinator)
    mod(ApiKey.JOIN_GROUP, join_group, coordinator=gc)
    mod(ApiKey.SYNC_GROUP, sync_group, coordinator=gc)
    mod(ApiKey.HEARTBEAT, heartbeat, coordinator=gc)
    mod(ApiKey.LEAVE_GROUP, leave_group, coordinator=gc)
    mod(ApiKey.OFFSET_COMMIT, offset_commit, coordinator=gc, metadata=md)
    mod(ApiKey.OFFSET_FETCH, offset_fetch, coordinator=gc)
    mod(ApiKey.DESCRIBE_GROUPS, describe_groups, coordinator=gc)
    mod(ApiKey.LIST_GROUPS, list_groups, coordinator=gc)
    mod(ApiKey.DELETE_GROUPS, delete_groups, coordinator=gc)
    mod(ApiKey.OFFSET_DELETE, offset_delete, coordinator=gc, metadata=md)
    mod(ApiKey.TXN_OFFSET_COMMIT, txn_offset_commit, coordinator=gc, metadata=md)
    # KIP-848 and KIP-590 forwarding need KRaft: advertised and refused the way Kafka 3.9 in ZooKeeper mode does
    mod(ApiKey.CONSUMER_GROUP_HEARTBEAT, consumer_group_heartbeat)
    mod(ApiKey.CONSUMER_GROUP_DESCRIBE, consumer_group_describe)
    mod(ApiKey.ENVELOPE, envelope)
    # transaction coordinator
    if s.txn_coordinator is not None:
        tc = s.txn_coordinator
        mod(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_to_txn, txn_coordinator=tc, metadata=md)
        mod(ApiKey.ADD_OFFSETS_TO_TXN, add_offsets_to_txn, txn_coordinator=tc, group_coordinator=gc)
        mod(ApiKey.END_TXN, end_txn, txn_coordinator=tc)
        mod(ApiKey.DESCRIBE_TRANSACTIONS, describe_transactions, txn_coordinator=tc)
        mod(ApiKey.LIST_TRANSACTIONS, list_transactions, txn_coordinator=tc)
    # inter-broker: controller -> broker
    mod(ApiKey.LEADER_AND_ISR, leader_and_isr, replica_manager=rm, broker_epoch=s.broker_epoch,
        topic_configs=s.dynamic_config)
    mod(ApiKey.STOP_REPLICA, stop_replica, replica_manager=rm, broker_epoch=s.broker_epoch)
    mod(ApiKey.UPDATE_METADATA, update_metadata, metadata=md, replica_manager=rm, broker_epoch=s.broker_epoch)
    # inter-broker: transaction coordinator (or KIP-664's abort tool) -> partition leader
    mod(ApiKey.WRITE_TXN_MARKERS, write_txn_markers, replica_manager=rm, config=s.config)
    # inter-broker and admin: answered by the controller
    mod(ApiKey.ELECT_LEADERS, elect_leaders, controller=s.controller, metadata=md, replica_manager=rm)
    for key, m in ((ApiKey.CONTROLLED_SHUTDOWN, controlled_shutdown), (ApiKey.ALTER_PARTITION, alter_partition),
                   (ApiKey.ALLOCATE_PRODUCER_IDS, allocate_producer_ids),
                   (ApiKey.ALTER_PARTITION_REASSIGNMENTS, alter_partition_reassignments),
                   (ApiKey.LIST_PARTITION_REASSIGNMENTS, list_partition_reassignments),
                   (ApiKey.UPDATE_FEATURES, update_features)):
        mod(key, m, controller=s.controller)
    for key, fn in ((ApiKey.DESCRIBE_ACLS, acls.describe), (ApiKey.CREATE_ACLS, acls.create),
                    (ApiKey.DELETE_ACLS, acls.delete)):
        add(key, fn, acls.MIN_VERSION, acls.MAX_VERSION)
    add(ApiKey.SASL_HANDSHAKE, sasl_apis.handshake, sasl_apis.HANDSHAKE_MIN, sasl_apis.HANDSHAKE_MAX)
    add(ApiKey.SASL_AUTHENTICATE, sasl_apis.authenticate, sasl_apis.AUTHENTICATE_MIN, sasl_apis.AUTHENTICATE_MAX)
    cfg = dict(config=s.config, metadata=md, admin=s.admin)
    add(ApiKey.DESCRIBE_CONFIGS, configs.describe, configs.DESCRIBE_MIN, configs.DESCRIBE_MAX, **cfg)
    add(ApiKey.ALTER_CONFIGS, configs.alter, configs.ALTER_MIN, configs.ALTER_MAX, **cfg)
    add(ApiKey.INCREMENTAL_ALTER_CONFIGS, configs.incremental_alter, configs.INCREMENTAL_MIN,
        configs.INCREMENTAL_MAX, **cfg)
    if s.scram_credentials is not None:
        usc = user_scram_credentials
        add(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, usc.describe, usc.DESCRIBE_MIN, usc.DESCRIBE_MAX,
            admin=s.scram_credentials, authz=s.authz)
        add(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, usc.alter, usc.ALTER_MIN, usc.ALTER_MAX, admin=s.scram_credentials,
            controller=s.controller, authz=s.authz)
    if s.delegation_tokens is not None:
        dt, tokens = delegation_tokens, s.delegation_tokens
        add(ApiKey.CREATE_DELEGATION_TOKEN, dt.create, dt.CREATE_MIN, dt.CREATE_MAX, tokens=tokens, authz=s.authz)
        add(ApiKey.RENEW_DELEGATION_TOKEN, dt.renew, dt.RENEW_MIN, dt.RENEW_MAX, tokens=tokens)
        add(ApiKey.EXPIRE_DELEGATION_TOKEN, dt.expire, dt.EXPIRE_MIN, dt.EXPIRE_MAX, tokens=tokens)
        add(ApiKey.DESCRIBE_DELEGATION_TOKEN, dt.describe, dt.DESCRIBE_MIN, dt.DESCRIBE_MAX, tokens=tokens,
            authz=s.authz)
    return reg
