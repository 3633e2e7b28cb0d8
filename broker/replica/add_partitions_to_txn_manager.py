"""AddPartitionsToTxnManager: a partition leader asks the transaction coordinator before a transactional append.

KIP-890 part 1 (Kafka 3.9, ``transaction.partition.verification.enable``): before the first
transactional batch of a producer lands on a partition, the leader sends AddPartitionsToTxn v4
(``verify_only``) to the coordinator of the transactional id, which answers whether the partition is
in that producer's open transaction. A hanging transaction (data after its transaction ended, from a
late retry) can then never start. The group coordinator does the same for TxnOffsetCommit.

Error mapping as Kafka's: the coordinator's PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH (what
producers expect here), TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE for clients that predate it,
a CLUSTER_AUTHORIZATION_FAILED of the whole request becomes INVALID_TXN_STATE, a lost connection
NETWORK_EXCEPTION, and a coordinator that does not know v4 means verification is skipped.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from broker.util.java_hash import partition_for
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey
from broker.util.broker_channel import BrokerChannel, BrokerChannelError, BrokerNode

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
VERIFY_VERSION = 4
TopicPartition = Tuple[str, int]


class AddPartitionsToTxnManager:
    """Verifies transactional appends with the transaction coordinator over the inter-broker channel."""

    def __init__(self, channel: BrokerChannel, leader_node: Callable[[str, int], Optional[BrokerNode]],
                 num_txn_partitions: int, request_timeout_ms: int = 30000) -> None:
        """``leader_node(topic, partition)``: where that partition's leader listens for other brokers (None when it
        has no leader or the leader is unknown), from the metadata cache."""
        self.channel = channel
        self.leader_node = leader_node
        self.num_txn_partitions = num_txn_partitions
        self.request_timeout_ms = request_timeout_ms

    def _coordinator(self, transactional_id: str) -> Optional[BrokerNode]:
        return self.leader_node(TRANSACTION_STATE_TOPIC_NAME, partition_for(transactional_id, self.num_txn_partitions))

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Sequence[TopicPartition], generic_errors: bool) -> Dict[TopicPartition, int]:
        """The partitions that failed verification, with their error (empty: all verified)."""
        node = self._coordinator(transactional_id)
        if node is None:
            return {tp: int(ErrorCode.COORDINATOR_NOT_AVAILABLE) for tp in partitions}
        by_topic: Dict[str, List[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        body = {"transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                                  "producer_epoch": producer_epoch, "verify_only": True,
                                  "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}]}
        try:
            response = await self.channel.send(node, ApiKey.ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, body,
                                               self.request_timeout_ms)
        except (BrokerChannelError, asyncio.TimeoutError, OSError) as exc:
            log.warning("AddPartitionsToTxn verification for %s with broker %d failed: %s", transactional_id,
                        node.broker_id, exc or type(exc).__name__)
            return {tp: int(ErrorCode.NETWORK_EXCEPTION) for tp in partitions}
        top = int(getattr(response, "error_code", 0) or 0)
        if top == ErrorCode.UNSUPPORTED_VERSION:
            log.warning("Broker %d cannot verify transactions (AddPartitionsToTxn v4); appending unverified",
                        node.broker_id)
            return {}
        if top:
            log.error("AddPartitionsToTxn verification with broker %d answered %s", node.broker_id,
                      ErrorCode(top).name)
            code = ErrorCode.INVALID_TXN_STATE if top == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else top
            return {tp: int(code) for tp in partitions}
        unverified: Dict[TopicPartition, int] = {}
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    code = int(p.partition_error_code)
                    if not code:
                        continue
                    if code == ErrorCode.PRODUCER_FENCED:
                        code = int(ErrorCode.INVALID_PRODUCER_EPOCH)
                    elif code == ErrorCode.TRANSACTION_ABORTABLE and not generic_errors:
                        code = int(ErrorCode.INVALID_TXN_STATE)
                    unverified[(topic.name, p.partition_index)] = code
        return unverified

    async def verify_partition(self, topic: str, partition: int, transactional_id: str, producer_id: int,
                               producer_epoch: int, generic_errors: bool) -> int:
        """One partition (the group coordinator's ``__consumer_offsets`` partition): its error, 0 if verified."""
        return (await self.verify(transactional_id, producer_id, producer_epoch, [(topic, partition)],
                                  generic_errors)).get((topic, partition), 0)
