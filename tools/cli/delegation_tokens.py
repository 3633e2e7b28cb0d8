"""kafka-delegation-tokens.sh: create, renew, expire and describe delegation tokens (KIP-48), as Kafka 3.9's
DelegationTokenCommand.

    kafka-delegation-tokens.sh --bootstrap-server host:9093 --command-config scram.properties --create \\
        --max-life-time-period -1 [--renewer-principal User:bob] [--owner-principal User:carol]
    kafka-delegation-tokens.sh ... --renew --hmac <base64> --renew-time-period -1
    kafka-delegation-tokens.sh ... --expire --hmac <base64> --expiry-time-period -1
    kafka-delegation-tokens.sh ... --describe [--owner-principal User:alice]

Brokers serve token requests only on SASL (or mutual TLS) channels, so --command-config is required and holds the
login. Output is Kafka's: the "Calling ... operation" line, then the token table (TOKENID, HMAC, OWNER, REQUESTER,
RENEWERS, ISSUEDATE, EXPIRYDATE, MAXDATE; dates as yyyy-MM-dd'T'HH:mm in local time); renew and expire end with
"Completed ... operation. New expiry date : <date>" without a line break, as Kafka's printf does.

Spoken with the raw protocol client (confluent-kafka has no delegation token calls).
"""
from __future__ import annotations

import base64
import binascii
import sys
import time
from typing import Any, List, Optional, Sequence

from broker.protocol.api import ApiKey

from .admin_errors import error_line
from .command import client_config, protocol_client, tool_main
from .options import CommandError, OptionParser, Options, UsageError
from .protocol_client import NodeAssignmentTimeout

SUMMARY = "This tool helps to create, renew, expire, or describe delegation tokens."
_ACTIONS = ("create", "renew", "expire", "describe")


def build_parser() -> OptionParser:
    p = OptionParser(SUMMARY)
    p.arg("bootstrap-server", "REQUIRED: server(s) to use for bootstrapping.")
    p.arg("command-config", "REQUIRED: A property file containing configs to be passed to Admin Client. Token "
                            "management operations are allowed in secure mode only. This config file is used to "
                            "pass security related configs.")
    p.flag("create", "Create a new delegation token. Use --renewer-principal option to pass renewer principals.")
    p.flag("renew", "Renew delegation token. Use --renew-time-period option to set renew time period.")
    p.flag("expire", "Expire delegation token. Use --expiry-time-period option to expire the token.")
    p.flag("describe", "Describe delegation tokens for the given principals. Use --owner-principal to pass "
                       "owner/renewer principals. If --owner-principal option is not supplied, all the user-owned "
                       "tokens and tokens where the user has Describe permissions will be returned.")
    p.arg("owner-principal", "owner is a Kafka principal. They should be in principalType:name format.",
          optional=True)
    p.arg("renewer-principal", "renewer is a Kafka principal. They should be in principalType:name format.",
          optional=True)
    p.arg("max-life-time-period", "Max life period for the token in milliseconds. If the value is -1, then token "
                                  "max life time will default to the server side config value of "
                                  "(delegation.token.max.lifetime.ms).", value_type="Long", optional=True)
    p.arg("renew-time-period", "Renew time period in milliseconds. If the value is -1, then the renew time period "
                               "will default to the server side config value of (delegation.token.expiry.time.ms).",
          value_type="Long", optional=True)
    p.arg("expiry-time-period", "Expiry time period in milliseconds. If the value is -1, then the token will get "
                                "invalidated immediately.", value_type="Long", optional=True)
    p.arg("hmac", "HMAC of the delegation token", optional=True)
    return p


def check_args(p: OptionParser, o: Options, argv: Sequence[str]) -> None:
    """DelegationTokenCommandOptions.checkArgs of Kafka 3.9."""
    if not argv:
        raise UsageError(SUMMARY)
    if sum(o.has(a) for a in _ACTIONS) != 1:
        raise UsageError("Command must include exactly one action: --create, --renew, --expire or --describe")
    p.check_required(o, "bootstrap-server", "command-config")
    if o.has("create"):
        p.check_required(o, "max-life-time-period")
    if o.has("renew"):
        p.check_required(o, "hmac", "renew-time-period")
    if o.has("expire"):
        p.check_required(o, "hmac", "expiry-time-period")
    p.check_invalid(o, "create", ["hmac", "renew-time-period", "expiry-time-period"])
    p.check_invalid(o, "renew", ["renewer-principal", "max-life-time-period", "expiry-time-period",
                                 "owner-principal"])
    p.check_invalid(o, "expire", ["renew", "max-life-time-period", "renew-time-period", "owner-principal"])
    p.check_invalid(o, "describe", ["renew-time-period", "max-life-time-period", "hmac", "expiry-time-period"])


class ToolFailure(Exception):
    """Kafka's tool prints a failure's message on stderr, then its stack trace; exit 1."""


def principals(o: Options, name: str) -> List[tuple]:
    """SecurityUtils.parseKafkaPrincipal of each value: (type, name)."""
    out = []
    for raw in o.values(name):
        text = raw.strip()
        kind, sep, who = text.partition(":")
        if not text or not sep:
            raise ToolFailure(f"expected a string in format principalType:principalName but got {text}")
        out.append((kind, who))
    return out


def _plist(items: Sequence[tuple]) -> str:
    """A Java List<KafkaPrincipal>.toString."""
    return "[" + ", ".join(f"{k}:{n}" for k, n in items) + "]"


def java_date(ms: int) -> str:
    """SimpleDateFormat("yyyy-MM-dd'T'HH:mm") in the local time zone."""
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(ms / 1000.0))


def _value(o: Options, name: str) -> int:
    v = o.value(name)
    if v is None:  # the option without its argument: Kafka unboxes a null Long
        raise ToolFailure('Cannot invoke "java.lang.Long.longValue()" because the return value of '
                          '"joptsimple.OptionSet.valueOf(joptsimple.OptionSpec)" is null')
    return int(v)


def _check(code: int) -> None:
    if code:
        raise ToolFailure(error_line(code))


def print_tokens(tokens: Sequence[Any]) -> None:
    fmt = "\n%-15s %-30s %-15s %-15s %-25s %-15s %-15s %-15s\n"
    sys.stdout.write(fmt % ("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE",
                            "MAXDATE"))
    for t in tokens:
        sys.stdout.write(fmt % (t["token_id"], base64.b64encode(t["hmac"]).decode(), t["owner"], t["requester"],
                                _plist(t["renewers"]), java_date(t["issue"]), java_date(t["expiry"]),
                                java_date(t["max"])))


def create(client: Any, o: Options) -> None:
    renewers = principals(o, "renewer-principal")
    max_life = _value(o, "max-life-time-period")
    print(f"Calling create token operation with renewers :{_plist(renewers)} , max-life-time-period :{max_life}")
    owners = principals(o, "owner-principal")
    body = {"renewers": [{"principal_type": k, "principal_name": n} for k, n in renewers],
            "max_lifetime_ms": max_life, "owner_principal_type": owners[0][0] if owners else None,
            "owner_principal_name": owners[0][1] if owners else None}
    if owners and client.version_for(ApiKey.CREATE_DELEGATION_TOKEN) < 3:
        raise ToolFailure("org.apache.kafka.common.errors.UnsupportedVersionException: The broker does not support "
                          "creating a token for another owner")
    r = client.send_any(ApiKey.CREATE_DELEGATION_TOKEN, body)
    _check(r.error_code)
    owner = f"{r.principal_type}:{r.principal_name}"
    requester = (f"{r.token_requester_principal_type}:{r.token_requester_principal_name}"
                 if getattr(r, "token_requester_principal_type", None) else owner)
    print(f"Created delegation token with tokenId : {r.token_id}")
    print_tokens([{"token_id": r.token_id, "hmac": bytes(r.hmac), "owner": owner, "requester": requester,
                   "renewers": renewers, "issue": r.issue_timestamp_ms, "expiry": r.expiry_timestamp_ms,
                   "max": r.max_timestamp_ms}])


def _hmac(o: Options) -> tuple:
    text = o.value("hmac")
    if text is None:
        raise ToolFailure('Cannot invoke "String.getBytes(java.nio.charset.Charset)" because "src" is null')
    try:
        return text, base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ToolFailure(f"Illegal base64 character: {e}") from None


def renew_or_expire(client: Any, o: Options, renew: bool) -> None:
    text, hmac = _hmac(o)
    if renew:
        period = _value(o, "renew-time-period")
        print(f"Calling renew token operation with hmac :{text} , renew-time-period :{period}")
        r = client.send_any(ApiKey.RENEW_DELEGATION_TOKEN, {"hmac": hmac, "renew_period_ms": period})
    else:
        period = _value(o, "expiry-time-period")
        print(f"Calling expire token operation with hmac :{text} , expire-time-period :{period}")
        r = client.send_any(ApiKey.EXPIRE_DELEGATION_TOKEN, {"hmac": hmac, "expiry_time_period_ms": period})
    _check(r.error_code)
    sys.stdout.write(f"Completed {'renew' if renew else 'expire'} operation. New expiry date : "
                     f"{java_date(r.expiry_timestamp_ms)}")


def describe(client: Any, o: Options) -> None:
    owners = principals(o, "owner-principal")
    if not owners:
        print("Calling describe token operation for current user.")
    else:
        print(f"Calling describe token operation for owners: {_plist(owners)}")
    r = client.send_any(ApiKey.DESCRIBE_DELEGATION_TOKEN,
                        {"owners": [{"principal_type": k, "principal_name": n} for k, n in owners]})
    _check(r.error_code)
    tokens = []
    for t in r.tokens:
        owner = f"{t.principal_type}:{t.principal_name}"
        rtype = getattr(t, "token_requester_principal_type", None)
        tokens.append({"token_id": t.token_id, "hmac": bytes(t.hmac), "owner": owner,
                       "requester": f"{rtype}:{t.token_requester_principal_name}" if rtype else owner,
                       "renewers": [(x.principal_type, x.principal_name) for x in t.renewers],
                       "issue": t.issue_timestamp, "expiry": t.expiry_timestamp, "max": t.max_timestamp})
    sys.stdout.write(f"Total number of tokens : {len(tokens)}")
    print_tokens(tokens)


def _run(argv: Sequence[str], parser: OptionParser) -> int:
    o = parser.parse(argv)
    check_args(parser, o, argv)
    try:
        cfg = client_config(o)
        with protocol_client(cfg) as client:
            if o.has("create"):
                create(client, o)
            elif o.has("renew"):
                renew_or_expire(client, o, True)
            elif o.has("expire"):
                renew_or_expire(client, o, False)
            else:
                describe(client, o)
    except (ToolFailure, NodeAssignmentTimeout) as e:
        sys.stdout.flush()
        # Kafka prints the ExecutionException's message, then its stack trace (whose first line repeats it)
        raise CommandError(f"{e}\njava.util.concurrent.ExecutionException: {e}") from None
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
