"""S3Server: a real S3 API server (S3Proxy 2.6.0 over a local directory) for the tiered-storage tests, started with
java directly as ZooKeeperServer starts ZooKeeper.

S3Proxy (org.gaul:s3proxy, Apache-2.0) speaks S3's REST API (SigV2/SigV4 auth, multipart upload, ranged GET,
Content-MD5 checks) and stores objects through jclouds' ``filesystem-nio2`` blob store in this server's directory,
which outlives a stop so a restarted server serves the same objects. scripts/install-test.sh resolves its jars from
Maven Central into .cache/s3proxy-2.6.0/libs (tests/harness/s3proxy/pom.xml). The server listens on a free loopback
port; ``start()`` returns once it answers HTTP, ``stop()`` kills it (SIGKILL: an outage, not a shutdown, which is
what the tests need), ``start()`` again brings it back on the same port and directory; ``pause()``/``resume()``
freeze it (SIGSTOP/SIGCONT) to hold a request in flight.
"""
from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Optional

ROOT = Path(__file__).resolve().parents[2]
S3PROXY_LIBS = ROOT / ".cache" / "s3proxy-2.6.0" / "libs"
LOGBACK = Path(__file__).resolve().parent / "s3proxy" / "logback.xml"
ACCESS_KEY = "tiered-storage-test"
SECRET_KEY = "tiered-storage-test-secret"


class S3ServerUnavailable(RuntimeError):
    """Java or S3Proxy's jars are missing, or the server did not start."""


def check_prerequisites() -> str:
    """The java executable; raises S3ServerUnavailable naming what is missing and how to install it."""
    java = shutil.which("java")
    if java is None:
        raise S3ServerUnavailable("java not found on PATH: install a JRE 17+ (scripts/install.sh does)")
    if not (S3PROXY_LIBS / ".complete").exists():
        raise S3ServerUnavailable(f"S3Proxy's jars are not in {S3PROXY_LIBS}: run bash scripts/install-test.sh")
    return java


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3Server:
    """One S3Proxy process. Use as a context manager or call start()/stop()."""

    def __init__(self, start_timeout_s: float = 60.0) -> None:
        self.host = "127.0.0.1"
        self.port = _free_port()
        self.start_timeout_s = start_timeout_s
        self.dir = Path(tempfile.mkdtemp(prefix="s3-test-"))
        self.data_dir = self.dir / "data"
        self.data_dir.mkdir()
        self.log_path = self.dir / "s3proxy.out"
        self.proc: Optional[subprocess.Popen[bytes]] = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def rsm_configs(self, bucket: str, **extra: Any) -> Dict[str, str]:
        """The S3RemoteStorageManager keys (prefix stripped) that reach this server."""
        out = {"s3.bucket.name": bucket, "s3.endpoint.url": self.endpoint_url, "s3.region": "us-east-1",
               "s3.access.key.id": ACCESS_KEY, "s3.secret.access.key": SECRET_KEY}
        out.update({k: str(v) for k, v in extra.items()})
        return out

    def client(self) -> Any:
        """A plain boto3 client of this server (for the tests' own checks)."""
        import boto3
        from botocore.config import Config
        return boto3.client("s3", endpoint_url=self.endpoint_url, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                                          request_checksum_calculation="when_required",
                                          response_checksum_validation="when_required"))

    def create_bucket(self, bucket: str) -> None:
        self.client().create_bucket(Bucket=bucket)

    def _write_config(self) -> Path:
        cfg = self.dir / "s3proxy.conf"
        cfg.write_text(f"s3proxy.endpoint={self.endpoint_url}\n"
                       "s3proxy.authorization=aws-v2-or-v4\n"
                       f"s3proxy.identity={ACCESS_KEY}\n"
                       f"s3proxy.credential={SECRET_KEY}\n"
                       "jclouds.provider=filesystem-nio2\n"
                       "jclouds.identity=local\n"
                       "jclouds.credential=local\n"
                       f"jclouds.filesystem.basedir={self.data_dir}\n")
        return cfg

    def start(self) -> "S3Server":
        java = check_prerequisites()
        cfg = self._write_config()
        cmd = [java, "-Xmx256m", "-XX:TieredStopAtLevel=1", f"-Dlogback.configurationFile={LOGBACK}",
               "-cp", f"{S3PROXY_LIBS}/*", "org.gaul.s3proxy.Main", "--properties", str(cfg)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise S3ServerUnavailable(f"S3Proxy exited with {self.proc.returncode}: {self._tail()}")
            if self.answers():
                return self
            time.sleep(0.1)
        self.kill()
        raise S3ServerUnavailable(f"S3Proxy did not answer on {self.endpoint_url} within {self.start_timeout_s}s: "
                                  f"{self._tail()}")

    def answers(self) -> bool:
        """Whether the server answers HTTP (any status: an anonymous request is refused with 403)."""
        try:
            urllib.request.urlopen(self.endpoint_url + "/", timeout=1).close()
            return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    def _tail(self) -> str:
        try:
            return self.log_path.read_bytes()[-2000:].decode("utf-8", "replace")
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """Stop the process at once (SIGKILL); the stored objects stay for a restart."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP: the server stops answering (requests in flight hang, new connections are accepted by the kernel
        and wait) until :meth:`resume`."""
        assert self.proc is not None and self.proc.poll() is None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """Kill the server and remove its directory."""
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "S3Server":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

