"""Nemesis: ZooKeeper and 3 brokers, each in its own network namespace, under seeded random faults, with an
idempotent acks=all producer, a read_committed consumer group and a transactional producer (its own namespace,
``txc``: tests.harness.nemesis.txn_client) running throughout.

One fault at a time: a quiet gap, the fault held for its duration, the heal, then a bounded wait for recovery
(every broker up, every partition led, full ISR as every broker's Metadata says) and for the producer and the
consumer to resume on every partition. The times measured from each heal are kept in a :class:`FaultRecord`.
:mod:`tests.harness.nemesis.audit` checks the ledgers at the end.

Disk faults on a running broker (no device-mapper, no FUSE here; a read-only remount is refused while files are
open for writing) are injected with strace (:mod:`tests.harness.syscall_faults`):
- ``disk_eio``: the leader's write-side syscalls on its log dir's files fail with EIO for the hold, then strace
  detaches; the broker is restarted only if it exited or does not rejoin every ISR (as after ``disk_full``);
- ``disk_ro_live``: the same with EROFS (the filesystem turned read-only under the broker).
"""
from __future__ import annotations

import logging
import os
import resource
import random
import shutil
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.faults import ProduceLoad
from tests.harness.mixed_cluster import COMMON
from tests.harness.nemesis.disk import TmpfsLogDir
from tests.harness.nemesis.ledger import ConsumeLedger
from tests.harness.nemesis.netns import CLIENT, NetLab, remove_leftovers
from tests.harness.nemesis.nodes import (Broker, KafkaNsBroker, NsZooKeeper, OurNsBroker, group_pids,
                                         open_descriptors)
from tests.harness.nemesis.schedule import FaultSpec
from tests.harness.syscall_faults import SyscallErrors, log_dir_paths
from tests.harness.nemesis.txn_client import TXN_PARTITIONS, TXN_TOPIC, TxnWorkload

TOPIC = "nemesis"
#: Same keys, same meaning for both targets (tests.harness.mixed_cluster.COMMON plus the fault-speed settings).
BROKER_PROPS = dict(COMMON, **{"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "4000",
                                "unclean.leader.election.enable": "false", "controlled.shutdown.enable": "true",
                                "offsets.topic.num.partitions": "3",
                                # the transactional client's coordinator: few partitions, and a transaction past
                                # its timeout (10 s, txn_client.TXN_TIMEOUT_MS) aborted within 2 s, not 10
                                "transaction.state.log.num.partitions": "3",
                                "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000"})
SESSION_TIMEOUT_S = 6.0
RECOVERY_TIMEOUT_S = 120.0


@dataclass
class FaultRecord:
    kind: str
    target: str
    start: float                      # seconds since the fault phase began
    held: float                       # seconds the fault was in place
    recovered_s: Optional[float] = None   # heal -> every broker up, every partition led with a full ISR
    producer_any_s: Optional[float] = None  # heal -> first acknowledgement (any partition)
    producer_all_s: Optional[float] = None  # heal -> an acknowledgement on every partition
    consumer_any_s: Optional[float] = None
    consumer_all_s: Optional[float] = None
    note: str = ""
    healed_at: float = 0.0            # monotonic time of the heal (a killed broker: when its restart began)
    txn_resume_s: Optional[float] = None  # heal -> the transactional client's next commit returned
    txn_cut: Optional[int] = None     # txn_client_cut: the transaction open when the client was cut


@dataclass
class RunResult:
    seed: str
    target: str
    records: List[FaultRecord] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)


def summarize(xs: Sequence[Optional[float]]) -> str:
    vals = sorted(x for x in xs if x is not None)
    if not vals:
        return "-"
    return f"{vals[0]:.1f}/{statistics.median(vals):.1f}/{vals[-1]:.1f}"


class Nemesis:
    """The cluster, the workload and the fault injection. ``with Nemesis(...) as n: n.run(schedule, budget)``."""

    def __init__(self, target: str = "ours", partitions: int = 4, tmpfs_mb: int = 128,
                 produce_interval_s: float = 0.01, inflight: int = 1, workdir: Optional[Path] = None,
                 log: Callable[[str], None] = print) -> None:
        if target not in ("ours", "kafka"):
            raise ValueError("target is ours or kafka")
        self.target = target
        self.partitions = partitions
        self.tmpfs_mb = tmpfs_mb
        self.produce_interval_s = produce_interval_s
        self.inflight = inflight
        self.log = log
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"nemesis-{os.getpid()}-"))
        self.broker_ids = [0, 1, 2]
        self.net = NetLab(["zk"] + [f"b{i}" for i in self.broker_ids] + ["txc"])  # txc: the transactional client
        self.disks: Dict[int, TmpfsLogDir] = {}
        self.brokers: Dict[int, Broker] = {}
        self.zk: Optional[NsZooKeeper] = None
        self.load: Optional[ProduceLoad] = None
        self.reader: Optional[ConsumeLedger] = None
        self.txn: Optional[TxnWorkload] = None
        self.t0 = time.monotonic()
        self.result = RunResult(seed="", target=target)
        self.last_view: object = None
        # librdkafka's connection notes go to clients.log in the work dir, not to the summary's terminal
        self._client_log = logging.getLogger(f"nemesis.clients.{os.getpid()}.{id(self)}")
        self._client_log.propagate = False
        self._client_log.setLevel(logging.INFO)

    # ------------------------------------------------------------------ set-up / tear-down
    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self) -> "Nemesis":
        left = remove_leftovers()
        if left:
            self.log(f"removed leftovers of an earlier run: {', '.join(left)}")
        self.net.setup()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._client_log.addHandler(logging.FileHandler(self.workdir / "clients.log"))
        self.log(f"subnet {self.net.prefix}.0/24, workdir {self.workdir}")
        self.zk = NsZooKeeper(self.workdir, self.net.addr["zk"], self.net.exec_prefix("zk"))
        self.zk.start()
        zk_connect = f"{self.zk.connect_string}/nemesis"
        cls = OurNsBroker if self.target == "ours" else KafkaNsBroker
        for i in self.broker_ids:
            disk = TmpfsLogDir(self.workdir / f"b{i}" / "data", self.tmpfs_mb).mount()
            self.disks[i] = disk
            self.brokers[i] = cls(self.workdir / f"b{i}", zk_connect, i, self.net.addr[f"b{i}"],
                                  self.net.exec_prefix(f"b{i}"), disk.path, dict(BROKER_PROPS))
        for b in self.brokers.values():
            b.start(wait=False)
        for b in self.brokers.values():
            b.wait_started(120)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        fut = admin.create_topics([NewTopic(TOPIC, self.partitions, 3, config={"min.insync.replicas": "2"}),
                                   NewTopic(TXN_TOPIC, TXN_PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                                  operation_timeout=30)
        fut[TOPIC].result(40)
        fut[TXN_TOPIC].result(40)
        if self.wait_recovered(60) is None:
            raise RuntimeError(f"topic {TOPIC} did not come online with full ISRs: {self.last_view!r}")
        self.load = ProduceLoad(self.bootstrap, TOPIC, self.partitions, interval_s=self.produce_interval_s,
                                extra={"max.in.flight.requests.per.connection": self.inflight,
                                       "message.timeout.ms": 600000, "logger": self._client_log}).start()
        self.reader = ConsumeLedger(self.bootstrap, TOPIC, f"nemesis-{uuid.uuid4().hex[:6]}",
                                    logger=self._client_log).start()
        self.txn = TxnWorkload(self.net.exec_prefix("txc"), self.bootstrap, self.workdir).start()
        self.load.wait_acks(50, 60)
        if self.txn.wait_commit_since(0.0, 90) is None:
            raise RuntimeError(f"the transactional client committed nothing within 90 s (see "
                               f"{self.txn.output_path} and {self.txn.ledger_path})")
        deadline = time.monotonic() + 60
        while not self.reader.ledger.reads and time.monotonic() < deadline:
            time.sleep(0.1)
        self.t0 = time.monotonic()
        return self

    def close(self) -> None:
        """Stop everything this run started and remove its namespaces, links and mounts (always safe to call)."""
        if self.load is not None and self.load._thread.is_alive():
            self.load._stop.set()
            self.load._thread.join(5)
        if self.reader is not None and self.reader._thread.is_alive():
            self.reader._stop.set()
            self.reader._thread.join(5)
        if self.txn is not None and self.txn.is_alive():
            self.txn.stop(10)
        for b in self.brokers.values():
            try:
                b.kill()  # SIGKILL also ends a SIGSTOPped process
            except Exception:  # already gone
                pass
        if self.zk is not None:
            self.zk.stop()
        self.net.heal()
        for d in self.disks.values():
            d.unfill()
            d.unmount()
        self.net.teardown()
        for h in list(self._client_log.handlers):
            h.close()
            self._client_log.removeHandler(h)

    def __enter__(self) -> "Nemesis":
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ views of the cluster
    def view_from(self, broker_id: int, timeout_s: float = 3.0) -> Dict[int, Tuple[int, List[int], List[int]]]:
        """partition -> (leader, replicas, isr) as ``broker_id`` answers Metadata (a fresh client pinned to it)."""
        admin = AdminClient({"bootstrap.servers": self.brokers[broker_id].bootstrap})
        md = admin.list_topics(TOPIC, timeout=timeout_s)
        t = md.topics[TOPIC]
        if t.error is not None:
            raise RuntimeError(str(t.error))
        return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in t.partitions.values()}

    def any_view(self) -> Dict[int, Tuple[int, List[int], List[int]]]:
        last: Exception = RuntimeError("no broker answered")
        for i in self.broker_ids:
            if self.brokers[i].is_alive():
                try:
                    return self.view_from(i)
                except Exception as exc:
                    last = exc
        raise last

    def controller(self) -> int:
        for i in self.broker_ids:
            try:
                c = AdminClient({"bootstrap.servers": self.brokers[i].bootstrap}).list_topics(timeout=3).controller_id
                if c is not None and c >= 0:
                    return int(c)
            except Exception:
                continue
        return -1

    def recovered(self) -> bool:
        """Every broker up, and every broker's Metadata: each partition led, with all 3 replicas in its ISR."""
        if not all(b.is_alive() for b in self.brokers.values()):
            self.last_view = "a broker is down"
            return False
        for i in self.broker_ids:
            v = self.view_from(i)
            self.last_view = (i, v)
            if len(v) != self.partitions or any(l < 0 or len(isr) != 3 for l, _, isr in v.values()):
                return False
        return True

    def wait_recovered(self, timeout_s: float = RECOVERY_TIMEOUT_S) -> Optional[float]:
        start = time.monotonic()
        self.last_view: object = None
        while time.monotonic() - start < timeout_s:
            try:
                if self.recovered():
                    return time.monotonic() - start
            except Exception as exc:
                self.last_view = exc
            time.sleep(0.25)
        return None

    def full_replicas(self) -> Dict[int, List[int]]:
        """partition -> replicas, only once every ISR is full (for wait_replicas_identical)."""
        if not self.recovered():
            raise RuntimeError(f"ISR not full: {self.last_view!r}")
        return {p: r for p, (_, r, _) in self.view_from(self.broker_ids[0]).items()}

    # ------------------------------------------------------------------ faults
    def _leader_of(self, pick: int) -> int:
        v = self.any_view()
        leader = v[pick % self.partitions][0]
        return leader if leader >= 0 else self.broker_ids[pick % 3]

    def _restart(self, i: int, rec: Optional[FaultRecord] = None, attempts: int = 4) -> None:
        """Kill broker ``i`` if it runs, start it again; retried if it exits or hangs during start-up (Kafka 3.9
        gives up at once when its previous session's /brokers/ids znode still exists after a kill -9)."""
        b = self.brokers[i]
        if rec is not None and not rec.healed_at:
            rec.healed_at = time.monotonic()
        for attempt in range(attempts):
            if b.is_alive():
                b.kill()
            b.start(wait=False)
            try:
                b.wait_started(45)
                if attempt and rec is not None:
                    rec.note = (rec.note + "; " if rec.note else "") + f"started at attempt {attempt + 1}"
                return
            except Exception as exc:
                last = str(exc)[-300:]
                b.kill()
                time.sleep(2)
        self.result.problems.append(f"broker {i} did not start again in {attempts} attempts: {last}")

    def _ensure_serving(self, i: int, rec: FaultRecord, settle_s: float = 20.0) -> None:
        """After a disk fault: restart broker ``i`` if it exited, or if it does not rejoin every ISR by itself."""
        b = self.brokers[i]
        if not b.is_alive():
            rec.note = "broker exited; restarted"
            self._restart(i)
            return
        if self.wait_recovered(settle_s) is None:
            rec.note = f"not back in every ISR within {settle_s:.0f}s; restarted"
            self._restart(i)
        else:
            rec.note = "recovered without a restart"

    def _broker_czxid(self, i: int) -> Optional[int]:
        """czxid of /brokers/ids/<i> (the broker's ZooKeeper session), None if absent or unreadable."""
        from kazoo.client import KazooClient

        assert self.zk is not None
        zk = KazooClient(hosts=f"{self.zk.connect_string}/nemesis", timeout=5)
        try:
            zk.start(5)
            st = zk.exists(f"/brokers/ids/{i}")
            return None if st is None else st.czxid
        except Exception:
            return None
        finally:
            zk.stop()
            zk.close()

    def _hold_descriptor_limit(self, i: int, duration: float, spare: int = 16) -> str:
        """Lower broker ``i``'s soft RLIMIT_NOFILE to what it has open plus ``spare`` (prlimit on the running
        process: new connections, files and sockets fail with EMFILE), hold it while the workload runs, restore
        it. Returns a note: the acknowledgements during the hold on partitions it leads, and whether its ZooKeeper
        session (czxid of its registration) survived."""
        b = self.brokers[i]
        before = self._broker_czxid(i)
        led = [p for p, (leader, _, _) in self.any_view().items() if leader == i]
        saved: Dict[int, Tuple[int, int]] = {}
        start = time.monotonic()
        try:
            for pid in group_pids(b.proc.pid):
                try:
                    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
                    limit = min(open_descriptors(pid) + spare, soft)
                    resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, hard))
                    saved[pid] = (soft, hard)
                except (ProcessLookupError, FileNotFoundError):
                    continue
            if not saved:
                raise RuntimeError(f"no process of broker {i} to limit")
            served = self._new_clients_while_limited(i, spare * 2)
            time.sleep(max(0.0, duration - (time.monotonic() - start)))
        finally:
            end = time.monotonic()
            for pid, lim in saved.items():
                try:
                    resource.prlimit(pid, resource.RLIMIT_NOFILE, lim)
                except ProcessLookupError:
                    pass
        assert self.load is not None
        acked = sum(1 for p in led for a in self.load.acks_since(start, p) if a.t <= end)
        after = self._broker_czxid(i)
        session = ("ZooKeeper session kept" if before is not None and before == after
                   else f"ZooKeeper registration changed ({before} -> {after})")
        alive = "" if b.is_alive() else "; broker exited"
        return f"{acked} acks on its partitions {led} while limited; new client {served}; {session}{alive}"

    def _new_clients_while_limited(self, i: int, idle: int) -> str:
        """Spend the broker's spare descriptors with ``idle`` idle connections, then ask a new client's Metadata:
        whether it was served (the idle ones are closed again before the limit is restored)."""
        import socket

        host, port = self.brokers[i].bootstrap.rsplit(":", 1)
        socks = []
        try:
            for _ in range(idle):
                try:
                    socks.append(socket.create_connection((host, int(port)), timeout=2))
                except OSError:
                    break
            time.sleep(0.5)
            try:
                self.view_from(i, timeout_s=3.0)
                return "served"
            except Exception:
                return "not served"
        finally:
            for sk in socks:
                sk.close()

    def _max_ack_gap(self, partitions: Sequence[int], since: float) -> Optional[float]:
        """The longest wait between two acknowledgements on one of ``partitions`` from ``since`` on (the producer's
        stall while their leader failed or its link was bad); None with fewer than two acknowledgements."""
        assert self.load is not None
        gaps = []
        for p in partitions:
            ts = sorted(a.t for a in self.load.acks_since(since, p))
            gaps += [b - a for a, b in zip(ts, ts[1:])]
        return max(gaps) if gaps else None

    def _longest_ack_gap(self, partitions: Sequence[int], since: float) -> str:
        """:meth:`_max_ack_gap` from a second before ``since``, as a note."""
        gap = self._max_ack_gap(partitions, since - 1.0)
        return f"longest ack gap on its led partitions {list(partitions)}: " + ("-" if gap is None else f"{gap:.1f}s")

    def _hold_syscall_errors(self, i: int, errno_name: str, duration: float) -> str:
        """Make broker ``i``'s write-side syscalls on every file now in its log dir fail with ``errno_name`` (strace
        attached to its process group, tests.harness.syscall_faults) for ``duration`` s, then detach. Returns a
        note: how many calls failed, and whether the broker took the dir offline, halted or kept on."""
        b = self.brokers[i]
        seen = len(b.output())
        with SyscallErrors(group_pids(b.proc.pid), log_dir_paths([self.disks[i].path]), errno_name) as faults:
            time.sleep(duration)
        injected = faults.injected
        faults.cleanup()
        out = b.output()[seen:]
        if not b.is_alive():
            state = f"halted (status {b.proc.returncode})"
        elif "Stopped serving replicas in dir" in out:
            state = "dir offline, kept running"
        else:
            state = "kept running, dir online"
        return f"{injected} syscalls failed with {errno_name}; {state}"

    def _hold_watching_isr(self, i: int, duration: float) -> str:
        """Hold a link fault for ``duration`` s, reading every partition's ISR about once a second from a broker
        other than ``i``; returns the shrinks seen (partition: smallest ISR, seconds into the fault) as a note."""
        other = next(j for j in self.broker_ids if j != i)
        start = time.monotonic()
        smallest: Dict[int, Tuple[List[int], float]] = {}
        views = 0
        while time.monotonic() - start < duration:
            try:
                for p, (_, _, isr) in self.view_from(other, timeout_s=1.0).items():
                    if len(isr) < 3 and len(isr) < len(smallest.get(p, ([0, 0, 0], 0.0))[0]):
                        smallest[p] = (sorted(isr), time.monotonic() - start)
                views += 1
            except Exception:  # no answer this time; the next view tries again
                pass
            time.sleep(max(0.0, min(1.0, duration - (time.monotonic() - start))))
        if not smallest:
            return f"ISR full in all {views} views"
        return "ISR shrank: " + ", ".join(f"p{p} to {isr} at {t:.1f}s" for p, (isr, t) in sorted(smallest.items()))

    def _link_note(self, i: int, pick: int, since: float) -> str:
        """While a lossy or slow link is in place: the acknowledgement rate on the partitions broker ``i`` leads
        since ``since`` (and in the 5 s before), their longest wait between two acknowledgements, and the ISR of
        partition ``pick`` as a broker other than ``i`` answers Metadata."""
        assert self.load is not None
        now = time.monotonic()
        try:  # a broker other than i answers: the clients' link to i may be the lossy one
            other = next(j for j in self.broker_ids if j != i)
            view = self.view_from(other)
        except Exception as exc:
            return f"{len(self.load.acks_since(since))} acks during the fault; no Metadata view ({exc!r:.80})"
        led = [p for p, (leader, _, _) in view.items() if leader == i]
        during = [a.t for p in led for a in self.load.acks_since(since, p)]
        before = [a.t for p in led for a in self.load.acks_since(since - 5.0, p) if a.t < since]
        return (f"acks on its partitions {led}: {len(during) / max(now - since, 1e-3):.0f}/s during "
                f"({len(before) / 5.0:.0f}/s before), longest gap {self._max_ack_gap(led, since) or 0.0:.1f}s; "
                f"ISR of p{pick % self.partitions} {view[pick % self.partitions][2]}")

    def heal_everything(self) -> None:
        """After a fault that could not be applied or healed: no cut, no filler, every disk writable, every broker
        running."""
        self.net.heal()
        for i, d in self.disks.items():
            d.unfill()
            try:
                d.remount_rw()
            except Exception:  # it was not read-only
                pass
            b = self.brokers[i]
            if b.is_alive():
                try:
                    b.resume()
                except Exception:
                    pass
            else:
                self._restart(i)

    def inject(self, spec: FaultSpec) -> FaultRecord:
        """Apply ``spec``, hold it, heal it; returns the record (times from the heal filled in by :meth:`run`)."""
        rng = random.Random(spec.pick)
        k = spec.kind
        start = time.monotonic()
        rec = FaultRecord(k, "", start - self.t0, spec.duration)
        if k in ("kill9", "kill9_controller"):
            i = self.controller() if k == "kill9_controller" else self.broker_ids[spec.pick % 3]
            if i < 0:
                i = self.broker_ids[spec.pick % 3]
                rec.note = "no controller known; killed a random broker"
            rec.target = f"broker {i}"
            self.brokers[i].kill()
            time.sleep(spec.duration)
            self._restart(i, rec)
        elif k == "sigstop":
            i = self.broker_ids[spec.pick % 3]
            rec.target = f"broker {i}"
            self.brokers[i].pause()
            time.sleep(spec.duration)
            self.brokers[i].resume()
        elif k == "leader_cut":
            i = self._leader_of(spec.pick)
            rec.target = f"leader {i} of p{spec.pick % self.partitions}"
            for j in self.broker_ids:
                if j != i:
                    self.net.cut(f"b{i}", f"b{j}")
            time.sleep(spec.duration)
            try:  # as a follower's Metadata has it (the controller's view when it is not the leader)
                isr = self.view_from(next(j for j in self.broker_ids if j != i))[spec.pick % self.partitions][2]
                rec.note = f"ISR before heal {isr}"
            except Exception:
                pass
            self.net.heal()
        elif k == "zk_cut":
            i = self.broker_ids[spec.pick % 3]
            rec.target = f"broker {i}"
            self.net.cut(f"b{i}", "zk")
            time.sleep(max(spec.duration, SESSION_TIMEOUT_S + 1))
            self.net.heal()
        elif k == "all_zk_cut":
            rec.target = "all brokers"
            for j in self.broker_ids:
                self.net.cut(f"b{j}", "zk")
            time.sleep(spec.duration)
            self.net.heal()
        elif k == "client_cut":
            i = self._leader_of(spec.pick)
            rec.target = f"clients / leader {i} of p{spec.pick % self.partitions}"
            self.net.cut(CLIENT, f"b{i}")
            time.sleep(spec.duration)
            self.net.heal()
        elif k == "oneway_cut":
            nodes = ["zk"] + [f"b{j}" for j in self.broker_ids]
            a, b = rng.sample(nodes, 2)
            rec.target = f"{a} -> {b} dropped"
            self.net.block(a, b)
            time.sleep(spec.duration)
            self.net.heal()
        elif k == "rate_limit":
            i = self._leader_of(spec.pick)
            rec.target = f"broker {i} link at 256kbit (tbf)"
            self.net.rate_limit(f"b{i}", "256kbit")
            time.sleep(spec.duration)
            self.net.heal()
        elif k == "disk_full":
            i = self._leader_of(spec.pick)
            rec.target = f"broker {i} log dir"
            taken = self.disks[i].fill()
            rec.target += f" (+{taken >> 20} MiB filler)"
            time.sleep(spec.duration)
            self.disks[i].unfill()
            rec.healed_at = time.monotonic()
            rec.held = rec.healed_at - start
            self._ensure_serving(i, rec)
            return rec
        elif k == "disk_ro":
            i = self.broker_ids[spec.pick % 3]
            rec.target = f"broker {i} log dir"
            b = self.brokers[i]
            b.kill()
            self.disks[i].remount_ro()
            b.start(wait=False)
            time.sleep(spec.duration)
            rec.note = ("broker kept running on the read-only dir" if b.is_alive()
                        else "broker exited on the read-only dir")
            b.kill()
            self.disks[i].remount_rw()
            self._restart(i, rec)
        elif k == "txn_client_cut":
            assert self.txn is not None
            # alternately with its records in the leaders' logs (commit not sent yet) and just begun (the
            # AddPartitionsToTxn and the records in flight)
            delivered = sum(r.kind == k for r in self.result.records) % 2 == 0
            t = self.txn.wait_open(delivered, 10)
            rec.txn_cut = None if t is None else t.txn
            rec.target = "txc / every broker" + ("" if t is None else f", txn {t.txn} " +
                                                 ("delivered" if t.delivered is not None else "begun"))
            for j in self.broker_ids:
                self.net.cut("txc", f"b{j}")
            time.sleep(spec.duration)
            self.net.heal()
        elif k in ("disk_eio", "disk_ro_live"):
            i = self._leader_of(spec.pick)
            errno_name = "EIO" if k == "disk_eio" else "EROFS"
            rec.target = f"broker {i} log dir ({errno_name} on its files, strace)"
            led = [p for p, (leader, _, _) in self.any_view().items() if leader == i]
            held = self._hold_syscall_errors(i, errno_name, spec.duration)
            rec.healed_at = time.monotonic()
            rec.held = rec.healed_at - start
            self._ensure_serving(i, rec)
            rec.note = f"{held}; {self._longest_ack_gap(led, start)}; {rec.note}"
            return rec
        elif k == "lossy_link":  # nft drops on arrival, both directions (NetLab.lossy)
            i = self._leader_of(spec.pick)
            pct = rng.randint(5, 30)
            peer = rng.choice([f"b{j}" for j in self.broker_ids if j != i] + [CLIENT])
            rec.target = f"leader {i} of p{spec.pick % self.partitions} <-> {peer}: {pct}% loss each way"
            self.net.lossy(f"b{i}", peer, pct)
            self.net.lossy(peer, f"b{i}", pct)
            shrunk = self._hold_watching_isr(i, spec.duration)
            rec.note = f"{self._link_note(i, spec.pick, start)}; {shrunk}"
            self.net.heal()
        elif k == "slow_link":  # NFQUEUE delayers, both directions (NetLab.delay)
            i = self.broker_ids[spec.pick % 3]
            ms = rng.randint(50, 400)
            peers = ["zk"] if rng.random() < 1 / 3 else [f"b{j}" for j in self.broker_ids if j != i]
            rec.target = f"broker {i} <-> {'+'.join(peers)}: {ms} ms added each way"
            for peer in peers:
                self.net.delay(f"b{i}", peer, ms)
                self.net.delay(peer, f"b{i}", ms)
            shrunk = self._hold_watching_isr(i, spec.duration)
            rec.note = f"{self._link_note(i, spec.pick, start)}; {shrunk}"
            self.net.heal()
        elif k == "fd_limit":
            i = self._leader_of(spec.pick)
            rec.target = f"broker {i} (leader of p{spec.pick % self.partitions})"
            rec.note = self._hold_descriptor_limit(i, spec.duration)
            if not self.brokers[i].is_alive():  # Kafka 3.9 halts when EMFILE fails its only log dir: a supervisor
                self._restart(i, rec)           # restarts it (as after a disk fault); ours keeps running
        else:
            raise ValueError(k)
        if not rec.healed_at:
            rec.healed_at = time.monotonic()
        rec.held = rec.healed_at - start
        return rec

    def run(self, schedule: Sequence[FaultSpec], budget_s: float) -> RunResult:
        """Run ``schedule`` until it ends or ``budget_s`` (since the workload started) is spent."""
        assert self.load is not None and self.reader is not None
        parts = set(range(self.partitions))
        for spec in schedule:
            if time.monotonic() - self.t0 + spec.gap + spec.duration > budget_s:
                break
            time.sleep(spec.gap)
            self.log(f"[{time.monotonic() - self.t0:7.1f}s] {spec.kind} for {spec.duration:.1f}s")
            try:
                rec = self.inject(spec)
            except Exception as exc:
                self.result.problems.append(f"{spec.kind}: could not inject or heal: {exc!r}"[:600])
                self.heal_everything()
                continue
            healed = rec.healed_at
            waited = self.wait_recovered()
            rec.recovered_s = None if waited is None else time.monotonic() - healed
            if rec.recovered_s is None:
                self.result.problems.append(f"{rec.kind} on {rec.target}: no recovery within "
                                            f"{RECOVERY_TIMEOUT_S:.0f}s ({self.last_view!r})"[:600])
                for i, b in self.brokers.items():
                    if not b.is_alive():
                        self._restart(i)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                acks = self.load.acks_since(healed)
                got = {a.partition for a in acks}
                c_any, c_all = self.reader.first_read_since(healed, parts)
                if got >= parts and c_all is not None:
                    break
                time.sleep(0.1)
            acks = self.load.acks_since(healed)
            if acks:
                rec.producer_any_s = min(a.t for a in acks) - healed
                firsts = {}
                for a in acks:
                    firsts[a.partition] = min(firsts.get(a.partition, a.t), a.t)
                if set(firsts) >= parts:
                    rec.producer_all_s = max(firsts.values()) - healed
            c_any, c_all = self.reader.first_read_since(healed, parts)
            rec.consumer_any_s = None if c_any is None else c_any - healed
            rec.consumer_all_s = None if c_all is None else c_all - healed
            if rec.producer_all_s is None:
                self.result.problems.append(f"{rec.kind} on {rec.target}: producer did not resume on every "
                                            "partition within 60 s of recovery")
            if rec.consumer_all_s is None:
                self.result.problems.append(f"{rec.kind} on {rec.target}: consumer did not resume on every "
                                            "partition within 60 s of recovery")
            if self.txn is not None:  # the transactional client: its next commit after the heal
                rec.txn_resume_s = self.txn.wait_commit_since(healed, max(5.0, deadline - time.monotonic()))
                if rec.txn_resume_s is None:
                    self.result.problems.append(f"{rec.kind} on {rec.target}: the transactional client did not "
                                                "commit within 60 s of recovery")
                if rec.txn_cut is not None:
                    rec.note = (rec.note + "; " if rec.note else "") + \
                        f"txn {rec.txn_cut} {self.txn.outcome_of(rec.txn_cut)}"
            self.log(f"          -> {rec.target}: held {rec.held:.1f}s, recovered "
                     f"{'-' if rec.recovered_s is None else f'{rec.recovered_s:.1f}s'}, producer "
                     f"{_fmt(rec.producer_all_s)}, consumer {_fmt(rec.consumer_all_s)}, txn commit "
                     f"{_fmt(rec.txn_resume_s)} {rec.note}")
            self.result.records.append(rec)
        return self.result


def _fmt(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.1f}s"


def remove_workdir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
