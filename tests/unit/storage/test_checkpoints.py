import os

import pytest

from broker.storage.checkpoints import (OffsetCheckpointFile, read_partition_metadata, write_partition_metadata)
from broker.storage.files import file_path, filename_prefix, offset_from_file_name, parse_topic_partition_dir
from broker.storage.leader_epoch_file import LeaderEpochFileCache


def test_offset_checkpoint_bytes_match_kafka(tmp_path) -> None:
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    cp = OffsetCheckpointFile(path)
    cp.write({("my-topic", 0): 1234, ("other", 3): 0})
    with open(path, "rb") as f:
        assert f.read() == b"0\n2\nmy-topic 0 1234\nother 3 0\n"
    assert cp.read() == {("my-topic", 0): 1234, ("other", 3): 0}
    assert not os.path.exists(path + ".tmp")


def test_empty_and_missing_checkpoint(tmp_path) -> None:
    cp = OffsetCheckpointFile(str(tmp_path / "cp"))
    assert cp.read() == {}
    cp.write({})
    assert (tmp_path / "cp").read_bytes() == b"0\n0\n"


def test_empty_checkpoint_files_as_kafka_leaves_them(tmp_path) -> None:
    """Kafka's CheckpointFile creates the file empty when it opens it (a follower of an empty partition never
    writes its leader-epoch-checkpoint), and reads an empty file, or a version line alone, as no entries."""
    p = tmp_path / "leader-epoch-checkpoint"
    p.write_bytes(b"")
    assert LeaderEpochFileCache(str(p)).entries == []
    assert OffsetCheckpointFile(str(p)).read() == {}
    p.write_bytes(b"0\n")
    assert OffsetCheckpointFile(str(p)).read() == {}


def test_malformed_checkpoint_raises(tmp_path) -> None:
    p = tmp_path / "cp"
    p.write_bytes(b"0\n2\na 0 1\n")
    with pytest.raises(ValueError):
        OffsetCheckpointFile(str(p)).read()
    p.write_bytes(b"1\n0\n")
    with pytest.raises(ValueError):
        OffsetCheckpointFile(str(p)).read()


def test_partition_metadata(tmp_path) -> None:
    write_partition_metadata(str(tmp_path), "AAAAAAAAAAAAAAAAAAAAAQ")
    # byte for byte Kafka's PartitionMetadata.encode(): no final newline
    assert (tmp_path / "partition.metadata").read_bytes() == b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"
    assert read_partition_metadata(str(tmp_path)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    (tmp_path / "partition.metadata").write_bytes(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n")  # ours, before
    assert read_partition_metadata(str(tmp_path)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert read_partition_metadata(str(tmp_path / "nope")) is None


def test_file_names_are_20_digits(tmp_path) -> None:
    assert filename_prefix(42) == "00000000000000000042"
    assert os.path.basename(file_path("/x", 7, ".log")) == "00000000000000000007.log"
    assert offset_from_file_name("00000000000000000042.timeindex") == 42
    assert parse_topic_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_topic_partition_dir("t-0.abc-delete") is None


def test_leader_epoch_checkpoint_format_and_semantics(tmp_path) -> None:
    path = str(tmp_path / "leader-epoch-checkpoint")
    c = LeaderEpochFileCache(path)
    c.assign(0, 0)
    c.assign(0, 5)  # same epoch, later offset: ignored
    c.assign(2, 10)
    c.assign(4, 20)
    with open(path, "rb") as f:
        assert f.read() == b"0\n3\n0 0\n2 10\n4 20\n"
    assert LeaderEpochFileCache(path).entries == [(0, 0), (2, 10), (4, 20)]
    # OffsetsForLeaderEpoch semantics
    assert c.end_offset_for(4, 30) == (4, 30)
    assert c.end_offset_for(2, 30) == (2, 20)
    assert c.end_offset_for(3, 30) == (2, 20)
    assert c.end_offset_for(5, 30) == (-1, -1)
    assert c.end_offset_for(-1, 30) == (-1, -1)
    assert c.epoch_for_offset(15) == 2
    # a lower epoch start replaces later entries
    c.assign(3, 15)
    assert c.entries == [(0, 0), (2, 10), (3, 15)]
    c.truncate_from_end(12)
    assert c.entries == [(0, 0), (2, 10)]
    c.truncate_from_start(11)
    assert c.entries == [(2, 11)]
    assert LeaderEpochFileCache(path).entries == [(2, 11)]


def test_leader_epoch_below_all_known(tmp_path) -> None:
    c = LeaderEpochFileCache(str(tmp_path / "lec"))
    c.assign(5, 100)
    assert c.end_offset_for(1, 200) == (1, 100)
