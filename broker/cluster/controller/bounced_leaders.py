"""Bounced leaders at controller failover: a leader that registered after its leadership was written.

A running controller sees a broker bounce (it died and registered again before the controller noticed) as a
larger broker epoch, the czxid of /brokers/ids/<id> (KafkaController's bounced brokers). A controller taking
over cannot: it has no earlier epoch to compare with. The case is common when the controller and a partition
leader are the same broker L, killed and restarted within zookeeper.session.timeout.ms: the restarted L waits
for its old /brokers/ids/L to vanish and registers the moment the old session expires, the same moment
/controller vanishes; the next controller then finds L live, and L would stay leader with the SAME leader epoch
although it lost its in-memory state (and, after a machine crash, maybe unflushed records the followers would
truncate to). Kafka 3.9 avoids it differently: its restarted broker fails start-up on the old registration
(NodeExistsException) and comes back only after a supervisor restarts it.

The check: a partition whose leader L is live, with czxid(/brokers/ids/L) > mzxid(the partition's state
znode) and another live broker in its ISR, has a leader that registered after its leadership was last written
while a follower that may hold more is there to take over; L is then treated as bounced (failure, then start-up):
those partitions get another live ISR member as leader, with a new epoch, and the rest L led (those with no other
live ISR member) are elected again with a new epoch. A broker leading only partitions without another live ISR
member is left alone, as Kafka leaves it: a one-broker cluster's restart is always such a case. KafkaController leaves such a broker out of the live
brokers while the failover starts the replica and partition state machines (that is its failure: its replicas
leave the ISRs, the partitions it led elect another live ISR member or go offline; nothing is sent to it, so it
never hears it leads with its old epoch), then runs onBrokerStartup for it at the end of the failover.

Why no later write can hide the bounce (raise the state's mzxid above L's czxid while keeping L leader): between
L's new registration and the new controller's check, the state znode is written by
  * a controller: there is none. When the controller was L, /controller vanished with L's old session, the
    moment L re-registered; every controller write is a multi-op checking the /controller_epoch version, which
    the new controller bumped when it was elected, so nothing of the old one can land afterwards. The new
    controller reads the states (with their mzxid) in initializeControllerContext, before its first write of a
    state znode (the replica and partition state machines' start-up come later; what it writes before are
    /feature, notification deletions and topic ids), so its own writes cannot hide anything;
  * the leader itself, only at IBP < 2.7 (it writes its ISR): the leader is L, whose new incarnation leads
    nothing until a controller sends it LeaderAndIsr, and whose old incarnation is dead.
What the check does not cover: a controller C other than L that dies after L re-registered but before it
handled that BrokerChange, having written L's partition in between (e.g. an AlterPartition L sent before it
died): the write keeps L leader (with a new epoch) and raises mzxid. That needs two failures within the time
C takes to process one event queue.

Why a false positive costs only an extra leader epoch: a broker flagged here is live and its registration is
current, so the worst case is an unneeded leader election: leadership moves to another ISR member (clean: the
ISR holds every committed record) and clients refresh their metadata, or the same broker is elected again with
a new epoch; the broker rejoins every ISR as a follower. It only arises when nothing rewrote a partition's state
after its leader re-registered, which a controller that saw the registration always does (it elects, or takes
the bounced broker out of the ISR).
"""
from __future__ import annotations

from typing import Mapping

from broker.cluster.controller.context import TopicPartition
from broker.zk.paths import LeaderAndIsr


def find_bounced_leaders(states: Mapping[TopicPartition, tuple[LeaderAndIsr, int]],
                         broker_epochs: Mapping[int, int]) -> dict[int, list[TopicPartition]]:
    """{live broker: the partitions it leads whose state (with its mzxid) was written before the broker's
    registration (its epoch, a czxid) and whose ISR holds another live broker}, brokers without such partitions left
    out. zxids are totally ordered.

    Only partitions with another live ISR member count: there the restarted leader may have lost what its
    followers hold, and an election moves leadership to one of them. A leader without another live ISR member
    keeps its leadership as in Kafka (nobody could take it; a new epoch alone protects nothing): otherwise every
    restart of a one-broker cluster, whose broker is always its own new controller, would rewrite the state of every
    partition (3,000 partitions: restart to all led 2 s -> 7 s)."""
    found: dict[int, list[TopicPartition]] = {}
    for tp, (state, mzxid) in states.items():
        epoch = broker_epochs.get(state.leader)
        if epoch is not None and epoch > mzxid and any(r != state.leader and r in broker_epochs for r in state.isr):
            found.setdefault(state.leader, []).append(tp)
    return {b: sorted(tps) for b, tps in sorted(found.items())}
