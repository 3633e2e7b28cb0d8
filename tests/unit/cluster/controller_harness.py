"""Deterministic harness for the controller: an in-memory ZooKeeper (kazoo-level fake, so the real
KafkaZkClient runs), a fake ControllerChannelManager that records every request per broker and lets the test
answer it, a manual clock and controllers whose event queues the test drives (`run()`).

Every request the controller sends is encoded and decoded with the wire schema at its version, so a body that
does not fit the schema fails the test at once.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from broker.cluster.controller import ControllerConfig, KafkaController
from broker.cluster.controller.context import TopicPartition
from broker.config.kafka_config import Endpoint
from broker.protocol import api as proto
from broker.util.broker_channel import BrokerNode
from broker.util.clock import ManualClock
from broker.zk.client import KafkaZkClient
from broker.zk.paths import LeaderAndIsr, TopicPartitionStateZNode, topic_id_to_uuid
from tests.unit.zk.fake_kazoo import FakeZooKeeper

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6
API_NAMES = {4: "LeaderAndIsr", 5: "StopReplica", 6: "UpdateMetadata"}


def roundtrip_request(api_key: int, version: int, body: Any) -> Any:
    frame = proto.encode_request(api_key, version, 1, "test", body)[4:]
    header, offset = proto.decode_request_header(frame)
    return proto.decode_request(api_key, version, frame, offset)


def roundtrip_response(api_key: int, version: int, body: Any) -> Any:
    data = b"".join(bytes(p) for p in proto.encode_response(api_key, version, 1, body))
    return proto.decode_response(api_key, version, data)


@dataclass
class SentRequest:
    broker_id: int
    api_key: int
    version: int
    body: dict
    message: Any
    callback: Callable[[Any], None] | None
    answered: bool = False

    @property
    def name(self) -> str:
        return API_NAMES.get(self.api_key, str(self.api_key))

    # ------------------------------------------------------------------ views of the body
    def partition_states(self) -> dict[TopicPartition, dict]:
        """LeaderAndIsr / UpdateMetadata partition states by (topic, partition)."""
        out = {}
        for ts in self.body.get("topic_states", []):
            for ps in ts.get("partition_states", []):
                out[(ts["topic_name"], ps["partition_index"])] = ps
        for ps in self.body.get("ungrouped_partition_states", []):
            out[(ps["topic_name"], ps["partition_index"])] = ps
        return out

    def stop_partitions(self) -> dict[TopicPartition, dict]:
        """StopReplica partitions by (topic, partition), each with delete_partition (any version)."""
        out = {}
        for ts in self.body.get("topic_states", []):
            for ps in ts["partition_states"]:
                out[(ts["topic_name"], ps["partition_index"])] = ps
        delete = self.body.get("delete_partitions", False)
        for t in self.body.get("topics", []):
            for p in t["partition_indexes"]:
                out[(t["name"], p)] = {"partition_index": p, "delete_partition": delete}
        for up in self.body.get("ungrouped_partitions", []):
            out[(up["topic_name"], up["partition_index"])] = {"partition_index": up["partition_index"],
                                                              "delete_partition": delete}
        return out

    def success_response(self) -> Any:
        if self.api_key == LEADER_AND_ISR:
            body = {"error_code": 0, "topics": [
                {"topic_id": ts["topic_id"], "partition_errors": [
                    {"partition_index": ps["partition_index"], "error_code": 0} for ps in ts["partition_states"]]}
                for ts in self.body.get("topic_states", [])]}
        elif self.api_key == STOP_REPLICA:
            body = {"error_code": 0, "partition_errors": [
                {"topic_name": tp[0], "partition_index": tp[1], "error_code": 0} for tp in self.stop_partitions()]}
        else:
            body = {"error_code": 0}
        return roundtrip_response(self.api_key, self.version, body)


class FakeChannelManager:
    """Records requests per broker; the test answers them (or not: an unanswered request just waits)."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerNode] = {}
        self.sent: list[SentRequest] = []
        self.dropped: list[tuple[int, int]] = []
        self.removed: list[int] = []
        self.shutdowns = 0

    def startup(self, brokers: dict[int, BrokerNode]) -> None:
        self.brokers.update(brokers)

    def add_broker(self, broker_id: int, node: BrokerNode) -> None:
        self.brokers[broker_id] = node

    def remove_broker(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)
        self.removed.append(broker_id)
        for r in self.sent:
            if r.broker_id == broker_id and not r.answered:
                r.answered = True  # dropped with the broker's queue

    def send_request(self, broker_id: int, api_key: int, api_version: int, body: Any,
                     callback: Callable[[Any], None] | None = None) -> None:
        message = roundtrip_request(api_key, api_version, body)
        if broker_id not in self.brokers:
            self.dropped.append((broker_id, api_key))
            return
        self.sent.append(SentRequest(broker_id, api_key, api_version, body, message, callback))

    def shutdown(self) -> None:
        self.shutdowns += 1
        for b in list(self.brokers):
            self.remove_broker(b)

    # ------------------------------------------------------------------ test helpers
    def pending(self, broker: int | None = None, api: int | None = None) -> list[SentRequest]:
        return [r for r in self.sent if not r.answered and (broker is None or r.broker_id == broker)
                and (api is None or r.api_key == api)]

    def requests(self, broker: int | None = None, api: int | None = None) -> list[SentRequest]:
        return [r for r in self.sent if (broker is None or r.broker_id == broker) and (api is None or r.api_key == api)]

    def clear(self) -> None:
        """Forget what was sent so far (answered or not)."""
        self.sent.clear()

    def respond(self, req: SentRequest, response: Any | None = None) -> None:
        req.answered = True
        if req.callback is not None:
            req.callback(response if response is not None else req.success_response())

    def respond_all(self, api: int | None = None) -> int:
        n = 0
        for r in self.pending(api=api):
            self.respond(r)
            n += 1
        return n


@dataclass
class Node:
    """One broker: its ZooKeeper session (KafkaZkClient on the fake) and, if started, its controller."""

    broker_id: int
    zk: KafkaZkClient
    epoch: int
    controller: KafkaController | None = None
    channel: FakeChannelManager = field(default_factory=FakeChannelManager)


class Cluster:
    def __init__(self, **config: Any) -> None:
        self.fake = FakeZooKeeper()
        self.clock = ManualClock(1_000_000)
        self.config = config
        self.admin = self._client()
        self.nodes: dict[int, Node] = {}

    def _client(self) -> KafkaZkClient:
        c = KafkaZkClient("fake:2181", kazoo_client=self.fake.client())
        c.run_in_background = lambda fn: fn()  # session recovery runs synchronously: deterministic
        c.start()
        return c

    # ------------------------------------------------------------------ brokers
    def add_broker(self, broker_id: int, rack: str | None = None, start_controller: bool = True,
                   features: dict | None = None, **config: Any) -> Node:
        zk = self._client()
        epoch = zk.register_broker(broker_id, [Endpoint("PLAINTEXT", f"host{broker_id}", 9090 + broker_id)], rack,
                                   features)
        node = Node(broker_id, zk, epoch)
        self.nodes[broker_id] = node
        if start_controller:
            self.start_controller(broker_id, **config)
        self.run()
        return node

    def start_controller(self, broker_id: int, **config: Any) -> KafkaController:
        node = self.nodes[broker_id]
        cfg = ControllerConfig(broker_id=broker_id, **{**self.config, **config})
        node.controller = KafkaController(cfg, node.zk, channel_manager=node.channel, clock=self.clock,
                                          threaded=False)
        node.controller.startup()
        self.run()
        return node.controller

    def kill_broker(self, broker_id: int) -> None:
        """The broker dies: its session closes (ephemerals vanish); its controller stops processing."""
        node = self.nodes.pop(broker_id)
        if node.controller is not None:
            node.controller.event_manager.close()
        node.zk.close()
        self.run()

    def restart_broker(self, broker_id: int, **kw: Any) -> Node:
        """Kill then register again with a new session (new broker epoch)."""
        self.kill_broker(broker_id)
        return self.add_broker(broker_id, **kw)

    def bounce_session(self, broker_id: int) -> None:
        """The broker's session expires and it re-registers at once with a new epoch (as after a long GC)."""
        node = self.nodes[broker_id]
        self.fake.expire_session(node.zk.kazoo)  # KafkaZkClient re-registers (synchronously, see _client)
        found = self.admin.get_broker_and_epoch(broker_id)
        assert found is not None
        node.epoch = found[1]
        self.run()

    # ------------------------------------------------------------------ driving
    def run(self, max_rounds: int = 100) -> None:
        """Process every controller's queued events until all queues are empty."""
        for _ in range(max_rounds):
            n = 0
            for node in list(self.nodes.values()):
                if node.controller is not None:
                    n += node.controller.event_manager.process_pending()
            if n == 0:
                return
        raise AssertionError("controller events did not settle")

    def ack_all(self, rounds: int = 20) -> None:
        """Answer every pending request with success (as healthy brokers would) until none is left."""
        for _ in range(rounds):
            n = sum(node.channel.respond_all() for node in list(self.nodes.values()))
            self.run()
            if n == 0:
                return
        raise AssertionError("requests kept coming")

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.run()

    # ------------------------------------------------------------------ views
    @property
    def controller_node(self) -> Node:
        active = [n for n in self.nodes.values() if n.controller is not None and n.controller.is_active]
        assert len(active) == 1, f"expected one active controller, got {[n.broker_id for n in active]}"
        return active[0]

    @property
    def controller(self) -> KafkaController:
        return self.controller_node.controller  # type: ignore[return-value]

    @property
    def channel(self) -> FakeChannelManager:
        return self.controller_node.channel

    def create_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str] | None = None) -> str:
        tid = self.admin.create_topic_assignment(name, assignment, configs)
        self.run()
        return tid

    def state(self, topic: str, partition: int) -> LeaderAndIsr | None:
        return self.admin.get_partition_state(topic, partition)

    def write_state(self, topic: str, partition: int, **changes: Any) -> LeaderAndIsr:
        """Overwrite a partition state znode as a leader at IBP < 2.7 (or an operator) would."""
        cur = self.state(topic, partition)
        assert cur is not None
        from dataclasses import replace
        new = replace(cur, **changes)
        v = self.admin.set_partition_state(topic, partition, new, cur.zk_version)
        assert v is not None
        return replace(new, zk_version=v)

    def state_path_exists(self, topic: str, partition: int) -> bool:
        return self.admin.path_exists(TopicPartitionStateZNode.path(topic, partition))

    def topic_uuid(self, topic: str) -> Any:
        found = self.admin.get_topic(topic)
        assert found is not None
        return topic_id_to_uuid(found[0])


def run_async(coro_factory: Callable[[], Any], cluster: Cluster) -> Any:
    """Await a controller coroutine while driving the event queue on the same thread."""

    async def main() -> Any:
        task = asyncio.ensure_future(coro_factory())
        for _ in range(100):
            await asyncio.sleep(0)
            cluster.run()
            if task.done():
                return task.result()
        raise AssertionError("controller call did not complete")

    return asyncio.run(main())


def lai_for(channel: FakeChannelManager, broker: int, tp: TopicPartition) -> list[dict]:
    """Every LeaderAndIsr partition state sent to `broker` for `tp`, oldest first."""
    return [r.partition_states()[tp] for r in channel.requests(broker, LEADER_AND_ISR) if tp in r.partition_states()]


def um_for(channel: FakeChannelManager, broker: int, tp: TopicPartition) -> list[dict]:
    return [r.partition_states()[tp] for r in channel.requests(broker, UPDATE_METADATA) if tp in r.partition_states()]


def brokers_of(requests: Iterable[SentRequest]) -> set[int]:
    return {r.broker_id for r in requests}
