"""AlterPartitionManager: batching into AlterPartition v3, one item per partition, retries, answers."""
from __future__ import annotations

import asyncio
import uuid
from typing import Any, Callable, List, Optional, Tuple

import pytest

from broker.errors import ErrorCode
from broker.protocol.api import decode_request, decode_request_header, decode_response, encode_request, encode_response
from broker.replica.alter_partition import AlterPartitionManager
from broker.replica.partition import AlterPartitionError, LeaderAndIsr
from broker.util.broker_channel import BrokerChannelError, BrokerNode

TID = uuid.UUID("aaaaaaaa-0000-0000-0000-000000000001")
TID2 = uuid.UUID("aaaaaaaa-0000-0000-0000-000000000002")
Handler = Callable[[BrokerNode, Any], Any]


class FakeControllerChannel:
    """Decodes each AlterPartition request and answers with ``handler(node, request)`` (dict or exception)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.sent: List[Tuple[BrokerNode, int, Any]] = []
        self.closed = False

    async def send(self, node: BrokerNode, api_key: int, api_version: int, body: Any, timeout_ms: int) -> Any:
        assert api_key == 56
        frame = encode_request(api_key, api_version, 1, "alter-partition", body)
        _, off = decode_request_header(memoryview(frame)[4:])
        req = decode_request(api_key, api_version, memoryview(frame)[4:], off)
        self.sent.append((node, api_version, req))
        await asyncio.sleep(0)
        resp = self.handler(node, req)
        if isinstance(resp, Exception):
            raise resp
        return decode_response(api_key, api_version, b"".join(encode_response(api_key, api_version, 1, resp)))

    def disconnect(self, broker_id: int) -> None:
        pass

    async def close(self) -> None:
        self.closed = True


def commit_all(node: BrokerNode, req: Any, errors: Optional[dict] = None) -> dict:
    errors = errors or {}
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code = errors.get((t.topic_id, p.partition_index), 0)
            parts.append({"partition_index": p.partition_index, "error_code": code, "leader_id": req.broker_id,
                          "leader_epoch": p.leader_epoch, "isr": [b.broker_id for b in p.new_isr_with_epochs],
                          "leader_recovery_state": p.leader_recovery_state, "partition_epoch": p.partition_epoch + 1})
        topics.append({"topic_id": t.topic_id, "partitions": parts})
    return {"throttle_time_ms": 0, "error_code": 0, "topics": topics}


def manager(handler: Handler, controller: Callable[[], Optional[BrokerNode]] = lambda: BrokerNode(9, "c", 1)
            ) -> Tuple[AlterPartitionManager, FakeControllerChannel]:
    ch = FakeControllerChannel(handler)
    return AlterPartitionManager(1, lambda: 77, ch, controller, retry_backoff_ms=1), ch


def test_items_are_batched_and_answered() -> None:
    async def main() -> None:
        m, ch = manager(commit_all)
        r = await asyncio.gather(
            m.submit(("a", 0), TID, 3, [(1, -1), (2, -1)], 0, 5),
            m.submit(("a", 1), TID, 4, [(1, -1)], 0, 6),
            m.submit(("b", 0), TID2, 1, [(1, -1), (3, -1)], 0, 0))
        assert r[0] == LeaderAndIsr(1, 3, (1, 2), 0, 6)
        assert r[1] == LeaderAndIsr(1, 4, (1,), 0, 7)
        assert r[2] == LeaderAndIsr(1, 1, (1, 3), 0, 1)
        assert len(ch.sent) == 1  # one request for all three
        node, version, req = ch.sent[0]
        assert (node.broker_id, version, req.broker_id, req.broker_epoch) == (9, 3, 1, 77)
        by_topic = {t.topic_id: t for t in req.topics}
        p = by_topic[TID].partitions[0]
        assert (p.partition_index, p.leader_epoch, p.partition_epoch, p.leader_recovery_state) == (0, 3, 5, 0)
        assert [(b.broker_id, b.broker_epoch) for b in p.new_isr_with_epochs] == [(1, -1), (2, -1)]
        assert not m.unsent

    asyncio.run(main())


def test_one_pending_item_per_partition() -> None:
    async def main() -> None:
        gate = asyncio.Event()
        answers: List[Any] = []

        def handler(node: BrokerNode, req: Any) -> Any:
            answers.append(req)
            return commit_all(node, req)

        m, ch = manager(handler)
        first = asyncio.ensure_future(m.submit(("a", 0), TID, 0, [(1, -1)], 0, 0))
        await asyncio.sleep(0)
        with pytest.raises(AlterPartitionError) as e:
            await m.submit(("a", 0), TID, 0, [(1, -1), (2, -1)], 0, 0)
        assert e.value.error_code == ErrorCode.OPERATION_NOT_ATTEMPTED
        assert (await first).isr == (1,)
        gate.set()

    asyncio.run(main())


def test_partition_errors_and_missing_answers() -> None:
    async def main() -> None:
        calls = {"n": 0}

        def handler(node: BrokerNode, req: Any) -> Any:
            calls["n"] += 1
            resp = commit_all(node, req, {(TID, 0): ErrorCode.INVALID_UPDATE_VERSION})
            if calls["n"] == 1:
                # Leave partition 1 out of the first answer: it must be re-sent.
                resp["topics"][0]["partitions"] = [p for p in resp["topics"][0]["partitions"]
                                                   if p["partition_index"] != 1]
            return resp

        m, ch = manager(handler)
        r0 = asyncio.ensure_future(m.submit(("a", 0), TID, 0, [(1, -1)], 0, 0))
        r1 = asyncio.ensure_future(m.submit(("a", 1), TID, 0, [(1, -1)], 0, 0))
        with pytest.raises(AlterPartitionError) as e:
            await r0
        assert e.value.error_code == ErrorCode.INVALID_UPDATE_VERSION
        assert (await r1).partition_epoch == 1
        assert len(ch.sent) == 2 and [p.partition_index for p in ch.sent[1][2].topics[0].partitions] == [1]

    asyncio.run(main())


def test_retries_not_controller_disconnects_and_top_level_errors() -> None:
    async def main() -> None:
        controller = {"node": None}
        script: List[Any] = [BrokerChannelError("down"), "not_controller", "stale", "ok"]

        def handler(node: BrokerNode, req: Any) -> Any:
            step = script.pop(0)
            if isinstance(step, Exception):
                return step
            if step == "not_controller":
                controller["node"] = BrokerNode(5, "c5", 1)
                return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
            if step == "stale":
                return {"throttle_time_ms": 0, "error_code": ErrorCode.STALE_BROKER_EPOCH, "topics": []}
            return commit_all(node, req)

        m, ch = manager(handler, lambda: controller["node"])
        fut = asyncio.ensure_future(m.submit(("a", 0), TID, 2, [(1, -1)], 0, 4))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not ch.sent  # no controller known yet: nothing sent, the item waits
        controller["node"] = BrokerNode(4, "c4", 1)
        assert (await asyncio.wait_for(fut, 10)).partition_epoch == 5
        assert [n.broker_id for n, _, _ in ch.sent] == [4, 4, 5, 5]
        await m.shutdown()
        assert ch.closed
        with pytest.raises(AlterPartitionError):
            await m.submit(("a", 0), TID, 2, [(1, -1)], 0, 4)

    asyncio.run(main())


def test_falls_back_to_v1_without_topic_ids() -> None:
    async def main() -> None:
        def handler(node: BrokerNode, req: Any) -> Any:
            t = req.topics[0]
            p = t.partitions[0]
            return {"throttle_time_ms": 0, "error_code": 0, "topics": [{"topic_name": t.topic_name, "partitions": [
                {"partition_index": p.partition_index, "error_code": 0, "leader_id": 1, "leader_epoch": p.leader_epoch,
                 "isr": list(p.new_isr), "leader_recovery_state": 0, "partition_epoch": p.partition_epoch + 1}]}]}

        m, ch = manager(handler)
        r = await m.submit(("a", 0), None, 1, [(1, -1), (2, -1)], 0, 0)
        assert r.isr == (1, 2)
        assert ch.sent[0][1] == 1 and ch.sent[0][2].topics[0].topic_name == "a"

    asyncio.run(main())
