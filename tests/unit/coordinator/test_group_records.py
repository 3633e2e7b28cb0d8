"""``__consumer_offsets`` records: the hand-packed offset-commit key/value agree with the schema codec, coordinator
batches with ``build_batch``, and the streaming load (``read_batches``) replays a real log as one list would."""
from __future__ import annotations

import os
import struct
from typing import Any, List, Optional, Tuple

import pytest

from broker.coordinator.group import records as rec
from broker.coordinator.group.state import C_OFFSET, GroupConfig, GroupCoordinatorState
from broker.coordinator.offsets_topic import coordinator_batch, read_batches
from broker.protocol.api import data_codec
from broker.protocol.records.builder import build_batch
from broker.storage.log import Log, LogConfig

NAMES = [("g", "t", 0), ("group-é☃", "tópic.x_y", 2147483647), ("", "t", -1), ("g" * 300, "t" * 249, 7)]


@pytest.mark.parametrize("group,topic,partition", NAMES)
def test_offset_commit_key_matches_the_codec(group: str, topic: str, partition: int) -> None:
    fields = {"group": group, "topic": topic, "partition": partition}
    assert rec.offset_commit_key(group, topic, partition) == \
        struct.pack(">h", 1) + data_codec("OffsetCommitKey", 1).encode(fields)
    for version in (0, 1):
        key = struct.pack(">h", version) + data_codec("OffsetCommitKey", version).encode(fields)
        assert rec.decode_offset_key(key) == (group, topic, partition)
        assert rec.decode_key(key) == rec.OffsetKey(group, topic, partition)
    gkey = rec.group_metadata_key(group)
    assert rec.decode_offset_key(gkey) is None and rec.decode_key(gkey) == rec.GroupKey(group)


@pytest.mark.parametrize("metadata", ["", "md", "ü" * 100])
@pytest.mark.parametrize("expire", [None, 1234])
def test_offset_commit_value_matches_the_codec(metadata: str, expire: Optional[int]) -> None:
    value = rec.offset_commit_value(1 << 40, 7, metadata, 1700000000000, expire)
    if expire is None:
        ref = struct.pack(">h", 3) + data_codec("OffsetCommitValue", 3).encode(
            {"offset": 1 << 40, "leader_epoch": 7, "metadata": metadata, "commit_timestamp": 1700000000000})
    else:
        ref = struct.pack(">h", 1) + data_codec("OffsetCommitValue", 1).encode(
            {"offset": 1 << 40, "metadata": metadata, "commit_timestamp": 1700000000000, "expire_timestamp": expire})
    assert value == ref
    assert rec.decode_offset_commit_value(value) == (1 << 40, 7 if expire is None else -1, metadata,
                                                     1700000000000, expire)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_value_version_decodes_as_the_codec_does(version: int) -> None:
    fields = {"offset": 42, "leader_epoch": 5, "metadata": "md", "commit_timestamp": 7, "expire_timestamp": 9}
    value = struct.pack(">h", version) + data_codec("OffsetCommitValue", version).encode(fields)
    ref = rec.decode_offset_value(value)
    expire = getattr(ref, "expire_timestamp", -1)
    assert rec.decode_offset_commit_value(value) == (ref.offset, getattr(ref, "leader_epoch", -1), ref.metadata,
                                                     ref.commit_timestamp, None if expire == -1 else expire)


@pytest.mark.parametrize("bad", [b"\x00\x01\x00\x05ab", b"\x00\x01\x00\x01g\x00\x01t\x00\x00", b"\x00\x09\x00\x00",
                                 b"\x00\x01\xff\xff"])
def test_malformed_keys_raise(bad: bytes) -> None:
    with pytest.raises((ValueError, struct.error)):
        rec.decode_offset_key(bad)


def test_malformed_values_raise() -> None:
    good = rec.offset_commit_value(1, -1, "abc", 2, None)
    for cut in (len(good) - 1, 16, 3):
        with pytest.raises((ValueError, struct.error)):
            rec.decode_offset_commit_value(good[:cut])


def test_coordinator_batches_are_build_batch_bytes() -> None:
    records = [(b"k1", b"v"), (b"k2", None), (b"k" * 300, b"v" * 70000)]
    assert bytes(coordinator_batch(records, 1234, base_sequence=0)) == \
        build_batch([(k, v, [], 1234) for k, v in records], base_sequence=0)
    assert bytes(coordinator_batch(records, 99, 5, 2, 0, True)) == build_batch(
        [(k, v, [], 99) for k, v in records], producer_id=5, producer_epoch=2, base_sequence=0, is_transactional=True)


def _marker(producer_id: int, committed: bool) -> bytearray:
    key = struct.pack(">hh", 0, 1 if committed else 0)
    return bytearray(build_batch([(key, struct.pack(">hi", 0, 0), [], 1)], producer_id=producer_id,
                                 producer_epoch=0, is_transactional=True, is_control=True))


def test_streaming_load_replays_a_log_batch_by_batch(tmp_path: "os.PathLike[str]") -> None:
    """Many small reads (a 1 KiB buffer) see every batch once and in order, markers included; the state they
    build equals replaying the records one by one."""
    log = Log.open(os.path.join(str(tmp_path), "__consumer_offsets-0"), LogConfig())
    try:
        written: List[Tuple[bytes, Optional[bytes], int]] = []  # (key, value, producer id)
        for r in range(30):
            recs = [(rec.offset_commit_key(f"g{g}", "t", p), rec.offset_commit_value(r, -1, "", r, None))
                    for g in range(3) for p in range(4)]
            if r == 7:
                recs.append((rec.offset_commit_key("g0", "t", 0), None))
            log.append_as_leader(coordinator_batch(recs, 1000 + r), 0, is_from_client=False)
            written.extend((k, v, -1) for k, v in recs)
        txn = [(rec.offset_commit_key("g1", "t", 9), rec.offset_commit_value(99, -1, "", 5, None))]
        log.append_as_leader(coordinator_batch(txn, 2000, 77, 0, 0, True), 0, is_from_client=False)
        log.append_as_leader(_marker(77, True), 0, is_from_client=False)
        seen: List[Any] = []
        streamed = GroupCoordinatorState(GroupConfig())

        def on_batch(records: Any, producer_id: int, marker: Optional[bool]) -> None:
            seen.append((len(records), producer_id, marker))
            if marker is not None:
                streamed.replay_txn_marker(producer_id, marker)
            for r in records if marker is None else ():
                if producer_id >= 0:
                    streamed.replay_txn_record(r.key, r.value, r.offset, producer_id)
                else:
                    streamed.replay(r.key, r.value, r.offset)

        n, end = read_batches(log, on_batch, 1024)
        assert (n, end) == (len(written) + 1, log.log_end_offset)
        assert seen == [(12, -1, None)] * 7 + [(13, -1, None)] + [(12, -1, None)] * 22 + [(1, 77, None),
                                                                                        (1, 77, True)]
        direct = GroupCoordinatorState(GroupConfig())
        for offset, (k, v, _pid) in enumerate(written):
            direct.replay(k, v, offset)
        direct.replay(*txn[0], len(written))
        assert streamed.snapshot() == direct.snapshot()
        assert streamed.groups["g1"].offsets[("t", 9)][C_OFFSET] == 99
        assert ("t", 0) in streamed.groups["g0"].offsets  # re-committed after the tombstone
    finally:
        log.close()


class _Rec:
    __slots__ = ("offset", "key", "value")

    def __init__(self, offset: int, key: bytes, value: Optional[bytes]) -> None:
        self.offset, self.key, self.value = offset, key, value


def _random_log(seed: int) -> List[Tuple[str, Any]]:
    """Plain commits and tombstones, group metadata and its tombstones, transactional commits and markers."""
    import random
    rnd = random.Random(seed)
    keys = [rec.offset_commit_key(f"g{g}", "t", p) for g in range(3) for p in range(3)]
    member = {"member_id": "m", "group_instance_id": None, "client_id": "c", "client_host": "h",
              "rebalance_timeout": 1000, "session_timeout": 1000, "subscription": b"", "assignment": b""}
    out: List[Tuple[str, Any]] = []
    for i in range(400):
        roll = rnd.random()
        if roll < 0.55:
            batch = [(rnd.choice(keys), None if rnd.random() < 0.1 else rec.offset_commit_value(i, -1, "", i, None))
                     for _ in range(rnd.randint(1, 4))]
            out.append(("plain", batch))
        elif roll < 0.65:
            g = f"g{rnd.randrange(3)}"
            value = None if rnd.random() < 0.3 else rec.group_metadata_value(
                {"protocol_type": "consumer", "generation": i, "protocol": "range", "leader": "m",
                 "current_state_timestamp": i, "members": [member]})
            out.append(("plain", [(rec.group_metadata_key(g), value)]))
        elif roll < 0.9:
            value = rec.offset_commit_value(1000 + i, -1, "", i, None)
            out.append(("txn", (rnd.randrange(2), rnd.choice(keys), value)))
        else:
            out.append(("marker", (rnd.randrange(2), rnd.random() < 0.7)))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_noting_keys_while_loading_builds_the_same_state(seed: int, monkeypatch: Any) -> None:
    """begin_loading .. end_replay (each key's latest record applied once, flushed before markers and every
    LOAD_BUFFER_KEYS keys) gives exactly the state that replaying every record in order gives."""
    from broker.coordinator.group import state as state_module
    monkeypatch.setattr(state_module, "LOAD_BUFFER_KEYS", 5)
    direct, noted = GroupCoordinatorState(GroupConfig()), GroupCoordinatorState(GroupConfig())
    noted.begin_loading()
    offset = 0
    for kind, item in _random_log(seed):
        if kind == "plain":
            rs = []
            for k, v in item:
                direct.replay(k, v, offset)
                rs.append(_Rec(offset, k, v))
                offset += 1
            noted.replay_records(rs)
        elif kind == "txn":
            pid, k, v = item
            for st in (direct, noted):
                st.replay_txn_record(k, v, offset, pid)
            offset += 1
        else:
            for st in (direct, noted):
                st.replay_txn_marker(*item)
            offset += 1
    noted.end_replay()
    assert direct.groups and any(g.offsets for g in direct.groups.values())
    assert noted.snapshot() == direct.snapshot()
    for gid, g in direct.groups.items():
        h = noted.groups[gid]
        assert h.offsets == g.offsets  # record offsets included
        assert h.pending_txn_commits == g.pending_txn_commits


def test_loads_pause_the_garbage_collector_and_restore_it() -> None:
    """Counted across overlapping loads; the setting found before the first is restored after the last."""
    import gc
    from broker.coordinator.offsets_topic import gc_paused
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: left off
    finally:
        gc.enable()
