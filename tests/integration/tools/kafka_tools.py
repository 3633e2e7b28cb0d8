"""Running command-line tools in the tool tests: this project's (``bin/kafka-*.sh`` as subprocesses) and Apache
Kafka 3.9.1's own (by main class, several per JVM through KafkaToolBatch.java, since each JVM start costs seconds).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from tests.harness.kafka import java_program
from tools.cluster import ROOT

BATCH = Path(__file__).with_name("KafkaToolBatch.java")

#: tool name (as in bin/kafka-<name>.sh) -> Kafka 3.9's main class
KAFKA_CLASSES: Dict[str, str] = {
    "topics": "org.apache.kafka.tools.TopicCommand",
    "console-producer": "kafka.tools.ConsoleProducer",
    "console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "configs": "kafka.admin.ConfigCommand",
    "get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "dump-log": "kafka.tools.DumpLogSegments",
    "log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "features": "org.apache.kafka.tools.FeatureCommand",
    "delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "broker-api-versions": "kafka.admin.BrokerApiVersionsCommand",
    "producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "acls": "kafka.admin.AclCommand",
    "delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "transactions": "org.apache.kafka.tools.TransactionsCommand",
    "leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
}

#: Kafka's config/tools-log4j.properties: warnings and errors on stderr, as the bin/ scripts run the tools
_LOG4J = ("log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
          "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
          "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\nlog4j.appender.stderr.Target=System.err\n")


@dataclass
class ToolRun:
    code: int
    stdout: str
    stderr: str

    def lines(self) -> List[str]:
        return self.stdout.splitlines()


def run_tool(name: str, *args: str, input: Optional[str] = None, timeout_s: float = 120.0,
             env: Optional[Dict[str, str]] = None) -> ToolRun:
    """This project's bin/kafka-<name>.sh as a subprocess (``sleep <ms>``: a pause, as in a Kafka tool batch)."""
    if name == "sleep":
        time.sleep(int(args[0]) / 1000.0)
        return ToolRun(0, "", "")
    script = ROOT / "bin" / f"kafka-{name}.sh"
    r = subprocess.run([str(script), *args], input=input, capture_output=True, text=True, timeout=timeout_s,
                       env={**os.environ, **(env or {})}, cwd="/")
    return ToolRun(r.returncode, r.stdout, r.stderr)


def run_kafka_batch(commands: Sequence[Tuple[str, Sequence[str], Optional[str]]],
                    timeout_s: float = 600.0) -> List[ToolRun]:
    """Kafka 3.9.1's tools (``(name or main class, args, stdin)``) run one after another in one JVM (a command
    ``sleep <ms>`` pauses)."""
    java = shutil.which("java")
    assert java is not None, "java not found"
    program = java_program(BATCH)
    with tempfile.TemporaryDirectory(prefix="kafka-tools-") as d:
        cmds = Path(d) / "commands.json"
        cmds.write_text(json.dumps([{"main": KAFKA_CLASSES.get(n, n), "args": list(a), "stdin": s or ""}
                                    for n, a, s in commands]))
        log4j = Path(d) / "tools-log4j.properties"
        log4j.write_text(_LOG4J)
        r = subprocess.run([java, "-Xmx384m", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
                            f"-Dlog4j.configuration=file:{log4j}", *program, str(cmds)],
                           capture_output=True, text=True, timeout=timeout_s)
    assert r.returncode == 0 and r.stdout.startswith("["), f"tool batch failed: {r.stderr[-4000:]}"
    return [ToolRun(x["code"], x["stdout"], x["stderr"]) for x in json.loads(r.stdout)]


def run_kafka_tool(name: str, *args: str, input: Optional[str] = None) -> ToolRun:
    return run_kafka_batch([(name, args, input)])[0]


_LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+\] (WARN|INFO) .*$")


def without_log_lines(text: str) -> str:
    """stderr without log4j WARN/INFO lines (clients warn about things the tests do on purpose)."""
    return "\n".join(line for line in text.splitlines() if not _LOG_LINE.match(line))


def mask(text: str, *patterns: Tuple[str, str]) -> str:
    """Replace what legitimately differs between two clusters (ids, times, ports) before comparing outputs."""
    for pattern, repl in patterns:
        text = re.sub(pattern, repl, text)
    return text


TOPIC_ID = (r"TopicId: [A-Za-z0-9_-]{22}", "TopicId: <id>")
