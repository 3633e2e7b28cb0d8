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

#: test file -> seconds it took in one whole CI run (one lane, a loaded machine; only the long files matter)
SECONDS: Dict[str, int] = {
    "tests/integration/test_bench_scripts.py": 223,
    "compat-tests/test_mixed_cluster.py": 212,
    "compat-tests/test_librdkafka_txn.py": 187,
    "tests/integration/cluster/test_faults.py": 170,
    "tests/integration/spark/test_pipeline_end_to_end.py": 130,
    "tests/integration/cluster/test_transactions_cluster.py": 129,
    "tests/integration/broker/test_client_quotas.py": 90,
    "tests/integration/tools/test_kafka_tools_judge.py": 76,
    "tests/integration/tools/test_tools_cluster_admin.py": 72,
    "tests/integration/tools/test_tools_security_txn.py": 71,
    "tests/integration/tools/test_tool_errors.py": 71,
    "tests/integration/cluster/test_nemesis.py": 65,
    "compat-tests/test_cluster_clients.py": 62,
    "tests/integration/tools/test_tools_logs_features.py": 59,
    "tests/integration/broker/test_txn_log.py": 54,
    "tests/integration/spark/test_connector_batch.py": 53,
    "tests/integration/cluster/test_leadership.py": 51,
    "tests/integration/test_packaging.py": 46,
    "tests/integration/broker/test_startup.py": 44,
    "compat-tests/test_groups_confluent.py": 43,
    "tests/integration/broker/test_txn_matrix_kafka.py": 38,
    "tests/integration/spark/test_connector_cluster.py": 34,
    "tests/integration/cluster/test_groups.py": 34,
    "tests/integration/security/test_secured_listeners.py": 34,
    "compat-tests/test_streams_eos.py": 34,
}


def _weight(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return SECONDS.get(path, 0)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: List[pytest.Item]) -> None:
    """Stable sort by file weight, longest first (Python's sort is stable: every other order is kept)."""
    items.sort(key=lambda it: -_weight(it))
