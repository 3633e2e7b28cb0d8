"""A follower of ``__consumer_offsets`` that becomes leader serves every commit in its log, above its high
watermark too (Kafka's doLoadGroupsAndOffsets reads to the log end).

A commit the old leader acknowledged (acks=-1) is in every ISR member's log, but a follower learns the high
watermark only from its next fetch answer, so the new leader's HW may still be below it when it loads: a load
that stopped at the HW would lose acknowledged commits. The real OffsetsTopicIO over a real Log here.
"""
from __future__ import annotations

import asyncio
import os
import struct
from types import SimpleNamespace
from typing import Any

from broker.coordinator.group import records as rec
from broker.coordinator.group.service import GroupCoordinator
from broker.coordinator.offsets_topic import OffsetsTopicIO, coordinator_batch
from broker.storage.config import LogConfig
from broker.storage.log import Log
from broker.util.executor import NamedExecutor


class _Config:
    values = {"offsets.topic.num.partitions": 1, "group.initial.rebalance.delay.ms": 0}

    def get(self, key: str) -> Any:
        return self.values[key]


def _replicated(base_offset: int, offset: int) -> bytearray:
    """One commit batch of group g as a follower receives it: its offsets assigned, leader epoch 0."""
    batch = coordinator_batch([(rec.offset_commit_key("g", "t", 0), rec.offset_commit_value(offset, -1, "", 1, None))],
                              1000 + offset, base_sequence=0)
    struct.pack_into(">q", batch, 0, base_offset)   # neither is covered by the CRC
    struct.pack_into(">i", batch, 12, 0)
    return batch


def test_new_leader_loads_commits_above_its_high_watermark(tmp_path: "os.PathLike[str]") -> None:
    log = Log.open(os.path.join(str(tmp_path), "__consumer_offsets-0"), LogConfig())
    loader = NamedExecutor("offsets-loader")
    try:
        for i in range(5):
            log.append_as_follower(_replicated(i, 100 + i))
        log.update_high_watermark(2)  # the last fetch answer said 2; offsets 2..4 were acknowledged since
        assert (log.high_watermark, log.log_end_offset) == (2, 5)
        rm = SimpleNamespace(broker_id=0, get_partition=lambda tp: SimpleNamespace(log=log, leader_id=0))
        io = OffsetsTopicIO(rm, loader)  # type: ignore[arg-type]

        async def scenario() -> Any:
            gc = GroupCoordinator(_Config(), io, SimpleNamespace())  # type: ignore[arg-type]
            gc.start()
            try:
                await gc.on_become_leader("__consumer_offsets", 0)
                await gc.wait_loaded()
                return await gc.fetch_offsets("g", [("t", 0)], False)
            finally:
                await gc.stop()

        err, offsets = asyncio.run(scenario())
        assert err == 0
        assert [(tp, offset) for tp, offset, *_ in offsets] == [(("t", 0), 104)]
    finally:
        loader.shutdown()
        log.close()
