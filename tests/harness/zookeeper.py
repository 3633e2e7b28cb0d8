"""ZooKeeperServer: a real (Debian-packaged) ZooKeeper for integration tests, started with java directly.

It writes a zoo.cfg into a temporary directory (free port, admin server off, all four-letter words allowed,
tickTime 500 ms so sessions may be as short as 1 s), runs QuorumPeerMain with the classpath Debian uses
(/etc/zookeeper/conf + /usr/share/java/zookeeper.jar, whose manifest lists its dependencies), waits until it answers
`ruok`, and stops it with SIGTERM (SIGKILL after a grace period).
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
LOG4J_JARS = ("/usr/share/java/log4j-1.2.jar", "/usr/share/java/slf4j-log4j12.jar")
CONF_DIR = "/etc/zookeeper/conf"


class ZooKeeperUnavailable(RuntimeError):
    """Java or the ZooKeeper jar is missing, or the server did not start."""


def zookeeper_classpath() -> str:
    parts = [CONF_DIR, ZOOKEEPER_JAR] + [j for j in LOG4J_JARS if os.path.exists(j)]
    return ":".join(parts)


def check_prerequisites() -> str:
    """Return the java executable; raise ZooKeeperUnavailable naming what is missing and how to install it."""
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperUnavailable("java not found on PATH: install a JRE (e.g. apt-get install default-jre)")
    if not os.path.exists(ZOOKEEPER_JAR):
        raise ZooKeeperUnavailable(f"{ZOOKEEPER_JAR} not found: run scripts/install.sh "
                                   "(or apt-get install zookeeper)")
    return java


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command (ruok, srvr, ...) and return the answer."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while True:
            b = s.recv(4096)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperServer:
    """One standalone ZooKeeper server process. Use as a context manager or call start()/stop()."""

    def __init__(self, port: int | None = None, tick_time_ms: int = 500, start_timeout_s: float = 60.0) -> None:
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.tick_time_ms = tick_time_ms
        self.start_timeout_s = start_timeout_s
        self.dir = tempfile.mkdtemp(prefix="zk-test-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = os.path.join(self.dir, "zookeeper.out")

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def write_config(self) -> str:
        data_dir = os.path.join(self.dir, "data")
        os.makedirs(data_dir, exist_ok=True)
        cfg = os.path.join(self.dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(f"tickTime={self.tick_time_ms}\n"
                    f"dataDir={data_dir}\n"
                    f"clientPort={self.port}\n"
                    f"clientPortAddress={self.host}\n"
                    "maxClientCnxns=0\n"
                    "admin.enableServer=false\n"
                    "4lw.commands.whitelist=*\n"
                    f"minSessionTimeout={2 * self.tick_time_ms}\n")
        return cfg

    def start(self) -> "ZooKeeperServer":
        java = check_prerequisites()
        cfg = self.write_config()
        cmd = [java, "-Xmx256m", "-cp", zookeeper_classpath(), f"-Dzookeeper.log.dir={self.dir}",
               "-Dzookeeper.root.logger=INFO,CONSOLE", "-Dzookeeper.console.threshold=INFO",
               "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg]
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ZooKeeperUnavailable(f"ZooKeeper exited with {self.proc.returncode}: {self._tail()}")
            try:
                if four_letter_word(self.host, self.port, "ruok") == "imok":
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise ZooKeeperUnavailable(f"ZooKeeper did not answer on {self.connect_string} within "
                                   f"{self.start_timeout_s}s: {self._tail()}")

    def _tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-2000:].decode("utf-8", "replace")
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
