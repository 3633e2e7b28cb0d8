"""A ZooKeeper and N brokers on one machine, each broker its own process, port and log dir.

``bin/kafka-cluster.sh`` (this module's CLI) starts and stops such a cluster for development; the
integration tests and the benchmarks use the same classes, so what they exercise is what a user runs:

    bin/kafka-cluster.sh start [--brokers 3] [--dir .cluster] [--base-port 9092] [--zk-port 2181]
                               [--zookeeper host:port] [--override key=value ...]
    bin/kafka-cluster.sh status [--dir .cluster]
    bin/kafka-cluster.sh stop [--dir .cluster] [--timeout 120]
    bin/kafka-cluster.sh stop --broker ID [--broker ID ...] [--dir .cluster]
    bin/kafka-cluster.sh start --broker ID [--broker ID ...] [--dir .cluster]
    bin/kafka-cluster.sh restart --broker ID [--broker ID ...] [--dir .cluster]

``start`` writes ``server-<id>.properties`` for broker ids 0..N-1 (ports from ``--base-port``, default
9092, one each), a ``zoo.cfg`` (ZooKeeper on ``--zk-port``, default 2181, unless ``--zookeeper`` names
one already running), starts every process in the background and records their pids in
``<dir>/cluster.json``. A port counts as in use only if the broker itself could not bind it: the check binds
with the listener's own socket options (:func:`broker.network.bind_check.bind_error`, SO_REUSEADDR), so sockets
of a broker that just stopped, left in TIME-WAIT, do not block a start.

``--broker ID`` (repeatable) acts on single brokers of a recorded cluster: ``stop --broker 1`` stops broker 1
(SIGTERM, then waits), ``start --broker 1`` starts it again from its ``server-1.properties`` (kept as it is,
edits included) with its LOG_DIR and output file, ``restart --broker 1`` does both; ZooKeeper and the other
brokers are left alone.

Brokers are found, by every command, as whatever runs now: the pid recorded at start, the pid files in the
broker's LOG_DIR (``<dir>/logs-<id>/kafkaServer-<pid>.pid``, written by every broker started with that LOG_DIR)
and any broker process whose command line names its ``<dir>/server-<id>.properties`` (a broker restarted by
hand, e.g. ``bin/kafka-server-start.sh -daemon .cluster/server-1.properties``). So ``status`` is right after a
restart by hand, and ``stop`` stops every broker of the cluster, first (SIGTERM to all, controlled shutdowns
while ZooKeeper is still there), then ZooKeeper. If a broker is still running after ``--timeout`` (default
120 s), ZooKeeper is left running too and ``stop`` exits 1: run it again or kill the broker. ``status`` exits 0
when ZooKeeper and every broker are up, 1 otherwise.

How long a broker takes to stop on SIGTERM (see BrokerServer.controlled_shutdown): its controlled shutdown takes
at most ``controlled.shutdown.max.retries x request.timeout.ms + (max.retries - 1) x
controlled.shutdown.retry.backoff.ms`` (100 s with Kafka's defaults; well under a second normally), and with its
ZooKeeper gone at most ``(max.retries - 1) x backoff`` (10 s by default), since every attempt then fails at once;
the rest of the shutdown (an unclean one if the controlled shutdown failed) takes well under a second here.

Brokers run from ``bin/kafka-server-start.sh`` (from ``python -m broker`` when the package is installed without
a checkout), each with its own LOG_DIR (``<dir>/logs-<id>``); ZooKeeper is Debian's package run by java, as
``bin/zookeeper-server-start.sh`` does.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from broker.network.bind_check import bind_error
from broker.pid_files import all_broker_processes, is_broker_process, recorded_brokers
from tools import invoked_as

ROOT = Path(__file__).resolve().parents[1]
ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
_ZK_EXTRA_JARS = ("/usr/share/java/log4j-1.2.jar", "/usr/share/java/slf4j-log4j12.jar")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a broker listener (or ZooKeeper, which binds the same way) could bind ``host:port`` now: the bind is
    tried with the socket server's own options (SO_REUSEADDR), so a port held only by TIME-WAIT sockets of a
    process that just stopped counts as free, as it is for the broker."""
    return bind_error(host, port) is None


def zookeeper_ok(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"ruok")
            return s.recv(4) == b"imok"
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------- processes
def broker_command() -> List[str]:
    """bin/kafka-server-start.sh in a checkout; the running interpreter's ``-m broker`` in an installed package."""
    script = ROOT / "bin" / "kafka-server-start.sh"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "broker"]


class BrokerProcess:
    """One broker run from ``bin/kafka-server-start.sh`` with its own properties file, port and log dir.

    Its output goes to ``broker-<id>.out`` in ``workdir``; :meth:`output` reads it.
    """

    def __init__(self, workdir: Path, zk_connect: str, broker_id: int = 0, port: Optional[int] = None,
                 overrides: Optional[Dict[str, str]] = None, log_dir: Optional[Path] = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.broker_id = broker_id
        self.port = port or free_port()
        self.log_dir = Path(log_dir) if log_dir else self.workdir / f"kafka-logs-{broker_id}"
        self.zk_connect = zk_connect
        self.overrides = dict(overrides or {})
        self.config_path = self.workdir / f"server-{broker_id}.properties"
        self.output_path = self.workdir / f"broker-{broker_id}.out"
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.pid: Optional[int] = None
        self._out: Any = None
        self._start_offset = 0
        self._terminated = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self) -> Dict[str, str]:
        props = {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            "zookeeper.connect": self.zk_connect,
            "zookeeper.session.timeout.ms": "6000",
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.overrides)
        return props

    def write_config(self) -> None:
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))

    @property
    def logs_dir(self) -> Path:
        """This broker's LOG_DIR: server.log, controller.log, ... and its pid file."""
        return self.workdir / f"logs-{self.broker_id}"

    def start(self, wait: bool = True, timeout: float = 60.0, extra_env: Optional[Dict[str, str]] = None,
              write_config: bool = True) -> None:
        """Start the broker (in a session of its own); ``write_config=False`` runs ``config_path`` as it is (a
        restart of a broker whose properties file exists)."""
        if write_config:
            self.write_config()
        self._start_offset = len(self.output())
        env = dict(os.environ, LOG_DIR=str(self.logs_dir))
        env.update(extra_env or {})
        self._out = open(self.output_path, "ab")
        self._terminated = False
        self.proc = subprocess.Popen(broker_command() + [str(self.config_path)],
                                     cwd=str(self.workdir), stdout=self._out, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid = self.proc.pid
        if wait:
            self.wait_started(timeout)

    def wait_started(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.is_alive():
                rc = self.proc.returncode if self.proc is not None else "?"
                raise RuntimeError(f"broker {self.broker_id} exited with {rc} during start-up:\n{self.output()}")
            if "started (listeners" in self.output()[self._start_offset:]:
                return
            time.sleep(0.05)
        raise TimeoutError(f"broker {self.broker_id} did not start within {timeout}s:\n{self.output()[-4000:]}")

    def output(self) -> str:
        try:
            return self.output_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def output_since_start(self) -> str:
        return self.output()[self._start_offset:]

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: a clean (controlled) shutdown. Returns the exit status."""
        if self.proc is None:
            if self.pid is not None:
                return _terminate_pid(self.pid, timeout)
            return 0
        if self.proc.poll() is None:
            if not self._terminated:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        rc = self.proc.returncode
        self._close()
        return rc

    def terminate(self) -> None:
        """Send SIGTERM without waiting (see :meth:`stop`, which then only waits)."""
        if self.is_alive() and self.pid is not None and not self._terminated:
            self._terminated = True
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except OSError:
                pass

    def kill(self) -> None:
        """SIGKILL: a crash (the page cache survives, as after a process crash)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        elif self.proc is None and self.pid is not None and _alive(self.pid):
            os.killpg(self.pid, signal.SIGKILL)
        self._close()

    def pause(self) -> None:
        """SIGSTOP: the process stops dead (no fetches, no ZooKeeper heartbeats) until :meth:`resume`."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    def _close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def is_alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return self.pid is not None and _alive(self.pid)


class ZooKeeperProcess:
    """Debian's ZooKeeper, standalone, with its data in ``workdir/zookeeper``."""

    def __init__(self, workdir: Path, port: int, tick_time_ms: int = 500) -> None:
        self.workdir = Path(workdir)
        self.port = port
        self.tick_time_ms = tick_time_ms
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.pid: Optional[int] = None
        self.output_path = self.workdir / "zookeeper.out"

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        java = shutil.which("java")
        if java is None or not os.path.exists(ZOOKEEPER_JAR):
            raise RuntimeError(f"ZooKeeper needs java and {ZOOKEEPER_JAR}: run bash scripts/install.sh")
        data = self.workdir / "zookeeper"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "zoo.cfg"
        cfg.write_text(f"tickTime={self.tick_time_ms}\ndataDir={data}\nclientPort={self.port}\n"
                       "clientPortAddress=127.0.0.1\nmaxClientCnxns=0\nadmin.enableServer=false\n"
                       f"4lw.commands.whitelist=*\nminSessionTimeout={2 * self.tick_time_ms}\n")
        cp = ":".join(["/etc/zookeeper/conf", ZOOKEEPER_JAR] + [j for j in _ZK_EXTRA_JARS if os.path.exists(j)])
        with open(self.output_path, "ab") as out:
            self.proc = subprocess.Popen(
                [java, "-Xmx256m", "-cp", cp, f"-Dzookeeper.log.dir={self.workdir}",
                 "-Dzookeeper.root.logger=INFO,CONSOLE", "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                 str(cfg)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        self.pid = self.proc.pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}; see {self.output_path}")
            if zookeeper_ok("127.0.0.1", self.port):
                return
            time.sleep(0.1)
        raise TimeoutError(f"ZooKeeper did not answer on port {self.port} within {timeout}s")

    def stop(self, timeout: float = 20.0) -> None:
        if self.pid is not None:
            _terminate_pid(self.pid, timeout)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie child of ours counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _terminate_pid(pid: int, timeout: float) -> int:
    """SIGTERM ``pid`` (its whole process group if it leads one, as the processes started here do), wait, SIGKILL
    after ``timeout``; 0, or -9 if it had to be killed."""
    try:
        leader = os.getpgid(pid) == pid
    except OSError:
        return 0
    send = os.killpg if leader else os.kill
    try:
        send(pid, signal.SIGTERM)
    except OSError:
        return 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    if _alive(pid):
        try:
            send(pid, signal.SIGKILL)
        except OSError:
            return 0
        return -9
    return 0


# ---------------------------------------------------------------------------------------------- cluster
class LocalCluster:
    """ZooKeeper (own or given) plus brokers 0..N-1 under ``workdir``."""

    def __init__(self, workdir: Path, num_brokers: int = 3, zk_connect: Optional[str] = None,
                 zk_port: Optional[int] = None, base_port: Optional[int] = None,
                 overrides: Optional[Dict[str, str]] = None,
                 broker_overrides: Optional[Dict[int, Dict[str, str]]] = None) -> None:
        self.workdir = Path(workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.zookeeper: Optional[ZooKeeperProcess] = None
        if zk_connect is None:
            self.zookeeper = ZooKeeperProcess(self.workdir, zk_port or free_port())
            zk_connect = self.zookeeper.connect_string
        self.zk_connect = zk_connect
        base = {"offsets.topic.replication.factor": str(min(3, num_brokers)),
                "transaction.state.log.replication.factor": str(min(3, num_brokers)),
                "transaction.state.log.min.isr": str(min(2, num_brokers)),
                "default.replication.factor": str(min(3, num_brokers))}
        base.update(overrides or {})
        self.brokers: List[BrokerProcess] = []
        for i in range(num_brokers):
            props = dict(base)
            props.update((broker_overrides or {}).get(i, {}))
            self.brokers.append(BrokerProcess(self.workdir, zk_connect, broker_id=i,
                                              port=(base_port + i) if base_port else None, overrides=props))

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    def start(self, timeout: float = 90.0) -> "LocalCluster":
        if self.zookeeper is not None:
            self.zookeeper.start()
        for b in self.brokers:
            b.start(wait=False)
        for b in self.brokers:
            b.wait_started(timeout)
        self.save_state()
        return self

    def stop(self, timeout: float = 60.0) -> Dict[int, int]:
        """SIGTERM every broker (controlled shutdown), then ZooKeeper; broker id -> exit status."""
        codes: Dict[int, int] = {}
        for b in self.brokers:  # all at once: they shut down in parallel, as a rolling stop would not
            b.terminate()
        for b in self.brokers:
            codes[b.broker_id] = b.stop(timeout)
        if self.zookeeper is not None:
            self.zookeeper.stop()
        state = self.workdir / "cluster.json"
        if state.exists():
            state.unlink()
        return codes

    def kill(self) -> None:
        for b in self.brokers:
            b.kill()
        if self.zookeeper is not None:
            self.zookeeper.stop()

    def save_state(self) -> None:
        state = {"zookeeper": {"pid": self.zookeeper.pid if self.zookeeper else None, "connect": self.zk_connect},
                 "brokers": [{"id": b.broker_id, "pid": b.pid, "port": b.port, "log_dir": str(b.log_dir),
                              "config": str(b.config_path), "output": str(b.output_path)} for b in self.brokers]}
        (self.workdir / "cluster.json").write_text(json.dumps(state, indent=2) + "\n")


@contextmanager
def running_cluster(workdir: Path, num_brokers: int = 3, **kwargs: Any) -> Iterator[LocalCluster]:
    c = LocalCluster(workdir, num_brokers, **kwargs)
    try:
        c.start()
    except BaseException:
        c.kill()
        raise
    try:
        yield c
    finally:
        c.stop()


# ---------------------------------------------------------------------------------------------- finding processes
def _cmdline(pid: int) -> List[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _names_file(pid: int, path: Path) -> bool:
    """Whether an argument of ``pid``'s command line is ``path`` (a relative one resolved in the process's working
    directory, as the process itself resolved it)."""
    target = os.path.realpath(path)
    name = os.path.basename(target)
    cwd: Optional[str] = None
    for arg in _cmdline(pid)[1:]:
        if os.path.basename(arg) != name:
            continue
        if not os.path.isabs(arg):
            try:
                cwd = cwd or os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            arg = os.path.join(cwd, arg)
        if os.path.realpath(arg) == target:
            return True
    return False


def find_broker_pids(config: Path, logs_dir: Optional[Path] = None, recorded_pid: Optional[int] = None,
                     candidates: Optional[List[int]] = None) -> List[int]:
    """The live broker processes running ``config`` (a ``server-<id>.properties``): ``recorded_pid`` (the pid from
    the start), the pids in ``logs_dir``'s pid files (the broker's LOG_DIR) and every broker process whose command
    line names ``config``, however it was started. ``candidates``: the machine's broker processes, if known."""
    found = set(recorded_brokers(logs_dir, remove_stale=False)) if logs_dir is not None and logs_dir.is_dir() else set()
    if recorded_pid and is_broker_process(recorded_pid) and _names_file(recorded_pid, config):
        found.add(recorded_pid)
    for pid in (all_broker_processes() if candidates is None else candidates):
        if pid not in found and _names_file(pid, config):
            found.add(pid)
    return sorted(p for p in found if is_broker_process(p))


ZOOKEEPER_MAIN_CLASSES = ("org.apache.zookeeper.server.quorum.QuorumPeerMain",
                          "org.apache.zookeeper.server.ZooKeeperServerMain")


def _is_zookeeper(pid: int, zoo_cfg: Path) -> bool:
    return (_alive(pid) and any(c in _cmdline(pid) for c in ZOOKEEPER_MAIN_CLASSES)
            and _names_file(pid, zoo_cfg))


def find_zookeeper_pids(zoo_cfg: Path, recorded_pid: Optional[int] = None) -> List[int]:
    """Live ZooKeeper servers run with ``zoo.cfg`` (the one a ``start`` ran, or one run by hand)."""
    if recorded_pid and _is_zookeeper(recorded_pid, zoo_cfg):
        return [recorded_pid]
    me = os.getpid()
    return sorted(int(e) for e in os.listdir("/proc")
                  if e.isdigit() and int(e) != me and _is_zookeeper(int(e), zoo_cfg))


def _wait_gone(pids: List[int], timeout: float, gone: Any = None) -> List[int]:
    """The pids still running after at most ``timeout`` seconds."""
    still = (lambda p: not gone(p)) if gone else _alive
    deadline = time.monotonic() + timeout
    left = [p for p in pids if still(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [p for p in left if still(p)]
    return left


# ---------------------------------------------------------------------------------------------- CLI
def _parse_overrides(items: List[str]) -> Dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--override needs key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _load(workdir: Path) -> Optional[Dict[str, Any]]:
    state = workdir / "cluster.json"
    if not state.exists():
        return None
    return dict(json.loads(state.read_text()))


def _save(workdir: Path, state: Dict[str, Any]) -> None:
    tmp = workdir / "cluster.json.tmp"
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, workdir / "cluster.json")


def _port_from_properties(path: Path) -> Optional[int]:
    try:
        for line in path.read_text().splitlines():
            if line.strip().startswith("listeners="):
                return int(line.split("=", 1)[1].split(",")[0].rsplit(":", 1)[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


class _Cluster:
    """What a ``--dir`` holds: the recorded state (cluster.json) completed from the files a start leaves, so a
    cluster is found even when the state file is gone (every ``server-<id>.properties`` is a broker)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.state = _load(workdir)
        brokers: Dict[int, Dict[str, Any]] = {int(b["id"]): dict(b) for b in (self.state or {}).get("brokers", [])}
        for cfg in workdir.glob("server-*.properties"):
            suffix = cfg.stem.split("-", 1)[1]
            if suffix.isdigit() and int(suffix) not in brokers:
                brokers[int(suffix)] = {"id": int(suffix), "pid": None, "port": _port_from_properties(cfg)}
        for i, b in brokers.items():
            b.setdefault("config", str(workdir / f"server-{i}.properties"))
            b.setdefault("output", str(workdir / f"broker-{i}.out"))
            b.setdefault("logs_dir", str(workdir / f"logs-{i}"))
        self.brokers = dict(sorted(brokers.items()))
        self._candidates: Optional[List[int]] = None

    @property
    def exists(self) -> bool:
        return self.state is not None or bool(self.brokers)

    @property
    def own_zookeeper(self) -> bool:
        """Whether ``start`` ran ZooKeeper itself (not ``--zookeeper``)."""
        zk = (self.state or {}).get("zookeeper") or {}
        return bool(zk.get("pid")) or (self.state is None and (self.workdir / "zoo.cfg").exists())

    def zk_connect(self) -> Optional[str]:
        return ((self.state or {}).get("zookeeper") or {}).get("connect")

    def zookeeper_pids(self) -> List[int]:
        if not self.own_zookeeper:
            return []
        return find_zookeeper_pids(self.workdir / "zoo.cfg", ((self.state or {}).get("zookeeper") or {}).get("pid"))

    def broker_pids(self, broker_id: int) -> List[int]:
        b = self.brokers[broker_id]
        if self._candidates is None:
            self._candidates = all_broker_processes()
        return find_broker_pids(Path(b["config"]), Path(b["logs_dir"]), b.get("pid"), self._candidates)

    def forget_processes(self) -> None:
        """Look again next time (after processes were started or stopped)."""
        self._candidates = None

    def check_ids(self, ids: List[int]) -> Optional[str]:
        unknown = [i for i in ids if i not in self.brokers]
        if unknown:
            known = ", ".join(map(str, self.brokers)) or "none"
            return f"No broker {', '.join(map(str, unknown))} in {self.workdir} (brokers: {known})"
        return None

    def record_pid(self, broker_id: int, pid: Optional[int]) -> None:
        if self.state is None:
            return
        for b in self.state.setdefault("brokers", []):
            if int(b["id"]) == broker_id:
                b["pid"] = pid
        self.brokers[broker_id]["pid"] = pid
        _save(self.workdir, self.state)


def _stop_brokers(cluster: _Cluster, ids: List[int], timeout: float) -> Dict[int, List[int]]:
    """SIGTERM every process of brokers ``ids`` at once and wait; broker id -> pids still running."""
    pids = {i: cluster.broker_pids(i) for i in ids}
    for ps in pids.values():
        for pid in ps:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    left = set(_wait_gone([p for ps in pids.values() for p in ps], timeout, gone=lambda p: not is_broker_process(p)))
    cluster.forget_processes()
    return {i: [p for p in ps if p in left] for i, ps in pids.items()}


def _start_broker(cluster: _Cluster, broker_id: int, timeout: float) -> bool:
    """Start broker ``broker_id`` again from its properties file (kept as it is); True once it serves."""
    b = cluster.brokers[broker_id]
    running = cluster.broker_pids(broker_id)
    if running:
        print(f"Broker {broker_id} is already running (pid {', '.join(map(str, running))})", file=sys.stderr)
        return False
    config = Path(b["config"])
    if not config.is_file():
        print(f"Broker {broker_id} has no {config}", file=sys.stderr)
        return False
    port = b.get("port") or _port_from_properties(config)
    if port and not port_is_free(port):
        print(f"Broker {broker_id}'s port {port} is in use ({bind_error('127.0.0.1', port)})", file=sys.stderr)
        return False
    if cluster.own_zookeeper and not cluster.zookeeper_pids():
        print(f"The ZooKeeper of the cluster in {cluster.workdir} is not running: stop the cluster and start it "
              f"again (bin/kafka-cluster.sh stop, then start)", file=sys.stderr)
        return False
    proc = BrokerProcess(cluster.workdir, cluster.zk_connect() or "", broker_id=broker_id, port=port)
    proc.config_path = config
    proc.output_path = Path(b["output"])
    try:
        proc.start(wait=True, timeout=timeout, write_config=False)
    except Exception as exc:
        proc.kill()
        errors = [line for line in proc.output_since_start().splitlines() if line.startswith("ERROR ")]
        why = errors[-1] if errors else str(exc).splitlines()[0]
        print(f"Broker {broker_id} did not start: {why} (output in {proc.output_path})", file=sys.stderr)
        return False
    cluster.record_pid(broker_id, proc.pid)
    cluster.forget_processes()
    print(f"broker {broker_id}: 127.0.0.1:{port} (pid {proc.pid}, output {proc.output_path})")
    return True


def _cmd_start(args: argparse.Namespace) -> int:
    workdir = Path(args.dir).resolve()
    if args.broker:
        return _cmd_start_brokers(args)
    existing = _Cluster(workdir)
    if existing.exists:
        up = [i for i in existing.brokers if existing.broker_pids(i)]
        zk = existing.zookeeper_pids()
        if up or zk:
            what = ", ".join([f"broker {i}" for i in up] + (["ZooKeeper"] if zk else []))
            print(f"A cluster from {workdir} is already running ({what}); stop it first (bin/kafka-cluster.sh stop "
                  f"--dir {args.dir}), or start single stopped brokers with --broker ID", file=sys.stderr)
            return 1
    zk_connect = args.zookeeper
    if zk_connect is None and not port_is_free(args.zk_port):
        print(f"Port {args.zk_port} is in use: pass --zookeeper host:port to use a running ZooKeeper, or "
              f"--zk-port for another port", file=sys.stderr)
        return 1
    busy = [args.base_port + i for i in range(args.brokers) if not port_is_free(args.base_port + i)]
    if busy:
        print(f"Broker port(s) in use: {busy}; pick another --base-port", file=sys.stderr)
        return 1
    cluster = LocalCluster(workdir, args.brokers, zk_connect=zk_connect, zk_port=args.zk_port,
                           base_port=args.base_port, overrides=_parse_overrides(args.override))
    try:
        cluster.start(timeout=args.timeout)
    except Exception as exc:
        cluster.kill()
        print(f"Cluster did not start: {str(exc).splitlines()[0]} (broker output in {workdir})", file=sys.stderr)
        return 1
    print(f"ZooKeeper: {cluster.zk_connect}")
    for b in cluster.brokers:
        print(f"broker {b.broker_id}: {b.bootstrap} (pid {b.pid}, log dir {b.log_dir}, output {b.output_path})")
    print(f"bootstrap.servers={cluster.bootstrap}")
    return 0


def _cmd_start_brokers(args: argparse.Namespace) -> int:
    cluster = _Cluster(Path(args.dir).resolve())
    if cluster.state is None:
        print(f"No cluster recorded in {cluster.workdir}: start one first (bin/kafka-cluster.sh start --dir "
              f"{args.dir})", file=sys.stderr)
        return 1
    error = cluster.check_ids(args.broker)
    if error:
        print(error, file=sys.stderr)
        return 1
    ok = True
    for i in dict.fromkeys(args.broker):
        ok = _start_broker(cluster, i, args.timeout) and ok
    return 0 if ok else 1


def _cmd_stop(args: argparse.Namespace) -> int:
    workdir = Path(args.dir).resolve()
    cluster = _Cluster(workdir)
    if not cluster.exists:
        print(f"No cluster recorded in {workdir}", file=sys.stderr)
        return 1
    if args.broker:
        error = cluster.check_ids(args.broker)
        if error:
            print(error, file=sys.stderr)
            return 1
        ids = list(dict.fromkeys(args.broker))
        found = {i: cluster.broker_pids(i) for i in ids}
        left = _stop_brokers(cluster, ids, args.timeout)
        rc = 0
        for i in ids:
            if left[i]:
                print(f"Broker {i} still running after {args.timeout:g}s (pid {', '.join(map(str, left[i]))})",
                      file=sys.stderr)
                rc = 1
            elif found[i]:
                cluster.record_pid(i, None)
                print(f"Stopped broker {i} (pid {', '.join(map(str, found[i]))})")
            else:
                print(f"Broker {i} was not running")
        return rc
    ids = list(cluster.brokers)
    found = {i: cluster.broker_pids(i) for i in ids}
    left = {i: ps for i, ps in _stop_brokers(cluster, ids, args.timeout).items() if ps}
    if left:  # ZooKeeper stays: without it they could only shut down uncleanly
        running = ", ".join(f"broker {i} (pid {', '.join(map(str, ps))})" for i, ps in left.items())
        print(f"Still running after {args.timeout:g}s: {running}; ZooKeeper is left running. Run stop again, or "
              f"kill them", file=sys.stderr)
        return 1
    zk_pids = cluster.zookeeper_pids()
    for pid in zk_pids:
        _terminate_pid(pid, 20)
    state = workdir / "cluster.json"
    if state.exists():
        state.unlink()
    stopped = sum(1 for ps in found.values() if ps)
    print(f"Stopped {stopped} broker(s)" + (" and ZooKeeper" if zk_pids else ""))
    return 0


def _cmd_restart(args: argparse.Namespace) -> int:
    cluster = _Cluster(Path(args.dir).resolve())
    if cluster.state is None:
        print(f"No cluster recorded in {cluster.workdir}", file=sys.stderr)
        return 1
    error = cluster.check_ids(args.broker)
    if error:
        print(error, file=sys.stderr)
        return 1
    for i in dict.fromkeys(args.broker):  # one after the other, as a rolling restart
        left = _stop_brokers(cluster, [i], args.timeout)[i]
        if left:
            print(f"Broker {i} still running after {args.timeout:g}s (pid {', '.join(map(str, left))})",
                  file=sys.stderr)
            return 1
        if not _start_broker(cluster, i, args.start_timeout):
            return 1
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    workdir = Path(args.dir).resolve()
    cluster = _Cluster(workdir)
    if not cluster.exists:
        print("not running")
        return 1
    all_up = True
    if cluster.own_zookeeper:
        zk = cluster.zookeeper_pids()
        all_up = all_up and bool(zk)
        print(f"ZooKeeper {cluster.zk_connect() or '(' + str(workdir / 'zoo.cfg') + ')'} "
              + (f"(pid {', '.join(map(str, zk))}, up)" if zk else "(down)"))
    else:
        print(f"ZooKeeper {cluster.zk_connect()} (external)")
    for i, b in cluster.brokers.items():
        pids = cluster.broker_pids(i)
        where = f"127.0.0.1:{b.get('port')}"
        if pids:
            note = "" if b.get("pid") in pids else " (started outside kafka-cluster.sh)"
            print(f"broker {i}: {where} pid {', '.join(map(str, pids))} up{note}")
        else:
            all_up = False
            print(f"broker {i}: {where} down")
    return 0 if all_up else 1


USAGE_EPILOG = """commands:
  start [--brokers N] ...     ZooKeeper and brokers 0..N-1 in the background, recorded in <dir>/cluster.json
  start --broker ID           start one stopped broker again (repeatable), from its server-<id>.properties
  stop                        every broker of <dir> (SIGTERM, controlled shutdowns), then ZooKeeper
  stop --broker ID            stop one broker (repeatable); ZooKeeper and the others keep running
  restart --broker ID         stop, then start one broker (repeatable: one after the other)
  status                      ZooKeeper and every broker, up or down (exit 0 only if all are up)

Brokers are found by the pid recorded at start, by the pid files in <dir>/logs-<id>, and by their command line
naming <dir>/server-<id>.properties, so a broker restarted by hand is found too. On SIGTERM a broker's
controlled shutdown takes at most controlled.shutdown.max.retries x request.timeout.ms + (max.retries - 1) x
controlled.shutdown.retry.backoff.ms (100 s by default), and at most (max.retries - 1) x backoff (10 s by
default) when its ZooKeeper is gone; then it shuts down (uncleanly if the controlled shutdown failed)."""


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog=invoked_as("tools.cluster"),  # kafka-cluster.sh, or kafka-cluster
                                     description="Start or stop ZooKeeper and N brokers on this machine, or one "
                                                 "broker of them.",
                                     epilog=USAGE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def broker_option(p: argparse.ArgumentParser, help: str, required: bool = False) -> None:
        p.add_argument("--broker", "-b", type=int, action="append", metavar="ID", required=required, help=help)

    p = sub.add_parser("start", help="start ZooKeeper and the brokers in the background, or one stopped broker")
    p.add_argument("--brokers", "-n", type=int, default=3, help="number of brokers (ids 0..N-1), default 3")
    p.add_argument("--dir", default=".cluster", help="working directory (configs, logs, data); default .cluster")
    p.add_argument("--base-port", type=int, default=9092, help="port of broker 0; broker i uses base+i")
    p.add_argument("--zk-port", type=int, default=2181, help="port of the ZooKeeper this command starts")
    p.add_argument("--zookeeper", help="host:port[/chroot] of a running ZooKeeper to use instead")
    p.add_argument("--override", action="append", default=[], metavar="key=value",
                   help="a server.properties value for every broker (repeatable)")
    p.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for the brokers to serve")
    broker_option(p, "start only this stopped broker again, from its server-<id>.properties (repeatable)")
    p.set_defaults(fn=_cmd_start)
    s = sub.add_parser("stop", help="stop every broker of the cluster, then ZooKeeper; or one broker")
    s.add_argument("--dir", default=".cluster")
    s.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the brokers to exit")
    broker_option(s, "stop only this broker (SIGTERM, then wait; repeatable)")
    s.set_defaults(fn=_cmd_stop)
    r = sub.add_parser("restart", help="stop, then start one broker (or several, one after the other)")
    r.add_argument("--dir", default=".cluster")
    r.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the broker to exit")
    r.add_argument("--start-timeout", type=float, default=90.0, help="seconds to wait for it to serve again")
    broker_option(r, "the broker to restart (repeatable)", required=True)
    r.set_defaults(fn=_cmd_restart)
    st = sub.add_parser("status", help="show ZooKeeper and the brokers, up or down")
    st.add_argument("--dir", default=".cluster")
    st.set_defaults(fn=_cmd_status)
    args = parser.parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    sys.exit(main())
