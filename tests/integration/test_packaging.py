"""The package: ``pip install`` of the project into a fresh virtualenv builds the Cython extensions and installs the
broker with its console scripts; the installed ``kafka-server-start`` then runs a broker against a real ZooKeeper
that a stock client (confluent-kafka) produces to and consumes from, and ``kafka-server-stop`` stops it.

The project's files are copied to a temporary directory first (pip builds in the source tree: build/, egg-info and,
for ``-e``, the extensions in place), so the checkout is left as it is. pip builds with build isolation, i.e. with
the build requirements pyproject.toml declares (setuptools, Cython, wheel), not with this test's environment: that
is what proves they are declared. pip's cache keeps it to about 20 s per install.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Dict

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker import __version__
from tests.harness.clients import consume_from_start
from tests.harness.zookeeper import free_port

ROOT = Path(__file__).resolve().parents[2]
#: what an sdist of the project holds (MANIFEST.in), enough to build and install it
SOURCES = ("broker", "pyx", "tools", "config", "bin", "setup.py", "pyproject.toml", "MANIFEST.in", "README.md",
           "requirements.txt", "requirements-test.txt")
#: variables that would make the installed package run from the checkout or log into it
CHECKOUT_VARIABLES = ("PYTHONPATH", "LOG_DIR", "BROKER_LOG_DIR", "BROKER_LOG_CONFIG", "VIRTUAL_ENV",
                      "BROKER_NO_EXTENSIONS")


def copy_sources(dst: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.c", "*.html", "build", "*.egg-info")
    dst.mkdir(parents=True)
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=ignore, symlinks=True)
        else:
            shutil.copy2(src, dst / name)
    return dst


def clean_env(**extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CHECKOUT_VARIABLES}
    env.update(extra)
    return env


def make_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    return path


def pip_install(venv: Path, *args: str) -> None:
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *args], capture_output=True, text=True,
                       timeout=900, env=clean_env())
    assert r.returncode == 0, f"pip install {' '.join(args)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the project installed from a copy of its sources (a regular, non-editable install)."""
    base = tmp_path_factory.mktemp("pkg")
    src = copy_sources(base / "src")
    venv = make_venv(base / "venv")
    pip_install(venv, str(src))
    shutil.rmtree(src)  # the installed package must not need its sources
    return venv


def test_wheel_holds_the_extensions_the_data_files_and_the_console_scripts(installed: Path) -> None:
    site = next((installed / "lib").glob("python3*/site-packages"))
    for name in ("crc32c", "varint", "record_batch", "offset_index"):
        assert list((site / "broker" / "_native").glob(f"{name}.*.so")), name
    schemas = sorted(p.name for p in (site / "broker" / "protocol" / "schemas").glob("*.schema"))
    assert schemas == sorted(p.name for p in (ROOT / "broker" / "protocol" / "schemas").glob("*.schema"))
    assert (site / "broker" / "config" / "logging.ini").read_text() == (ROOT / "config" / "logging.ini").read_text()
    for script in ("kafka-server-start", "kafka-server-stop", "kafka-producer-perf-test", "kafka-consumer-perf-test",
                   "kafka-cluster"):
        assert (installed / "bin" / script).is_file(), script
    assert not (site / "tests").exists() and not (site / "tools" / "bench").exists()
    r = subprocess.run([str(installed / "bin" / "python"), "-c",
                        "import broker, broker.accel as a; print(broker.__file__); print(a.IMPLEMENTATION)"],
                       capture_output=True, text=True, timeout=60, cwd="/", env=clean_env(BROKER_REQUIRE_NATIVE="1"))
    assert r.returncode == 0, r.stderr
    where, implementation = r.stdout.split()
    assert where.startswith(str(site)) and implementation == "native"


def test_installed_entry_point_runs_a_broker_that_serves_a_stock_client(installed: Path, zk_chroot: str,
                                                                         tmp_path: Path) -> None:
    """kafka-server-start from the virtualenv (logs in <venv>/logs, the default LOG_DIR of an installed package),
    one record produced and consumed with confluent-kafka, then kafka-server-stop stops it cleanly."""
    port = free_port()
    cfg = tmp_path / "server.properties"
    cfg.write_text(f"broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={tmp_path / 'data'}\n"
                   f"zookeeper.connect={zk_chroot}\noffsets.topic.replication.factor=1\n"
                   "group.initial.rebalance.delay.ms=0\n")
    console = tmp_path / "console.out"
    env = clean_env(BROKER_REQUIRE_NATIVE="1")
    with open(console, "wb") as out:
        proc = subprocess.Popen([str(installed / "bin" / "kafka-server-start"), str(cfg)], cwd=str(tmp_path),
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "started (listeners" not in console.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, console.read_text()[-4000:]
            time.sleep(0.1)
        bootstrap = f"127.0.0.1:{port}"
        topic = f"pkg-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(30)
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        p.produce(topic, key=b"k", value=b"from the installed package")
        assert p.flush(30) == 0
        got = consume_from_start(bootstrap, [(topic, 0)], 1, 30)
        assert [(m.key(), m.value()) for m in got] == [(b"k", b"from the installed package")]

        stop = subprocess.run([str(installed / "bin" / "kafka-server-stop")], capture_output=True, text=True,
                              timeout=90, env=env)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = console.read_text()
    assert "Using native (Cython) record code" in out and "shut down completed" in out and "Traceback" not in out
    assert "started (listeners" in (installed / "logs" / "server.log").read_text()


def test_editable_install_builds_the_extensions_in_place(tmp_path: Path) -> None:
    """pip install -e: the package runs from the (copied) source tree, its extensions built there."""
    src = copy_sources(tmp_path / "src")
    venv = make_venv(tmp_path / "venv")
    pip_install(venv, "-e", str(src))
    r = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import broker, broker.accel as a; print(broker.__file__); print(a.IMPLEMENTATION)"],
                       capture_output=True, text=True, timeout=60, cwd="/", env=clean_env(BROKER_REQUIRE_NATIVE="1"))
    assert r.returncode == 0, r.stderr
    where, implementation = r.stdout.split()
    assert where == str(src / "broker" / "__init__.py") and implementation == "native"
    assert list((src / "broker" / "_native").glob("record_batch.*.so"))
    r = subprocess.run([str(venv / "bin" / "kafka-server-start"), "--version"], capture_output=True, text=True,
                       timeout=60, env=clean_env())
    assert r.returncode == 0 and r.stdout.split()[0] == __version__, r.stdout + r.stderr
