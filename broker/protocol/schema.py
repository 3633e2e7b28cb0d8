"""Parse the project's ``.schema`` files (written by tools/codegen/import_specs.py) into schema objects.

Sans-IO apart from reading the schema files once; the objects are immutable and shared.

File format (indentation-based, two spaces per nesting level, ``#`` starts a comment line)::

    api <key> <snake_name>                       only in API files; then one request + one response
    <kind> <MessageName> versions=<range> flexible=<range> [deprecated=<range>] [latest-unstable]
      <field_name> <type> v=<range> [null=<range>] [default=<token>] [tag=<n> tagv=<range>]
                          [flex=<range>] [ignorable]
        <nested fields of a struct or []struct type, one level deeper>

``kind`` is request, response, header or data. A range is ``N``, ``N-M``, ``N+`` or ``none``.
Types are Kafka's: bool int8 int16 uint16 int32 int64 float64 string bytes uuid records,
``[]T`` arrays, and struct names (their fields follow, indented). ``default`` tokens are
``null``, ``true``/``false``, decimal integers, floats or JSON strings; a missing default means
the type's zero. ``flex`` overrides the message's flexible versions for one field (request
header client_id).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"

PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "int64", "float64", "string", "bytes", "uuid", "records"}
)


@dataclass(frozen=True)
class VersionRange:
    """Inclusive version range; ``high`` None means open-ended, ``low`` > ``high`` means empty."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        if text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        assert isinstance(version, int)
        return self.low <= version and (self.high is None or version <= self.high)

    def __str__(self) -> str:
        if self.high is not None and self.low > self.high:
            return "none"
        if self.high is None:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


NO_VERSIONS = VersionRange(1, 0)


@dataclass(frozen=True)
class Field:
    """One field of a message or struct."""

    name: str
    type: str
    versions: VersionRange
    nullable: VersionRange
    default: Any  # parsed token: None for null, bool, int, float, str; _UNSET when absent
    tag: int | None
    tagged_versions: VersionRange
    flexible_override: VersionRange | None
    ignorable: bool
    fields: tuple[Field, ...]  # for struct and []struct types

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        """Type of one element for arrays, else the type itself."""
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        """True for struct and array-of-struct fields."""
        return self.element_type not in PRIMITIVES

    @property
    def has_default(self) -> bool:
        return self.default is not _UNSET


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


_UNSET: Any = _Unset()


@dataclass(frozen=True)
class MessageSchema:
    """A request, response, header or data (internal topic record) schema."""

    kind: str
    name: str
    versions: VersionRange
    flexible: VersionRange
    deprecated: VersionRange
    latest_unstable: bool
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class ApiSchema:
    """One API: its key, snake_case name and request/response schemas."""

    key: int
    name: str
    request: MessageSchema
    response: MessageSchema


def _parse_default(token: str) -> Any:
    if token == "null":
        return None
    if token == "true":
        return True
    if token == "false":
        return False
    if token.startswith('"'):
        return json.loads(token)
    try:
        return int(token)
    except ValueError:
        return float(token)


def _split_attrs(line: str) -> list[str]:
    """Split on spaces, keeping a quoted JSON string default in one piece."""
    out: list[str] = []
    rest = line
    while rest:
        rest = rest.lstrip(" ")
        if not rest:
            break
        if rest.startswith('default="'):
            end = rest.index('"', 9)
            while rest[end - 1] == "\\":
                end = rest.index('"', end + 1)
            out.append(rest[: end + 1])
            rest = rest[end + 1 :]
        else:
            tok, _, rest = rest.partition(" ")
            out.append(tok)
    return out


def _parse_field(text: str, children: tuple[Field, ...]) -> Field:
    name, ftype, *attrs = _split_attrs(text)
    opts: dict[str, str] = {}
    flags: set[str] = set()
    for a in attrs:
        if "=" in a:
            k, _, v = a.partition("=")
            opts[k] = v
        else:
            flags.add(a)
    return Field(
        name=name,
        type=ftype,
        versions=VersionRange.parse(opts["v"]),
        nullable=VersionRange.parse(opts.get("null", "none")),
        default=_parse_default(opts["default"]) if "default" in opts else _UNSET,
        tag=int(opts["tag"]) if "tag" in opts else None,
        tagged_versions=VersionRange.parse(opts.get("tagv", "none")),
        flexible_override=VersionRange.parse(opts["flex"]) if "flex" in opts else None,
        ignorable="ignorable" in flags,
        fields=children,
    )


def _build_fields(lines: list[tuple[int, str]], start: int, depth: int) -> tuple[tuple[Field, ...], int]:
    fields: list[Field] = []
    i = start
    while i < len(lines) and lines[i][0] >= depth:
        ind, text = lines[i]
        if ind != depth:
            raise ValueError(f"bad indentation at {text!r}")
        children, i = _build_fields(lines, i + 1, depth + 1)
        fields.append(_parse_field(text, children))
    return tuple(fields), i


def parse_schema_text(text: str) -> tuple[int | None, str | None, list[MessageSchema]]:
    """Parse one file: returns (api key, api name, messages in file order)."""
    lines: list[tuple[int, str]] = []
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        if indent % 2:
            raise ValueError(f"odd indentation: {raw!r}")
        lines.append((indent // 2, stripped))
    api_key: int | None = None
    api_name: str | None = None
    messages: list[MessageSchema] = []
    i = 0
    while i < len(lines):
        depth, text = lines[i]
        if depth != 0:
            raise ValueError(f"unexpected indentation: {text!r}")
        words = text.split()
        if words[0] == "api":
            api_key, api_name = int(words[1]), words[2]
            i += 1
            continue
        kind, name, *attrs = words
        opts = dict(a.partition("=")[::2] for a in attrs if "=" in a)
        fields, i = _build_fields(lines, i + 1, 1)
        messages.append(
            MessageSchema(
                kind=kind,
                name=name,
                versions=VersionRange.parse(opts["versions"]),
                flexible=VersionRange.parse(opts["flexible"]),
                deprecated=VersionRange.parse(opts.get("deprecated", "none")),
                latest_unstable="latest-unstable" in attrs,
                fields=fields,
            )
        )
    return api_key, api_name, messages


@lru_cache(maxsize=None)
def load_apis(schema_dir: Path = SCHEMA_DIR) -> dict[int, ApiSchema]:
    """All API schemas by key."""
    apis: dict[int, ApiSchema] = {}
    for path in sorted(schema_dir.glob("*.schema")):
        key, name, messages = parse_schema_text(path.read_text())
        if key is None or name is None:
            continue
        req = next(m for m in messages if m.kind == "request")
        resp = next(m for m in messages if m.kind == "response")
        apis[key] = ApiSchema(key, name, req, resp)
    return apis


@lru_cache(maxsize=None)
def load_messages(schema_dir: Path = SCHEMA_DIR) -> dict[str, MessageSchema]:
    """Every message in every file by its name (ProduceRequest, RequestHeader, OffsetCommitKey...)."""
    out: dict[str, MessageSchema] = {}
    for path in sorted(schema_dir.glob("*.schema")):
        for m in parse_schema_text(path.read_text())[2]:
            out[m.name] = m
    return out
