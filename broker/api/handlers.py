"""The table of served APIs: (API key, handler module, version range). ApiVersions is built from it."""
from __future__ import annotations

import functools
from typing import Any

from broker.api import (api_versions, configs, create_partitions, create_topics, delete_records, delete_topics,
                        describe_cluster, describe_log_dirs, describe_producers, fetch, init_producer_id,
                        list_offsets, metadata, offset_for_leader_epoch, produce)
from broker.api import (delete_groups, describe_groups, find_coordinator, heartbeat, join_group,  # group coordinator
                        leave_group, list_groups, offset_commit, offset_delete, offset_fetch, sync_group)
from broker.api.registry import ApiRegistry
from broker.protocol.api import ApiKey


def build_registry(broker: Any) -> ApiRegistry:
    reg = ApiRegistry()

    def add(key: ApiKey, fn: Any, lo: int, hi: int) -> None:
        reg.register(key, key.name, lo, hi, functools.partial(fn, broker))

    for key, mod in [
        (ApiKey.PRODUCE, produce), (ApiKey.FETCH, fetch), (ApiKey.LIST_OFFSETS, list_offsets),
        (ApiKey.METADATA, metadata), (ApiKey.API_VERSIONS, api_versions), (ApiKey.CREATE_TOPICS, create_topics),
        (ApiKey.DELETE_TOPICS, delete_topics), (ApiKey.DELETE_RECORDS, delete_records),
        (ApiKey.INIT_PRODUCER_ID, init_producer_id), (ApiKey.OFFSET_FOR_LEADER_EPOCH, offset_for_leader_epoch),
        (ApiKey.DESCRIBE_LOG_DIRS, describe_log_dirs), (ApiKey.CREATE_PARTITIONS, create_partitions),
        (ApiKey.DESCRIBE_CLUSTER, describe_cluster), (ApiKey.DESCRIBE_PRODUCERS, describe_producers),
        # group coordinator (classic protocol)
        (ApiKey.FIND_COORDINATOR, find_coordinator), (ApiKey.JOIN_GROUP, join_group),
        (ApiKey.SYNC_GROUP, sync_group), (ApiKey.HEARTBEAT, heartbeat), (ApiKey.LEAVE_GROUP, leave_group),
        (ApiKey.OFFSET_COMMIT, offset_commit), (ApiKey.OFFSET_FETCH, offset_fetch),
        (ApiKey.DESCRIBE_GROUPS, describe_groups), (ApiKey.LIST_GROUPS, list_groups),
        (ApiKey.DELETE_GROUPS, delete_groups), (ApiKey.OFFSET_DELETE, offset_delete),
    ]:
        add(key, mod.handle, mod.MIN_VERSION, mod.MAX_VERSION)
    add(ApiKey.DESCRIBE_CONFIGS, configs.describe, configs.DESCRIBE_MIN, configs.DESCRIBE_MAX)
    add(ApiKey.ALTER_CONFIGS, configs.alter, configs.ALTER_MIN, configs.ALTER_MAX)
    add(ApiKey.INCREMENTAL_ALTER_CONFIGS, configs.incremental_alter, configs.INCREMENTAL_MIN,
        configs.INCREMENTAL_MAX)
    return reg
