"""ControllerBrokerRequestBatch: collects the LeaderAndIsr, UpdateMetadata and StopReplica requests one state
change produces, then sends them per broker (in that order), as Kafka's controller does.

Rules kept from Kafka: adding a LeaderAndIsr for a partition also queues that partition's UpdateMetadata to
every live broker; a partition of a topic being deleted is announced with leader -2 (LeaderDuringDelete) and
StopReplica carries leader epoch -2; requests go only to live (or shutting-down) brokers, each stamped with the
controller id and epoch and the TARGET broker's epoch (czxid of its /brokers/ids/<id>).
Bodies are plain dicts with the schema's field names (broker/protocol/schemas/*.schema).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

from broker.cluster.controller.config import ControllerConfig
from broker.cluster.controller.context import (LEADER_DURING_DELETE, ControllerContext, ReplicaAssignment,
                                               TopicPartition)
from broker.zk.paths import LeaderAndIsr, topic_id_to_uuid

log = logging.getLogger(__name__)

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

#: send(broker_id, api_key, api_version, body, on_response or None)
SendFn = Callable[[int, int, int, dict, Callable[[Any], None] | None], None]


def _answer_from(fn: Callable[..., None], broker: int, *extra: Any) -> Callable[[Any], None]:
    """``fn(broker, response, *extra)`` as the response callback of a request to ``broker``."""
    return lambda resp: fn(broker, resp, *extra)


class ControllerBrokerRequestBatch:
    def __init__(self, config: ControllerConfig, ctx: ControllerContext, send: SendFn,
                 on_leader_and_isr_response: Callable[[int, Any], None],
                 on_update_metadata_response: Callable[[int, Any], None],
                 on_stop_replica_response: Callable[[int, Any, set[TopicPartition]], None]) -> None:
        self.config = config
        self.ctx = ctx
        self._send = send
        self._on_lai = on_leader_and_isr_response
        self._on_um = on_update_metadata_response
        self._on_sr = on_stop_replica_response
        self.leader_and_isr: dict[int, dict[TopicPartition, dict]] = {}
        self.stop_replica: dict[int, dict[TopicPartition, dict]] = {}
        self.update_metadata_brokers: set[int] = set()
        self.update_metadata_partitions: dict[TopicPartition, dict] = {}

    # ------------------------------------------------------------------ batching
    def is_empty(self) -> bool:
        return not (self.leader_and_isr or self.stop_replica or self.update_metadata_brokers)

    def new_batch(self) -> None:
        """Start a batch; a leftover non-empty batch means requests would be lost (Kafka treats that as an
        illegal state and the controller resigns)."""
        if not self.is_empty():
            raise RuntimeError("Controller to broker request batch is not empty while creating a new one")

    def clear(self) -> None:
        self.leader_and_isr.clear()
        self.stop_replica.clear()
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()

    def add_leader_and_isr(self, broker_ids: Iterable[int], tp: TopicPartition, state: LeaderAndIsr,
                           assignment: ReplicaAssignment, is_new: bool) -> None:
        for b in broker_ids:
            if b < 0:
                continue
            per_broker = self.leader_and_isr.setdefault(b, {})
            already_new = per_broker.get(tp, {}).get("is_new", False)
            ps = {
                "topic_name": tp[0], "partition_index": tp[1], "controller_epoch": state.controller_epoch,
                "leader": state.leader, "leader_epoch": state.leader_epoch, "isr": list(state.isr),
                "partition_epoch": state.zk_version, "replicas": list(assignment.replicas),
                "adding_replicas": list(assignment.adding), "removing_replicas": list(assignment.removing),
                "is_new": is_new or already_new,
                "leader_recovery_state": state.leader_recovery_state if self.config.is_leader_recovery_supported
                else 0,
            }
            per_broker[tp] = ps
        self.add_update_metadata(self.ctx.live_or_shutting_down_broker_ids, [tp])

    def add_stop_replica(self, broker_ids: Iterable[int], tp: TopicPartition, delete: bool) -> None:
        epoch = self.ctx.leader_epoch(tp)
        for b in broker_ids:
            if b < 0:
                continue
            per_broker = self.stop_replica.setdefault(b, {})
            already_delete = per_broker.get(tp, {}).get("delete_partition", False)
            per_broker[tp] = {"partition_index": tp[1], "leader_epoch": epoch,
                              "delete_partition": already_delete or delete}

    def add_update_metadata(self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition] = ()) -> None:
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        for tp in partitions:
            state = self.ctx.leadership.get(tp)
            if state is None:
                continue  # no leader assigned yet: nothing to tell
            replicas = self.ctx.partition_replica_assignment(tp)
            offline = [r for r in replicas if not self.ctx.is_replica_online(r, tp)]
            leader, epoch, version = state.leader, state.leader_epoch, state.zk_version
            if self.ctx.is_topic_queued_for_deletion(tp[0]):
                leader, epoch, version = LEADER_DURING_DELETE, 0, 0  # Kafka's LeaderAndIsr.duringDelete
            self.update_metadata_partitions[tp] = {
                "topic_name": tp[0], "partition_index": tp[1], "controller_epoch": state.controller_epoch,
                "leader": leader, "leader_epoch": epoch, "isr": list(state.isr), "zk_version": version,
                "replicas": replicas, "offline_replicas": offline,
            }

    # ------------------------------------------------------------------ sending
    def send_requests(self, controller_epoch: int) -> None:
        try:
            self._send_leader_and_isr(controller_epoch)
            self._send_update_metadata(controller_epoch)
            self._send_stop_replica(controller_epoch)
        finally:
            self.clear()

    def _header(self, controller_epoch: int, broker: int) -> dict[str, Any]:
        return {"controller_id": self.config.broker_id, "is_k_raft_controller": False,
                "controller_epoch": controller_epoch,
                "broker_epoch": self.ctx.live_broker_epochs.get(broker, -1)}

    def _topic_uuid(self, topic: str) -> Any:
        return topic_id_to_uuid(self.ctx.topic_ids.get(topic))

    def _send_leader_and_isr(self, controller_epoch: int) -> None:
        version = self.config.leader_and_isr_version
        live = self.ctx.live_or_shutting_down_broker_ids
        for broker, states in sorted(self.leader_and_isr.items()):
            if broker not in live:
                continue
            leader_ids = {s["leader"] for s in states.values()}
            live_leaders = []
            for lid in sorted(leader_ids):
                info = self.ctx.live_brokers.get(lid)
                ep = info.endpoint(self.config.inter_broker_listener_name) if info is not None else None
                if ep is not None:
                    live_leaders.append({"broker_id": lid, "host_name": ep.host, "port": ep.port})
            body = self._header(controller_epoch, broker)
            body["type"] = 0
            body["live_leaders"] = live_leaders
            if version >= 2:
                topics: dict[str, list[dict]] = {}
                for (topic, _), ps in sorted(states.items()):
                    topics.setdefault(topic, []).append(ps)
                body["topic_states"] = [{"topic_name": t, "topic_id": self._topic_uuid(t), "partition_states": pss}
                                        for t, pss in topics.items()]
            else:
                body["ungrouped_partition_states"] = [ps for _, ps in sorted(states.items())]
            n_lead = sum(1 for s in states.values() if s["leader"] == broker)
            log.info("Sending LeaderAndIsr request to broker %d with %d become-leader and %d become-follower "
                     "partitions", broker, n_lead, len(states) - n_lead)
            self._send(broker, LEADER_AND_ISR, version, body,
                       _answer_from(self._on_lai, broker))
        self.leader_and_isr.clear()

    def _live_brokers_body(self, version: int) -> list[dict]:
        out = []
        for bid in sorted(self.ctx.live_or_shutting_down_broker_ids):
            info = self.ctx.live_brokers.get(bid)
            if info is None:
                continue
            if version == 0:
                ep = info.endpoint("PLAINTEXT")
                out.append({"id": bid, "v0_host": ep.host if ep else "", "v0_port": ep.port if ep else -1})
                continue
            out.append({"id": bid, "rack": info.rack, "endpoints": [
                {"port": e.port, "host": e.host, "listener": e.listener_name,
                 "security_protocol": SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0)} for e in info.endpoints]})
        return out

    def _send_update_metadata(self, controller_epoch: int) -> None:
        if not self.update_metadata_brokers:
            return
        version = self.config.update_metadata_version
        states = [ps for _, ps in sorted(self.update_metadata_partitions.items())]
        live_brokers = self._live_brokers_body(version)
        targets = sorted(self.update_metadata_brokers & self.ctx.live_or_shutting_down_broker_ids)
        log.info("Sending UpdateMetadata request to brokers %s for %d partitions", targets, len(states))
        # Every broker gets the same partition states: built once, shared by the bodies (read-only from here on).
        if version >= 5:
            topics: dict[str, list[dict]] = {}
            for ps in states:
                topics.setdefault(ps["topic_name"], []).append(ps)
            partitions: dict[str, Any] = {"topic_states": [
                {"topic_name": t, "topic_id": self._topic_uuid(t), "partition_states": pss}
                for t, pss in topics.items()]}
        else:
            partitions = {"ungrouped_partition_states": states}
        for broker in targets:
            body = self._header(controller_epoch, broker)
            body["live_brokers"] = live_brokers
            body.update(partitions)
            self._send(broker, UPDATE_METADATA, version, body, _answer_from(self._on_um, broker))
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()

    def _send_stop_replica(self, controller_epoch: int) -> None:
        version = self.config.stop_replica_version
        live = self.ctx.live_or_shutting_down_broker_ids
        for broker, states in sorted(self.stop_replica.items()):
            if broker not in live:
                continue
            deleting = {tp for tp, s in states.items() if s["delete_partition"]}
            if version >= 3:
                topics: dict[str, list[dict]] = {}
                for (topic, _), s in sorted(states.items()):
                    topics.setdefault(topic, []).append(s)
                body = self._header(controller_epoch, broker)
                body["topic_states"] = [{"topic_name": t, "partition_states": pss} for t, pss in topics.items()]
                log.info("Sending StopReplica request for %d replicas to broker %d", len(states), broker)
                self._send(broker, STOP_REPLICA, version, body,
                           _answer_from(self._on_sr, broker, deleting))
                continue
            # before v3 one request per delete flag
            for delete in (True, False):
                chosen = sorted(tp for tp, s in states.items() if s["delete_partition"] == delete)
                if not chosen:
                    continue
                body = self._header(controller_epoch, broker)
                body["delete_partitions"] = delete
                if version == 0:
                    body["ungrouped_partitions"] = [{"topic_name": t, "partition_index": p} for t, p in chosen]
                else:
                    grouped: dict[str, list[int]] = {}
                    for t, p in chosen:
                        grouped.setdefault(t, []).append(p)
                    body["topics"] = [{"name": t, "partition_indexes": ps} for t, ps in grouped.items()]
                cb = _answer_from(self._on_sr, broker, set(chosen)) if delete else None
                self._send(broker, STOP_REPLICA, version, body, cb)
        self.stop_replica.clear()
