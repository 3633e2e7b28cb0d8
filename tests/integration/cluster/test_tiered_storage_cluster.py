"""Tiered storage (KIP-405) end to end on 3 real broker processes (bin/, real ZooKeeper) with Kafka's
``LocalTieredStorage`` layout in a directory the brokers share: segments roll and are copied by the leader, local
segments past local.retention go, a stock consumer (confluent-kafka) reads every record from offset 0 across the
remote/local boundary; the leader is killed (-9) and the new leader continues copying from the metadata
(``__remote_log_metadata``) without copying again what was copied (only the segment holding the first offset
not copied yet may overlap, as in Kafka: replicas roll their segments at their own points) and without a gap; the
killed broker, restarted with its partition directory wiped, rebuilds from the remote state instead of fetching
from offset 0; a lowered retention.ms expires the remote segments and moves the log start. The brokers run with
explicit copier / expiration pool sizes (Kafka 3.9's keys), and their Prometheus endpoint shows the RemoteLogManager's
pool, the RemoteFetch purgatory and the remote deletion gauges."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable, List

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from tests.harness.tiered import (LOCAL_TIERED_STORAGE, assert_copies_continue, list_offset, local_segments,
                                  remote_ranges)
from tests.harness.tiered import consume_numbered as _consume_all
from tests.harness.tiered import produce_numbered as _produce
from tests.harness.tiered import remote_segments as _remote_segments
from tests.harness.tiered import scrape_metrics as _scrape
from tests.integration.cluster.conftest import ClusterView, wait_for
from tools.cluster import LocalCluster, free_port

SEGMENT_BYTES = 16 * 1024
BTM = "kafka_server_brokertopicmetrics_"
IDLE = "kafka_log_remote_remotelogmanager_remotelogmanagertasksavgidlepercent"


def _server_log(cluster: LocalCluster, broker_id: int) -> str:
    path = cluster.brokers[broker_id].logs_dir / "server.log"
    return path.read_text(errors="replace") if path.exists() else ""


def _local_segments(cluster: LocalCluster, broker_id: int, topic: str) -> List[int]:
    return local_segments(cluster.brokers[broker_id].log_dir, topic)


def test_tiered_topic_copies_deletes_locally_reads_back_and_survives_leader_kill(
        new_cluster: Callable[..., LocalCluster], tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    cluster = new_cluster(3, overrides={
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
        "rsm.config.dir": str(remote),
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "3",
        "remote.log.manager.task.interval.ms": "500",
        "remote.log.manager.thread.pool.size": "3",
        "remote.log.manager.copier.thread.pool.size": "2",
        "remote.log.manager.expiration.thread.pool.size": "1",
        "log.retention.check.interval.ms": "1000",
        "log.initial.task.delay.ms": "500",
        "remote.fetch.max.wait.ms": "2000"},
        broker_overrides={i: {"broker.metrics.prometheus.port": str(free_port())} for i in range(3)})
    view = ClusterView(cluster.bootstrap)
    topic = "tiered"
    # retention.bytes far above what is produced: only so the remote log size is computed (and timed)
    view.create_topic(topic, 1, 3, {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                                    "local.retention.ms": "1000", "retention.ms": "-1",
                                    "retention.bytes": str(1 << 30)})
    n1 = 3000  # ~600 KB: ~37 segments
    _produce(cluster.bootstrap, topic, 0, n1)
    leader = view.partitions(topic)[0][0]

    # segments are copied, and the leader's local log keeps only the tail
    wait_for(lambda: len(_remote_segments(remote)) >= 30, 90, "rolled segments copied to remote storage")
    wait_for(lambda: len(_local_segments(cluster, leader, topic)) <= 3, 60, "local segments past local.retention "
             "deleted on the leader")
    wait_for(lambda: all(len(_local_segments(cluster, b, topic)) <= 3 for b in range(3)), 60,
             "followers delete copied segments too")
    assert _local_segments(cluster, leader, topic)[0] > 0

    # a stock consumer reads every record from offset 0, most of them from remote storage
    assert _consume_all(cluster.bootstrap, topic, n1) == list(range(n1))

    # the pools as configured, and their metrics: the copier pool's idle fraction, the remote fetch purgatory (the
    # fetches just parked there are done), the remote size computed for retention.bytes
    assert "RemoteLogManager started: copier 2, expiration 1, follower 3 threads at most" in \
        cluster.brokers[leader].output() + _server_log(cluster, leader)
    m = _scrape(cluster, leader)
    assert 0.0 <= m[IDLE] <= 1.0
    assert m['kafka_server_delayedoperationpurgatory_numdelayedoperations{delayedOperation="RemoteFetch"}'] == 0
    assert 'kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Fetch"}' in m
    assert "kafka_server_delayedremotefetchmetrics_expires_total" in m
    assert m[BTM + 'remotelogsizecomputationtime{topic="tiered"}'] >= 0
    assert m[BTM + 'remotedeletelagsegments{topic="tiered"}'] == 0  # nothing past retention yet

    before = remote_ranges(remote)
    assert_copies_continue({}, before)

    # kill -9 the leader: the new leader continues from the metadata, no segment is copied again
    cluster.brokers[leader].kill()
    wait_for(lambda: view.partitions(topic)[0][0] not in (-1, leader), 60, "a new leader")
    _produce(cluster.bootstrap, topic, n1, 1000)
    wait_for(lambda: len(_remote_segments(remote)) >= len(before) + 8, 90, "the new leader copies new segments")
    assert_copies_continue(before, remote_ranges(remote))
    assert _consume_all(cluster.bootstrap, topic, n1 + 1000) == list(range(n1 + 1000))

    # the killed broker comes back with its partition directory wiped: it rebuilds from the new leader's remote
    # state (OFFSET_MOVED_TO_TIERED_STORAGE, then Kafka's TierStateMachine) instead of fetching from offset 0
    shutil.rmtree(cluster.brokers[leader].log_dir / f"{topic}-0")
    cluster.brokers[leader].start()
    wait_for(lambda: leader in view.partitions(topic)[0][2], 90, "the wiped broker back in the ISR")
    rebuilt = _local_segments(cluster, leader, topic)
    assert rebuilt and rebuilt[0] > 0, f"the wiped broker fetched from offset 0: {rebuilt}"

    # remote expiry: retention.ms lowered, every segment past it goes from remote storage and the log start moves
    copied_end = max(end for _, end in remote_ranges(remote).values())
    retention = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    view.admin.incremental_alter_configs([retention])[retention].result(30)
    wait_for(lambda: not remote_ranges(remote), 90, "remote segments past retention.ms deleted")
    new_leader = view.partitions(topic)[0][0]
    wait_for(lambda: _scrape(cluster, new_leader).get(BTM + 'remotedeletelagsegments{topic="tiered"}') == 0 and
             _scrape(cluster, new_leader).get(BTM + 'remotedeletelagbytes{topic="tiered"}') == 0, 30,
             "the remote delete lag back to 0 once the expired segments are deleted")
    assert _scrape(cluster, new_leader)[BTM + "remotedeleterequests_total"] > 0
    seen: List[object] = []

    def log_start_moved() -> bool:
        """ListOffsets -2 past every expired remote segment (the local ones they overlapped go at the next local
        retention check)."""
        seen[:] = list(list_offset(cluster.brokers[view.partitions(topic)[0][0]].bootstrap, topic, -2))
        return seen[0] == 0 and int(seen[1]) > copied_end  # type: ignore[call-overload]
    wait_for(log_start_moved, 60, f"the log start past the expired remote segments (up to {copied_end})")
