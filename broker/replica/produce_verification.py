"""Transactional produce with KIP-890 part 1 verification (Kafka's ReplicaManager.handleProduceAppend).

A Produce request carrying transactional batches names one producer id and epoch. For each partition
whose log has no open transaction of that producer yet, the leader takes a *verification guard*,
asks the transaction coordinator (AddPartitionsToTxnManager) whether the partition is in the open
transaction, and appends only the verified partitions, presenting the guard: a marker that ends the
transaction meanwhile clears the guard, so the late append is refused instead of starting a hanging
transaction. Coordinator errors become what producers retry (NOT_ENOUGH_REPLICAS) or understand
(INVALID_TXN_STATE "Partition was not added to the transaction"), as Kafka 3.9 answers them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Set, Tuple

from broker.accel import record_batch
from broker.errors import ErrorCode
from broker.replica.add_partitions_to_txn_manager import AddPartitionsToTxnManager

if TYPE_CHECKING:
    from broker.replica.manager import ProduceResult, ReplicaManager

TopicPartition = Tuple[str, int]
_NOT_VERIFIED_MESSAGE = "Partition was not added to the transaction"


def transactional_producer(buf: Any) -> Optional[Tuple[int, int]]:
    """(producer id, epoch) of a transactional magic-2 batch, else None (the first batch decides, as Kafka's)."""
    if not record_batch.is_transactional(buf):
        return None
    pid = record_batch.producer_id(buf)
    if pid < 0:
        return None
    return pid, record_batch.producer_epoch(buf)


def _produce_error(code: int) -> Tuple[int, Optional[str]]:
    """Kafka's translation of a failed verification into a produce error."""
    if code == ErrorCode.INVALID_TXN_STATE:
        return code, _NOT_VERIFIED_MESSAGE
    if code in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
        return (int(ErrorCode.NOT_ENOUGH_REPLICAS),
                "Unable to verify the partition has been added to the transaction. Underlying error: %s"
                % ErrorCode(code).name)
    return code, None


class ProduceVerification:
    """Appends a Produce request's partitions, verifying transactional ones first when enabled."""

    def __init__(self, replica_manager: "ReplicaManager", manager: Optional[AddPartitionsToTxnManager],
                 enabled: Any) -> None:
        self.replica_manager = replica_manager
        self.manager = manager
        #: transaction.partition.verification.enable, read per request (it is a dynamic broker config)
        self._enabled = enabled

    def enabled(self) -> bool:
        return self.manager is not None and bool(self._enabled() if callable(self._enabled) else self._enabled)

    async def append(self, acks: int, entries: Dict[TopicPartition, Any], timeout_ms: int,
                     transactional_id: Optional[str], api_version: int) -> Dict[TopicPartition, "ProduceResult"]:
        from broker.replica.manager import ProduceResult
        rm = self.replica_manager
        if transactional_id is None or not self.enabled():  # nothing to verify: no need to look at the batches
            return await rm.append_records(acks, entries, timeout_ms=timeout_ms)
        producers: Set[Tuple[int, int]] = set()
        txn_tps = []
        for tp, buf in entries.items():
            prod = transactional_producer(buf)
            if prod is not None:
                producers.add(prod)
                txn_tps.append(tp)
        if not txn_tps:
            return await rm.append_records(acks, entries, timeout_ms=timeout_ms)
        if len(producers) > 1:  # Kafka: InvalidPidMappingException for the whole request
            return {tp: ProduceResult(int(ErrorCode.INVALID_PRODUCER_ID_MAPPING), error_message=(
                "Transactional records contained more than one producer ID")) for tp in entries}
        ((pid, epoch),) = producers
        guards: Dict[TopicPartition, object] = {}
        for tp in txn_tps:
            guard = rm.start_transaction_verification(tp, pid, epoch)
            if guard is not None:
                guards[tp] = guard
        failed: Dict[TopicPartition, Tuple[int, Optional[str]]] = {}
        if guards:
            assert self.manager is not None
            unverified = await self.manager.verify(transactional_id, pid, epoch, list(guards),
                                                   generic_errors=api_version > 10)
            failed = {tp: _produce_error(code) for tp, code in unverified.items()}
        verified = {tp: buf for tp, buf in entries.items() if tp not in failed}
        results = (await rm.append_records(acks, verified, timeout_ms=timeout_ms,
                                           verification_guards={tp: g for tp, g in guards.items() if tp in verified})
                   if verified else {})
        for tp, (code, message) in failed.items():
            results[tp] = ProduceResult(int(code), error_message=message, custom_message=message is not None)
        return results
