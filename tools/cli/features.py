"""kafka-features.sh: describe and update feature flags, as Kafka 3.9's FeatureCommand (argparse4j-style).

    kafka-features.sh --bootstrap-server localhost:9092 describe
    kafka-features.sh --bootstrap-server localhost:9092 upgrade [--metadata 3.9-IV0] [--feature name=level]...
        [--dry-run]
    kafka-features.sh --bootstrap-server localhost:9092 downgrade [--metadata V] [--feature name=level]...
        [--unsafe] [--dry-run]
    kafka-features.sh --bootstrap-server localhost:9092 disable --feature name... [--unsafe] [--dry-run]

``describe`` prints one line per supported feature (ApiVersions' supported and finalized features; a ZooKeeper-mode
cluster has none, so nothing). The updates send one UpdateFeatures request to the controller and print, per
feature in name order, ``<f> was upgraded to <n>.`` or ``Could not upgrade <f> to <n>. <broker's message>`` (``can
be``/``Can not`` with ``--dry-run``), then ``<k> out of <n> operation(s) failed.`` on stderr with exit 1 if any
failed. ``--bootstrap-controller`` (KRaft) is refused. Kafka 3.9 has no ``version-mapping``,
``feature-dependencies`` or ``--release-version`` (they came in 4.0), so neither does this tool.
"""
from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from broker.protocol.api import ApiKey

from .client_config import build_client_config, load_properties_file
from .command import protocol_client
from .options import CommandError
from .protocol_client import ProtocolClientError

PROG = "kafka-features"
#: Kafka 3.9's MetadataVersion: the KRaft releases an update may name, and their feature levels
METADATA_VERSIONS: List[Tuple[str, int]] = [
    ("3.3-IV0", 4), ("3.3-IV1", 5), ("3.3-IV2", 6), ("3.3-IV3", 7), ("3.4-IV0", 8), ("3.5-IV0", 9),
    ("3.5-IV1", 10), ("3.5-IV2", 11), ("3.6-IV0", 12), ("3.6-IV1", 13), ("3.6-IV2", 14), ("3.7-IV0", 15),
    ("3.7-IV1", 16), ("3.7-IV2", 17), ("3.7-IV3", 18), ("3.7-IV4", 19), ("3.8-IV0", 20), ("3.9-IV0", 21)]
_OLDER_LEVELS = {"3.0-IV1": 1, "3.1-IV0": 2, "3.2-IV0": 3}

_USAGE_MAIN = """usage: kafka-features [-h] [--command-config COMMAND_CONFIG]
                      (--bootstrap-server BOOTSTRAP_SERVER |
                      --bootstrap-controller BOOTSTRAP_CONTROLLER)
                      {describe,upgrade,downgrade,disable} ...
"""
_HELP_MAIN = _USAGE_MAIN + """
This tool manages feature flags in Kafka.

positional arguments:
  {describe,upgrade,downgrade,disable}
    describe             Describes the current active feature flags.
    upgrade              Upgrade one or more feature flags.
    downgrade            Upgrade one or more feature flags.
    disable              Disable one or  more  feature  flags.  This is the
                         same as downgrading the version to zero.

optional arguments:
  -h, --help             show this help message and exit
  --bootstrap-server BOOTSTRAP_SERVER
                         A comma-separated list of  host:port  pairs to use
                         for  establishing  the  connection  to  the  Kafka
                         cluster.
  --bootstrap-controller BOOTSTRAP_CONTROLLER
                         A comma-separated list of  host:port  pairs to use
                         for  establishing  the  connection  to  the  KRaft
                         quorum.
  --command-config COMMAND_CONFIG
                         Property file containing configs  to  be passed to
                         Admin Client.
"""
_USAGE_SUB = {
    "describe": """usage: kafka-features (--bootstrap-server BOOTSTRAP_SERVER |
                      --bootstrap-controller BOOTSTRAP_CONTROLLER) describe
                      [-h]
""",
    "upgrade": """usage: kafka-features (--bootstrap-server BOOTSTRAP_SERVER |
                      --bootstrap-controller BOOTSTRAP_CONTROLLER) upgrade
                      [-h] [--metadata METADATA] [--feature FEATURE]
                      [--dry-run]
""",
    "downgrade": """usage: kafka-features (--bootstrap-server BOOTSTRAP_SERVER |
                      --bootstrap-controller BOOTSTRAP_CONTROLLER)
                      downgrade [-h] [--metadata METADATA]
                      [--feature FEATURE] [--unsafe] [--dry-run]
""",
    "disable": """usage: kafka-features (--bootstrap-server BOOTSTRAP_SERVER |
                      --bootstrap-controller BOOTSTRAP_CONTROLLER) disable
                      [-h] [--feature FEATURE] [--unsafe] [--dry-run]
""",
}
_HELP_SUB = {
    "describe": "",
    "upgrade": """  --metadata METADATA    The  level  to   which   we   should  upgrade  the
                         metadata. For example, 3.3-IV3.
  --feature FEATURE      A  feature   upgrade   we   should   perform,   in
                         feature=level  format.  For   example:  `metadata.
                         version=5`.
  --dry-run              Validate this upgrade, but do not perform it.
""",
    "downgrade": """  --metadata METADATA    The  level  to  which   we  should  downgrade  the
                         metadata. For example, 3.3-IV0.
  --feature FEATURE      A  feature  downgrade   we   should   perform,  in
                         feature=level  format.  For   example:  `metadata.
                         version=5`.
  --unsafe               Perform   this   downgrade   even    if   it   may
                         irreversibly destroy metadata.
  --dry-run              Validate this downgrade, but do not perform it.
""",
    "disable": """  --feature FEATURE      A feature flag to disable.
  --unsafe               Disable  this  feature   flag   even   if  it  may
                         irreversibly destroy metadata.
  --dry-run              Perform a dry-run of this disable operation.
""",
}
_SUB_OPTIONS = {"describe": set(), "upgrade": {"--metadata", "--feature", "--dry-run"},
                "downgrade": {"--metadata", "--feature", "--unsafe", "--dry-run"},
                "disable": {"--feature", "--unsafe", "--dry-run"}}
_TAKES_VALUE = {"--metadata", "--feature", "--bootstrap-server", "--bootstrap-controller", "--command-config"}
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


class Exit(Exception):
    def __init__(self, code: int, stdout: str = "", stderr: str = "") -> None:
        super().__init__(stderr or stdout)
        self.code, self.stdout, self.stderr = code, stdout, stderr


def _usage_error(usage: str, message: str) -> Exit:
    return Exit(1, stderr=f"{usage}{PROG}: error: {message}\n")


def parse(argv: Sequence[str]) -> Dict[str, Any]:
    """argparse4j's parse of Kafka's FeatureCommand arguments (help and errors with Kafka's texts)."""
    ns: Dict[str, Any] = {"command": None, "feature": [], "metadata": None, "dry_run": False, "unsafe": False,
                          "bootstrap_server": None, "bootstrap_controller": None, "command_config": None}
    args = list(argv)
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        name, eq, inline = a.partition("=") if a.startswith("--") else (a, "", "")
        sub = ns["command"]
        if a in ("-h", "--help"):
            raise Exit(1, stdout=(_USAGE_SUB[sub] + "\noptional arguments:\n  -h, --help             show this "
                                  "help message and exit\n" + _HELP_SUB[sub]) if sub else _HELP_MAIN)
        if sub is None and a in _SUB_OPTIONS:
            ns["command"] = a
            continue
        allowed = _SUB_OPTIONS[sub] if sub else {"--bootstrap-server", "--bootstrap-controller", "--command-config"}
        if name not in allowed:
            if a.startswith("-"):
                raise _usage_error(_USAGE_SUB[sub] if sub else _USAGE_MAIN, f"unrecognized arguments: '{a}'")
            raise _usage_error(_USAGE_MAIN, f"invalid choice: '{a}' (choose from 'describe', 'upgrade', "
                                            "'downgrade', 'disable')")
        key = name[2:].replace("-", "_")
        if name in _TAKES_VALUE:
            if eq:
                value = inline
            elif i < len(args):
                value, i = args[i], i + 1
            else:
                raise _usage_error(_USAGE_SUB[sub] if sub else _USAGE_MAIN, f"argument {name}: expected one argument")
            if name == "--feature":
                ns["feature"].append(value)
            else:
                ns[key] = value
        else:
            ns[key] = True
    if ns["bootstrap_server"] is None and ns["bootstrap_controller"] is None:
        raise _usage_error(_USAGE_MAIN, "one of the arguments --bootstrap-server --bootstrap-\ncontroller is "
                                        "required")
    if ns["command"] is None:
        raise _usage_error(_USAGE_MAIN, "too few arguments")
    return ns


def metadata_level(text: str) -> int:
    """MetadataVersion.fromVersionString: ``3.9-IV0`` or a release (``3.7``: its latest IV)."""
    for name, level in METADATA_VERSIONS:
        if name == text:
            return level
    matches = [level for name, level in METADATA_VERSIONS + list(_OLDER_LEVELS.items()) if name.split("-")[0] == text]
    if text in _OLDER_LEVELS:
        return _OLDER_LEVELS[text]
    if matches:
        return max(matches)
    raise Exit(1, stderr=f"Unsupported metadata.version {text}. Supported metadata.version are "
                         f"{', '.join(n for n, _ in METADATA_VERSIONS)}\n")


def _level_text(feature: str, level: int) -> str:
    if feature == "metadata.version":
        for name, lvl in METADATA_VERSIONS + list(_OLDER_LEVELS.items()):
            if lvl == level:
                return name
        return f"UNKNOWN {level}"
    return str(level)


def describe(pc: Any) -> List[str]:
    r = pc.send_any(ApiKey.API_VERSIONS, {"client_software_name": "kafka-features",
                                          "client_software_version": "3.9.1"})
    finalized = {f.name: f.max_version_level for f in (getattr(r, "finalized_features", None) or [])}
    epoch = getattr(r, "finalized_features_epoch", -1)
    lines = []
    for f in sorted(getattr(r, "supported_features", None) or [], key=lambda f: f.name):
        lines.append(f"Feature: {f.name}\tSupportedMinVersion: {_level_text(f.name, f.min_version)}\t"
                     f"SupportedMaxVersion: {_level_text(f.name, f.max_version)}\tFinalizedVersionLevel: "
                     f"{_level_text(f.name, finalized.get(f.name, 0))}\tEpoch: {epoch if epoch >= 0 else '-'}")
    return lines


def _parse_name_level(text: str) -> Tuple[str, int]:
    if "=" not in text:
        raise Exit(1, stderr=f"Can't parse feature=level string {text}: equals sign not found.\n")
    name, _, level = text.partition("=")
    name, level = name.strip(), level.strip()
    try:
        value = int(level)
        if not -32768 <= value <= 32767:
            raise ValueError
    except ValueError:
        raise Exit(1, stderr=f"Can't parse feature=level string {text}: unable to parse {level} as a short.\n") \
            from None
    return name, value


def updates_of(ns: Dict[str, Any]) -> Dict[str, Tuple[int, int]]:
    """feature -> (level, upgrade type), with Kafka's checks and messages."""
    op = ns["command"]
    kind = UPGRADE if op == "upgrade" else (UNSAFE_DOWNGRADE if ns["unsafe"] else SAFE_DOWNGRADE)
    updates: Dict[str, Tuple[int, int]] = {}
    if op != "disable" and ns["metadata"] is not None:
        updates["metadata.version"] = (metadata_level(ns["metadata"]), kind)
    for f in ns["feature"]:
        name, level = (f, 0) if op == "disable" else _parse_name_level(f)
        if name in updates:
            raise Exit(1, stderr=f"Feature {name} was specified more than once.\n")
        updates[name] = (level, kind)
    if not updates:
        raise Exit(1, stderr=f"You must specify at least one feature to {op}\n")
    return updates


def update(pc: Any, op: str, updates: Dict[str, Tuple[int, int]], dry_run: bool) -> Tuple[List[str], int]:
    version = pc.version_for(ApiKey.UPDATE_FEATURES)
    keys = []
    for name, (level, kind) in updates.items():
        key: Dict[str, Any] = {"feature": name, "max_version_level": level}
        if version == 0:
            key["allow_downgrade"] = kind != UPGRADE
        else:
            key["upgrade_type"] = kind
        keys.append(key)
    body: Dict[str, Any] = {"timeout_ms": 60000, "feature_updates": keys}
    if version >= 1:
        body["validate_only"] = dry_run
    r = pc.send_to_controller(ApiKey.UPDATE_FEATURES, body)
    errors: Dict[str, Optional[str]] = {}
    for name in updates:
        errors[name] = None
    if r.error_code:
        errors = {name: r.error_message or _default_message(r.error_code) for name in updates}
    else:
        for res in r.results:
            if res.error_code:
                errors[res.feature] = res.error_message or _default_message(res.error_code)
    lines, failures = [], 0
    for name in sorted(errors):
        level = updates[name][0]
        if errors[name] is not None:
            what = f"disable {name}" if op == "disable" else f"{op} {name} to {level}"
            lines.append(f"{'Can not ' if dry_run else 'Could not '}{what}. {errors[name]}")
            failures += 1
        else:
            verb = " can be " if dry_run else " was "
            lines.append(name + verb + ("disabled." if op == "disable" else f"{op}d to {level}."))
    return lines, failures


def _default_message(code: int) -> str:
    from .java_format import exception_line
    return exception_line(code).split(": ", 1)[1]


def run(argv: Sequence[str]) -> int:
    ns = parse(argv)
    if ns["bootstrap_controller"] is not None:
        raise Exit(1, stderr="--bootstrap-controller is not supported by this broker's tools: this broker runs in "
                             "ZooKeeper mode and has no KRaft quorum\n")
    props = load_properties_file(ns["command_config"]) if ns["command_config"] else {}
    cfg = build_client_config(props, "admin", ns["bootstrap_server"])
    with protocol_client(cfg) as pc:
        if ns["command"] == "describe":
            for line in describe(pc):
                print(line)
            return 0
        updates = updates_of(ns)
        lines, failures = update(pc, ns["command"], updates, bool(ns["dry_run"]))
    for line in lines:
        print(line)
    if failures:
        print(f"{failures} out of {len(updates)} operation(s) failed.", file=sys.stderr)
        return 1
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except Exit as e:
        sys.stdout.write(e.stdout)
        sys.stderr.write(e.stderr)
        return e.code
    except (ProtocolClientError, CommandError) as e:
        print(str(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
