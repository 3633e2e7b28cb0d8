"""kafka-acls.sh: add, remove and list ACLs, as Kafka 3.9's kafka.admin.AclCommand with --bootstrap-server.

    kafka-acls.sh --bootstrap-server localhost:9092 --add --allow-principal User:alice --operation Read --topic t
    kafka-acls.sh --bootstrap-server localhost:9092 --list [--topic t] [--principal User:alice]
    kafka-acls.sh --bootstrap-server localhost:9092 --remove --force --topic t

Prints Kafka's blocks: "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:"
then one "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" line per ACL; --list prints
"Current ACLs for resource ..." blocks (Kafka 3.9.1 lists nothing after --add or --remove). --producer / --consumer / --idempotent expand to
Kafka's role ACLs. Kafka prints resources and ACLs in the order of Scala hash sets keyed by Java enum hash codes
(different on every run); this tool prints them in command-line and broker order.

Speaks CreateAcls/DescribeAcls/DeleteAcls with the raw protocol client (confluent-kafka has no USER or
DELEGATION_TOKEN resource type). The deprecated ZooKeeper direct mode (--authorizer, --authorizer-properties,
--zk-tls-config-file) is refused: the broker keeps ACLs in ZooKeeper in Kafka's format, but only the broker
writes them, so the change notifications and the authorizer's cache stay consistent.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from broker.protocol.api import ApiKey

from .admin_errors import error_line
from .client_config import build_client_config
from .command import client_config, protocol_client, tool_main
from .options import OptionParser, Options, UsageError
from .protocol_client import ProtocolClientError

SUMMARY = "This tool helps to manage acls on kafka."
NL = "\n"
_ZK_REASON = ("ZooKeeper direct mode (deprecated in Kafka) is not offered; use --bootstrap-server, the broker "
              "writes ACLs to ZooKeeper itself")
_DEPRECATION = ("Warning: support for ACL configuration directly through the authorizer is deprecated and will be "
                "removed in a future release. Please use --bootstrap-server instead to set ACLs through the admin "
                "client.")

RESOURCE_TYPES = {"UNKNOWN": 0, "ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5,
                  "DELEGATION_TOKEN": 6, "USER": 7}
PATTERN_TYPES = {"UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
OPERATIONS = {"UNKNOWN": 0, "ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7,
              "DESCRIBE": 8, "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11,
              "IDEMPOTENT_WRITE": 12, "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14}
PERMISSIONS = {"UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}
_NAMES = {kind: {v: k for k, v in table.items()} for kind, table in
          (("resource", RESOURCE_TYPES), ("pattern", PATTERN_TYPES), ("operation", OPERATIONS),
           ("permission", PERMISSIONS))}
#: what an ACL on each resource type may allow (kafka.security.authorizer.AclEntry.supportedOperations), plus ALL
SUPPORTED = {
    "TOPIC": ["READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"],
    "GROUP": ["READ", "DESCRIBE", "DELETE"],
    "CLUSTER": ["CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
                "DESCRIBE"],
    "TRANSACTIONAL_ID": ["DESCRIBE", "WRITE"],
    "DELEGATION_TOKEN": ["DESCRIBE"],
    "USER": ["CREATE_TOKENS", "DESCRIBE_TOKENS"],
}
#: the operation names of --help, in the order Kafka 3.9's --help lists them
_HELP_OPERATIONS = ["CreateTokens", "Create", "Describe", "DescribeTokens", "AlterConfigs", "Write", "Alter",
                    "IdempotentWrite", "Delete", "ClusterAction", "Read", "All", "DescribeConfigs"]


def pascal(name: str) -> str:
    """Kafka's SecurityUtils.operationName: IDEMPOTENT_WRITE -> IdempotentWrite."""
    return "".join(part.capitalize() for part in name.split("_"))




@dataclass(frozen=True)
class Pattern:
    """A ResourcePattern, or a ResourcePatternFilter (name None = any), printed as Kafka prints both."""

    resource_type: str
    name: Optional[str]
    pattern_type: str

    def __str__(self) -> str:
        name = "<any>" if self.name is None else self.name
        return f"ResourcePattern(resourceType={self.resource_type}, name={name}, patternType={self.pattern_type})"


@dataclass(frozen=True)
class Entry:
    """An AccessControlEntry."""

    principal: str
    host: str
    operation: str
    permission: str

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation}, "
                f"permissionType={self.permission})")


CLUSTER_FILTER = Pattern("CLUSTER", "kafka-cluster", "LITERAL")


def build_parser() -> OptionParser:
    p = OptionParser(SUMMARY)
    p.flag("add", "Indicates you are trying to add ACLs.")
    p.arg("allow-host", "Host from which principals listed in --allow-principal will have access. If you have "
                        "specified --allow-principal then the default for this option will be set to '*' which "
                        "allows access from all hosts.", "allow-host")
    p.arg("allow-principal", "principal is in principalType:name format. Note that principalType must be supported "
                             "by the Authorizer being used. For example, User:'*' is the wild card indicating all "
                             "users.", "allow-principal")
    p.refuse("authorizer", _ZK_REASON, "DEPRECATED: Fully qualified class name of the authorizer, which defaults to "
             "kafka.security.authorizer.AclAuthorizer if --bootstrap-server is not provided. " + _DEPRECATION,
             described_as="authorizer")
    p.refuse("authorizer-properties", _ZK_REASON, "DEPRECATED: The properties required to configure an instance of "
             "the Authorizer specified by --authorizer. These are key=val pairs. For the default authorizer, example "
             "values are: zookeeper.connect=localhost:2181. " + _DEPRECATION, described_as="authorizer-properties")
    p.arg("bootstrap-server", "A list of host/port pairs to use for establishing the connection to the Kafka "
                              "cluster. This list should be in the form host1:port1,host2:port2,... This config is "
                              "required for acl management using admin client API.", "server to connect to")
    p.flag("cluster", "Add/Remove cluster ACLs.")
    p.arg("command-config", "A property file containing configs to be passed to Admin Client.", "command-config",
          optional=True)
    p.flag("consumer", "Convenience option to add/remove ACLs for consumer role. This will generate ACLs that allows "
                       "READ,DESCRIBE on topic and READ on group.")
    p.arg("delegation-token", "Delegation token to which ACLs should be added or removed. A value of '*' indicates "
                              "ACL should apply to all tokens.", "delegation-token")
    p.arg("deny-host", "Host from which principals listed in --deny-principal will be denied access. If you have "
                       "specified --deny-principal then the default for this option will be set to '*' which denies "
                       "access from all hosts.", "deny-host")
    p.arg("deny-principal", "principal is in principalType:name format. By default anyone not added through "
                            "--allow-principal is denied access. You only need to use this option as negation to "
                            "already allowed set. Note that principalType must be supported by the Authorizer being "
                            "used. For example if you wanted to allow access to all users in the system but not "
                            "test-user you can define an ACL that allows access to User:'*' and specify "
                            "--deny-principal=User:test@EXAMPLE.COM. AND PLEASE REMEMBER DENY RULES TAKES "
                            "PRECEDENCE OVER ALLOW RULES.", "deny-principal")
    p.flag("force", "Assume Yes to all queries and do not prompt.")
    p.arg("group", "Consumer Group to which the ACLs should be added or removed. A value of '*' indicates the ACLs "
                   "should apply to all groups.", "group")
    p.flag("idempotent", "Enable idempotence for the producer. This should be used in combination with the "
                         "--producer option. Note that idempotence is enabled automatically if the producer is "
                         "authorized to a particular transactional-id.")
    p.flag("list", "List ACLs for the specified resource, use --topic <topic> or --group <group> or --cluster to "
                   "specify a resource.")
    p.arg("operation", "Operation that is being allowed or denied. Valid operation names are: " + NL
          + NL.join("\t" + n for n in _HELP_OPERATIONS) + NL, default="All")
    p.arg("principal", "List ACLs for the specified principal. principal is in principalType:name format. Note that "
                       "principalType must be supported by the Authorizer being used. Multiple --principal option "
                       "can be passed.", "principal", optional=True)
    p.flag("producer", "Convenience option to add/remove ACLs for producer role. This will generate ACLs that allows "
                       "WRITE,DESCRIBE and CREATE on topic.")
    p.flag("remove", "Indicates you are trying to remove ACLs.")
    p.arg("resource-pattern-type", "The type of the resource pattern or pattern filter. When adding acls, this "
          "should be a specific pattern type, e.g. 'literal' or 'prefixed'. When listing or removing acls, a specific "
          "pattern type can be used to list or remove acls from specific resource patterns, or use the filter values "
          "of 'any' or 'match', where 'any' will match any pattern type, but will match the resource name exactly, "
          "where as 'match' will perform pattern matching to list or remove all acls that affect the supplied "
          "resource(s). WARNING: 'match', when used in combination with the '--remove' switch, should be used with "
          "care.", value_type="ANY|MATCH|LITERAL|PREFIXED", default="LITERAL")
    p.arg("topic", "topic to which ACLs should be added or removed. A value of '*' indicates ACL should apply to all "
                   "topics.", "topic")
    p.arg("transactional-id", "The transactionalId to which ACLs should be added or removed. A value of '*' "
                              "indicates the ACLs should apply to all transactionalIds.", "transactional-id")
    p.arg("user-principal", "Specifies a user principal as a resource in relation with the operation. For instance "
                            "one could grant CreateTokens or DescribeTokens permission on a given user principal.",
          "user-principal")
    p.refuse("zk-tls-config-file", _ZK_REASON, "DEPRECATED: Identifies the file where ZooKeeper client TLS "
             "connectivity properties are defined for the default authorizer kafka.security.authorizer."
             "AclAuthorizer.", described_as="Authorizer ZooKeeper TLS configuration")
    return p


# ------------------------------------------------------------------------------------------------ checking
def check_args(o: Options, argv: Sequence[str]) -> None:
    """AclCommandOptions.checkArgs of Kafka 3.9 (admin-client mode)."""
    if not argv:
        raise UsageError(SUMMARY)
    if not o.has("bootstrap-server"):
        raise UsageError('Missing required argument "[authorizer-properties]"')
    if sum(o.has(a) for a in ("add", "remove", "list")) != 1:
        raise UsageError("Command must include exactly one action: --list, --add, --remove. ")
    invalid = {"list": ["producer", "consumer", "allow-host", "allow-principal", "deny-host", "deny-principal"],
               "producer": ["operation", "deny-principal", "deny-host"],
               "consumer": ["operation", "deny-principal", "deny-host"]}
    for used, others in invalid.items():
        if o.has(used):
            for other in others:
                if o.has(other):
                    raise UsageError(f'Option "[{used}]" can\'t be used with option "[{other}]"')
    if o.has("principal") and not o.has("list"):
        raise UsageError("The --principal option is only available if --list is set")
    if o.has("producer") and not o.has("topic"):
        raise UsageError("With --producer you must specify a --topic")
    if o.has("idempotent") and not o.has("producer"):
        raise UsageError("The --idempotent option is only available if --producer is set")
    if o.has("consumer") and (not o.has("topic") or not o.has("group") or
                              (not o.has("producer") and (o.has("cluster") or o.has("transactional-id")))):
        raise UsageError("With --consumer you must specify a --topic and a --group and no --cluster or "
                         "--transactional-id option should be specified.")


class ToolFailure(Exception):
    """What Kafka's tool catches around an action: "Error while executing ACL command: <message>" on stdout."""


def pattern_type(o: Options) -> str:
    """--resource-pattern-type, converted when first used (as joptsimple does), inside the action's error handling."""
    raw = o.value("resource-pattern-type")
    name = raw.upper()
    if name not in PATTERN_TYPES or name == "UNKNOWN":
        raise ToolFailure(f"Cannot parse argument '{raw}' of option resource-pattern-type")
    return name


def parse_principal(text: str) -> str:
    """SecurityUtils.parseKafkaPrincipal, returned as KafkaPrincipal.toString."""
    kind, sep, name = text.partition(":")
    if not text or not sep:
        raise ToolFailure(f"expected a string in format principalType:principalName but got {text}")
    return f"{kind}:{name}"


def parse_operation(text: str) -> str:
    """SecurityUtils.operation: the Pascal-case name (IdempotentWrite), else the name in any case without
    underscores (IDEMPOTENTWRITE); anything else is UNKNOWN (which the resource type check then refuses)."""
    for op in OPERATIONS:
        if pascal(op) == text or pascal(op).upper() == text.upper():
            return op
    return "UNKNOWN"


def _unique(items: Sequence) -> List:
    out: List = []
    for x in items:
        if x not in out:
            out.append(x)
    return out


def resource_filters(o: Options, die_if_none: bool = True) -> List[Pattern]:
    """getResourceFilter: the resources named on the command line, with --resource-pattern-type."""
    pt = pattern_type(o)
    out: List[Pattern] = [Pattern("TOPIC", t.strip(), pt) for t in o.values("topic")]
    if pt == "LITERAL" and (o.has("cluster") or o.has("idempotent")):
        out.append(CLUSTER_FILTER)
    out += [Pattern("GROUP", g.strip(), pt) for g in o.values("group")]
    out += [Pattern("TRANSACTIONAL_ID", t, pt) for t in o.values("transactional-id")]
    out += [Pattern("DELEGATION_TOKEN", t.strip(), pt) for t in o.values("delegation-token")]
    out += [Pattern("USER", u.strip(), pt) for u in o.values("user-principal")]
    out = _unique(out)
    if not out and die_if_none:
        raise UsageError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
                         "--delegation-token <Delegation Token ID>")
    return out


def entries(o: Options, operations: Sequence[str]) -> List[Entry]:
    """getAcl: every principal x operation x host, ALLOW then DENY."""
    out: List[Entry] = []
    for permission, principals_opt, hosts_opt in (("ALLOW", "allow-principal", "allow-host"),
                                                  ("DENY", "deny-principal", "deny-host")):
        principals = _unique([parse_principal(p.strip()) for p in o.values(principals_opt)])
        hosts = _unique([h.strip() for h in o.values(hosts_opt)]) if o.has(hosts_opt) else \
            (["*"] if o.has(principals_opt) else [])
        if principals and hosts:
            out += [Entry(p, h, op, permission) for p in principals for op in _unique(operations) for h in hosts]
    return out


def filters_to_entries(o: Options) -> List[Tuple[Pattern, List[Entry]]]:
    """getResourceFilterToAcls: the command line's ACLs, or those of --producer / --consumer."""
    result: Dict[Pattern, List[Entry]] = {}
    if not o.has("producer") and not o.has("consumer"):
        ops = [parse_operation(op.strip()) for op in o.values("operation")]
        acl = entries(o, ops)
        for f in resource_filters(o):
            result[f] = list(acl)
    if o.has("producer"):
        filters = resource_filters(o)
        for f in filters:
            if f.resource_type == "TOPIC":
                result[f] = entries(o, ["WRITE", "DESCRIBE", "CREATE"])
        for f in filters:
            if f.resource_type == "TRANSACTIONAL_ID":
                result[f] = entries(o, ["WRITE", "DESCRIBE"])
        if o.has("idempotent"):
            result[CLUSTER_FILTER] = entries(o, ["IDEMPOTENT_WRITE"])
    if o.has("consumer"):
        filters = resource_filters(o)
        consumer: Dict[Pattern, List[Entry]] = {}
        for f in filters:
            if f.resource_type == "TOPIC":
                consumer[f] = entries(o, ["READ", "DESCRIBE"])
        for f in filters:
            if f.resource_type == "GROUP":
                consumer[f] = entries(o, ["READ"])
        for f, acl in consumer.items():
            result[f] = _unique(acl + result.get(f, []))
    for f, acl in result.items():
        valid = SUPPORTED[f.resource_type] + ["ALL"]
        if any(e.operation not in valid for e in acl):
            raise UsageError(f"ResourceType {f.resource_type} only supports operations "
                             f"{', '.join(pascal(v) for v in valid)}")
    return list(result.items())


# ------------------------------------------------------------------------------------------------ requests
def _filter_body(f: Optional[Pattern], e: Optional[Entry] = None) -> dict:
    return {"resource_type_filter": RESOURCE_TYPES[f.resource_type] if f else 1,
            "resource_name_filter": f.name if f else None,
            "pattern_type_filter": PATTERN_TYPES[f.pattern_type] if f else 1,
            "principal_filter": e.principal if e else None, "host_filter": e.host if e else None,
            "operation": OPERATIONS[e.operation] if e else 1, "permission_type": PERMISSIONS[e.permission] if e else 1}


def _check(code: int, message: Optional[str]) -> None:
    if code:
        raise ToolFailure(error_line(code, message))


def describe(client: Any, filters: Sequence[Pattern]) -> List[Tuple[Pattern, List[Entry]]]:
    """getAcls: the ACLs matching each filter (or every ACL), grouped by resource pattern."""
    grouped: Dict[Pattern, List[Entry]] = {}
    for f in (filters or [None]):
        r = client.send_any(ApiKey.DESCRIBE_ACLS, _filter_body(f))
        _check(r.error_code, r.error_message)
        for res in r.resources:
            pattern = Pattern(_NAMES["resource"].get(res.resource_type, "UNKNOWN"), res.resource_name,
                              _NAMES["pattern"].get(getattr(res, "pattern_type", 3), "UNKNOWN"))
            acl = grouped.setdefault(pattern, [])
            for a in res.acls:
                e = Entry(a.principal, a.host, _NAMES["operation"].get(a.operation, "UNKNOWN"),
                          _NAMES["permission"].get(a.permission_type, "UNKNOWN"))
                if e not in acl:
                    acl.append(e)
    return list(grouped.items())


def block(title: str, pattern: object, acl: Sequence[Entry]) -> str:
    """Kafka's println(s"$title `$pattern`: $Newline ${acls.map("\t" + _).mkString(Newline)} $Newline")."""
    return f"{title} `{pattern}`: {NL} {NL.join(chr(9) + str(e) for e in acl)} {NL}"


def list_acls(client: Any, o: Options) -> None:
    filters = resource_filters(o, die_if_none=False)
    found = describe(client, filters)
    principals = _unique([parse_principal(p.strip()) for p in o.values("principal")]) if o.has("principal") else []
    if not principals:
        for pattern, acl in found:
            print(block("Current ACLs for resource", pattern, acl))
        return
    for principal in principals:
        print(f"ACLs for principal `{principal}`")
        for pattern, acl in found:
            mine = [e for e in acl if e.principal == principal]
            if mine:
                print(block("Current ACLs for resource", pattern, mine))


def acls_to_add(o: Options) -> List[Tuple[Pattern, List[Entry]]]:
    """getResourceToAcls: checked before Kafka's tool connects."""
    if pattern_type(o) not in ("LITERAL", "PREFIXED"):
        raise UsageError(f"A '--resource-pattern-type' value of '{pattern_type(o)}' is not valid when adding acls.")
    todo = filters_to_entries(o)
    if any(not acl for _, acl in todo):
        raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    return todo


def add_acls(client: Any, o: Options, todo: List[Tuple[Pattern, List[Entry]]]) -> None:
    for pattern, acl in todo:
        print(block("Adding ACLs for resource", pattern, acl))
        creations = [{"resource_type": RESOURCE_TYPES[pattern.resource_type], "resource_name": pattern.name,
                      "resource_pattern_type": PATTERN_TYPES[pattern.pattern_type], "principal": e.principal,
                      "host": e.host, "operation": OPERATIONS[e.operation], "permission_type": PERMISSIONS[e.permission]}
                     for e in acl]
        r = client.send_any(ApiKey.CREATE_ACLS, {"creations": creations})
        for result in r.results:
            _check(result.error_code, result.error_message)


def confirm(o: Options, message: str) -> bool:
    """confirmAction: --force, else ask on stdin (y/n)."""
    if o.has("force"):
        return True
    print(message)
    sys.stdout.flush()
    line = sys.stdin.readline()
    if not line:
        raise ToolFailure('Cannot invoke "String.equalsIgnoreCase(String)" because the return value of '
                          '"scala.io.StdIn$.readLine()" is null')
    return line.rstrip("\r\n").lower() == "y"


def remove_acls(client: Any, o: Options) -> None:
    for f, acl in filters_to_entries(o):
        if not acl:
            question = f"Are you sure you want to delete all ACLs for resource filter `{f}`? (y/n)"
        else:
            question = (f"Are you sure you want to remove ACLs: {NL} {NL.join(chr(9) + str(e) for e in acl)} {NL} "
                        f"from resource filter `{f}`? (y/n)")
        if confirm(o, question):
            bodies = [_filter_body(f)] if not acl else [_filter_body(f, e) for e in acl]
            r = client.send_any(ApiKey.DELETE_ACLS, {"filters": bodies})
            for result in r.filter_results:
                _check(result.error_code, result.error_message)
                for m in result.matching_acls:
                    _check(m.error_code, m.error_message)


def _run(argv: Sequence[str], parser: OptionParser) -> int:
    o = parser.parse(argv)
    check_args(o, argv)
    try:
        todo = acls_to_add(o) if o.has("add") else []
        if o.has("command-config") and not o.has_argument("command-config"):
            print("Did not load any properties since the property file is not specified")  # Utils.loadProps(null)
            cfg = build_client_config({}, "admin", o.value("bootstrap-server"))
        else:
            cfg = client_config(o)
        with protocol_client(cfg) as client:
            if o.has("add"):
                add_acls(client, o, todo)
            elif o.has("remove"):
                remove_acls(client, o)
            else:
                list_acls(client, o)
    except (ToolFailure, ProtocolClientError) as e:
        print(f"Error while executing ACL command: {e}")
        return 1
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
