"""One tiered topic (KIP-405) shared by Apache Kafka 3.9.1's brokers and ours, in ONE ZooKeeper-mode cluster, with
Kafka's own ``LocalTieredStorage`` and ``TopicBasedRemoteLogMetadataManager`` in the Kafka broker and the project's
implementations of the same in ours, over one remote directory and one ``__remote_log_metadata`` topic.

Each kind is judged by the other:
- a Kafka 3.9.1 leader copies segments and writes the metadata; our followers drop their copied local segments
  from that metadata; when our broker becomes leader it continues copying from Kafka's metadata (no segment copied
  twice, no gap) and serves Kafka-copied segments to a stock consumer from offset 0;
- a Kafka broker whose partition directory was wiped rebuilds from our leader as Kafka's TierStateMachine does
  (our OFFSET_MOVED_TO_TIERED_STORAGE, ListOffsets -4 and OffsetsForLeaderEpoch, the remote leader-epoch checkpoint
  and producer snapshot our broker copied): it does not fetch from offset 0;
- Kafka, leader again, continues from our metadata and serves the segments ours copied;
- ListOffsets -4 (EARLIEST_LOCAL_TIMESTAMP) and -5 (LATEST_TIERED_TIMESTAMP) from each kind while it leads: the
  leader's first local segment, and the last copied offset;
- kafka-topics, kafka-configs and kafka-log-dirs print what Kafka's tools print for the tiered topic, and each
  kind reports its local size only in DescribeLogDirs;
- both kinds answer alike the topic changes KIP-950 brings (refused in ZooKeeper mode) and remote.storage.enable=false;
- Kafka's DumpLogSegments ``--remote-log-metadata-decoder`` decodes ``__remote_log_metadata`` as both kinds wrote
  it, and the project's kafka-dump-log prints the same lines.
"""
from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import pytest
from confluent_kafka import ElectionType, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol.api import ApiKey
from tests.harness.cluster_ops import call, run_kafka_tool
from tests.harness.mixed_cluster import MixedCluster
from tests.harness.tiered import (EARLIEST_LOCAL, LATEST_TIERED, LOCAL_TIERED_STORAGE, assert_copies_continue,
                                  consume_numbered, list_offset, local_segments, produce_numbered, remote_end_offset,
                                  remote_ranges, remote_segments)
from tests.harness.waiting import wait_for
from tests.integration.tools.kafka_tools import run_kafka_batch, run_tool

KAFKA, OURS, OTHER = 2, 0, 1
SEGMENT_BYTES = 16 * 1024


def tiered_settings(remote: Path) -> Dict[str, str]:
    """The same tiered-storage keys for both kinds (Kafka's class names; the project maps them to its own)."""
    return {
        "zookeeper.session.timeout.ms": "9000",
        "replica.lag.time.max.ms": "4000",
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
        "rsm.config.dir": str(remote),
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "3",
        "remote.log.manager.task.interval.ms": "500",
        "log.retention.check.interval.ms": "1000",
        "log.initial.task.delay.ms": "500",
        "remote.fetch.max.wait.ms": "2000",
    }


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: str) -> Iterator[Callable[[Path], MixedCluster]]:
    made: List[MixedCluster] = []

    def make(remote: Path) -> MixedCluster:
        c = MixedCluster(tmp_path / "mixed", f"{zookeeper}/tiered-{uuid.uuid4().hex[:10]}", [OURS, OTHER], [KAFKA],
                         tiered_settings(remote))
        made.append(c)
        return c

    yield make
    for c in made:
        c.kill_all()
    for c in made:
        for n in c.nodes.values():
            if n.kind == "ours":
                out = n.output()
                assert "Traceback" not in out, f"our broker {n.broker_id} logged a traceback:\n{out[-6000:]}"


def leader_of(c: MixedCluster, topic: str) -> int:
    state = c.partition_state(topic, 0)
    return -1 if state is None else int(state["leader"])


def isr_of(c: MixedCluster, topic: str) -> Set[int]:
    state = c.partition_state(topic, 0)
    return set() if state is None else set(state["isr"])


def check_list_offsets(c: MixedCluster, leader: int, topic: str, remote: Path) -> None:
    """-4 is the leader's first local segment, -5 the last offset of the remote segments (read until both agree:
    local segments are deleted and new ones copied meanwhile), with no gap between the two."""
    bootstrap = c[leader].bootstrap
    seen: List[object] = []

    def answers_agree() -> bool:
        err4, earliest_local, _ = list_offset(bootstrap, topic, EARLIEST_LOCAL)
        err5, latest_tiered, epoch = list_offset(bootstrap, topic, LATEST_TIERED)
        local, copied_end = local_segments(c[leader].log_dir, topic), remote_end_offset(remote)
        seen[:] = [err4, earliest_local, local, err5, latest_tiered, epoch, copied_end]
        return err4 == err5 == 0 and bool(local) and earliest_local == local[0] and latest_tiered == copied_end \
            and epoch >= 0 and earliest_local <= latest_tiered + 1
    wait_for(answers_agree, 30, f"ListOffsets -4/-5 of the {c.kind(leader)} leader to name its first local segment "
             "and the last remote offset", detail=lambda: "last [-4 error, -4 offset, local segments, -5 error, "
             f"-5 offset, -5 epoch, last remote offset]: {seen}")


def alter_topic(bootstrap: str, topic: str, configs: Dict[str, str]) -> Tuple[int, Optional[str]]:
    """IncrementalAlterConfigs (SET) of a topic's keys at one broker, validate_only: (error code, message)."""
    r: Any = call(bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": 2, "resource_name": topic,
        "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]}],
        "validate_only": True})
    (resource,) = r.responses
    return resource.error_code, resource.error_message


def test_kafka_and_our_brokers_share_one_tiered_topic(cluster: Callable[[Path], MixedCluster],
                                                      tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    c = cluster(remote)
    c.start([KAFKA, OURS, OTHER])
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    topic = "tiered"
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[KAFKA, OURS, OTHER]], config={
        "remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES), "local.retention.ms": "1000",
        "retention.ms": "-1", "min.insync.replicas": "2"})])[topic].result(60)
    wait_for(lambda: leader_of(c, topic) == KAFKA and isr_of(c, topic) == {KAFKA, OURS, OTHER}, 60,
             "Kafka's broker to lead the tiered topic with every replica in sync")

    # 1. Kafka leads: it copies, and every broker drops its copied local segments
    produce_numbered(c.bootstrap, topic, 0, 3000)  # ~600 KB: ~37 segments
    wait_for(lambda: len(remote_segments(remote)) >= 30, 90, "Kafka's leader to copy rolled segments")
    for b in (KAFKA, OURS, OTHER):
        wait_for(lambda: 0 < len(local_segments(c[b].log_dir, topic)) <= 3, 60,
                 f"broker {b} ({c.kind(b)}) to delete its copied local segments")
    by_kafka = remote_ranges(remote)
    assert_copies_continue({}, by_kafka)
    check_list_offsets(c, KAFKA, topic, remote)

    # the tools show a tiered topic as Kafka's do (same cluster, same moment: the same text), and every broker
    # reports its local size only in DescribeLogDirs
    commands = [("topics", ["--bootstrap-server", c.bootstrap, "--describe", "--topic", topic]),
                ("configs", ["--bootstrap-server", c.bootstrap, "--describe", "--entity-type", "topics",
                             "--entity-name", topic]),
                ("log-dirs", ["--bootstrap-server", c.bootstrap, "--describe", "--topic-list", topic,
                              "--broker-list", f"{KAFKA},{OURS}"])]
    seen: List[object] = []

    def tools_agree() -> bool:
        """Compared until a moment without a local segment deletion between the runs (local.retention.ms is 1 s)."""
        theirs = run_kafka_batch([(name, args, None) for name, args in commands])
        ours = [run_tool(name, *args) for name, args in commands]
        seen[:] = [[(r.code, r.stdout, r.stderr[-500:]) for r in runs] for runs in (ours, theirs)]
        if [(r.code, r.stdout) for r in ours] != [(r.code, r.stdout) for r in theirs] or theirs[2].code != 0:
            return False
        described = json.loads(theirs[2].stdout.splitlines()[-1])
        for entry in described["brokers"]:
            (partition,) = [p for d in entry["logDirs"] for p in d["partitions"] if p["partition"] == f"{topic}-0"]
            local = sum(f.stat().st_size for f in (c[entry["broker"]].log_dir / f"{topic}-0").glob("*.log"))
            if partition["size"] != local:
                seen.append((entry["broker"], partition, local))
                return False
        return True
    wait_for(tools_agree, 60, "our tools to print what Kafka's print, with each broker's local size",
             detail=lambda: f"last [ours, Kafka's] runs: {seen}")

    # KIP-950's keys are refused in ZooKeeper mode, alike by both kinds (remote.storage.enable=false alone is
    # accepted by Kafka 3.9.1 in ZooKeeper mode: ours too)
    for change in ({"remote.log.copy.disable": "true"}, {"remote.log.delete.on.disable": "true"},
                   {"remote.storage.enable": "false"},
                   {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}):
        answers = {c.kind(b): alter_topic(c[b].bootstrap, topic, change) for b in (KAFKA, OURS)}
        kip950 = "remote.log.copy.disable" in change or "remote.log.delete.on.disable" in change
        assert answers["ours"] == answers["kafka"] and (answers["kafka"][0] != 0) == kip950, (change, answers)

    # 2. Kafka's broker stops: ours leads, continues from Kafka's metadata, serves Kafka's copies
    c[KAFKA].stop()  # SIGTERM: controlled shutdown (the JVM exits 143)
    assert not c[KAFKA].is_alive()
    wait_for(lambda: leader_of(c, topic) in (OURS, OTHER), 60, "one of our brokers to lead")
    ours_leading = leader_of(c, topic)
    check_list_offsets(c, ours_leading, topic, remote)
    produce_numbered(c.bootstrap, topic, 3000, 1000)
    wait_for(lambda: len(remote_segments(remote)) >= len(by_kafka) + 8, 90, "our leader to copy new segments")
    by_ours = remote_ranges(remote)
    assert_copies_continue(by_kafka, by_ours)
    assert consume_numbered(c.bootstrap, topic, 4000) == list(range(4000))

    # 3. Kafka's broker comes back with an empty partition directory: it rebuilds from our leader's remote state
    shutil.rmtree(c[KAFKA].log_dir / f"{topic}-0")
    c[KAFKA].start()
    wait_for(lambda: KAFKA in isr_of(c, topic), 90, "Kafka's broker back in the ISR after rebuilding")
    kafka_local = local_segments(c[KAFKA].log_dir, topic)
    assert kafka_local and kafka_local[0] > 0, \
        f"Kafka's broker fetched from offset 0 instead of starting after the remote segments: {kafka_local}"

    # 4. Kafka leads again: it continues from our metadata and serves the segments ours copied
    def elected() -> bool:
        """A fresh admin client each time: the controller moved twice since the first one read the metadata (a
        broker that is not the controller answers NOT_CONTROLLER, as Kafka's ZooKeeper-mode brokers do)."""
        fresh = AdminClient({"bootstrap.servers": c.bootstrap})
        try:
            result = fresh.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
        except KafkaException:
            return False
        return all(e is None for e in result.values())
    wait_for(elected, 60, "a preferred leader election to succeed")
    wait_for(lambda: leader_of(c, topic) == KAFKA, 60, "Kafka's broker to lead again")
    produce_numbered(c.bootstrap, topic, 4000, 1000)
    wait_for(lambda: len(remote_segments(remote)) >= len(by_ours) + 8, 90, "Kafka's leader to copy new segments")
    assert_copies_continue(by_ours, remote_ranges(remote))
    check_list_offsets(c, KAFKA, topic, remote)
    assert consume_numbered(c[KAFKA].bootstrap, topic, 5000) == list(range(5000))

    # 5. __remote_log_metadata, written by both kinds' metadata managers: Kafka's DumpLogSegments decodes every
    #    record of our replica's segments, and kafka-dump-log prints the same lines
    segments = []
    for f in sorted((c[OURS].log_dir).glob("__remote_log_metadata-*/*.log")):  # copied: both tools read the same bytes
        copy = tmp_path / "rlmm" / f.parent.name / f.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, copy)
        segments.append(copy)
    assert segments, "no __remote_log_metadata segment in our broker's log directory"
    args = ["--remote-log-metadata-decoder", "--files", ",".join(str(f) for f in segments)]
    kafka = run_kafka_tool("kafka.tools.DumpLogSegments", args)
    assert kafka.returncode == 0 and "Error at offset" not in kafka.stdout, kafka.stdout[-3000:] + kafka.stderr
    assert kafka.stdout.count("RemoteLogSegmentMetadataUpdate{") >= len(by_ours)  # copies finished long before
    ours = run_tool("dump-log", *args)
    assert ours.code == 0 and ours.lines() == kafka.stdout.splitlines(), ours.stderr
