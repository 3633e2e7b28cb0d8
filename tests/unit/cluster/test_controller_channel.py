"""ControllerChannelManager on asyncio with a fake BrokerChannel, and a threaded controller end to end."""
from __future__ import annotations

import asyncio
from typing import Any

from broker.cluster.controller import ControllerConfig, KafkaController
from broker.cluster.controller.channel_manager import ControllerChannelManager
from broker.config.kafka_config import Endpoint
from broker.util.broker_channel import BrokerChannelError, BrokerNode
from broker.zk.client import KafkaZkClient
from tests.unit.cluster.controller_harness import SentRequest, roundtrip_request, roundtrip_response
from tests.unit.zk.fake_kazoo import FakeZooKeeper

UPDATE_METADATA = 6


class FakeBrokerChannel:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int, Any, str]] = []
        self.failures: dict[int, int] = {}
        self.gates: dict[int, asyncio.Event] = {}
        self.disconnected: list[int] = []
        self.closed = False
        self.seen = asyncio.Event()
        self.seen_api: dict[int, asyncio.Event] = {}

    async def send(self, node: BrokerNode, api_key: int, api_version: int, body: Any, timeout_ms: int) -> Any:
        self.calls.append((node.broker_id, api_key, body.get("tag") if isinstance(body, dict) else None, node.host))
        gate = self.gates.get(node.broker_id)
        if gate is not None:
            await gate.wait()
        if self.failures.get(node.broker_id, 0) > 0:
            self.failures[node.broker_id] -= 1
            raise BrokerChannelError("connection refused")
        self.seen.set()
        self.seen_api.setdefault(api_key, asyncio.Event()).set()
        req = SentRequest(node.broker_id, api_key, api_version, body, None, None)
        return req.success_response()

    def disconnect(self, broker_id: int) -> None:
        self.disconnected.append(broker_id)

    async def close(self) -> None:
        self.closed = True


def um(tag: str) -> dict:
    return {"controller_id": 1, "controller_epoch": 1, "broker_epoch": 5, "live_brokers": [], "topic_states": [],
            "tag": tag}


async def settle(n: int = 20) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_requests_to_a_broker_go_one_at_a_time_in_order() -> None:
    async def main() -> None:
        fake = FakeBrokerChannel()
        fake_factory = [fake]
        mgr = ControllerChannelManager(lambda cid: fake_factory[-1], asyncio.get_running_loop(), 1,
                                       retry_backoff_ms=0)
        got: list = []
        mgr.add_broker(2, BrokerNode(2, "h2", 9092))
        fake.gates[2] = asyncio.Event()
        for tag in ("a", "b", "c"):
            mgr.send_request(2, UPDATE_METADATA, 8, um(tag), lambda r, t=tag: got.append((t, r.error_code)))
        await settle()
        assert [c[2] for c in fake.calls] == ["a"]  # b waits for a's response
        fake.gates[2].set()
        await settle()
        assert got == [("a", 0), ("b", 0), ("c", 0)]
        mgr.shutdown()
        await settle()
        assert fake.closed
        # usable again after a shutdown (resigned, then elected again): a new channel
        again = FakeBrokerChannel()
        fake_factory.append(again)
        mgr.add_broker(2, BrokerNode(2, "h2", 9092))
        mgr.send_request(2, UPDATE_METADATA, 8, um("d"), lambda r: got.append(("d", r.error_code)))
        await settle()
        assert got[-1] == ("d", 0) and again.calls

    asyncio.run(main())


def test_failed_requests_are_retried_until_they_succeed() -> None:
    async def main() -> None:
        fake = FakeBrokerChannel()
        fake.failures[2] = 3
        mgr = ControllerChannelManager(lambda cid: fake, asyncio.get_running_loop(), 1, retry_backoff_ms=0)
        got: list = []
        mgr.add_broker(2, BrokerNode(2, "h2", 9092))
        mgr.send_request(2, UPDATE_METADATA, 8, um("x"), lambda r: got.append("x"))
        await settle(50)
        assert got == ["x"] and len(fake.calls) == 4

    asyncio.run(main())


def test_removed_broker_drops_its_queue_and_unknown_brokers_get_nothing() -> None:
    async def main() -> None:
        fake = FakeBrokerChannel()
        mgr = ControllerChannelManager(lambda cid: fake, asyncio.get_running_loop(), 1, retry_backoff_ms=0)
        got: list = []
        mgr.add_broker(2, BrokerNode(2, "h2", 9092))
        fake.gates[2] = asyncio.Event()
        mgr.send_request(2, UPDATE_METADATA, 8, um("a"), lambda r: got.append("a"))
        mgr.send_request(2, UPDATE_METADATA, 8, um("b"), lambda r: got.append("b"))
        await settle()
        mgr.remove_broker(2)
        fake.gates[2].set()
        mgr.send_request(3, UPDATE_METADATA, 8, um("c"), lambda r: got.append("c"))
        await settle()
        assert got == [] and fake.disconnected == [2] and mgr.broker_ids == set()
        # re-added (e.g. it re-registered): a fresh queue; a changed address is used
        mgr.add_broker(2, BrokerNode(2, "h2", 9092))
        mgr.add_broker(2, BrokerNode(2, "moved", 9092))
        mgr.send_request(2, UPDATE_METADATA, 8, um("d"), lambda r: got.append("d"))
        await settle()
        assert got == ["d"] and fake.calls[-1][3] == "moved"

    asyncio.run(main())


def test_threaded_controller_end_to_end() -> None:
    """The real wiring: event thread, ZooKeeper calls on it, requests through the channel manager on the loop."""
    zk = FakeZooKeeper()

    def client() -> KafkaZkClient:
        c = KafkaZkClient("fake:2181", kazoo_client=zk.client())
        c.run_in_background = lambda fn: fn()
        c.start()
        return c

    async def main() -> None:
        fake = FakeBrokerChannel()
        broker_zk = client()
        epoch = broker_zk.register_broker(1, [Endpoint("PLAINTEXT", "h1", 9092)])
        ctl = KafkaController(ControllerConfig(1), broker_zk, lambda cid: fake, asyncio.get_running_loop())
        ctl.startup()
        admin = client()
        admin.create_topic_assignment("t", {0: [1]})
        # the LeaderAndIsr of the new partition is sent after its state znode was written
        await asyncio.wait_for(fake.seen_api.setdefault(4, asyncio.Event()).wait(), 5)
        assert admin.get_partition_state("t", 0).leader == 1
        assert ctl.is_active and ctl.epoch == 1
        r = await asyncio.wait_for(ctl.allocate_producer_ids(1, epoch), 5)
        assert r["producer_id_len"] == 1000
        body = {"broker_id": 1, "broker_epoch": epoch, "topics": []}
        msg = roundtrip_request(56, 3, body)
        assert (await asyncio.wait_for(ctl.alter_partition(msg, 3), 5))["error_code"] == 0
        await asyncio.get_running_loop().run_in_executor(None, ctl.shutdown)
        assert not ctl.is_active
        assert (await ctl.controlled_shutdown(1, epoch))[0] == 41  # after shutdown: NOT_CONTROLLER at once

    asyncio.run(main())


def test_roundtrip_helpers_match_the_schema() -> None:
    r = roundtrip_response(UPDATE_METADATA, 8, {"error_code": 0})
    assert r.error_code == 0
