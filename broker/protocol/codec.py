"""Kafka message codecs: the shared runtime (Message classes, defaults, varints) and ``codec_for``.

``codec_for(schema, version)`` returns a MessageCodec backed by straight-line Python generated for
that (message, version) by broker.protocol.gen on first use. broker.protocol.interp keeps the
older closure engine as the test oracle. Sans-IO; safe to share between threads once compiled.

Wire layout (big-endian), per Kafka's message format:

- int8/int16/uint16/int32/int64: fixed width; float64: IEEE-754 double; bool: one byte, 0 or 1;
  uuid: 16 raw bytes.
- Unsigned varint (flexible versions): 7 bits per byte, low group first, MSB set = more bytes.
- string: non-flexible int16 length (-1 = null) + UTF-8; flexible uvarint(length + 1) (0 = null) + UTF-8.
- bytes, records: as string but with an int32 length when non-flexible.
- array: non-flexible int32 count (-1 = null); flexible uvarint(count + 1) (0 = null); then elements.
- struct: its fields in schema order; in flexible versions followed by a tagged-field section:
  uvarint(number of tagged fields), then per field in ascending tag order
  uvarint(tag) uvarint(size) <size bytes of the value in flexible encoding>.
- nullable struct (not tagged): int8 -1 for null, 1 followed by the struct otherwise.

Decoded structs are instances of generated ``Message`` subclasses with ``__slots__`` (one per
struct schema), holding every field of every version (absent ones carry their default).
``records`` decode to a zero-copy memoryview slice of the input. Encoding accepts those objects
or plain dicts; missing fields take their default. ``records`` accept bytes-like objects, a
sized non-bytes object (FileSlice: emitted as its own part, never read) or a list of those.
An element of an array of structs may also be a :class:`PreEncoded`: that struct's bytes, already
encoded at the message's version (by ``element_encoder``), written as they are. This lets a
handler reuse the encoding of entries that seldom change (Metadata's topics).
"""
from __future__ import annotations

import struct
import uuid
from functools import lru_cache
from typing import Any, Callable, NamedTuple

from .exceptions import MalformedMessageError
from .schema import Field, MessageSchema

ZERO_UUID = uuid.UUID(int=0)

_INT_STRUCTS = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "uint16": struct.Struct(">H"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
    "float64": struct.Struct(">d"),
}
_BYTES_LIKE = (bytes, bytearray, memoryview)
_UV1 = [bytes([i]) for i in range(128)]


class Message:
    """Base of generated struct classes: attribute access, equality, repr and to_dict()."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dicts/lists (memoryviews become bytes); for tests and logging."""
        return {name: _plain(getattr(self, name)) for name in self._fields}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Message):
            return type(other) is type(self) and self.to_dict() == other.to_dict()
        if isinstance(other, dict):
            return self.to_dict() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields)
        return f"{type(self).__name__}({inner})"


def _plain(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


# ---------------------------------------------------------------- defaults


def default_value(field: Field) -> Any:
    """A fresh default for ``field`` (Kafka's rules: explicit default, else the type's zero)."""
    if field.is_array:
        return None if field.has_default and field.default is None else []
    if field.is_struct:
        if field.has_default and field.default is None:
            return None
        return struct_class(field.element_type, field.fields)()
    if field.has_default:
        return field.default
    return _TYPE_ZERO[field.type]


_TYPE_ZERO: dict[str, Any] = {
    "bool": False, "int8": 0, "int16": 0, "uint16": 0, "int32": 0, "int64": 0, "float64": 0.0,
    "string": "", "bytes": b"", "uuid": ZERO_UUID, "records": None,
}


def encode_default(field: Field) -> Any:
    """An immutable stand-in for the default, used when a dict lacks the field."""
    if field.is_array:
        return None if field.has_default and field.default is None else ()
    if field.is_struct:
        return None if field.has_default and field.default is None else {}
    return default_value(field)


@lru_cache(maxsize=None)
def struct_class(name: str, fields: tuple[Field, ...]) -> type[Message]:
    """The generated class for one struct schema (cached: one class per schema)."""
    names = tuple(f.name for f in fields)
    ns: dict[str, Any] = {"_M": _MISSING}
    lines = [f"def __init__(self{''.join(f', {n}=_M' for n in names)}):"]
    for i, f in enumerate(fields):
        if f.is_array and not (f.has_default and f.default is None):
            expr = "[]"
        elif f.is_struct and not (f.has_default and f.default is None):
            ns[f"_f{i}"] = struct_class(f.element_type, f.fields)
            expr = f"_f{i}()"
        else:
            ns[f"_d{i}"] = default_value(f)
            expr = f"_d{i}"
        lines.append(f"    self.{f.name} = {expr} if {f.name} is _M else {f.name}")
    if not fields:
        lines.append("    pass")
    exec("\n".join(lines), ns)  # noqa: S102 - generated from our own schema names only
    return type(name, (Message,), {"__slots__": names, "_fields": names, "__init__": ns["__init__"]})


class PreEncoded:
    """One struct, already encoded at the version of the message it will be part of.

    Accepted as an element of an array of that struct; the encoder copies ``data`` without looking
    inside, so encoding it at another version, or as another struct, writes a corrupt message.
    """

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PreEncoded) and other.data == self.data

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PreEncoded({len(self.data)} bytes)"


class _Missing:
    __slots__ = ()


_MISSING = _Missing()
_EMPTY: dict[str, Any] = {}


def field_flexible(field: Field, version: int, flexible: bool) -> bool:
    """Whether a field uses the flexible encoding (the request header's client_id never does)."""
    return flexible if field.flexible_override is None else version in field.flexible_override


def is_tagged(field: Field, version: int) -> bool:
    """Whether a field is a tagged field at this version."""
    return field.tag is not None and version in field.tagged_versions


# ---------------------------------------------------------------- varints


def read_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint (at most 5 bytes, as Kafka's readUnsignedVarint)."""
    b = buf[pos]
    pos += 1
    if b < 0x80:
        return b, pos
    result = b & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise MalformedMessageError("unsigned varint longer than 5 bytes")


def uvarint_bytes(n: int) -> bytes:
    """Encode an unsigned varint."""
    if n < 128:
        return _UV1[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# ---------------------------------------------------------------- public


class MessageCodec:
    """Generated encoder/decoder of one message schema at one version.

    ``decode_fn(data, offset)`` and ``encode_fn(w, ins, message)`` are the generated functions:
    the encoder appends to bytearray ``w`` and records ``(position in w, part)`` in ``ins`` for
    FileSlices and large record sets, which are kept out of ``w`` (see ``assemble``).

    ``engine`` is "compiled" (the decoder and the encoder are the Cython twins, broker.protocol.compiled) or
    "python"; the default takes the compiled ones when broker.protocol.compiled chose them and covers
    (schema, version). ``encode_engine`` says which encoder is in use.
    """

    __slots__ = ("schema", "version", "flexible", "decode_fn", "encode_fn", "source", "engine", "encode_engine")

    def __init__(self, schema: MessageSchema, version: int, engine: str | None = None) -> None:
        from .compiled import compiled_decoder, compiled_encoder, load_module
        from .gen import generate, run_source

        self.schema = schema
        self.version = version
        self.flexible = version in schema.flexible
        self.source, ns = generate(schema, version)
        decode = encode = None
        if engine == "compiled":
            module = load_module()
            decode = compiled_decoder(schema, version, self.source, ns, module)
            if decode is None:
                raise LookupError(f"no compiled codec for {schema.name} v{version}")
            encode = compiled_encoder(schema, version, self.source, ns, module)
        elif engine is None:
            decode = compiled_decoder(schema, version, self.source, ns)
            encode = compiled_encoder(schema, version, self.source, ns)
        elif engine != "python":
            raise ValueError(f"engine must be 'compiled' or 'python', not {engine!r}")
        self.engine = "python" if decode is None else "compiled"
        self.encode_engine = "python" if encode is None else "compiled"
        self.encode_fn, self.decode_fn = run_source(schema, version, self.source, ns)
        if decode is not None:
            self.decode_fn = decode
        if encode is not None:
            self.encode_fn = encode

    def decode(self, data: Any, offset: int = 0) -> tuple[Any, int]:
        """Decode from ``data`` at ``offset``; returns (message, offset after it)."""
        return self.decode_fn(data, offset)

    def encode_parts(self, message: Any) -> list[Any]:
        """Coalesced parts: bytes, with FileSlices (and large record sets) as their own parts."""
        w = bytearray()
        ins: list[tuple[int, Any]] = []
        self.encode_fn(w, ins, message)
        return assemble(w, ins, 0)

    def encode(self, message: Any) -> bytes:
        """Encode to bytes (FileSlices are read; for tests and tools)."""
        return join_parts(self.encode_parts(message), read_slices=True)


def assemble(w: bytearray, ins: list[tuple[int, Any]], start: int) -> list[Any]:
    """Interleave ``w[start:]`` with the out-of-line parts; adjacent bytes-like pieces become one bytes."""
    if not ins:
        return [bytes(w)] if start == 0 else [w[start:]]
    mv = memoryview(w)
    parts: list[Any] = []
    run: list[Any] = []
    prev = start
    for at, p in ins:
        if at > prev:
            run.append(mv[prev:at])
            prev = at
        if isinstance(p, _BYTES_LIKE):
            run.append(p)
        else:
            if run:
                parts.append(b"".join(run))
                run = []
            parts.append(p)
    if prev < len(w):
        run.append(mv[prev:])
    if run:
        parts.append(b"".join(run))
    return parts


def coalesce(parts: list[Any]) -> list[Any]:
    """Join adjacent bytes-like parts; non-bytes parts (FileSlice) stay separate."""
    try:
        return [b"".join(parts)]
    except TypeError:
        pass
    out: list[Any] = []
    run: list[Any] = []
    for p in parts:
        if isinstance(p, _BYTES_LIKE):
            run.append(p)
        else:
            if run:
                out.append(b"".join(run))
                run = []
            out.append(p)
    if run:
        out.append(b"".join(run))
    return out


def join_parts(parts: list[Any], read_slices: bool = False) -> bytes:
    """All parts as one bytes object; FileSlices are read only when ``read_slices``."""
    if read_slices:
        parts = [p if isinstance(p, _BYTES_LIKE) else p.read() for p in parts]
    return b"".join(parts)


_codecs: dict[tuple[str, int], MessageCodec] = {}
_element_encoders: dict[tuple[str, tuple[str, ...], int], Callable[[Any], PreEncoded]] = {}


def element_encoder(schema: MessageSchema, path: tuple[str, ...], version: int) -> Callable[[Any], PreEncoded]:
    """An encoder of one element of the struct array at ``path`` (field names from the top of ``schema``).

    The element is encoded exactly as it would be inside a ``schema`` message of ``version``; the
    result goes back into such a message as a :class:`PreEncoded` element. Record sets are not
    supported (they would be out-of-line parts).
    """
    key = (schema.name, path, version)
    fn = _element_encoders.get(key)
    if fn is None:
        from .gen import compile_element_encoder

        enc = compile_element_encoder(schema, path, version)

        def fn(element: Any) -> PreEncoded:
            w = bytearray()
            ins: list[tuple[int, Any]] = []
            enc(w, ins, element)
            if ins:
                raise ValueError(f"{schema.name} {'.'.join(path)}: out-of-line parts cannot be pre-encoded")
            return PreEncoded(bytes(w))

        _element_encoders[key] = fn
    return fn


class ElementLayout(NamedTuple):
    """How an element of a struct array encodes when only its leading fixed-width fields vary (see
    :func:`element_layout`): ``PreEncoded(prefix.pack(*values) + suffix)``."""

    prefix: struct.Struct
    suffix: bytes


_element_layouts: dict[tuple[str, tuple[str, ...], int, tuple[str, ...]], ElementLayout] = {}


def element_layout(schema: MessageSchema, path: tuple[str, ...], version: int,
                   leading: tuple[str, ...]) -> ElementLayout:
    """The encoding of an element of the struct array at ``path`` whose fields other than ``leading`` hold their
    defaults: the ``leading`` fields (the element's first fields at ``version``, in order, each a fixed-width
    number) packed big-endian, then the bytes every such element shares (the other fields at their defaults, as
    :func:`element_encoder` writes them).

    For answers built by the thousand (a Produce's partitions): one pack and one concatenation per element
    instead of the encoder's walk over a dict. Raises ValueError when ``leading`` does not fit that description.
    """
    key = (schema.name, path, version, leading)
    layout = _element_layouts.get(key)
    if layout is None:
        fields = _element_fields(schema, path, version)
        present = [f for f in fields if version in f.versions and not is_tagged(f, version)]
        codes = []
        for i, name in enumerate(leading):
            f = present[i] if i < len(present) else None
            if f is None or f.name != name or f.is_array or f.type not in _INT_STRUCTS:
                raise ValueError(f"{schema.name} {'.'.join(path)} v{version}: {name} is not leading field {i} "
                                 "of fixed width")
            codes.append(_INT_STRUCTS[f.type].format[1:])
        prefix = struct.Struct(">" + "".join(codes))
        defaults = element_encoder(schema, path, version)({}).data
        layout = _element_layouts[key] = ElementLayout(prefix, defaults[prefix.size:])
    return layout


def _element_fields(schema: MessageSchema, path: tuple[str, ...], version: int) -> tuple[Field, ...]:
    """The fields of the elements of the struct array at ``path`` (names from the top of ``schema``)."""
    fields = schema.fields
    for step in path:
        f = next((x for x in fields if x.name == step), None)
        if f is None or not (f.is_array and f.is_struct) or version not in f.versions:
            raise ValueError(f"{schema.name}: {'.'.join(path)} is not an array of structs at v{version}")
        fields = f.fields
    return fields


def codec_for(schema: MessageSchema, version: int) -> MessageCodec:
    """The generated codec for (schema, version), generated and compiled on first use."""
    key = (schema.name, version)
    c = _codecs.get(key)
    if c is None:
        c = _codecs[key] = MessageCodec(schema, version)
    return c
