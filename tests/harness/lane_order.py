"""Pytest plugin for the process-test lanes (scripts/test.sh: ``-p tests.harness.lane_order -n 2 --dist loadfile``).

pytest-xdist hands whole test files to its two workers, one file at a time as each worker gets free, in collection
order. A long file collected last leaves one worker running alone at the end, so the files known to be long
(:data:`SECONDS`, measured in a CI run with ``--durations``) are moved to the front, longest first; every other
file keeps its place after them. The order of the tests inside a file never changes. A stale table costs only
balance, never a test: files missing from it run as before.
"""
from __future__ import annotations

from typing import Dict, List

import pytest

#: test file -> seconds it took in one whole CI run (both lanes and the unit lane beside them on a loaded 2-core
#: machine, 2026-11-28, ``--durations=0``; only the long files matter; the tiered-storage cluster test estimated;
#: test_packaging, test_bench_scripts, test_fresh_install_tools and three tool-test files scaled since by their
#: before/after ratios, measured side by side on the loaded machine, after their unoptimized builds, shorter quick
#: benchmarks, no-op install build, compiled tool batch and C1-only Kafka)
SECONDS: Dict[str, int] = {
    "tests/integration/test_bench_scripts.py": 405,
    "compat-tests/test_mixed_cluster.py": 358,
    "tests/integration/tools/test_tools_logs_features.py": 270,
    "tests/integration/tools/test_tools_cluster_admin.py": 250,
    "tests/integration/tools/test_kafka_tools_judge.py": 245,
    "tests/integration/tools/test_tools_security_txn.py": 240,
    "compat-tests/test_librdkafka_txn.py": 237,
    "tests/integration/cluster/test_faults.py": 222,
    "tests/integration/test_packaging.py": 220,
    "tests/integration/spark/test_pipeline_end_to_end.py": 166,
    "tests/integration/cluster/test_transactions_cluster.py": 140,
    "tests/integration/tools/test_project_tools.py": 120,
    "compat-tests/test_cluster_clients.py": 98,
    "tests/integration/broker/test_client_quotas.py": 96,
    "tests/integration/tools/test_tool_errors.py": 94,
    "tests/integration/broker/test_txn_matrix_kafka.py": 93,
    "tests/integration/broker/test_scram_credentials_and_tokens.py": 90,
    "tests/integration/broker/test_startup.py": 87,
    "tests/integration/broker/test_log_dir_failure.py": 82,
    "tests/integration/cluster/test_nemesis.py": 76,
    "tests/integration/cluster/test_leadership.py": 71,
    "tests/integration/cluster/test_admin.py": 63,
    "tests/integration/spark/test_connector_batch.py": 62,
    "tests/integration/broker/test_txn_log.py": 59,
    "tests/integration/cluster/test_groups.py": 52,
    "tests/integration/security/test_secured_listeners.py": 47,
    "compat-tests/test_groups_confluent.py": 44,
    "tests/integration/spark/test_connector_streaming.py": 42,
    "compat-tests/test_streams_eos.py": 42,
    "compat-tests/test_security_clients.py": 42,
    "tests/integration/broker/test_transactions.py": 41,
    "tests/integration/broker/test_txn_files_kafka_tools.py": 38,
    "tests/integration/zk/test_scripts.py": 35,
    "tests/integration/spark/test_connector_transactions.py": 33,
    "tests/integration/cluster/test_controller_leader_bounce.py": 31,
    "tests/integration/cluster/test_restarts.py": 30,
    "tests/integration/cluster/test_tiered_storage_cluster.py": 60,
    "tests/integration/test_fresh_install_tools.py": 60,
    # measured alone (103-109 s, 3 runs, 2026-11-29), its minute-long S3 outage included; scaled for the loaded lane
    "tests/integration/cluster/test_tiered_storage_s3.py": 130,
}


def _weight(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return SECONDS.get(path, 0)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: List[pytest.Item]) -> None:
    """Stable sort by file weight, longest first (Python's sort is stable: every other order is kept)."""
    items.sort(key=lambda it: -_weight(it))
