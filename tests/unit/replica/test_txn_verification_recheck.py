"""KIP-890: with transaction.partition.verification.enable, the append (the log's owner) checks every transactional
batch, as Kafka's UnifiedLog.analyzeAndValidateProducerState does: its producer's transaction is open at append
time, or the batch presents the verification guard it took. The loop's look that skips the verification (the log
held an open transaction: Kafka's maybeStartTransactionVerification returning VerificationGuard.SENTINEL) is made
without the owner, so a transaction that ends between that look and the append must not be continued by the
unverified batch: INVALID_TXN_STATE, as Kafka's InvalidTxnStateException "Record was not part of an ongoing
transaction".

A one-broker FakeCluster with inline I/O (no threads, no sleeps).
"""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from broker.errors import ErrorCode as E
from broker.protocol.records.builder import build_batch

from .harness import TP, FakeCluster, state, drive

PID = 5151


def txn_batch(seq: int, value: bytes) -> bytearray:
    return bytearray(build_batch([(b"k", value, [], 1_700_000_000_000)], producer_id=PID, producer_epoch=0,
                                 base_sequence=seq, is_transactional=True))


async def append(rm: Any, seq: int, guard: Any = None) -> int:
    guards = {TP: guard} if guard is not None else None
    return (await rm.append_records(1, {TP: txn_batch(seq, b"v%d" % seq)}, verification_guards=guards))[TP].error_code


@pytest.mark.parametrize("enabled", [True, False])
def test_a_transaction_ending_between_the_check_and_the_append_is_not_continued_unverified(
        tmp_path: Any, enabled: bool) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1], [1]))
            rm = b.rm
            rm.transaction_verification_enabled = lambda: enabled
            guard = rm.start_transaction_verification(TP, PID, 0)
            assert guard is not None  # no open transaction yet: verify with the coordinator first
            assert await append(rm, 0, guard) == 0  # verified: the transaction starts
            # the transaction is open: the loop's look skips the verification (no guard) ...
            assert rm.start_transaction_verification(TP, PID, 0) is None
            assert await append(rm, 1) == 0  # ... and the owner finds it still open
            assert rm.start_transaction_verification(TP, PID, 0) is None  # the next batch's look
            # ... but the transaction ends (its ABORT marker) before that batch's append
            assert await drive(rm, rm.append_txn_markers(PID, 0, 0, False, [TP], 30_000)) == {TP: 0}
            code = await append(rm, 2)
            leo = rm.get_partition(TP).log.log_end_offset
            if enabled:  # refused at the append: no transaction started without its coordinator knowing
                assert code == E.INVALID_TXN_STATE and leo == 3
            else:  # verification off: appended, as Kafka without verification
                assert code == 0 and leo == 4
        finally:
            await c.close()

    asyncio.run(main())
