"""kafka-acls, kafka-delegation-tokens and kafka-transactions judged by Apache Kafka 3.9.1's own tools (AclCommand,
DelegationTokenCommand, TransactionsCommand).

Two brokers with the same settings, each on its own ZooKeeper chroot: the project's (bin/) and a real Kafka 3.9.1
one. Both run Kafka's AclAuthorizer with super users User:ANONYMOUS (the PLAINTEXT listener) and User:admin, a
SASL_PLAINTEXT listener with SCRAM (users admin, alice, bob written to ZooKeeper before start) and a delegation
token secret, and transaction partition verification off (so a hanging transaction can be made, KIP-664 style).

Each scenario runs four ways: Kafka's tools and this project's, against either broker. ``{T}`` in a command is the
tool family's own name part (``judgeAa`` for Kafka's tools, ``judgeBB`` for ours: equal Java hash codes), so both
families can work on one broker without meeting. Outputs are compared after masking only what must differ (the
family's name, token ids, HMACs, dates, producer ids, timestamps) and, where Kafka's tool prints Scala hash-set order
(ACL blocks and entries: hash codes of Java enums, different on every JVM run), as sorted blocks.
"""
from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol.api import ApiKey
from broker.protocol.records.builder import build_batch
from tests.harness.broker_process import BrokerProcess, free_port
from tests.harness.cluster_ops import call
from tests.harness.kafka import RealKafkaBroker
from tests.integration.security.conftest import add_scram_user
from tests.integration.tools.kafka_tools import ToolRun, mask, run_kafka_batch, run_tool

pytestmark = pytest.mark.slow

Command = Tuple[str, Sequence[str], Optional[str]]
KAFKA_FAMILY, OUR_FAMILY = "Aa", "BB"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


def settings(plain: int, sasl: int) -> Dict[str, str]:
    jaas = f'{SCRAM} required username="admin" password="admin-secret";'
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": jaas,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": jaas,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
        "delegation.token.secret.key": "tools-token-secret",
        "delegation.token.max.lifetime.ms": "86400000", "delegation.token.expiry.time.ms": "3600000",
        "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "3",
        "group.initial.rebalance.delay.ms": "0", "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1", "transaction.state.log.num.partitions": "3",
        "transaction.partition.verification.enable": "false", "auto.create.topics.enable": "false",
    }


class Target:
    """One broker of the comparison: its PLAINTEXT and SASL addresses."""

    def __init__(self, plain: int, sasl: int) -> None:
        self.bootstrap = f"127.0.0.1:{plain}"
        self.sasl = f"127.0.0.1:{sasl}"


def _users(zk_connect: str) -> None:
    for user, password in USERS.items():
        add_scram_user(zk_connect, user, password, "SCRAM-SHA-512")


@pytest.fixture(scope="module")
def brokers(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Target]]:
    """{"project": ..., "kafka": ...}, both started and set up alike."""
    d = Path(tmp_path_factory.mktemp("sectxn"))
    ours_ports, kafka_ports = (free_port(), free_port()), (free_port(), free_port())
    ours_zk = f"{zookeeper}/sectxn-ours-{uuid.uuid4().hex[:8]}"
    kafka_zk = f"{zookeeper}/sectxn-kafka-{uuid.uuid4().hex[:8]}"
    _users(ours_zk)
    _users(kafka_zk)
    ours = BrokerProcess(d / "ours", ours_zk, broker_id=0, port=ours_ports[0], overrides=settings(*ours_ports))
    kafka = RealKafkaBroker(d / "kafka", kafka_zk, 0, port=kafka_ports[0], overrides=settings(*kafka_ports))
    try:
        ours.start()
        kafka.start()
        yield {"project": Target(*ours_ports), "kafka": Target(*kafka_ports)}
    finally:
        kafka.stop()
        rc = ours.stop()
        out = ours.output()
        assert "Traceback" not in out, out[-6000:]
        assert rc == 0, f"broker exited with {rc}"


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """--command-config files: a SCRAM login per user, and an empty one (PLAINTEXT)."""
    d = Path(tmp_path_factory.mktemp("sectxn-cfg"))
    out = {}
    for user, password in USERS.items():
        path = d / f"{user}.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                        f'sasl.jaas.config={SCRAM} required username="{user}" password="{password}";\n')
        out[user] = str(path)
    (d / "plain.properties").write_text("")
    out["plain"] = str(d / "plain.properties")
    return out


# ------------------------------------------------------------------------------------------------ running
def expand(commands: Sequence[Command], target: Target, family: str, extra: Dict[str, str]) -> List[Command]:
    def sub(text: str) -> str:
        text = text.replace("{bs}", target.bootstrap).replace("{sasl}", target.sasl).replace("{T}", f"judge{family}")
        for k, v in extra.items():
            text = text.replace("{" + k + "}", v)
        return text
    return [(tool, [sub(a) for a in args], None if stdin is None else sub(stdin)) for tool, args, stdin in commands]


def run_both(commands: Sequence[Command], target: Target, extra: Optional[Dict[str, str]] = None,
             per_family: Optional[Dict[str, Dict[str, str]]] = None) -> Dict[str, List[ToolRun]]:
    """Kafka's tools, then the project's, against one broker: {"kafka": [...], "ours": [...]}."""
    def values(family: str) -> Dict[str, str]:
        return {**(extra or {}), **((per_family or {}).get(family, {}))}
    kafka_runs = run_kafka_batch(expand(commands, target, KAFKA_FAMILY, values(KAFKA_FAMILY)))
    ours = [run_tool(tool, *args, input=stdin)
            for tool, args, stdin in expand(commands, target, OUR_FAMILY, values(OUR_FAMILY))]
    return {"kafka": kafka_runs, "ours": ours}


_TRACE = re.compile(r"^(\s+at |\s*\.\.\. \d+ more|Caused by: |java\.|joptsimple\.|org\.apache\.kafka\.common\.errors\.)")


def without_trace(text: str) -> str:
    """stdout/stderr without a Java stack trace (this project's tools print the message lines only)."""
    out: List[str] = []
    in_trace = False
    for line in text.split("\n"):
        if out and _TRACE.match(line) and (in_trace or out[-1].startswith(("Error while executing", "org.apache"))):
            in_trace = True
            continue
        in_trace = False
        out.append(line)
    return "\n".join(out)


def first_line(text: str) -> str:
    return text.strip("\n").split("\n")[0] if text.strip() else ""


def compare(results: Dict[str, Dict[str, List[ToolRun]]], commands: Sequence[Command],
            normalize: Callable[[str], object], stderr_first_line: bool = True) -> None:
    """For every command: our tool = Kafka's tool on each broker (exit code, normalized stdout, first stderr line
    of a failure), and Kafka's tool prints the same against both brokers."""
    seen: Dict[str, List[tuple]] = {}
    for where, runs in results.items():
        for family, family_runs in runs.items():
            seen[f"{family}@{where}"] = [
                (r.code, normalize(without_trace(r.stdout)),
                 normalize(first_line(without_trace(_no_log(r.stderr)))) if r.code and stderr_first_line else None)
                for r in family_runs]
    for i, (tool, args, _) in enumerate(commands):
        what = f"command {i} (kafka-{tool} {' '.join(args)})"
        for where in results:
            ours, theirs = seen[f"ours@{where}"][i], seen[f"kafka@{where}"][i]
            assert ours == theirs, (f"{what} on the {where} broker: ours differs from Kafka's\nours:    {ours!r}\n"
                                    f"Kafka's: {theirs!r}\nour stderr: {results[where]['ours'][i].stderr[-1500:]}")
        if len(results) == 2:
            on_project, on_kafka = seen["kafka@project"][i], seen["kafka@kafka"][i]
            assert on_project == on_kafka, (f"{what}: Kafka's tool differs between the brokers\nproject: "
                                            f"{on_project!r}\nkafka:   {on_kafka!r}")


_LOG = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+\] (WARN|INFO|ERROR) .*$")


def _no_log(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not _LOG.match(line))


FAMILY = (r"judge(Aa|BB)", "judge*")


# ------------------------------------------------------------------------------------------------ help
def test_help_and_options_are_kafkas() -> None:
    """--help of each tool: kafka-delegation-tokens and kafka-transactions print Kafka's text exactly; kafka-acls
    Kafka's table except the reasons appended to the ZooKeeper direct mode options it refuses."""
    tools = [("acls", ["--help"]), ("delegation-tokens", ["--help"]), ("transactions", ["--help"]),
             ("transactions", ["list", "--help"]), ("transactions", ["describe", "--help"]),
             ("transactions", ["describe-producers", "--help"]), ("transactions", ["abort", "--help"]),
             ("transactions", ["find-hanging", "--help"]), ("transactions", ["--bootstrap-server", "x"]),
             ("transactions", ["--bootstrap-server", "x", "force-terminate"]),
             ("transactions", ["--bootstrap-server", "x", "describe"]),
             ("transactions", ["--bootstrap-server", "x", "list", "--bogus"]),
             ("transactions", ["list"]),
             ("acls", []), ("delegation-tokens", []), ("delegation-tokens", ["--create", "--describe"]),
             ("delegation-tokens", ["--create", "--bootstrap-server", "x"]),
             ("delegation-tokens", ["--create", "--bootstrap-server", "x", "--command-config", "c"]),
             ("delegation-tokens", ["--renew", "--bootstrap-server", "x", "--command-config", "c", "--hmac", "h"]),
             ("delegation-tokens", ["--describe", "--bootstrap-server", "x", "--command-config", "c", "--hmac"])]
    theirs = run_kafka_batch([(tool, args, None) for tool, args in tools])
    for (tool, args), kafka_run in zip(tools, theirs):
        ours = run_tool(tool, *args)
        what = f"kafka-{tool} {' '.join(args)}"
        assert ours.code == kafka_run.code, what
        if tool == "acls":
            kafka_text, our_text = _no_log(kafka_run.stderr), ours.stderr
            assert first_line(our_text) == first_line(kafka_text), what
            assert set(re.findall(r"^(--[a-z-]+)", our_text, re.M)) == set(re.findall(r"^(--[a-z-]+)", kafka_text,
                                                                                       re.M))
            for option in ("--operation", "--resource-pattern-type", "--principal", "--command-config"):
                assert _help_entry(our_text, option) == _help_entry(kafka_text, option), option
            continue
        if ours.stdout.startswith("usage:") or kafka_run.stdout.startswith("usage:"):
            assert ours.stdout == kafka_run.stdout, what
        elif "error:" in kafka_run.stderr:  # argparse4j justifies long error lines; compare the words
            assert ours.stderr.split() == kafka_run.stderr.split(), what
        else:
            assert ours.stdout == kafka_run.stdout, what
            assert ours.stderr.strip() == _no_log(kafka_run.stderr).strip(), (what, ours.stderr, kafka_run.stderr)


def _help_entry(text: str, option: str) -> str:
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(option + " ") or line == option)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("--")), len(lines))
    return "\n".join(lines[start:end])


# ------------------------------------------------------------------------------------------------ kafka-acls
def acl_blocks(text: str) -> object:
    """Kafka's ACL output as its "ACLs for principal" sections, each a sorted list of blocks (header, sorted
    entries), after masking the family name."""
    text = mask(text, FAMILY, (r"only supports operations .*", "only supports operations <set>"))
    sections: List[tuple] = []
    for part in re.split(r"^(ACLs for principal .*)$", text.strip("\n"), flags=re.M):
        if part.startswith("ACLs for principal "):
            sections.append((part, ()))
            continue
        blocks: List[tuple] = []
        for chunk in re.split(r"\n\s*\n", part.strip("\n")):
            lines = [line.strip() for line in chunk.split("\n") if line.strip()]
            if lines:
                head = [ln for ln in lines if not ln.startswith("(")]
                blocks.append((tuple(head), tuple(sorted(ln for ln in lines if ln.startswith("(")))))
        if blocks:
            sections.append(("", tuple(sorted(blocks))))
    return sections


def B(*args: str, stdin: Optional[str] = None) -> Command:
    return ("acls", ["--bootstrap-server", "{bs}", *args], stdin)


ACLS: List[Command] = [
    B("--add", "--allow-principal", "User:{T}-alice", "--operation", "Read", "--operation", "write", "--topic",
      "{T}-t"),
    B("--add", "--deny-principal", "User:{T}-bob", "--deny-host", "10.0.0.1", "--operation", "Describe", "--topic",
      "{T}-t", "--group", "{T}-g"),
    B("--add", "--producer", "--topic", "{T}-p", "--transactional-id", "{T}-tx", "--allow-principal",
      "User:{T}-prod", "--idempotent"),
    B("--add", "--consumer", "--topic", "{T}-t", "--group", "{T}-g", "--allow-principal", "User:{T}-cons"),
    B("--add", "--resource-pattern-type", "PREFIXED", "--topic", "{T}-pre", "--allow-principal", "User:{T}-alice",
      "--allow-host", "127.0.0.1"),
    B("--add", "--user-principal", "User:{T}-alice", "--allow-principal", "User:{T}-admin", "--operation",
      "CreateTokens", "--operation", "DESCRIBE_TOKENS"),
    B("--add", "--delegation-token", "{T}-tok", "--allow-principal", "User:{T}-alice", "--operation", "Describe"),
    B("--add", "--cluster", "--allow-principal", "User:{T}-ops", "--operation", "AlterConfigs"),
    B("--list", "--topic", "{T}-t"),
    B("--list", "--topic", "{T}-pre-x", "--resource-pattern-type", "match"),
    B("--list", "--topic", "{T}-pre", "--resource-pattern-type", "any"),
    B("--list", "--topic", "{T}-pre"),
    B("--list", "--principal", "User:{T}-alice"),
    B("--list", "--principal", "User:{T}-alice", "--principal", "User:{T}-nobody", "--group", "{T}-g"),
    B("--list", "--cluster", "--transactional-id", "{T}-tx"),
    B("--remove", "--force", "--allow-principal", "User:{T}-alice", "--operation", "Write", "--topic", "{T}-t"),
    B("--remove", "--force", "--deny-principal", "User:{T}-bob", "--deny-host", "10.0.0.1", "--operation",
      "Describe", "--group", "{T}-g"),
    B("--list", "--group", "{T}-g"),
    B("--remove", "--topic", "{T}-t", "--force"),
    B("--list", "--topic", "{T}-t"),
    # refusals, before and after the connection
    B("--add", "--topic", "{T}-t", "--allow-principal", "alice"),
    B("--add", "--topic", "{T}-t", "--allow-principal", "User:a", "--operation", "ClusterAction"),
    B("--add", "--topic", "{T}-t", "--allow-principal", "User:a", "--operation", "bogus"),
    B("--add", "--topic", "{T}-t", "--allow-principal", "User:a", "--resource-pattern-type", "match"),
    B("--add", "--topic", "{T}-t", "--allow-principal", "User:a", "--resource-pattern-type", "bogus"),
    B("--add", "--topic", "{T}-t"),
    B("--add"),
    B("--list", "--producer"),
    B("--add", "--producer", "--group", "{T}-g"),
    B("--add", "--consumer", "--topic", "{T}-t", "--group", "{T}-g", "--cluster"),
    B("--add", "--idempotent", "--topic", "{T}-t"),
    B("--remove", "--principal", "User:x", "--topic", "{T}-t"),
    B("--add", "--list"),
    B("--add", "--topic", "{T}-cc", "--allow-principal", "User:{T}-cc", "--command-config"),
    ("acls", ["--list", "--topic", "x"], None),
    # everything else away: the next family starts on a clean cluster
    B("--remove", "--force", "--topic", "{T}-p", "--transactional-id", "{T}-tx", "--cluster", "--group", "{T}-g",
      "--topic", "{T}-cc"),
    B("--remove", "--force", "--topic", "{T}-pre", "--resource-pattern-type", "prefixed"),
    B("--remove", "--force", "--user-principal", "User:{T}-alice", "--delegation-token", "{T}-tok"),
    B("--list"),
]


def test_kafka_acls(brokers: Dict[str, Target]) -> None:
    results = {where: run_both(ACLS, target) for where, target in brokers.items()}
    compare(results, ACLS, acl_blocks)
    # and what the outputs say, on our broker with our tool
    ours = results["project"]["ours"]
    assert ours[0].code == 0 and ("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=judgeBB-t, "
                                  "patternType=LITERAL)`: \n \t") in ours[0].stdout
    assert "\t(principal=User:judgeBB-alice, host=*, operation=WRITE, permissionType=ALLOW)" in ours[0].stdout
    produced = ours[2].stdout
    assert "resourceType=CLUSTER, name=kafka-cluster" in produced and "operation=IDEMPOTENT_WRITE" in produced
    assert "resourceType=TRANSACTIONAL_ID, name=judgeBB-tx" in produced
    assert "operation=READ, permissionType=ALLOW" in ours[8].stdout and "judgeBB-cons" in ours[8].stdout
    assert "ACLs for principal `User:judgeBB-alice`" in ours[12].stdout
    assert "judgeBB-bob" not in ours[17].stdout and "judgeBB-cons" in ours[17].stdout  # the DENY went
    assert ours[19].stdout == ""  # every ACL of the topic removed
    assert ours[-1].code == 0 and ours[-1].stdout == ""


def test_acl_removal_asks_first(brokers: Dict[str, Target]) -> None:
    """Without --force, --remove asks on the terminal and removes only on "y" (Kafka's tool reads the JVM's own
    standard input, which the tool batch cannot feed, so this one is ours alone)."""
    bs = brokers["project"].bootstrap
    add = run_tool("acls", "--bootstrap-server", bs, "--add", "--allow-principal", "User:asker", "--topic", "asked")
    assert add.code == 0, add.stdout + add.stderr
    question = ("Are you sure you want to delete all ACLs for resource filter `ResourcePattern(resourceType=TOPIC, "
                "name=asked, patternType=LITERAL)`? (y/n)\n")
    no = run_tool("acls", "--bootstrap-server", bs, "--remove", "--topic", "asked", input="n\n")
    assert no.code == 0 and no.stdout == question, no.stdout
    listed = run_tool("acls", "--bootstrap-server", bs, "--list", "--topic", "asked")
    assert "User:asker" in listed.stdout
    eof = run_tool("acls", "--bootstrap-server", bs, "--remove", "--topic", "asked", input="")
    assert eof.code == 1 and eof.stdout.startswith(question + "Error while executing ACL command: ")
    yes = run_tool("acls", "--bootstrap-server", bs, "--remove", "--topic", "asked", input="y\n")
    assert yes.code == 0 and yes.stdout == question
    assert run_tool("acls", "--bootstrap-server", bs, "--list", "--topic", "asked").stdout == ""


def test_acl_tool_refuses_zookeeper_mode_with_a_reason() -> None:
    r = run_tool("acls", "--authorizer-properties", "zookeeper.connect=localhost:2181", "--list")
    assert r.code == 1 and r.stderr.startswith("--authorizer-properties is not supported by this broker's tools: "
                                               "ZooKeeper direct mode"), r.stderr


def test_acl_tool_needs_an_authorizer(broker: BrokerProcess, kafka: RealKafkaBroker) -> None:
    """Without an authorizer, both brokers answer SecurityDisabledException; both tools print it the same way."""
    cmds = [B("--list"), B("--add", "--topic", "t", "--allow-principal", "User:a")]
    results = {"project": run_both(cmds, Target(int(broker.bootstrap.rsplit(":", 1)[1]), 0)),
               "kafka": run_both(cmds, Target(int(kafka.bootstrap.rsplit(":", 1)[1]), 0))}
    compare(results, cmds, acl_blocks)
    assert "SecurityDisabledException" in results["project"]["ours"][0].stdout


# ------------------------------------------------------------------------------------------------ delegation tokens
def token_text(text: str) -> str:
    """The token table with ids, HMACs and dates masked, runs of padding as one space."""
    text = mask(text, FAMILY, (r"\d{4}-\d\d-\d\dT\d\d:\d\d", "<date>"))
    lines = []
    in_table = False
    for line in text.split("\n"):
        fields = line.split()
        if fields[:1] == ["TOKENID"]:
            in_table = True
        elif in_table and fields:  # a token row: id and HMAC vary
            fields[0], fields[1] = "<id>", "<hmac>"
        lines.append(" ".join(fields))
    text = "\n".join(lines)
    text = re.sub(r"(tokenId : )\S+", r"\1<id>", text)
    return re.sub(r"(hmac :)\S+", r"\1<hmac>", text)


def D(user: str, *args: str) -> Command:
    return ("delegation-tokens", ["--bootstrap-server", "{sasl}", "--command-config", "{cfg:" + user + "}", *args],
            None)


def _hmac_of(run: ToolRun) -> str:
    rows = [line.split() for line in run.stdout.split("\n") if line.strip()]
    header = next(i for i, row in enumerate(rows) if row[0] == "TOKENID")
    assert len(rows) == header + 2, run.stdout + run.stderr
    return rows[header + 1][1]


def test_kafka_delegation_tokens(brokers: Dict[str, Target], configs: Dict[str, str]) -> None:
    cfg = {f"cfg:{k}": v for k, v in configs.items()}
    create = [
        D("admin", "--create", "--max-life-time-period", "-1", "--owner-principal", "User:{T}-owner",
          "--renewer-principal", "User:alice", "--renewer-principal", "User:bob"),
        D("alice", "--create", "--max-life-time-period", "600000"),
        D("alice", "--create", "--max-life-time-period", "-1", "--owner-principal", "User:{T}-other"),
        D("alice", "--describe"),
        D("admin", "--describe", "--owner-principal", "User:{T}-owner"),
        ("delegation-tokens", ["--bootstrap-server", "{bs}", "--command-config", "{cfg:plain}", "--describe"], None),
        ("delegation-tokens", ["--bootstrap-server", "{bs}", "--command-config", "{cfg:plain}", "--create",
                               "--max-life-time-period", "-1"], None),
    ]
    results = {}
    hmacs: Dict[str, Dict[str, Dict[str, str]]] = {}
    for where, target in brokers.items():
        results[where] = run_both(create, target, cfg)
        hmacs[where] = {KAFKA_FAMILY: {"hmac": _hmac_of(results[where]["kafka"][0])},
                        OUR_FAMILY: {"hmac": _hmac_of(results[where]["ours"][0])}}
    compare(results, create, token_text)
    ours = results["project"]["ours"]
    assert ours[0].stdout.startswith("Calling create token operation with renewers :[User:alice, User:bob] , "
                                     "max-life-time-period :-1\nCreated delegation token with tokenId : ")
    row = ours[0].stdout.split("\n")[-2].split()
    assert row[2:5] == ["User:judgeBB-owner", "User:admin", "[User:alice,"], ours[0].stdout
    assert ours[1].code == 0 and "User:alice      User:alice      []" in ours[1].stdout, ours[1].stdout
    # another owner needs CreateTokens on that user: alice has none
    assert ours[2].stderr.startswith("org.apache.kafka.common.errors.DelegationTokenAuthorizationException: "
                                     "Delegation Token authorization failed.\n"), ours[2].stderr
    # no owner given: Kafka's tool sends an empty owner list, which brokers answer with no tokens
    assert ours[3].stdout.startswith("Calling describe token operation for current user.\nTotal number of tokens : 0")
    assert "Total number of tokens : 1" in ours[4].stdout
    assert "UnsupportedByAuthenticationException" in ours[6].stderr, ours[6].stderr

    manage = [
        D("admin", "--renew", "--hmac", "{hmac}", "--renew-time-period", "-1"),
        D("alice", "--renew", "--hmac", "{hmac}", "--renew-time-period", "1000000"),
        D("bob", "--describe", "--owner-principal", "User:{T}-owner"),
        D("bob", "--expire", "--hmac", "{hmac}", "--expiry-time-period", "-1"),
        D("admin", "--describe", "--owner-principal", "User:{T}-owner"),
        D("alice", "--renew", "--hmac", "{hmac}", "--renew-time-period", "-1"),
        D("alice", "--expire", "--hmac", "bm90IGEgdG9rZW4=", "--expiry-time-period", "-1"),
    ]
    results = {where: run_both(manage, target, cfg, hmacs[where]) for where, target in brokers.items()}
    compare(results, manage, token_text)
    ours = results["project"]["ours"]
    assert "DelegationTokenOwnerMismatchException" in ours[0].stderr, ours[0].stderr
    assert ours[1].code == 0 and ours[1].stdout.split("\n")[-1].startswith("Completed renew operation. New expiry "
                                                                           "date : "), ours[1].stdout
    assert ours[3].code == 0 and "Completed expire operation" in ours[3].stdout
    assert ours[4].stdout.startswith("Calling describe token operation for owners: [User:judgeBB-owner]\n"
                                     "Total number of tokens : 0"), ours[4].stdout
    assert "DelegationTokenNotFoundException" in ours[5].stderr, ours[5].stderr


# ------------------------------------------------------------------------------------------------ transactions
def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(30)


def _wait_coordinator(target: Target, txn_id: str) -> None:
    deadline = time.monotonic() + 60
    while call(target.bootstrap, ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [txn_id]}
               ).coordinators[0].error_code:
        assert time.monotonic() < deadline, "no transaction coordinator"
        time.sleep(0.3)


def hanging_transaction(target: Target, topic: str, txn_id: str) -> int:
    """A transactional batch the coordinator never heard of, written an hour "ago" (KIP-664's hanging
    transaction): the producer id."""
    _wait_coordinator(target, txn_id)
    deadline = time.monotonic() + 60
    while True:
        r = call(target.bootstrap, ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": txn_id, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})
        if r.error_code == 0:
            break
        assert time.monotonic() < deadline, r
        time.sleep(0.3)
    batch = build_batch([(None, b"hanging", [], int(time.time() * 1000) - 3600_000)], producer_id=r.producer_id,
                        producer_epoch=r.producer_epoch, base_sequence=0, is_transactional=True)
    p = call(target.bootstrap, ApiKey.PRODUCE, 9, {"transactional_id": txn_id, "acks": -1, "timeout_ms": 10000,
                                                   "topic_data": [{"name": topic, "partition_data": [
                                                       {"index": 0, "records": batch}]}]})
    assert p.responses[0].partition_responses[0].error_code == 0, p
    e = call(target.bootstrap, ApiKey.END_TXN, 3, {"transactional_id": txn_id, "producer_id": r.producer_id,
                                                   "producer_epoch": r.producer_epoch, "committed": True})
    assert e.error_code in (0, 48), e  # nothing was added to the transaction: INVALID_TXN_STATE is fine too
    return int(r.producer_id)


def open_transaction(target: Target, topic: str, txn_id: str) -> Producer:
    """A transactional producer with one record in an open transaction (kept open for the test)."""
    _wait_coordinator(target, txn_id)
    p = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 600000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"open")
    assert p.flush(30) == 0
    return p


def txn_text(text: str) -> object:
    """A kafka-transactions table as sorted rows of fields, producer ids, times and durations masked."""
    rows = []
    for line in mask(text, FAMILY).split("\n"):
        fields = line.split("\t")
        if not line.strip():
            continue
        fields = [f.strip() for f in fields if f.strip() != "" or False]
        rows.append(fields)
    if not rows or rows[0][0] not in ("TransactionalId", "CoordinatorId", "ProducerId", "Topic"):
        return mask(text, FAMILY, (r"producerId=\d+", "producerId=<pid>"), (r"producerEpoch=\d+", "producerEpoch=<e>"))
    header, body = rows[0], rows[1:]
    masked = {"ProducerId", "LastTimestamp", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
              "Duration(min)", "ProducerEpoch", "LastSequence"}
    out = [tuple("<m>" if header[i] in masked else v for i, v in enumerate(row)) for row in body]
    return (tuple(header), sorted(out))


def T(*args: str) -> Command:
    return ("transactions", ["--bootstrap-server", "{bs}", *args], None)


TXNS: List[Command] = [
    T("describe", "--transactional-id", "{T}-open"),
    T("describe-producers", "--topic", "{T}-txn", "--partition", "0"),
    T("describe-producers", "--topic", "{T}-txn", "--partition", "0", "--broker-id", "0"),
    T("find-hanging", "--topic", "{T}-hang", "--max-transaction-timeout", "5"),
    T("find-hanging", "--topic", "{T}-hang", "--partition", "0"),
    T("find-hanging", "--topic", "{T}-txn"),
    T("find-hanging"),
    T("find-hanging", "--partition", "0", "--broker-id", "0"),
    T("abort", "--topic", "{T}-hang", "--partition", "0", "--start-offset", "99"),
    T("abort", "--topic", "{T}-hang", "--partition", "0"),
    T("abort", "--topic", "{T}-hang", "--partition", "0", "--producer-id", "5"),
    T("abort", "--topic", "{T}-hang", "--partition", "0", "--start-offset", "0"),
    T("find-hanging", "--topic", "{T}-hang", "--max-transaction-timeout", "5"),
    T("describe-producers", "--topic", "{T}-hang", "--partition", "0"),
    T("describe", "--transactional-id", "{T}-nosuch"),
    T("list", "--duration-filter", "99999999"),
]


def test_kafka_transactions(brokers: Dict[str, Target]) -> None:
    producers = []
    for target in brokers.values():
        for family in (KAFKA_FAMILY, OUR_FAMILY):
            name = f"judge{family}"
            for t in ("txn", "hang"):
                _create_topic(target.bootstrap, f"{name}-{t}")
            hanging_transaction(target, f"{name}-hang", f"{name}-hanging")
            producers.append(open_transaction(target, f"{name}-txn", f"{name}-open"))
    try:
        results = {where: run_both(TXNS, target) for where, target in brokers.items()}
        compare(results, TXNS, txn_text)
        # list: every transaction of the broker (both families'), so compared apart
        listing = [T("list")]
        lists = {where: run_both(listing, target) for where, target in brokers.items()}
        compare(lists, listing, txn_text)
    finally:
        for p in producers:
            p.abort_transaction(30)
    ours = results["project"]["ours"]
    assert ours[0].code == 0 and "\tOngoing" in ours[0].stdout and "judgeBB-txn-0" in ours[0].stdout, ours[0].stdout
    assert ours[1].stdout.split("\n")[1].split("\t")[-2].strip() == "0"  # CurrentTransactionStartOffset
    assert ours[3].stdout.count("\n") == 2 and "judgeBB-hang" in ours[3].stdout, ours[3].stdout
    assert ours[8].stderr == "Could not find any open transactions starting at offset 99 on partition judgeBB-hang-0\n"
    assert ours[11].code == 0 and ours[11].stdout == ""
    assert ours[12].stdout.count("\n") == 1, ours[12].stdout  # aborted: no longer hanging
    assert "TransactionalIdNotFoundException" in ours[14].stderr or "could not be found" in ours[14].stderr
    assert "Ongoing" in lists["project"]["ours"][0].stdout
