"""Write docs/configuration.md, the configuration reference, from the one declaration of every key.

Every broker key of ``broker/config/defs.py`` and topic key of ``broker/config/topic_defs.py``: type, default,
valid values, whether AlterConfigs may change it (and how widely), and what the broker does with it: honours it,
accepts it without acting on it, or refuses to start (the security policy of ``broker/config/security_keys.py``,
the dynamic-only keys of ``broker/config/kafka_config.py``).

    python -m tools.docs.configuration            # rewrite docs/configuration.md
    python -m tools.docs.configuration --check    # exit 1 if the checked-in file is stale

The output depends only on those tables, so it is byte-identical from run to run (a unit test compares it).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, List, Optional

from broker.config.defs import BROKER_CONFIGS, TOPIC_SYNONYMS, ConfigDef
from broker.config.kafka_config import DYNAMIC_ONLY_KEYS, KafkaConfig
from broker.config.security_keys import (
    ACL_AUTHORIZER_CLASS_NAMES,
    HARMLESS_VALUES,
    LISTENER_KEYS,
    SECURITY_PREFIXES,
    SUPPORTED_MECHANISMS,
    SUPPORTED_PROTOCOLS,
    UNSUPPORTED_KEYS,
    unsupported_security_key,
)
from broker.config.topic_defs import TOPIC_CONFIGS, TopicConfigDef, topic_defaults
from broker.config.types import Dynamic, to_string

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "docs" / "configuration.md"
REGENERATE = "python -m tools.docs.configuration"

HONOURED = "honoured"
IGNORED = "accepted, not acted on"
_DYNAMIC = {Dynamic.READ_ONLY: "read-only", Dynamic.PER_BROKER: "per-broker", Dynamic.CLUSTER_WIDE: "cluster-wide"}
#: honoured keys whose values the broker restricts beyond their type (what is refused, one line at start-up)
_RESTRICTED = {
    "authorizer.class.name": f"{HONOURED}: empty (no authorizer) or {ACL_AUTHORIZER_CLASS_NAMES[0]}; any other "
                             "class refused",
    "sasl.enabled.mechanisms": f"{HONOURED}: {', '.join(SUPPORTED_MECHANISMS)}; any other mechanism on a SASL "
                               "listener refused",
    "sasl.mechanism.inter.broker.protocol": f"{HONOURED}: {', '.join(SUPPORTED_MECHANISMS)} (when the inter-broker "
                                            "listener uses SASL)",
    "remote.log.storage.system.enable": f"{HONOURED} (tiered storage, KIP-405: see above)",
}
#: topic keys whose values the broker refuses as Kafka does (CreateTopics and AlterConfigs answer INVALID_CONFIG)
_TOPIC_RESTRICTED = {
    "remote.storage.enable": f"{HONOURED}; refused when `true` as Kafka refuses it (the broker's tiered storage "
                             "off, a compacted topic)",
    "remote.log.copy.disable": "refused when `true` (Kafka's ZooKeeper-mode answer)",
    "remote.log.delete.on.disable": "refused when `true` (Kafka's ZooKeeper-mode answer)",
}


def _cell(text: Any) -> str:
    """A markdown table cell: pipes escaped, never empty."""
    s = "" if text is None else str(text)
    return s.replace("|", "\\|").replace("\n", " ") or " "


def _code(value: Optional[str]) -> str:
    if value is None:
        return "null"
    return f"`{value}`" if value != "" else '`""`'


def _valid_values(validator: Any) -> str:
    """Kafka's "Valid Values" from a validator: the ranges/lists of broker.config.types, else its docstring."""
    if validator is None:
        return ""
    doc = (validator.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""


def broker_key_status(d: ConfigDef) -> str:
    """What the broker does with a key set in server.properties."""
    if d.name in DYNAMIC_ONLY_KEYS:
        return "dynamic only: refused in server.properties, set it with AlterConfigs (kafka-configs.sh)"
    if d.name in _RESTRICTED:
        return _RESTRICTED[d.name]
    if unsupported_security_key({d.name: "x"}) == d.name:
        harmless = HARMLESS_VALUES.get(d.name)
        if harmless and unsupported_security_key({d.name: harmless[0]}) is None:
            shown = str(to_string(d.type, d.default)) if d.default is not None else harmless[0]
            if shown.lower() not in harmless:
                shown = harmless[0]
            return f"refused unless `{shown}` (a security setting this broker does not honour)"
        return "refused: a security setting this broker does not honour"
    if d.ignored:
        return IGNORED
    return HONOURED


def topic_key_status(d: TopicConfigDef) -> str:
    if d.name in _TOPIC_RESTRICTED:
        return _TOPIC_RESTRICTED[d.name]
    return IGNORED if d.ignored else HONOURED


def _broker_table() -> List[str]:
    rows = ["| Key | Type | Default | Valid values | Importance | Dynamic update | Status | Description |",
            "|---|---|---|---|---|---|---|---|"]
    for name in sorted(BROKER_CONFIGS):
        d = BROKER_CONFIGS[name]
        default = _code(to_string(d.type, d.default))
        if d.type.name == "PASSWORD" and d.default is not None:
            default = "(hidden)"
        rows.append("| " + " | ".join(_cell(c) for c in (
            f"`{name}`", d.type.name.lower(), default, _valid_values(d.validator), d.importance.value.lower(),
            _DYNAMIC[d.dynamic], broker_key_status(d), d.doc)) + " |")
    return rows


def _topic_table() -> List[str]:
    defaults = topic_defaults(KafkaConfig({"zookeeper.connect": "localhost:2181"}, warn_unknown=False))
    rows = ["| Key | Type | Default | Valid values | Broker default from | Status | Description |",
            "|---|---|---|---|---|---|---|"]
    for name in sorted(TOPIC_CONFIGS):
        d = TOPIC_CONFIGS[name]
        default = defaults.get(name)
        synonyms = ", ".join(f"`{k}`" for k, _ in TOPIC_SYNONYMS.get(name, []))
        rows.append("| " + " | ".join(_cell(c) for c in (
            f"`{name}`", d.type.name.lower(), _code(default if default != "" else None), _valid_values(d.validator),
            synonyms, topic_key_status(d), d.doc)) + " |")
    return rows


def render() -> str:
    """The whole of docs/configuration.md."""
    listener_keys = ", ".join(f"`{k}`" for k in sorted(LISTENER_KEYS))
    lines = [
        "# Configuration reference",
        "",
        f"<!-- Generated by `{REGENERATE}` from broker/config/ (defs.py, topic_defs.py, security_keys.py, "
        "kafka_config.py). Do not edit: change those files and regenerate; a unit test fails while this file is "
        "stale. -->",
        "",
        "The broker reads a Kafka `server.properties` (plus `--override key=value`) with Kafka 3.9's keys, types and "
        "defaults. What each column means:",
        "",
        "- **Type**, **Default**, **Valid values**, **Importance**: as Kafka's ConfigDef declares them (`null`: no "
        "default; a key whose default is `null` and that has a broker synonym falls back to it, e.g. `log.roll.ms` "
        "to `log.roll.hours`).",
        "- **Dynamic update** (broker keys): `read-only` keys are read at start-up only; `per-broker` keys can be "
        "changed for one broker and `cluster-wide` keys also for all brokers at once, with AlterConfigs or "
        "IncrementalAlterConfigs (`kafka-configs.sh --entity-type brokers [--entity-name <id> | --entity-default]`)."
        " Topic keys are all set per topic (CreateTopics, AlterConfigs, `kafka-configs.sh --entity-type topics`)."
        " As in Kafka 3.9, a broker resource also takes keys this broker has no use for (custom keys, Kafka's "
        "Kerberos and login-refresh tuning): stored, reported by DescribeConfigs, never applied. The listener, TLS and SASL keys that Kafka reconfigures at run time (`listeners`, `ssl.*`, "
        "`sasl.enabled.mechanisms`, their `listener.name.<listener>.` forms, ...) are read-only here: AlterConfigs "
        "refuses them rather than store a setting the broker would ignore.",
        f"- **Status**: `{HONOURED}`, the broker acts on the key; `{IGNORED}`, the key is valid (Kafka's tools and "
        "a stock `server.properties` use it) and reported by DescribeConfigs, but this broker does not change its "
        "behaviour for it; `refused`, setting it stops start-up with one line naming the key, exit status 1.",
        "",
        "Besides the keys below:",
        "",
        "- A key that is none of these is accepted with a warning (`The configuration '<key>' was supplied but "
        "isn't a known config.`), as Kafka does, so a Kafka `server.properties` loads unchanged.",
        f"- Listeners use the security protocols {', '.join(SUPPORTED_PROTOCOLS)}; a listener with any other "
        "protocol, or without one in `listener.security.protocol.map`, is refused.",
        f"- `listener.name.<listener>.<key>` overrides, for one listener, the keys {listener_keys}; "
        "`listener.name.<listener>.<mechanism>.sasl.jaas.config` holds the JAAS login of one SASL mechanism "
        f"({', '.join(SUPPORTED_MECHANISMS)}).",
        f"- Any other key of the security families ({', '.join(f'`{p}*`' for p in SECURITY_PREFIXES)}) and "
        f"{', '.join(f'`{k}`' for k in UNSUPPORTED_KEYS)} are refused unless set to their \"off\" value "
        "(Kerberos/GSSAPI, OAUTHBEARER, custom callback handlers, ZooKeeper TLS/SASL/ACLs are not implemented; "
        "running less protected than configured would be worse than not running).",
        "- Tiered storage (KIP-405), Kafka 3.9's keys: with `remote.log.storage.system.enable=true` the broker runs a "
        "RemoteLogManager (broker/replica/tiered_storage.py): the leader of each partition of a topic with "
        "`remote.storage.enable=true` copies its rolled segments below the last stable offset to the "
        "RemoteStorageManager named by `remote.log.storage.manager.class.name` (Kafka's "
        "`org.apache.kafka.server.log.remote.storage.LocalTieredStorage` or `broker.storage.remote.LocalTieredStorage`"
        " for the built-in local-directory storage, configured by `rsm.config.dir`; "
        "`broker.storage.remote.S3RemoteStorageManager` for S3; anything else is refused at start-up with one line), "
        "records them in `__remote_log_metadata` (Kafka's TopicBasedRemoteLogMetadataManager, its topic created with "
        "`rlmm.config.remote.log.metadata.topic.num.partitions`/`.replication.factor`), deletes local segments past "
        "`local.retention.ms`/`local.retention.bytes` once copied, and expires remote ones by `retention.ms`/"
        "`retention.bytes`; consumers read offsets only remote storage holds through the remote reader pool "
        "(`remote.log.reader.threads`, `remote.fetch.max.wait.ms`, the fetch quota), reading from the position the "
        "segment's offset index gives up to the fetch's max bytes (ranged reads: a seek, an S3 Range GET) with the "
        "remote offset/time/transaction indexes kept in `<first log dir>/remote-log-index-cache` (Kafka's "
        "RemoteIndexCache, bounded by `remote.log.index.file.cache.total.size.bytes`, least recently used out), "
        "followers below the leader's "
        "local log start rebuild from the remote metadata, ListOffsets answers -4 and -5. Kafka 3.9's remote-storage "
        "meters and gauges of `BrokerTopicMetrics` (`RemoteCopyBytesPerSec`, `RemoteCopyErrorsPerSec`, "
        "`RemoteFetchRequestsPerSec`, `RemoteCopyLagBytes`, `RemoteLogSizeBytes`, ...) are exported on the "
        "Prometheus endpoint (docs/metrics.md) when the switch is on. With the S3 storage, an unreachable store "
        "fails copies (retried every `remote.log.manager.task.interval.ms`; local segments stay until their copy is "
        "committed, so local retention waits) and remote reads (the fetch answers that partition "
        "`UNKNOWN_SERVER_ERROR`, which clients retry); producing and reading local data go on. The keys marked "
        "\"accepted, "
        "not acted on\" have no meaning here (Java class paths). The copy, expiration and follower tasks run on "
        "Kafka's three pools (`remote.log.manager.copier.thread.pool.size`, "
        "`remote.log.manager.expiration.thread.pool.size`, each -1 for `remote.log.manager.thread.pool.size`, which "
        "sizes the follower pool), each partition's task every `remote.log.manager.task.interval.ms` after its "
        "previous run. "
        "A topic's `remote.storage.enable=true` is refused as Kafka refuses it on a broker whose switch "
        "is off (`Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log "
        "storage.`) or on a compacted topic, and `remote.log.copy.disable`/`remote.log.delete.on.disable` set to true "
        "with Kafka's ZooKeeper-mode message (`It is invalid to set ... under Zookeeper's mode.`), all INVALID_CONFIG.",
        "",
        f"## Broker configs ({len(BROKER_CONFIGS)} keys)",
        "",
        *_broker_table(),
        "",
        f"## Topic configs ({len(TOPIC_CONFIGS)} keys)",
        "",
        "A topic key without an override takes its value from its broker synonym (the first one set, in the order "
        "listed: `retention.ms` from `log.retention.ms`, else `log.retention.minutes`, else "
        "`log.retention.hours`), converted to the topic key's unit.",
        "",
        *_topic_table(),
        "",
    ]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.docs.configuration", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/configuration.md is stale")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"wrote {args.output} ({len(BROKER_CONFIGS)} broker keys, {len(TOPIC_CONFIGS)} topic keys)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
