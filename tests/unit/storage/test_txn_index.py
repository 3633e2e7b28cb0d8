"""TransactionIndex: Kafka's ``.txnindex`` bytes, lazy creation, truncation, search and sanity checks."""
from __future__ import annotations

import os

import pytest

from broker.storage.txn_index import (ENTRY_SIZE, AbortedTxn, CorruptIndexError, TransactionIndex, overlapping,
                                      read_aborted_txns)


def test_entry_bytes_are_kafkas_aborted_txn_layout() -> None:
    txn = AbortedTxn(producer_id=0x0102030405060708, first_offset=0x10, last_offset=0x2A, last_stable_offset=0x2B)
    expected = bytes.fromhex(
        "0000"                # version int16 = 0
        "0102030405060708"    # producer id int64
        "0000000000000010"    # first offset int64 = 16
        "000000000000002a"    # last offset int64 = 42
        "000000000000002b")   # last stable offset int64 = 43
    assert txn.encode() == expected and len(expected) == ENTRY_SIZE == 34


def test_file_is_created_by_the_first_entry_and_holds_exactly_the_entries(tmp_path) -> None:
    path = str(tmp_path / "00000000000000000100.txnindex")
    idx = TransactionIndex(path, 100)
    assert idx.collect_aborted_txns(0, 1000) == ([], False)
    idx.truncate_to(0)
    idx.reset()
    idx.flush()
    assert not os.path.exists(path)  # nothing written, nothing created (as Kafka's lazy file)
    a = AbortedTxn(7, 90, 105, 106)
    b = AbortedTxn(-1 & 0x7FFFFFFFFFFFFFFF, 101, 110, 95)
    idx.append(a)
    idx.append(b)
    with open(path, "rb") as f:
        data = f.read()
    assert data == a.encode() + b.encode()
    assert data[:2] == b"\x00\x00" and int.from_bytes(data[2:10], "big") == 7
    assert read_aborted_txns(path) == idx.all_aborted_txns() == [a, b]
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(8, 100, 110, 111))  # last offsets must grow
    idx.close()
    again = TransactionIndex(path, 100)  # reopened: appends continue after the existing entries
    with pytest.raises(ValueError):
        again.append(AbortedTxn(8, 100, 109, 111))
    again.append(AbortedTxn(8, 111, 120, 121))
    assert [t.last_offset for t in again.all_aborted_txns()] == [105, 110, 120]


def test_truncate_reset_rename_delete(tmp_path) -> None:
    path = str(tmp_path / "00000000000000000000.txnindex")
    idx = TransactionIndex(path, 0)
    for i in range(4):
        idx.append(AbortedTxn(i, 10 * i, 10 * i + 5, 10 * i + 6))
    idx.truncate_to(16)  # entries whose marker is at or above 16 go
    assert [t.last_offset for t in idx.all_aborted_txns()] == [5, 15]
    assert os.path.getsize(path) == 2 * ENTRY_SIZE
    idx.append(AbortedTxn(9, 16, 17, 18))  # the last offset after truncation is the kept entry's
    idx.rename_to(path + ".deleted")
    assert os.path.exists(path + ".deleted") and not os.path.exists(path)
    assert len(idx.all_aborted_txns()) == 3
    idx.reset()
    assert os.path.getsize(path + ".deleted") == 0 and idx.all_aborted_txns() == []
    idx.delete()
    assert not os.path.exists(path + ".deleted")


def test_collect_stops_once_an_entrys_lso_reaches_the_upper_bound() -> None:
    txns = [AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 5, 20, 21), AbortedTxn(3, 30, 40, 41), AbortedTxn(4, 45, 50, 60)]
    # a transaction overlaps [fetch, upper) when it ends at/after the fetch offset and starts before the bound
    assert overlapping(txns, 11, 35) == ([txns[1], txns[2]], True)  # txn 3's LSO 41 >= 35: later segments not needed
    assert overlapping(txns, 0, 100) == (txns, False)
    assert overlapping(txns, 51, 100) == ([], False)


def test_sanity_check(tmp_path) -> None:
    path = str(tmp_path / "00000000000000000050.txnindex")
    TransactionIndex(path, 50).sanity_check()  # no file: fine
    with open(path, "wb") as f:
        f.write(AbortedTxn(1, 40, 49, 50).encode())
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 50).sanity_check()  # a marker below the segment's base offset
    with open(path, "wb") as f:
        f.write(AbortedTxn(1, 40, 55, 56).encode() + b"\x00" * 5)
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 50).sanity_check()  # a torn entry
    with open(path, "wb") as f:
        f.write(b"\x00\x01" + AbortedTxn(1, 40, 55, 56).encode()[2:])
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 50).sanity_check()  # an unknown version
    with open(path, "wb") as f:
        f.write(AbortedTxn(1, 40, 55, 56).encode())
    TransactionIndex(path, 50).sanity_check()
