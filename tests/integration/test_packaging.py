"""The package: ``pip install`` of the project into a fresh virtualenv builds the Cython extensions and installs the
broker with its console scripts, under one top-level import name (``kafka_broker_py``: ``import broker`` in a
user's program does not find ours); every console script runs and names itself as invoked; the installed
``kafka-server-start`` then runs a broker against a real ZooKeeper that a stock client (confluent-kafka) produces to
and consumes from, and ``kafka-server-stop`` stops it.

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
SOURCES = ("broker", "pyx", "tools", "kafka_broker_py", "config", "bin", "setup.py", "pyproject.toml", "MANIFEST.in", "README.md",
           "requirements.txt", "requirements-test.txt")
#: the builds' compiler flags where the extensions' speed does not matter: the generated codecs' (setup.py) and,
#: appended after Python's own -O3 -g, every other extension's
UNOPTIMIZED = {"BROKER_CODEC_CFLAGS": "-O0 -g0", "CFLAGS": "-O0 -g0"}
#: CCACHE_BASEDIR (passed by each build below): when scripts/test.sh puts ccache on PATH (scripts/compiler-cache.sh),
#: the copy's absolute paths are hashed relative to its directory, so this run's second build and the next runs'
#: builds come from the compiler cache
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


def pip_install(venv: Path, *args: str, **env: str) -> None:
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *args], capture_output=True, text=True,
                       timeout=900, env=clean_env(**env))
    assert r.returncode == 0, f"pip install {' '.join(args)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the project installed from a copy of its sources (a regular, non-editable install)."""
    base = tmp_path_factory.mktemp("pkg")
    src = copy_sources(base / "src")
    venv = make_venv(base / "venv")
    # unoptimized extensions (as the editable install below): these tests are about what the wheel holds and that
    # its console scripts and broker run, not about the extensions' speed, and the optimizer's CPU (the generated
    # codecs' -O1: 100 s; record_batch's -O3 -g: 12 s; more on a loaded machine) buys nothing here; the shipped
    # flags are compiled by every scripts/install.sh, the CI's first step included
    pip_install(venv, str(src), CCACHE_BASEDIR=str(base), **UNOPTIMIZED)
    shutil.rmtree(src)  # the installed package must not need its sources
    return venv


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def console_scripts() -> Dict[str, str]:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def test_wheel_holds_the_extensions_the_data_files_and_the_console_scripts(installed: Path) -> None:
    site = site_packages(installed)
    ours = site / "kafka_broker_py"
    for name in ("crc32c", "varint", "record_batch", "offset_index"):
        assert list((ours / "broker" / "_native").glob(f"{name}.*.so")), name
    schemas = sorted(p.name for p in (ours / "broker" / "protocol" / "schemas").glob("*.schema"))
    assert schemas == sorted(p.name for p in (ROOT / "broker" / "protocol" / "schemas").glob("*.schema"))
    assert (ours / "broker" / "config" / "logging.ini").read_text() == (ROOT / "config" / "logging.ini").read_text()
    for script in console_scripts():
        assert (installed / "bin" / script).is_file(), script
    assert not (ours / "tests").exists() and not (ours / "tools" / "bench").exists()
    r = subprocess.run([str(installed / "bin" / "python"), "-c",
                        "import kafka_broker_py; kafka_broker_py.activate(); "
                        "import broker, broker.accel as a; print(broker.__file__); print(a.IMPLEMENTATION)"],
                       capture_output=True, text=True, timeout=60, cwd="/", env=clean_env(BROKER_REQUIRE_NATIVE="1"))
    assert r.returncode == 0, r.stderr
    where, implementation = r.stdout.split()
    assert where == str(ours / "broker" / "__init__.py") and implementation == "native"


def test_the_distribution_installs_one_top_level_import_name(installed: Path) -> None:
    """Every file of the distribution is under site-packages/kafka_broker_py/ or its dist-info (plus the console
    scripts in bin/); ``broker`` and ``tools`` are not importable until a program asks for them."""
    site = site_packages(installed)
    dist_info = [p for p in site.glob("*.dist-info") if p.name.startswith("kafka_broker_py-")]
    assert [p.name for p in dist_info] == [f"kafka_broker_py-{__version__}.dist-info"]
    record = [line.rsplit(",", 2)[0] for line in (dist_info[0] / "RECORD").read_text().splitlines() if line]
    top = {path.split("/", 1)[0] for path in record if not path.startswith("../")}
    assert top == {"kafka_broker_py", dist_info[0].name}, top
    assert (dist_info[0] / "top_level.txt").read_text().split() == ["kafka_broker_py"]
    assert not (site / "broker").exists() and not (site / "tools").exists()
    for name in ("broker", "tools"):
        r = subprocess.run([str(installed / "bin" / "python"), "-c", f"import {name}"], capture_output=True,
                           text=True, timeout=60, cwd="/", env=clean_env())
        assert r.returncode == 1 and f"No module named '{name}'" in r.stderr, r.stderr


def test_every_console_script_runs_and_names_itself_as_invoked(installed: Path) -> None:
    """Each console script answers --help without a traceback; the ones whose usage names the command (as Kafka's
    scripts name themselves, $0) say kafka-x, not kafka-x.sh."""
    env = clean_env()
    outputs: Dict[str, str] = {}
    for script in console_scripts():
        r = subprocess.run([str(installed / "bin" / script), "--help"], capture_output=True, text=True, timeout=60,
                           cwd="/", env=env, stdin=subprocess.DEVNULL)
        out = r.stdout + r.stderr
        assert r.returncode in (0, 1) and out.strip(), f"{script}: exit {r.returncode}\n{out}"
        assert "Traceback" not in out and "Error" not in out.splitlines()[0], f"{script}:\n{out}"
        outputs[script] = out
    assert outputs["kafka-cluster"].startswith("usage: kafka-cluster [-h]")
    assert outputs["kafka-server-start"].startswith("USAGE: kafka-server-start [-daemon]")
    assert outputs["kafka-server-stop"].startswith("usage: kafka-server-stop ")
    assert outputs["kafka-transactions"].startswith("usage: kafka-transactions [-h]")
    r = subprocess.run([str(installed / "bin" / "kafka-run-class")], capture_output=True, text=True, timeout=60,
                       env=env)
    assert r.returncode == 1 and r.stderr.startswith("USAGE: kafka-run-class [-daemon]"), r.stderr


def test_an_installed_tool_without_its_client_library_says_what_to_install(installed: Path, tmp_path: Path) -> None:
    """confluent-kafka made unimportable (a sitecustomize that blocks it): one line naming what to install, exit 1."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['confluent_kafka'] = None\n")
    for script, args in (("kafka-console-producer", ["--bootstrap-server", "127.0.0.1:1", "--topic", "t"]),
                         ("kafka-producer-perf-test", ["--topic", "t", "--num-records", "1", "--record-size", "1",
                                                       "--throughput", "-1", "--producer-props",
                                                       "bootstrap.servers=127.0.0.1:1"])):
        r = subprocess.run([str(installed / "bin" / script), *args], capture_output=True, text=True, timeout=60,
                           cwd="/", env=clean_env(PYTHONPATH=str(tmp_path)), input="a record\n")
        assert (r.returncode, r.stdout, r.stderr) == (
            1, "", f"{script}: confluent-kafka is not installed; run pip install confluent-kafka\n"), r


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
    # unoptimized extensions: this test is about where the extensions are built, and the optimizer's CPU buys
    # nothing here
    pip_install(venv, "-e", str(src), CCACHE_BASEDIR=str(tmp_path), **UNOPTIMIZED)
    r = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import kafka_broker_py; kafka_broker_py.activate(); "
                        "import broker, broker.accel as a; print(broker.__file__); print(a.IMPLEMENTATION)"],
                       capture_output=True, text=True, timeout=60, cwd="/", env=clean_env(BROKER_REQUIRE_NATIVE="1"))
    assert r.returncode == 0, r.stderr
    where, implementation = r.stdout.split()
    assert where == str(src / "broker" / "__init__.py") and implementation == "native"
    assert list((src / "broker" / "_native").glob("record_batch.*.so"))
    r = subprocess.run([str(venv / "bin" / "kafka-server-start"), "--version"], capture_output=True, text=True,
                       timeout=60, env=clean_env())
    assert r.returncode == 0 and r.stdout.split()[0] == __version__, r.stdout + r.stderr
