"""LogConfig: the topic-level settings that govern one partition's log.

Keys and defaults are Kafka's topic config keys (TopicConfig / LogConfig in Kafka 3.9). The
broker-level config layer resolves broker defaults and per-topic overrides and then builds a
LogConfig with ``LogConfig.from_props``; this module does no broker-level validation.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

LONG_MAX = 9223372036854775807


def _bool(v: str) -> bool:
    s = v.strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise ValueError("expected true or false, got %r" % v)


def _list(v: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in v.split(",") if p.strip())


@dataclass(frozen=True)
class LogConfig:
    """Effective topic config of one log; attribute names are the Kafka keys with '.' -> '_'.

    Values derived from the keys and read on every append are ``cached_property``: the config is immutable, and a
    plain property would cost a call per read.
    """

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    max_message_bytes: int = 1048588
    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_type: str = "producer"
    file_delete_delay_ms: int = 60000
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_difference_max_ms: int = LONG_MAX
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    delete_retention_ms: int = 86400000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    preallocate: bool = False
    message_downconversion_enable: bool = True
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    #: the topic asks for tiered storage (KIP-405); whether a log is tiered also needs the broker's
    #: remote.log.storage.system.enable, and never holds for internal or compacted topics (tiered_storage config)
    remote_storage_enable: bool = False
    extra: Mapping[str, str] = field(default_factory=dict, compare=False)

    @functools.cached_property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @functools.cached_property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @functools.cached_property
    def timestamp_before_limit_ms(self) -> int:
        """``message.timestamp.before.max.ms``, or, left at its default, the deprecated
        ``message.timestamp.difference.max.ms`` (Kafka 3.9's LogConfig falls back the same way)."""
        if self.message_timestamp_before_max_ms != LONG_MAX:
            return self.message_timestamp_before_max_ms
        return self.message_timestamp_difference_max_ms

    @functools.cached_property
    def timestamp_after_limit_ms(self) -> int:
        """``message.timestamp.after.max.ms``, or the deprecated difference key, as for the before limit."""
        if self.message_timestamp_after_max_ms != LONG_MAX:
            return self.message_timestamp_after_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def max_index_size(self) -> int:
        return self.segment_index_bytes

    @classmethod
    def from_props(cls, props: Mapping[str, str], base: "LogConfig | None" = None) -> "LogConfig":
        """Build from Kafka topic keys (string values); unknown keys are kept in ``extra``.

        ``base`` supplies the values of keys missing from ``props`` (e.g. the broker defaults).
        """
        values: dict[str, Any] = {}
        extra: dict[str, str] = dict(base.extra) if base is not None else {}
        for key, raw in props.items():
            attr = key.replace(".", "_")
            conv = _CONVERTERS.get(attr)
            if conv is None:
                extra[key] = raw
                continue
            try:
                values[attr] = conv(str(raw)) if not isinstance(raw, (int, float, bool, tuple)) else raw
            except ValueError as e:
                raise ValueError("invalid value %r for %s: %s" % (raw, key, e)) from None
        if "message_timestamp_type" in values and values["message_timestamp_type"] not in (
            "CreateTime", "LogAppendTime"
        ):
            raise ValueError("invalid message.timestamp.type %r" % values["message_timestamp_type"])
        start = base if base is not None else cls()
        return dataclasses.replace(start, extra=extra, **values)

    def to_props(self) -> dict[str, str]:
        """The Kafka topic keys with string values (the inverse of from_props)."""
        out: dict[str, str] = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            v = getattr(self, f.name)
            if isinstance(v, tuple):
                s = ",".join(v)
            elif isinstance(v, bool):
                s = "true" if v else "false"
            else:
                s = str(v)
            out[f.name.replace("_", ".")] = s
        out.update(self.extra)
        return out


def _field_converter(f: "dataclasses.Field[Any]") -> Callable[[str], Any]:
    t = f.type
    if t == "int":
        return lambda s: int(s.strip())
    if t == "float":
        return lambda s: float(s.strip())
    if t == "bool":
        return _bool
    if t == "tuple[str, ...]":
        return _list
    return lambda s: s.strip()


_CONVERTERS: dict[str, Callable[[str], Any]] = {
    f.name: _field_converter(f) for f in dataclasses.fields(LogConfig) if f.name != "extra"
}
