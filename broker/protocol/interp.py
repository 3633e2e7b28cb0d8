"""Reference codec: the schema-walking closure engine, kept as the test oracle of the generated codec.

Each (message schema, version) is compiled once into a tree of small closures (no schema walking
per call). It is slower than broker.protocol.gen but simple enough to read against Kafka's
message format; tests/unit/protocol/test_gen_parity.py checks the two produce identical bytes
and equal messages. The wire layout is documented in broker/protocol/codec.py.
"""
from __future__ import annotations

import struct
import uuid
from functools import lru_cache
from typing import Any, Callable

from .codec import (
    _BYTES_LIKE, _EMPTY, _INT_STRUCTS, ZERO_UUID, default_value, encode_default, field_flexible, is_tagged,
    join_parts, read_uvarint, struct_class, uvarint_bytes,
)
from .exceptions import MalformedMessageError
from .schema import Field, MessageSchema

Decoder = Callable[[Any, int], tuple[Any, int]]
Encoder = Callable[[Callable[[Any], None], Any], None]

_pack_i16 = _INT_STRUCTS["int16"].pack
_pack_i32 = _INT_STRUCTS["int32"].pack
_unpack_i16 = _INT_STRUCTS["int16"].unpack_from
_unpack_i32 = _INT_STRUCTS["int32"].unpack_from


# ---------------------------------------------------------------- decoders


def _dec_fixed(name: str) -> Decoder:
    st = _INT_STRUCTS[name]
    unpack, size = st.unpack_from, st.size

    def dec(buf: Any, pos: int) -> tuple[Any, int]:
        return unpack(buf, pos)[0], pos + size

    return dec


def _dec_bool(buf: Any, pos: int) -> tuple[Any, int]:
    return buf[pos] != 0, pos + 1


def _dec_uuid(buf: Any, pos: int) -> tuple[Any, int]:
    end = pos + 16
    if end > len(buf):
        raise MalformedMessageError("uuid past end of buffer")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def _dec_length(flexible: bool, nullable: bool, int16: bool, what: str) -> Decoder:
    """Decoder of a length prefix; returns -1 for null, raises for bad lengths."""
    if flexible:
        def dec(buf: Any, pos: int) -> tuple[int, int]:
            n, pos = read_uvarint(buf, pos)
            n -= 1
            if n < 0 and not nullable:
                raise MalformedMessageError(f"null {what} in a non-nullable field")
            return n, pos
    else:
        unpack, size = (_unpack_i16, 2) if int16 else (_unpack_i32, 4)

        def dec(buf: Any, pos: int) -> tuple[int, int]:
            n = unpack(buf, pos)[0]
            if n < 0 and (n != -1 or not nullable):
                raise MalformedMessageError(f"invalid {what} length {n}")
            return n, pos + size
    return dec


def _dec_sized(flexible: bool, nullable: bool, kind: str) -> Decoder:
    read_len = _dec_length(flexible, nullable, kind == "string", kind)

    def dec(buf: Any, pos: int) -> tuple[Any, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            return None, pos
        end = pos + n
        if end > len(buf):
            raise MalformedMessageError(f"{kind} of {n} bytes runs past the end")
        if kind == "string":
            return str(buf[pos:end], "utf-8"), end
        if kind == "bytes":
            return bytes(buf[pos:end]), end
        return buf[pos:end], end  # records: zero-copy

    return dec


def _dec_array(elem: Decoder, flexible: bool, nullable: bool, elem_may_be_empty: bool) -> Decoder:
    read_len = _dec_length(flexible, nullable, False, "array")

    def dec(buf: Any, pos: int) -> tuple[Any, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            return None, pos
        if n > len(buf) - pos and not elem_may_be_empty:
            raise MalformedMessageError(f"array of {n} elements cannot fit in the buffer")
        out: list[Any] = []
        app = out.append
        for _ in range(n):
            v, pos = elem(buf, pos)
            app(v)
        return out, pos

    return dec


def _dec_nullable_struct(inner: Decoder) -> Decoder:
    def dec(buf: Any, pos: int) -> tuple[Any, int]:
        marker = buf[pos]
        if marker == 0xFF:
            return None, pos + 1
        if marker != 1:
            raise MalformedMessageError(f"bad nullable struct marker {marker}")
        return inner(buf, pos + 1)

    return dec


_PRIMITIVE_DEC: dict[str, Decoder] = {name: _dec_fixed(name) for name in _INT_STRUCTS}
_PRIMITIVE_DEC["bool"] = _dec_bool
_PRIMITIVE_DEC["uuid"] = _dec_uuid


def _value_decoder(field: Field, version: int, flexible: bool) -> Decoder:
    nullable = version in field.nullable
    et = field.element_type
    if field.is_struct:
        elem = _struct_decoder(et, field.fields, version, flexible)
        empty_ok = not flexible and not any(version in f.versions for f in field.fields)
    elif et in ("string", "bytes", "records"):
        elem = _dec_sized(flexible, nullable and not field.is_array, et)
        empty_ok = False
    else:
        elem = _PRIMITIVE_DEC[et]
        empty_ok = False
    if field.is_array:
        return _dec_array(elem, flexible, nullable, empty_ok)
    if field.is_struct and nullable:
        return _dec_nullable_struct(elem)
    return elem


@lru_cache(maxsize=None)
def _struct_decoder(name: str, fields: tuple[Field, ...], version: int, flexible: bool) -> Decoder:
    cls = struct_class(name, fields)
    template: list[Any] = []
    fresh: list[tuple[int, Field]] = []  # mutable defaults needing a new object per decode
    regular: list[tuple[int, Decoder]] = []
    tagged: dict[int, tuple[int, Decoder]] = {}
    for i, f in enumerate(fields):
        template.append(None)
        ff = field_flexible(f, version, flexible)
        if is_tagged(f, version):
            assert f.tag is not None
            tagged[f.tag] = (i, _value_decoder(f, version, ff))
        elif version in f.versions:
            regular.append((i, _value_decoder(f, version, ff)))
            continue
        if f.is_array or f.is_struct:
            fresh.append((i, f))
        else:
            template[i] = default_value(f)
    regular_t = tuple(regular)
    fresh_t = tuple(fresh)

    def dec(buf: Any, pos: int) -> tuple[Any, int]:
        vals = template[:]
        for i, f in fresh_t:
            vals[i] = default_value(f)
        for i, d in regular_t:
            vals[i], pos = d(buf, pos)
        if flexible:
            count, pos = read_uvarint(buf, pos)
            for _ in range(count):
                tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                end = pos + size
                if end > len(buf):
                    raise MalformedMessageError("tagged field runs past the end")
                entry = tagged.get(tag)
                if entry is not None:
                    i, d = entry
                    vals[i], p = d(buf, pos)
                    if p != end:
                        raise MalformedMessageError(f"tagged field {tag} size mismatch")
                pos = end
        return cls(*vals), pos

    return dec


# ---------------------------------------------------------------- encoders


def _enc_fixed(name: str) -> Encoder:
    pack = _INT_STRUCTS[name].pack

    def enc(app: Callable[[Any], None], v: Any) -> None:
        app(pack(v))

    return enc


def _enc_bool(app: Callable[[Any], None], v: Any) -> None:
    app(b"\x01" if v else b"\x00")


def _enc_uuid(app: Callable[[Any], None], v: Any) -> None:
    if isinstance(v, uuid.UUID):
        app(v.bytes)
    elif isinstance(v, _BYTES_LIKE) and len(v) == 16:
        app(bytes(v))
    elif isinstance(v, str):
        app(uuid.UUID(v).bytes)
    else:
        raise ValueError(f"not a uuid: {v!r}")


def _len_writer(flexible: bool, nullable: bool, int16: bool, what: str) -> Callable[[Callable[[Any], None], int], None]:
    """Writer of a length prefix; -1 means null."""
    if flexible:
        def write(app: Callable[[Any], None], n: int) -> None:
            if n < 0 and not nullable:
                raise ValueError(f"null {what} in a non-nullable field")
            app(uvarint_bytes(n + 1))
    else:
        pack, limit = (_pack_i16, 0x7FFF) if int16 else (_pack_i32, 0x7FFFFFFF)

        def write(app: Callable[[Any], None], n: int) -> None:
            if n < 0 and not nullable:
                raise ValueError(f"null {what} in a non-nullable field")
            if n > limit:
                raise ValueError(f"{what} of length {n} too long")
            app(pack(n))
    return write


def _enc_string(flexible: bool, nullable: bool) -> Encoder:
    write_len = _len_writer(flexible, nullable, True, "string")

    def enc(app: Callable[[Any], None], v: Any) -> None:
        if v is None:
            write_len(app, -1)
            return
        data = v.encode("utf-8")
        write_len(app, len(data))
        app(data)

    return enc


def _enc_bytes(flexible: bool, nullable: bool) -> Encoder:
    write_len = _len_writer(flexible, nullable, False, "bytes")

    def enc(app: Callable[[Any], None], v: Any) -> None:
        if v is None:
            write_len(app, -1)
            return
        write_len(app, len(v))
        app(v)

    return enc


def _enc_records(flexible: bool, nullable: bool) -> Encoder:
    write_len = _len_writer(flexible, True, False, "records")

    def enc(app: Callable[[Any], None], v: Any) -> None:
        if v is None:
            write_len(app, -1 if nullable else 0)
            return
        if isinstance(v, list):
            write_len(app, sum(len(p) for p in v))
            for p in v:
                app(p)
            return
        write_len(app, len(v))
        app(v)

    return enc


def _enc_array(elem: Encoder, flexible: bool, nullable: bool) -> Encoder:
    write_len = _len_writer(flexible, nullable, False, "array")

    def enc(app: Callable[[Any], None], v: Any) -> None:
        if v is None:
            write_len(app, -1)
            return
        write_len(app, len(v))
        for x in v:
            elem(app, x)

    return enc


def _enc_nullable_struct(inner: Encoder) -> Encoder:
    def enc(app: Callable[[Any], None], v: Any) -> None:
        if v is None:
            app(b"\xff")
        else:
            app(b"\x01")
            inner(app, v)

    return enc


_PRIMITIVE_ENC: dict[str, Encoder] = {name: _enc_fixed(name) for name in _INT_STRUCTS}
_PRIMITIVE_ENC["bool"] = _enc_bool
_PRIMITIVE_ENC["uuid"] = _enc_uuid


def _value_encoder(field: Field, version: int, flexible: bool) -> Encoder:
    nullable = version in field.nullable
    et = field.element_type
    elem_nullable = nullable and not field.is_array
    if field.is_struct:
        elem = _struct_encoder(et, field.fields, version, flexible)
    elif et == "string":
        elem = _enc_string(flexible, elem_nullable)
    elif et == "bytes":
        elem = _enc_bytes(flexible, elem_nullable)
    elif et == "records":
        elem = _enc_records(flexible, elem_nullable)
    else:
        elem = _PRIMITIVE_ENC[et]
    if field.is_array:
        return _enc_array(elem, flexible, nullable)
    if field.is_struct and nullable:
        return _enc_nullable_struct(elem)
    return elem


def _get(v: Any, name: str, dflt: Any) -> Any:
    if isinstance(v, dict):
        return v.get(name, dflt)
    return getattr(v, name, dflt)


def is_default_checker(field: Field, version: int) -> Callable[[Any], bool]:
    """Predicate: does this value equal the field's default (so a tagged field is not written)?"""
    explicit_null = field.has_default and field.default is None
    if field.is_array:
        if explicit_null:
            return lambda x: x is None
        return lambda x: x is None or len(x) == 0
    if field.is_struct:
        if explicit_null:
            return lambda x: x is None
        subs = [
            (f.name, encode_default(f), is_default_checker(f, version))
            for f in field.fields
            if version in f.versions
        ]
        return lambda x: x is None or all(chk(_get(x, n, d)) for n, d, chk in subs)
    if field.type == "uuid":
        return lambda x: x is None or x == ZERO_UUID or x == ZERO_UUID.bytes or x == str(ZERO_UUID)
    if field.type == "records":
        return lambda x: x is None
    d = default_value(field)
    if d is None:
        return lambda x: x is None
    return lambda x: x is not None and x == d


@lru_cache(maxsize=None)
def _struct_encoder(name: str, fields: tuple[Field, ...], version: int, flexible: bool) -> Encoder:
    regular: list[tuple[str, Encoder, Any]] = []
    tagged: list[tuple[int, str, Encoder, Any, Callable[[Any], bool]]] = []
    for f in fields:
        ff = field_flexible(f, version, flexible)
        if is_tagged(f, version):
            assert f.tag is not None
            tagged.append((f.tag, f.name, _value_encoder(f, version, ff), encode_default(f),
                           is_default_checker(f, version)))
        elif version in f.versions:
            regular.append((f.name, _value_encoder(f, version, ff), encode_default(f)))
    tagged.sort(key=lambda t: t[0])
    regular_t = tuple(regular)
    tagged_t = tuple(tagged)

    def write_tags(app: Callable[[Any], None], get: Callable[[str, Any], Any]) -> None:
        chunks: list[tuple[int, bytes]] = []
        for tag, fname, e, dflt, is_default in tagged_t:
            x = get(fname, dflt)
            if is_default(x):
                continue
            sub: list[Any] = []
            e(sub.append, x)
            chunks.append((tag, b"".join(sub)))
        app(uvarint_bytes(len(chunks)))
        for tag, data in chunks:
            app(uvarint_bytes(tag))
            app(uvarint_bytes(len(data)))
            app(data)

    def enc(app: Callable[[Any], None], v: Any) -> None:
        if v is None:
            v = _EMPTY
        if isinstance(v, dict):
            get = v.get
            for fname, e, dflt in regular_t:
                e(app, get(fname, dflt))
            if flexible:
                if tagged_t:
                    write_tags(app, get)
                else:
                    app(b"\x00")
        else:
            for fname, e, dflt in regular_t:
                e(app, getattr(v, fname, dflt))
            if flexible:
                if tagged_t:
                    write_tags(app, lambda n, d: getattr(v, n, d))
                else:
                    app(b"\x00")

    return enc


class EngineCodec:
    """Closure-engine encoder/decoder of one message schema at one version (same API as MessageCodec)."""

    __slots__ = ("schema", "version", "flexible", "_enc", "_dec")

    def __init__(self, schema: MessageSchema, version: int) -> None:
        self.schema = schema
        self.version = version
        self.flexible = version in schema.flexible
        self._enc = _struct_encoder(schema.name, schema.fields, version, self.flexible)
        self._dec = _struct_decoder(schema.name, schema.fields, version, self.flexible)

    def decode(self, data: Any, offset: int = 0) -> tuple[Any, int]:
        """Decode from ``data`` at ``offset``; returns (message, offset after it)."""
        buf = data if isinstance(data, memoryview) else memoryview(data)
        if buf.format != "B" or buf.ndim != 1:
            buf = buf.cast("B")
        try:
            return self._dec(buf, offset)
        except MalformedMessageError:
            raise
        except (struct.error, IndexError, ValueError, OverflowError, MemoryError) as exc:
            raise MalformedMessageError(f"{self.schema.name} v{self.version}: {exc}") from None

    def encode_parts(self, message: Any) -> list[Any]:
        """Raw parts (bytes-like and FileSlice objects), not yet coalesced."""
        parts: list[Any] = []
        self._enc(parts.append, message)
        return parts

    def encode(self, message: Any) -> bytes:
        """Encode to bytes (FileSlices are read)."""
        return join_parts(self.encode_parts(message), read_slices=True)


@lru_cache(maxsize=None)
def engine_codec(schema: MessageSchema, version: int) -> EngineCodec:
    """The oracle codec for (schema, version)."""
    return EngineCodec(schema, version)
