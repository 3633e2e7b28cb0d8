"""A ZooKeeper and N brokers on one machine, each broker its own process, port and log dir.

``bin/kafka-cluster.sh`` (this module's CLI) starts and stops such a cluster for development; the
integration tests and the benchmarks use the same classes, so what they exercise is what a user runs:

    bin/kafka-cluster.sh start --brokers 3 [--dir .cluster] [--override key=value ...]
    bin/kafka-cluster.sh status [--dir .cluster]
    bin/kafka-cluster.sh stop [--dir .cluster]

``start`` writes ``server-<id>.properties`` for broker ids 0..N-1 (ports from ``--base-port``, default
9092, one each), a ``zoo.cfg`` (ZooKeeper on ``--zk-port``, default 2181, unless ``--zookeeper`` names
one already running), starts every process in the background and records their pids in
``<dir>/cluster.json``; ``stop`` sends SIGTERM to exactly those processes (brokers first, so they
shut down in a controlled way while ZooKeeper is still there) and waits for them.

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

ROOT = Path(__file__).resolve().parents[1]
ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
_ZK_EXTRA_JARS = ("/usr/share/java/log4j-1.2.jar", "/usr/share/java/slf4j-log4j12.jar")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


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

    def start(self, wait: bool = True, timeout: float = 60.0, extra_env: Optional[Dict[str, str]] = None) -> None:
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
    try:
        os.killpg(pid, signal.SIGTERM)
    except OSError:
        return 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    if _alive(pid):
        os.killpg(pid, signal.SIGKILL)
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


# ---------------------------------------------------------------------------------------------- CLI
def _parse_overrides(items: List[str]) -> Dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--override needs key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _cmd_start(args: argparse.Namespace) -> int:
    workdir = Path(args.dir).resolve()
    state = workdir / "cluster.json"
    if state.exists() and any(_alive(b["pid"]) for b in json.loads(state.read_text())["brokers"] if b["pid"]):
        print(f"A cluster from {workdir} is already running; stop it first (bin/kafka-cluster.sh stop "
              f"--dir {args.dir})", file=sys.stderr)
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
        cluster.start()
    except Exception as exc:
        cluster.kill()
        print(f"Cluster did not start: {str(exc).splitlines()[0]} (broker output in {workdir})", file=sys.stderr)
        return 1
    print(f"ZooKeeper: {cluster.zk_connect}")
    for b in cluster.brokers:
        print(f"broker {b.broker_id}: {b.bootstrap} (pid {b.pid}, log dir {b.log_dir}, output {b.output_path})")
    print(f"bootstrap.servers={cluster.bootstrap}")
    return 0


def _load(workdir: Path) -> Optional[Dict[str, Any]]:
    state = workdir / "cluster.json"
    if not state.exists():
        return None
    return dict(json.loads(state.read_text()))


def _cmd_stop(args: argparse.Namespace) -> int:
    workdir = Path(args.dir).resolve()
    state = _load(workdir)
    if state is None:
        print(f"No cluster recorded in {workdir}", file=sys.stderr)
        return 1
    pids = [b["pid"] for b in state["brokers"] if b["pid"] and _alive(b["pid"])]
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    left = [p for p in pids if _alive(p)]
    zk_pid = state["zookeeper"].get("pid")
    if zk_pid and _alive(zk_pid):
        _terminate_pid(zk_pid, 20)
    (workdir / "cluster.json").unlink()
    if left:
        print(f"Broker process(es) still running after {args.timeout}s: {left}", file=sys.stderr)
        return 1
    print(f"Stopped {len(pids)} broker(s)" + (" and ZooKeeper" if zk_pid else ""))
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    state = _load(Path(args.dir).resolve())
    if state is None:
        print("not running")
        return 1
    zk = state["zookeeper"]
    print(f"ZooKeeper {zk['connect']}" + (f" (pid {zk['pid']}, {'up' if _alive(zk['pid']) else 'down'})"
                                         if zk.get("pid") else " (external)"))
    for b in state["brokers"]:
        print(f"broker {b['id']}: 127.0.0.1:{b['port']} pid {b['pid']} {'up' if _alive(b['pid']) else 'down'}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="kafka-cluster.sh",
                                     description="Start or stop ZooKeeper and N brokers on this machine.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("start", help="start ZooKeeper and the brokers in the background")
    p.add_argument("--brokers", "-n", type=int, default=3, help="number of brokers (ids 0..N-1), default 3")
    p.add_argument("--dir", default=".cluster", help="working directory (configs, logs, data); default .cluster")
    p.add_argument("--base-port", type=int, default=9092, help="port of broker 0; broker i uses base+i")
    p.add_argument("--zk-port", type=int, default=2181, help="port of the ZooKeeper this command starts")
    p.add_argument("--zookeeper", help="host:port[/chroot] of a running ZooKeeper to use instead")
    p.add_argument("--override", action="append", default=[], metavar="key=value",
                   help="a server.properties value for every broker (repeatable)")
    p.set_defaults(fn=_cmd_start)
    s = sub.add_parser("stop", help="stop exactly the processes the start command recorded")
    s.add_argument("--dir", default=".cluster")
    s.add_argument("--timeout", type=float, default=120.0)
    s.set_defaults(fn=_cmd_stop)
    st = sub.add_parser("status", help="show the recorded processes")
    st.add_argument("--dir", default=".cluster")
    st.set_defaults(fn=_cmd_status)
    args = parser.parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    sys.exit(main())
