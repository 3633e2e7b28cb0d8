"""Run the broker as a real separate process from ``bin/kafka-server-start.sh`` for tests.

Each instance writes its own server.properties (free port, temp log dir, the test's ZooKeeper
chroot) and captures the broker's output in a file that tests can read.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
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
        self._out = None
        self._start_offset = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def write_config(self) -> None:
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
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def start(self, wait: bool = True, timeout: float = 60.0, extra_env: Optional[Dict[str, str]] = None) -> None:
        self.write_config()
        self._start_offset = len(self.output())
        env = dict(os.environ)
        env.update(extra_env or {})
        self._out = open(self.output_path, "ab")
        self.proc = subprocess.Popen([str(ROOT / "bin" / "kafka-server-start.sh"), str(self.config_path)],
                                     cwd=str(self.workdir), stdout=self._out, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        if wait:
            self.wait_started(timeout)

    def wait_started(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode} during start-up:\n{self.output()}")
            if "started (listeners" in self.output()[self._start_offset:]:
                return
            time.sleep(0.05)
        raise TimeoutError(f"broker did not start within {timeout}s:\n{self.output()[-4000:]}")

    def output(self) -> str:
        try:
            return self.output_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: a clean shutdown."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
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

    def kill(self) -> None:
        """SIGKILL: a crash (the page cache survives, as after a process crash)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._close()

    def _close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@contextmanager
def running_broker(workdir: Path, zk_connect: str, **kwargs: Any) -> Iterator[BrokerProcess]:
    """A started broker that must, at the end, stop cleanly (exit 0) with no traceback in its log."""
    b = BrokerProcess(workdir, zk_connect, **kwargs)
    try:
        b.start()
    except BaseException:
        b.kill()
        raise
    try:
        yield b
    finally:
        rc = b.stop()
        out = b.output()
        assert "Traceback" not in out, f"broker logged a traceback:\n{out[-6000:]}"
        assert rc == 0, f"broker exited with {rc}"
