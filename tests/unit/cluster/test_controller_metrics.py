"""The controller publishes OfflinePartitionsCount after each event (Kafka's updateMetrics on the event thread), so
the metrics endpoint's threads read one published number and never the ControllerContext."""
from __future__ import annotations

from tests.unit.cluster.controller_harness import Cluster


def test_offline_partitions_count_is_published_after_each_event() -> None:
    c = Cluster()
    for b in (1, 2, 3):
        c.add_broker(b)
    c.ack_all()
    assert c.controller_node.broker_id == 1
    c.create_topic("alone", {0: [3], 1: [3]})
    c.create_topic("kept", {0: [1, 2]})
    c.run()
    controller = c.controller_node.controller
    assert controller.offline_partitions_count == 0
    c.kill_broker(3)  # the only replica of alone-0 and alone-1: both go offline
    c.run()
    assert controller.offline_partitions_count == 2
    # only the active controller counts
    assert c.nodes[2].controller.offline_partitions_count == 0
