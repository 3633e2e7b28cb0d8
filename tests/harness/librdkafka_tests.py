"""librdkafka's own test suite (``tests/test-runner``), built once and run against our brokers.

librdkafka's regression tests (``tests/0nnn-*.c``/``.cpp``) are the client's own statement of what a Kafka broker
does; the ones that need a real broker (not librdkafka's mock cluster) run here unchanged against ours, exactly
as librdkafka's CI runs them against Apache Kafka: a ``test.conf`` naming ``bootstrap.servers``,
``TEST_KAFKA_VERSION`` for the version-gated tests, ``TESTS``/``SUBTESTS`` to pick them.

Where the sources come from: the machine reaches package registries only, and librdkafka's release tarball is on
none of them, but npm's ``@confluentinc/kafka-javascript`` bundles librdkafka *with* its ``tests/`` directory
(``deps/librdkafka``). Version 1.10.1 carries librdkafka 2.15.1, the closest to the 2.16.0 of the project's
confluent-kafka wheel that a registry serves (crates.io's rdkafka-sys stops at 2.12.1; the Go proxy has only a
static library). The tarball is fetched with ``npm pack`` and checked against a pinned sha256.

The build (``python -m tests.harness.librdkafka_tests build``, run by ``scripts/install-test.sh``) configures
librdkafka without the optional codecs and TLS/SASL libraries the chosen tests do not need, builds the C and C++
libraries and ``test-runner`` (C and C++ tests; RapidJSON headers enable 0098), and compiles the suite's Java
helper (``TransactionProducerCli``, used by 0098) against Apache Kafka 3.9.1's ``kafka-clients`` jar that the
install step resolved into ``.cache/kafka-3.9.1/libs``. Everything lives under ``.cache/librdkafka-<version>/``;
``.complete`` there holds the build key, so the step is a no-op when nothing changed. A missing tool, header or
jar stops the build with :class:`LibrdkafkaUnavailable` naming it; tests turn that into a failure, never a skip.

Running never compiles: :class:`SuiteRun` starts ``test-runner`` in a work directory of its own (its stats files
land there, not in the cache), with ``KAFKA_PATH`` pointing at a shim holding Kafka's ``libs/`` and a
``bin/kafka-run-class.sh`` (the suite starts its Java helper through it), and parses the runner's summary table
and its per-test log lines.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBRDKAFKA_VERSION = "2.15.1"
NPM_SPEC = "@confluentinc/kafka-javascript@1.10.1"
NPM_TARBALL = "confluentinc-kafka-javascript-1.10.1.tgz"
NPM_TARBALL_SHA256 = "ada7d703bb1d3237e2292bfabf438d663b6160c9f1ac2a2406b5dc4257c81b66"
TARBALL_PREFIX = "package/deps/librdkafka/"
#: librdkafka's own options: no TLS, SASL/GSSAPI, OIDC (curl), zstd or zlib (the tests run here use none; LZ4 and
#: snappy are built in); no syslog; no downloads of mklove modules (the machine could not reach them anyway)
CONFIGURE_ARGS = ("--no-download", "--disable-ssl", "--disable-gssapi", "--disable-curl", "--disable-zstd",
                  "--disable-zlib", "--disable-syslog")
#: bump when the build steps change in a way the key below does not see
BUILD_REVISION = "1"

CACHE = ROOT / ".cache" / f"librdkafka-{LIBRDKAFKA_VERSION}"
SRC = CACHE / "librdkafka"
TESTS_DIR = SRC / "tests"
RUNNER = TESTS_DIR / "test-runner"
JAVA_DIR = TESTS_DIR / "java"
KAFKA_PATH = CACHE / "kafka-path"
MARKER = CACHE / ".complete"
BUILD_LOG = CACHE / "build.log"
KAFKA_LIBS = ROOT / ".cache" / "kafka-3.9.1" / "libs"
KAFKA_CLIENTS_JAR = "kafka-clients-3.9.1.jar"
#: the broker version the version-gated tests are told (TEST_KAFKA_VERSION): the Kafka release we answer as
BROKER_VERSION = "3.9.1"

_RUN_CLASS = """#!/bin/sh
# Stand-in for Kafka's bin/kafka-run-class.sh: librdkafka's suite starts its Java helpers through it
# (tests/java/run-class.sh), with the helpers' directory in CLASSPATH.
exec java -Xmx256m -XX:TieredStopAtLevel=1 -Dlog4j.configuration=file:/dev/null \\
    -cp "$CLASSPATH:$(dirname "$0")/../libs/*" "$@"
"""


class LibrdkafkaUnavailable(RuntimeError):
    """The suite is not built, or a tool, header or jar the build needs is missing; the message says which."""


# ------------------------------------------------------------------------------------------------------ build
def build_key() -> str:
    """What the cached build depends on: the sources, the configure options and the build steps."""
    h = hashlib.sha256()
    for part in (NPM_TARBALL_SHA256, *CONFIGURE_ARGS, BUILD_REVISION, KAFKA_CLIENTS_JAR):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def is_built() -> bool:
    try:
        return MARKER.read_text().strip() == build_key() and RUNNER.is_file()
    except OSError:
        return False


def check_built() -> None:
    """Raise :class:`LibrdkafkaUnavailable` unless the current build is in the cache (tests call this)."""
    if not is_built():
        raise LibrdkafkaUnavailable(
            f"librdkafka {LIBRDKAFKA_VERSION}'s test-runner is not built in {CACHE} (or is stale): run "
            f"bash scripts/install-test.sh (or .venv/bin/python -m tests.harness.librdkafka_tests build)")
    for f in (JAVA_DIR / "TransactionProducerCli.class", KAFKA_PATH / "bin" / "kafka-run-class.sh",
              KAFKA_PATH / "libs" / KAFKA_CLIENTS_JAR):
        if not f.exists():
            raise LibrdkafkaUnavailable(f"{f} is missing: run bash scripts/install-test.sh")


def missing_prerequisites() -> list[str]:
    """Everything the build needs that this machine lacks, each with how to get it."""
    missing = []
    for tool, pkg in (("npm", "npm"), ("gcc", "gcc"), ("g++", "g++"), ("make", "make"), ("java", "a JDK"),
                      ("javac", "default-jdk-headless")):
        if shutil.which(tool) is None:
            missing.append(f"{tool} (apt-get install {pkg})")
    if shutil.which("g++") is not None:
        probe = subprocess.run(["g++", "-x", "c++", "-fsyntax-only", "-"], input="#include <rapidjson/schema.h>\n",
                               capture_output=True, text=True, check=False)
        if probe.returncode != 0:
            missing.append("RapidJSON headers, which test 0098 needs (apt-get install rapidjson-dev)")
    if not (KAFKA_LIBS / KAFKA_CLIENTS_JAR).is_file():
        missing.append(f"{KAFKA_LIBS / KAFKA_CLIENTS_JAR} (scripts/install-test.sh resolves Apache Kafka 3.9.1)")
    return missing


def _say(msg: str) -> None:
    print(f"librdkafka_tests: {msg}", file=sys.stderr, flush=True)


def _run_logged(cmd: Sequence[str], cwd: Path, what: str, env: Mapping[str, str] | None = None) -> None:
    with BUILD_LOG.open("a") as log:
        log.write(f"\n$ (cd {cwd} && {' '.join(cmd)})\n")
        log.flush()
        r = subprocess.run(list(cmd), cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                           env={**os.environ, **(env or {})}, check=False)
    if r.returncode != 0:
        tail = "\n".join(BUILD_LOG.read_text(errors="replace").splitlines()[-40:])
        raise LibrdkafkaUnavailable(f"{what} failed (exit {r.returncode}); end of {BUILD_LOG}:\n{tail}")


def _fetch_tarball() -> Path:
    dl = CACHE / "download"
    dl.mkdir(parents=True, exist_ok=True)
    tgz = dl / NPM_TARBALL
    if not tgz.is_file():
        _say(f"fetching {NPM_SPEC} (bundles librdkafka {LIBRDKAFKA_VERSION} with its tests/) with npm pack")
        r = subprocess.run(["npm", "pack", NPM_SPEC, "--pack-destination", str(dl)], capture_output=True,
                           text=True, timeout=600, cwd=dl, check=False)
        if r.returncode != 0 or not tgz.is_file():
            raise LibrdkafkaUnavailable(f"npm pack {NPM_SPEC} failed (exit {r.returncode}): {r.stderr[-2000:]}")
    digest = hashlib.sha256(tgz.read_bytes()).hexdigest()
    if digest != NPM_TARBALL_SHA256:
        tgz.unlink()
        raise LibrdkafkaUnavailable(f"{NPM_TARBALL} has sha256 {digest}, expected {NPM_TARBALL_SHA256}")
    return tgz


def _extract(tgz: Path, dest: Path) -> None:
    """Only ``deps/librdkafka`` of the npm package, with that prefix removed."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(tgz, "r:gz") as tar:
        members = []
        for m in tar.getmembers():
            if m.name.startswith(TARBALL_PREFIX) and len(m.name) > len(TARBALL_PREFIX):
                m.name = m.name[len(TARBALL_PREFIX):]
                members.append(m)
        if not any(m.name == "tests/test.c" for m in members):
            raise LibrdkafkaUnavailable(f"{NPM_TARBALL} has no deps/librdkafka/tests/test.c")
        tar.extractall(dest, members=members, filter="data")
    for script in ("configure", "lds-gen.py", "tests/run-test.sh", "tests/java/run-class.sh"):
        p = dest / script
        if p.exists():
            p.chmod(0o755)


def _kafka_path_shim() -> None:
    """``KAFKA_PATH`` for the suite: ``libs`` -> Kafka 3.9.1's jars, ``bin/kafka-run-class.sh`` -> plain java."""
    (KAFKA_PATH / "bin").mkdir(parents=True, exist_ok=True)
    libs = KAFKA_PATH / "libs"
    if libs.is_symlink() or libs.exists():
        libs.unlink()
    libs.symlink_to(KAFKA_LIBS, target_is_directory=True)
    run_class = KAFKA_PATH / "bin" / "kafka-run-class.sh"
    run_class.write_text(_RUN_CLASS)
    run_class.chmod(0o755)


def build(jobs: int = 2) -> Path:
    """Fetch, configure and build librdkafka, its test-runner and its Java helper; a no-op when cached.
    Returns the test-runner's path."""
    if is_built():
        return RUNNER
    missing = missing_prerequisites()
    if missing:
        raise LibrdkafkaUnavailable("cannot build librdkafka's test suite, missing: " + "; ".join(missing))
    CACHE.mkdir(parents=True, exist_ok=True)
    MARKER.unlink(missing_ok=True)
    BUILD_LOG.write_text(f"librdkafka {LIBRDKAFKA_VERSION} from {NPM_SPEC}, key {build_key()}\n")
    tgz = _fetch_tarball()
    staging = CACHE / "librdkafka.new"
    _extract(tgz, staging)
    started = time.monotonic()
    _say(f"building librdkafka {LIBRDKAFKA_VERSION} and its test-runner (a few minutes; log in {BUILD_LOG})")
    _run_logged(["./configure", *CONFIGURE_ARGS], staging, "librdkafka ./configure")
    _run_logged(["make", f"-j{jobs}", "libs"], staging, "make libs (librdkafka, librdkafka++)")
    _run_logged(["make", f"-j{jobs}", "test-runner"], staging / "tests", "make test-runner")
    config_h = (staging / "config.h").read_text()
    if "#define WITH_RAPIDJSON 1" not in config_h:
        raise LibrdkafkaUnavailable("configure did not find RapidJSON: test 0098 would skip itself "
                                    "(apt-get install rapidjson-dev)")
    _kafka_path_shim()
    _run_logged(["make", "-C", "java"], staging / "tests", "javac of the suite's Java helpers",
                env={"KAFKA_PATH": str(KAFKA_PATH)})
    if SRC.exists():
        shutil.rmtree(SRC)
    staging.rename(SRC)
    MARKER.write_text(build_key() + "\n")
    _say(f"built {RUNNER} in {time.monotonic() - started:.0f} s")
    return RUNNER


# -------------------------------------------------------------------------------------------------------- run
_ANSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\(B")
_LINE = re.compile(r"^\[(?P<test>\S+)\s*/\s*[\d.]+s\] (?P<text>.*)$")
_SUMMARY = re.compile(r"^\|\s(?P<test>\S+)\s+\|\s+(?P<state>[A-Z_]+)\s+\|\s+(?P<dur>[\d.]+)s\s*\|\s?(?P<reason>.*)$")
_END = re.compile(r"^=+ Test (?P<test>\S+) (?P<state>PASSED|SKIPPED|FAILED) =+$")
_FAILED_AT = re.compile(r'^### Test "(?P<test>[^"]+)" failed at (?P<where>.*): ###$')
_SKIPPING = re.compile(r"^WARN: SKIPPING TEST: (?P<why>.*)$")
_SUB_PASS = re.compile(r"^\[ (?P<name>.+): PASS \([\d.]+s\) \]$")
_SUB_SKIP = re.compile(r"^\[ (?P<name>.+): SKIP: (?P<why>.*) \]$")


@dataclass
class RdkTestResult:
    """One librdkafka test (``0103_transactions``) of a run: its final state and what it printed."""
    name: str
    state: str  # PASSED, FAILED, SKIPPED, RUNNING, ... as the runner's summary (or the test's last line) says
    duration_s: float
    reason: str  # why it failed or was skipped
    lines: list[str] = field(default_factory=list)
    subtests_passed: list[str] = field(default_factory=list)
    subtests_skipped: list[tuple[str, str]] = field(default_factory=list)

    def tail(self, n: int = 60) -> str:
        return "\n".join(self.lines[-n:])


@dataclass
class SuiteResult:
    """A finished ``test-runner`` invocation."""
    description: str
    returncode: int | None  # None: killed after its timeout
    output: str
    tests: dict[str, RdkTestResult]

    def result(self, name: str) -> RdkTestResult | None:
        return self.tests.get(name)


def parse_output(output: str) -> dict[str, RdkTestResult]:
    """Each test's state, reason, log lines and sub-tests.

    The summary table at the end is authoritative; a runner that aborted before printing it (librdkafka's
    runner aborts when a failed test leaves client threads behind) still yields each test's state from its own
    ``=== Test X PASSED ===`` line or its ``### Test "X" failed at ...`` block, else RUNNING."""
    summary: dict[str, RdkTestResult] = {}
    lines_of: dict[str, list[str]] = {}
    ended: dict[str, str] = {}
    why: dict[str, list[str]] = {}
    failing: str | None = None  # the test whose failure message the untagged lines continue
    for raw in output.splitlines():
        line = _ANSI.sub("", raw).rstrip()
        if (m := _SUMMARY.match(line)) is not None:
            if m["test"] != "<MAIN>":
                summary[m["test"]] = RdkTestResult(m["test"], m["state"], float(m["dur"]), m["reason"].strip())
            failing = None
        elif (m := _FAILED_AT.match(line)) is not None:
            failing = m["test"]
            why.setdefault(failing, []).append(f"failed at {m['where']}:")
        elif (m := _LINE.match(line.lstrip())) is not None:
            failing = None
            name, text = m["test"], m["text"]
            lines_of.setdefault(name, []).append(text)
            if (e := _END.match(text)) is not None:
                ended[name] = e["state"]
            elif (k := _SKIPPING.match(text)) is not None:
                why.setdefault(name, []).append(k["why"])
        elif failing is not None and line:
            why[failing].append(line)
    tests: dict[str, RdkTestResult] = {}
    for name in [*summary, *(n for n in [*lines_of, *why] if n not in summary and n != "<MAIN>")]:
        if name in tests:
            continue
        res = summary.get(name) or RdkTestResult(name, ended.get(name, "FAILED" if name in why else "RUNNING"), 0.0, "")
        if name in why and not res.reason:
            res.reason = " ".join(why[name])
        res.lines = lines_of.get(name, [])
        for text in res.lines:
            if (p := _SUB_PASS.match(text)) is not None:
                res.subtests_passed.append(p["name"])
            elif (k := _SUB_SKIP.match(text)) is not None:
                res.subtests_skipped.append((k["name"], k["why"]))
        tests[name] = res
    return tests


class SuiteRun:
    """One ``test-runner`` process for ``tests`` (numbers such as ``"0103"``) against ``bootstrap``.

    ``subtests`` is librdkafka's ``SUBTESTS`` (a substring of the sub-test names to run, for every test of the
    run); ``parallel`` its ``-p``. The process runs in ``workdir``: ``test.conf``, the output and the runner's
    stats files go there."""

    def __init__(self, tests: Sequence[str], bootstrap: str, workdir: Path, subtests: str | None = None,
                 parallel: int = 1, extra_conf: Mapping[str, str] | None = None) -> None:
        self.tests = list(tests)
        self.bootstrap = bootstrap
        self.workdir = Path(workdir)
        self.subtests = subtests
        self.parallel = parallel
        self.extra_conf = dict(extra_conf or {})
        self.output_path = self.workdir / "test-runner.out"
        self.proc: subprocess.Popen[bytes] | None = None
        self.description = f"TESTS={','.join(self.tests)}" + (f" SUBTESTS={subtests!r}" if subtests else "")

    def _prepare(self) -> dict[str, str]:
        check_built()
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = {"bootstrap.servers": self.bootstrap, "test.topic.random": "true", **self.extra_conf}
        (self.workdir / "test.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        # the runner starts Java helpers as ./java/run-class.sh after `make -s java` in its cwd: a link to the
        # built helpers and a Makefile that only checks they are there (tests never compile)
        link = self.workdir / "java"
        if not link.exists():
            link.symlink_to(JAVA_DIR, target_is_directory=True)
        (self.workdir / "Makefile").write_text(
            f"java:\n\t@test -f {JAVA_DIR}/TransactionProducerCli.class || "
            f"{{ echo 'librdkafka Java helpers not built: run bash scripts/install-test.sh' >&2; exit 1; }}\n")
        env = {k: v for k, v in os.environ.items() if k != "CI"}  # CI=1 is librdkafka's own CI mode: slower timeouts
        env.update({
            "LD_LIBRARY_PATH": f"{SRC / 'src'}:{SRC / 'src-cpp'}",
            "RDKAFKA_TEST_CONF": str(self.workdir / "test.conf"),
            "TEST_KAFKA_VERSION": BROKER_VERSION,
            "KAFKA_PATH": str(KAFKA_PATH),
            "TESTS": ",".join(self.tests),
            "RDKAFKA_GITVER": f"v{LIBRDKAFKA_VERSION}",
        })
        env.pop("SUBTESTS", None)
        if self.subtests:
            env["SUBTESTS"] = self.subtests
        return env

    def start(self) -> SuiteRun:
        env = self._prepare()
        with self.output_path.open("wb") as out:
            self.proc = subprocess.Popen([str(RUNNER), f"-p{self.parallel}"], cwd=self.workdir, env=env,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def wait(self, timeout_s: float) -> SuiteResult:
        assert self.proc is not None, "start() first"
        try:
            rc: int | None = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
            rc = None
        output = self.output_path.read_text(errors="replace")
        return SuiteResult(self.description, rc, output, parse_output(output))


def run_suites(runs: Sequence[SuiteRun], timeout_s: float) -> list[SuiteResult]:
    """Start every run at once (they share the brokers, not their topics), then wait for all of them."""
    for r in runs:
        r.start()
    deadline = time.monotonic() + timeout_s
    return [r.wait(max(1.0, deadline - time.monotonic())) for r in runs]


def main(argv: Sequence[str]) -> int:
    cmd = argv[0] if argv else "build"
    try:
        if cmd == "build":
            print(build())
        elif cmd == "check":
            check_built()
            print(RUNNER)
        else:
            print("usage: python -m tests.harness.librdkafka_tests [build|check]", file=sys.stderr)
            return 2
    except LibrdkafkaUnavailable as e:
        _say(str(e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
