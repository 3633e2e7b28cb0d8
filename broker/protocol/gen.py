"""Code generator: straight-line Python source per (message schema, version), compiled on first use.

Why generated code: the closure engine (broker.protocol.interp) pays a Python call per field and
per length prefix; small requests were dominated by that dispatch. The generated functions read
and write whole runs of adjacent fixed-width fields with one precompiled ``struct.Struct``
(a non-flexible length prefix joins the run before it), keep everything in local variables,
inline nested structs and array loops, and build decoded objects with ``object.__new__`` plus
slot stores. Byte layouts are those documented in broker/protocol/codec.py.

Why lazily at first use (not committed modules): the ``.schema`` files stay the single source,
there is nothing generated to keep in sync or to review, and only the (api, version) pairs a
broker actually sees get compiled (a few ms each). ``tools/codegen/show_codec.py`` prints the
source of any pair, and the source is registered with ``linecache`` so tracebacks show it.

Generated functions:

- ``decode(data, pos) -> (message, end)``; wraps struct.error/IndexError/ValueError (bad UTF-8)/
  OverflowError/MemoryError in MalformedMessageError.
- ``encode(w, ins, message) -> None``; appends to bytearray ``w``. Record sets that are FileSlices
  or at least ``BIG_RECORDS`` bytes are not copied into ``w``: ``(len(w), part)`` is appended to
  ``ins`` instead, and codec.assemble() interleaves them. An element of an array of structs that is
  a ``codec.PreEncoded`` is copied as it is (one class check per element). If it raises, ``w``
  holds a partial encoding.
- ``generate_element_encoder``: the same ``encode`` for one element of a struct array, whose
  output such an array accepts back as a PreEncoded element.
"""
from __future__ import annotations

import linecache
import struct
import uuid
from typing import Any, Callable, Sequence

from .codec import (
    _BYTES_LIKE, _EMPTY, ZERO_UUID, Message, PreEncoded, default_value, encode_default, field_flexible, is_tagged,
    read_uvarint, struct_class, uvarint_bytes,
)
from .exceptions import MalformedMessageError
from .schema import Field, MessageSchema

BIG_RECORDS = 4096

_FIXED = {"bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "int64": "q", "float64": "d"}
#: the Cython flavour's big-endian readers (defined in the .pyx prelude by broker.protocol.gen_pyx)
_C_READ = {"?": "_r_bool", "b": "_r_i8", "h": "_r_i16", "H": "_r_u16", "i": "_r_i32", "q": "_r_i64", "d": "_r_f64"}
#: the Cython flavour's writers (same prelude): convert a Python value as struct.pack would (its errors included)
#: and store it big-endian into the C buffer ``o``; the ``_c_`` ones take a C integer (a length)
_C_WRITE = {"?": "_p_bool", "b": "_p_i8", "h": "_p_i16", "H": "_p_u16", "i": "_p_i32", "q": "_p_i64", "d": "_p_f64",
            "16s": "_p_16s"}
_C_WRITE_INT = {"h": "_c_i16", "i": "_c_i32"}
_SIZE = {"?": 1, "b": 1, "h": 2, "H": 2, "i": 4, "q": 8, "d": 8, "16s": 16, "x": 1}
_ZERO_UUID_BYTES = bytes(16)
_ZERO_UUID_STR = str(ZERO_UUID)
_SafeUUID_unknown = uuid.SafeUUID.unknown
_onew = object.__new__
_osetattr = object.__setattr__
_UUID = uuid.UUID


# ---------------------------------------------------------------- runtime helpers used by generated code


def _mk_uuid(b: bytes) -> uuid.UUID:
    """UUID from 16 bytes without UUID.__init__'s argument checks."""
    if b == _ZERO_UUID_BYTES:
        return ZERO_UUID
    u = _onew(_UUID)
    _osetattr(u, "int", int.from_bytes(b, "big"))
    _osetattr(u, "is_safe", _SafeUUID_unknown)
    return u


def _uuid_bytes(v: Any) -> bytes:
    if isinstance(v, uuid.UUID):
        return v.bytes
    if isinstance(v, _BYTES_LIKE) and len(v) == 16:
        return bytes(v)
    if isinstance(v, str):
        return uuid.UUID(v).bytes
    raise ValueError(f"not a uuid: {v!r}")


def _uuid_is_default(x: Any) -> bool:
    return x is None or x == ZERO_UUID or x == _ZERO_UUID_BYTES or x == _ZERO_UUID_STR


_ARRAY_STRUCTS: dict[tuple[str, int], struct.Struct] = {}


def _array_struct(code: str, n: int) -> struct.Struct:
    st = _ARRAY_STRUCTS.get((code, n))
    if st is None:
        st = struct.Struct(f">{n}{code}")
        if n <= 256:
            _ARRAY_STRUCTS[(code, n)] = st
    return st


_SHORT = 16
# per element code: index n -> bound pack/unpack_from of Struct(">{n}{code}"), for n <= _SHORT
_PACKERS = {c: [struct.Struct(f">{n}{c}").pack for n in range(_SHORT + 1)] for c in set(_FIXED.values())}
_UNPACKERS = {c: [struct.Struct(f">{n}{c}").unpack_from for n in range(_SHORT + 1)] for c in set(_FIXED.values())}


def _unpack_array(code: str, n: int, buf: Any, pos: int) -> list[Any]:
    return list(_array_struct(code, n).unpack_from(buf, pos))


def _pack_array(code: str, values: Any) -> bytes:
    return _array_struct(code, len(values)).pack(*values)


def _get(v: Any, name: str, dflt: Any) -> Any:
    if isinstance(v, dict):
        return v.get(name, dflt)
    return getattr(v, name, dflt)


def _too_long(what: str, n: int) -> ValueError:
    return ValueError(f"{what} of length {n} too long")


def _null(what: str) -> ValueError:
    return ValueError(f"null {what} in a non-nullable field")


_I32 = struct.Struct(">i")


def _put_records(w: bytearray, ins: list[tuple[int, Any]], v: Any, flexible: bool, nullable: bool) -> None:
    """Write a records field: length prefix, then the bytes (small) or an out-of-line part."""
    if v is None:
        n = -1 if nullable else 0
        w += uvarint_bytes(n + 1) if flexible else _I32.pack(n)
        return
    items: Sequence[Any]
    if isinstance(v, list):
        n = sum(len(p) for p in v)
        items = v
    else:
        n = len(v)
        items = (v,)
    if n > 0x7FFFFFFF:
        raise _too_long("records", n)
    w += uvarint_bytes(n + 1) if flexible else _I32.pack(n)
    for p in items:
        if isinstance(p, _BYTES_LIKE) and len(p) < BIG_RECORDS:
            w += p
        else:
            ins.append((len(w), p))


_RUNTIME: dict[str, Any] = {
    "_Mal": MalformedMessageError, "_new": object.__new__, "_ruv": read_uvarint, "_uv": uvarint_bytes,
    "_mk_uuid": _mk_uuid, "_ub": _uuid_bytes, "_UUID": uuid.UUID, "_uuid_isdef": _uuid_is_default,
    "_unpack_array": _unpack_array, "_pack_array": _pack_array, "_get": _get, "_too_long": _too_long,
    "_null": _null, "_put_records": _put_records, "_EMPTY": _EMPTY, "_mv": memoryview,
    "_struct_error": struct.error, "_BL": _BYTES_LIKE, "_BIG": BIG_RECORDS, "_Pre": PreEncoded,
}
for _c in set(_FIXED.values()):
    _RUNTIME[f"_PK_{_c if _c.islower() else _c + _c}"] = _PACKERS[_c]
    _RUNTIME[f"_UPK_{_c if _c.islower() else _c + _c}"] = _UNPACKERS[_c]


def _arr_name(prefix: str, code: str) -> str:
    return f"{prefix}_{code if code.islower() else code + code}"


# ---------------------------------------------------------------- generator


def _literal(v: Any) -> str | None:
    """Source text for simple immutable constants, else None."""
    if v is None or isinstance(v, (bool, str)):
        return repr(v)
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, float) and v == v and v not in (float("inf"), float("-inf")):
        return repr(v)
    return None


class _Gen:
    """Accumulates the source of one (message, version) module."""

    def __init__(self, cy: bool = False) -> None:
        #: the Cython flavour (broker.protocol.gen_pyx): the same statements and names, but fixed-width fields, bytes
        #: and strings are read from a C pointer ``cp`` and single bytes from a typed memoryview ``cb``, and written
        #: through ``o``, the prelude's C view of the output bytearray (``_p_*`` writers, ``_C_WRITE``)
        self.cy = cy
        self.lines: list[str] = []
        self.pre: list[str] = []  # helper functions emitted before the main ones
        self.ns: dict[str, Any] = dict(_RUNTIME)
        self._n = 0
        self.ints: set[str] = set()  # C-sized integer locals of the function being emitted (see generate_typed)
        self.dicts: set[str] = set()  # (Cython flavour) locals that are always exactly a dict
        self._consts: dict[Any, str] = {}
        self._structs: dict[str, str] = {}
        self._makers: dict[type, str] = {}
        self._edefaults: dict[int, str] = {}
        self._checkers: dict[tuple[str, tuple[Field, ...]], str] = {}
        # pending run of fixed-width items: (format, var-or-expr, indent, out)
        self.run: list[tuple[str, str | None]] = []
        self.run_ind = 0
        self.run_out = ""
        self.run_post: list[str] = []

    # ---- names and constants

    def var(self, hint: str, c_int: bool = False) -> str:
        """A fresh local name; ``c_int`` when it only ever holds a position, length or count."""
        self._n += 1
        name = f"{hint}_{self._n}"
        if c_int:
            self.ints.add(name)
        return name

    def const(self, obj: Any, hint: str = "K") -> str:
        lit = _literal(obj)
        if lit is not None:
            return lit
        key = (type(obj), id(obj))
        name = self._consts.get(key)
        if name is None:
            name = self._consts[key] = self.var(hint)
            self.ns[name] = obj
        return name

    def struct(self, fmt: str) -> str:
        name = self._structs.get(fmt)
        if name is None:
            name = self._structs[fmt] = self.var("S")
            self.ns[name] = struct.Struct(">" + fmt)
        return name

    @property
    def byte_buf(self) -> str:
        """What single bytes are read from: the memoryview, or (Cython) its typed twin, which reads a C int."""
        return "cb" if self.cy else "buf"

    def emit(self, ind: int, text: str) -> None:
        self.lines.append("    " * ind + text)

    # ---- shared helpers

    def cls(self, name: str, fields: tuple[Field, ...]) -> tuple[type[Message], str]:
        c = struct_class(name, fields)
        return c, self.const(c, "C")

    def edefault(self, f: Field) -> str:
        """Name of the shared stand-in used when an encoded dict/object lacks ``f``."""
        name = self._edefaults.get(id(f))
        if name is None:
            name = self._edefaults[id(f)] = self.const(encode_default(f), "D")
        return name

    def default_expr(self, f: Field) -> str:
        """Expression for a fresh decoded default of ``f`` (matches codec.default_value)."""
        explicit_null = f.has_default and f.default is None
        if f.is_array:
            return "None" if explicit_null else "[]"
        if f.is_struct:
            if explicit_null:
                return "None"
            return self.cls(f.element_type, f.fields)[1] + "()"
        return self.const(default_value(f))

    # ================================================================ decoding

    def dflush(self, ind: int) -> None:
        if not self.run:
            return
        assert ind == self.run_ind, (ind, self.run_ind)
        fmt = "".join(f for f, _ in self.run)
        size = struct.calcsize(">" + fmt)
        targets = [t for f, t in self.run if t is not None]
        lhs = ", ".join(targets) + ("," if len(targets) == 1 else "")
        unpack = f"{self.struct(fmt)}.unpack_from(buf, pos)"  # named in both flavours: names must not shift
        if not self.cy:
            self.emit(ind, f"{lhs} = {unpack}")
        else:
            self.emit(ind, f"if pos + {size} > ln:")
            self.emit(ind + 1, f"raise IndexError('{size} bytes past the end')")
            at = 0
            for code, t in self.run:
                if t is not None:
                    where = f"pos + {at}" if at else "pos"
                    if code == "16s":
                        self.emit(ind, f"{t} = cp[{where}:{where} + 16]")
                    else:
                        self.emit(ind, f"{t} = {_C_READ[code]}(cp + {where})")
                at += _SIZE[code]
        self.emit(ind, f"pos += {size}")
        for line in self.run_post:
            self.emit(ind, line)
        self.run = []
        self.run_post = []

    def dpush(self, ind: int, fmt: str, target: str | None) -> None:
        assert not self.run or self.run_ind == ind, "fixed-width run left open across a block"
        self.run_ind = ind
        self.run.append((fmt, target))

    def read_uvarint(self, ind: int, target: str) -> None:
        # one and two bytes inline (lengths below 16,384: a Produce's record sets, most strings), longer ones
        # through the helper
        self.dflush(ind)
        b = self.byte_buf
        self.emit(ind, f"{target} = {b}[pos]")
        self.emit(ind, f"if {target} < 128:")
        self.emit(ind + 1, "pos += 1")
        self.emit(ind, f"elif {b}[pos + 1] < 128:")
        self.emit(ind + 1, f"{target} = ({target} & 127) | ({b}[pos + 1] << 7)")
        self.emit(ind + 1, "pos += 2")
        self.emit(ind, "else:")
        self.emit(ind + 1, f"{target}, pos = _ruv(buf, pos)")

    def read_length(self, ind: int, flexible: bool, nullable: bool, int16: bool, what: str) -> str:
        """Emit a length read; returns the var holding it (-1 = null, validated)."""
        n = self.var("n", c_int=True)
        if flexible:
            self.read_uvarint(ind, n)
            self.emit(ind, f"{n} -= 1")
            if not nullable:
                self.emit(ind, f"if {n} < 0:")
                self.emit(ind + 1, f"raise _Mal('null {what} in a non-nullable field')")
        else:
            self.dpush(ind, "h" if int16 else "i", n)
            self.dflush(ind)
            cond = f"{n} < 0" if not nullable else f"{n} < -1"
            self.emit(ind, f"if {cond}:")
            self.emit(ind + 1, f"raise _Mal(f'invalid {what} length {{{n}}}')")
        return n

    def dec_sized_body(self, ind: int, n: str, kind: str, target: str) -> None:
        """Given length var ``n`` (-1 = null, already validated), read the value into ``target``."""
        self.emit(ind, f"if {n} < 0:")
        self.emit(ind + 1, f"{target} = None")
        self.emit(ind, "else:")
        e = self.var("e", c_int=True)
        self.emit(ind + 1, f"{e} = pos + {n}")
        self.emit(ind + 1, f"if {e} > ln:")
        self.emit(ind + 2, f"raise _Mal(f'{kind} of {{{n}}} bytes runs past the end')")
        if kind == "string" and self.cy:
            self.emit(ind + 1, f"{target} = cp[pos:{e}].decode('utf-8')")
        elif kind == "string":
            self.emit(ind + 1, f"{target} = str(buf[pos:{e}], 'utf-8')")
        elif kind == "bytes" and self.cy:
            self.emit(ind + 1, f"{target} = cp[pos:{e}]")
        elif kind == "bytes":
            self.emit(ind + 1, f"{target} = bytes(buf[pos:{e}])")
        else:
            self.emit(ind + 1, f"{target} = buf[pos:{e}]")
        self.emit(ind + 1, f"pos = {e}")

    def dec_value(self, ind: int, f: Field, version: int, flexible: bool) -> str:
        """Emit code decoding field ``f`` at ``pos``; returns the var (or expression) holding it."""
        nullable = version in f.nullable
        et = f.element_type
        target = self.var(f.name)
        if f.is_array:
            n = self.read_length(ind, flexible, nullable, False, "array")
            self.emit(ind, f"if {n} < 0:")
            self.emit(ind + 1, f"{target} = None")
            self.emit(ind, "else:")
            empty_ok = f.is_struct and not flexible and not any(version in c.versions for c in f.fields)
            if not empty_ok:
                self.emit(ind + 1, f"if {n} > ln - pos:")
                self.emit(ind + 2, f"raise _Mal(f'array of {{{n}}} elements cannot fit in the buffer')")
            self.dec_array_elems(ind + 1, f, version, flexible, n, target)
            return target
        if f.is_struct:
            if nullable:
                self.dflush(ind)
                m = self.var("m", c_int=True)
                self.emit(ind, f"{m} = {self.byte_buf}[pos]")
                self.emit(ind, f"if {m} == 255:")
                self.emit(ind + 1, "pos += 1")
                self.emit(ind + 1, f"{target} = None")
                self.emit(ind, "else:")
                self.emit(ind + 1, f"if {m} != 1:")
                self.emit(ind + 2, f"raise _Mal(f'bad nullable struct marker {{{m}}}')")
                self.emit(ind + 1, "pos += 1")
                o = self.dec_struct(ind + 1, et, f.fields, version, flexible)
                self.emit(ind + 1, f"{target} = {o}")
                return target
            return self.dec_struct(ind, et, f.fields, version, flexible)
        if et in _FIXED:
            self.dpush(ind, _FIXED[et], target)
            return target
        if et == "uuid":
            raw = self.var("raw")
            self.dpush(ind, "16s", raw)
            self.run_post.append(f"{target} = _mk_uuid({raw})")
            return target
        n = self.read_length(ind, flexible, nullable, et == "string", et)
        self.dec_sized_body(ind, n, et, target)
        return target

    def dec_array_elems(self, ind: int, f: Field, version: int, flexible: bool, n: str, target: str) -> None:
        et = f.element_type
        if et in _FIXED:
            code = _FIXED[et]
            self.emit(ind, f"if {n} <= {_SHORT}:")
            self.emit(ind + 1, f"{target} = list({_arr_name('_UPK', code)}[{n}](buf, pos))")
            self.emit(ind, "else:")
            self.emit(ind + 1, f"{target} = _unpack_array({code!r}, {n}, buf, pos)")
            self.emit(ind, f"pos += {n} * {_SIZE[code]}")
            return
        if f.is_struct and not flexible:
            present = [c for c in f.fields if version in c.versions]
            if present and all(c.type in _FIXED for c in present):
                fmt = "".join(_FIXED[c.type] for c in present)
                size = struct.calcsize(">" + fmt)
                maker = self.maker(et, f.fields, version)
                e = self.var("e", c_int=True)
                self.emit(ind, f"{e} = pos + {n} * {size}")
                self.emit(ind, f"if {e} > ln:")
                self.emit(ind + 1, "raise _Mal('array runs past the end')")
                p = self.var("p")
                self.emit(ind, f"_unp = {self.struct(fmt)}.unpack_from")
                self.emit(ind, f"{target} = [{maker}(*_unp(buf, {p})) for {p} in range(pos, {e}, {size})]")
                self.emit(ind, f"pos = {e}")
                return
        self.emit(ind, f"{target} = []")
        app = self.var("app")
        self.emit(ind, f"{app} = {target}.append")
        self.emit(ind, f"for _ in range({n}):")
        if f.is_struct:
            o = self.dec_struct(ind + 1, et, f.fields, version, flexible)
        elif et == "uuid":
            o = self.var("u")
            e = self.var("e", c_int=True)
            self.emit(ind + 1, f"{e} = pos + 16")
            self.emit(ind + 1, f"if {e} > ln:")
            self.emit(ind + 2, "raise _Mal('uuid past end of buffer')")
            self.emit(ind + 1, f"{o} = _mk_uuid(bytes(buf[pos:{e}]))")
            self.emit(ind + 1, f"pos = {e}")
        else:
            ln_var = self.read_length(ind + 1, flexible, False, et == "string", et)
            o = self.var("x")
            self.dec_sized_body(ind + 1, ln_var, et, o)
        self.dflush(ind + 1)
        self.emit(ind + 1, f"{app}({o})")

    def maker(self, name: str, fields: tuple[Field, ...], version: int) -> str:
        """A positional constructor for the fields present at ``version`` (others get defaults)."""
        c, cname = self.cls(name, fields)
        key = (c, version)
        fn = self._makers.get(key)  # type: ignore[call-overload]
        if fn is None:
            fn = self._makers[key] = self.var("mk")  # type: ignore[index]
            present = [c2.name for c2 in fields if version in c2.versions]
            body = [f"def {fn}({', '.join(present)}):", f"    o = _new({cname})"]
            for fld in fields:
                val = fld.name if fld.name in present else self.default_expr(fld)
                body.append(f"    o.{fld.name} = {val}")
            body.append("    return o")
            self.pre.extend(body)
        return fn

    def dec_struct(self, ind: int, name: str, fields: tuple[Field, ...], version: int, flexible: bool) -> str:
        """Emit inline decoding of one struct; returns the var holding the new object."""
        _, cname = self.cls(name, fields)
        values: list[str] = []
        tagged: list[tuple[int, Field, bool, str]] = []
        for f in fields:
            ff = field_flexible(f, version, flexible)
            if is_tagged(f, version):
                assert f.tag is not None
                v = self.var(f.name)
                tagged.append((f.tag, f, ff, v))
                values.append(v)
            elif version in f.versions:
                values.append(self.dec_value(ind, f, version, ff))
            else:
                values.append(self.default_expr(f))
        if flexible:
            self.dec_tags(ind, tagged, version)
        else:
            for _, f, _, v in tagged:
                self.emit_after_flush(ind, f"{v} = {self.default_expr(f)}")
        self.dflush(ind)
        o = self.var("o")
        self.emit(ind, f"{o} = _new({cname})")
        for f, v in zip(fields, values):
            self.emit(ind, f"{o}.{f.name} = {v}")
        return o

    def dec_tags(self, ind: int, tagged: list[tuple[int, Field, bool, str]], version: int) -> None:
        for _, f, _, v in tagged:
            self.emit_after_flush(ind, f"{v} = {self.default_expr(f)}")
        self.dflush(ind)
        self.emit(ind, f"if {self.byte_buf}[pos] == 0:")
        self.emit(ind + 1, "pos += 1")
        self.emit(ind, "else:")
        i1 = ind + 1
        tc, tag = self.var("tc", c_int=True), self.var("tag", c_int=True)
        size, end = self.var("sz", c_int=True), self.var("end", c_int=True)
        self.emit(i1, f"{tc}, pos = _ruv(buf, pos)")
        self.emit(i1, f"for _ in range({tc}):")
        i2 = i1 + 1
        self.emit(i2, f"{tag}, pos = _ruv(buf, pos)")
        self.emit(i2, f"{size}, pos = _ruv(buf, pos)")
        self.emit(i2, f"{end} = pos + {size}")
        self.emit(i2, f"if {end} > ln:")
        self.emit(i2 + 1, "raise _Mal('tagged field runs past the end')")
        first = True
        for t, f, ff, v in sorted(tagged, key=lambda x: x[0]):
            self.emit(i2, f"{'if' if first else 'elif'} {tag} == {t}:")
            first = False
            r = self.dec_value(i2 + 1, f, version, ff)
            self.dflush(i2 + 1)
            if r != v:
                self.emit(i2 + 1, f"{v} = {r}")
            self.emit(i2 + 1, f"if pos != {end}:")
            self.emit(i2 + 2, f"raise _Mal('tagged field {t} size mismatch')")
        self.emit(i2, f"pos = {end}")

    def emit_after_flush(self, ind: int, line: str) -> None:
        self.dflush(ind)
        self.emit(ind, line)

    # ================================================================ encoding

    def eflush(self) -> None:
        if not self.run:
            return
        ind, out = self.run_ind, self.run_out
        if len(self.run) == 1 and self.run[0][0] == "x":
            self.emit(ind, "_p_u8(&o, 0)" if self.cy else f"{out}.append(0)")
        elif self.cy:
            self.struct("".join(f for f, _ in self.run))  # named in both flavours: names must not shift
            for code, a in self.run:
                if a is None:
                    self.emit(ind, "_p_u8(&o, 0)")
                elif a in self.ints:
                    self.emit(ind, f"{_C_WRITE_INT[code]}(&o, {a})")
                else:
                    self.emit(ind, f"{_C_WRITE[code]}(&o, {a})")
        else:
            fmt = "".join(f for f, _ in self.run)
            args = ", ".join(a for _, a in self.run if a is not None)
            self.emit(ind, f"{out} += {self.struct(fmt)}.pack({args})")
        self.run = []

    def epush(self, ind: int, out: str, fmt: str, expr: str | None) -> None:
        assert not self.run or (self.run_ind, self.run_out) == (ind, out), "run left open across a block"
        self.run_ind, self.run_out = ind, out
        self.run.append((fmt, expr))

    def eemit(self, ind: int, text: str) -> None:
        """Emit a line after writing out any pending fixed-width run."""
        self.eflush()
        self.emit(ind, text)

    def write_len(self, ind: int, out: str, flexible: bool, int16: bool, n: str) -> None:
        """Write length var ``n`` (-1 = null)."""
        if flexible and self.cy:
            self.eemit(ind, f"_p_uv(&o, {n} + 1)")
        elif flexible:
            self.eemit(ind, f"if {n} < 127:")
            self.emit(ind + 1, f"{out}.append({n} + 1)")
            self.emit(ind, "else:")
            self.emit(ind + 1, f"{out} += _uv({n} + 1)")
        else:
            self.epush(ind, out, "h" if int16 else "i", n)

    def enc_sized(self, ind: int, out: str, kind: str, v: str, flexible: bool, nullable: bool) -> None:
        """string or bytes value in var ``v``."""
        d, n = self.var("d"), self.var("n", c_int=True)
        limit = 0x7FFF if (kind == "string" and not flexible) else 0x7FFFFFFF
        if self.cy:  # length, check and copy in one call (_p_string, _p_bytes); mode: 0 int16, 1 int32, 2 uvarint
            mode = 2 if flexible else (0 if kind == "string" else 1)
            self.eemit(ind, f"if {v} is None:")
            if nullable:
                self.emit(ind + 1, f"{n} = _p_null(&o, {mode})")
            else:
                self.emit(ind + 1, f"raise _null('{kind}')")
            self.emit(ind, "else:")
            self.emit(ind + 1, f"{n} = _p_{kind}(&o, {v}, {mode}, {limit})")
            if not flexible:  # the Python flavour packs the length with a struct of its own: name it here too
                self.struct("h" if kind == "string" else "i")
            return
        self.eemit(ind, f"if {v} is None:")
        if nullable:
            self.emit(ind + 1, f"{d} = b''")
            self.emit(ind + 1, f"{n} = -1")
        else:
            self.emit(ind + 1, f"raise _null('{kind}')")
        self.emit(ind, "else:")
        if kind == "string":
            self.emit(ind + 1, f"{d} = {v}.encode('utf-8')")
        else:
            self.emit(ind + 1, f"{d} = {v}")
        self.emit(ind + 1, f"{n} = len({d})")
        self.emit(ind + 1, f"if {n} > {limit}:")
        self.emit(ind + 2, f"raise _too_long('{kind}', {n})")
        self.write_len(ind, out, flexible, kind == "string", n)
        self.eemit(ind, f"{out} += {d}")

    def enc_value(self, ind: int, out: str, f: Field, version: int, flexible: bool, v: str) -> None:
        nullable = version in f.nullable
        et = f.element_type
        if f.is_array:
            n = self.var("n", c_int=True)
            self.eemit(ind, f"if {v} is None:")
            if nullable:
                self.emit(ind + 1, f"{n} = -1")
            else:
                self.emit(ind + 1, "raise _null('array')")
            self.emit(ind, "else:")
            self.emit(ind + 1, f"{n} = len({v})")
            self.write_len(ind, out, flexible, False, n)
            self.eflush()
            self.emit(ind, f"if {n} > 0:")
            self.enc_array_elems(ind + 1, out, f, version, flexible, v)
            return
        if f.is_struct:
            if nullable:
                self.eemit(ind, f"if {v} is None:")
                self.emit(ind + 1, "_p_u8(&o, 255)" if self.cy else f"{out}.append(255)")
                self.emit(ind, "else:")
                self.emit(ind + 1, "_p_u8(&o, 1)" if self.cy else f"{out}.append(1)")
                self.enc_struct(ind + 1, out, et, f.fields, version, flexible, v)
                self.eflush()
            else:
                self.enc_struct(ind, out, et, f.fields, version, flexible, v)
            return
        if et in _FIXED:
            self.epush(ind, out, _FIXED[et], v)
        elif et == "uuid":
            self.epush(ind, out, "16s", f"({v}.bytes if {self.cls_of(v)} is _UUID else _ub({v}))")
        elif et in ("string", "bytes"):
            self.enc_sized(ind, out, et, v, flexible, nullable)
        else:  # records
            if out != "w":
                raise NotImplementedError("records inside a tagged field")
            self.enc_records(ind, v, flexible, nullable)

    def enc_records(self, ind: int, v: str, flexible: bool, nullable: bool) -> None:
        """Single bytes-like or FileSlice inline; None and lists of parts through _put_records."""
        n = self.var("n", c_int=True)
        self.eemit(ind, f"if {v} is None or {self.cls_of(v)} is list:")
        if self.cy:  # _put_records appends to w: hand it w at its true length, then take it back
            self.emit(ind + 1, "_w_close(&o)")
        self.emit(ind + 1, f"_put_records(w, ins, {v}, {flexible}, {nullable})")
        if self.cy:
            self.emit(ind + 1, "_w_open(&o, w)")
        self.emit(ind, "else:")
        self.emit(ind + 1, f"{n} = len({v})")
        self.emit(ind + 1, f"if {n} > 0x7FFFFFFF:")
        self.emit(ind + 2, f"raise _too_long('records', {n})")
        self.write_len(ind + 1, "w", flexible, False, n)
        self.eflush()
        self.emit(ind + 1, f"if {n} < _BIG and isinstance({v}, _BL):")
        self.emit(ind + 2, f"_p_raw(&o, {v})" if self.cy else f"w += {v}")
        self.emit(ind + 1, "else:")
        self.emit(ind + 2, f"ins.append(({'o.n' if self.cy else 'len(w)'}, {v}))")

    def enc_array_elems(self, ind: int, out: str, f: Field, version: int, flexible: bool, v: str) -> None:
        et = f.element_type
        if et in _FIXED:
            code = _FIXED[et]
            if self.cy:
                self.eemit(ind, f"_p_array(&o, {v}, {ord(code)})")
                return
            self.eemit(ind, f"if len({v}) <= {_SHORT}:")
            self.emit(ind + 1, f"{out} += {_arr_name('_PK', code)}[len({v})](*{v})")
            self.emit(ind, "else:")
            self.emit(ind + 1, f"{out} += _pack_array({code!r}, {v})")
            return
        if et == "records":
            raise NotImplementedError("arrays of records")
        e = self.var("e")
        self.eemit(ind, f"for {e} in {v}:")
        if f.is_struct:
            self.emit(ind + 1, f"if {self.cls_of(e)} is _Pre:")  # see codec.PreEncoded
            self.emit(ind + 2, f"_p_raw(&o, {e}.data)" if self.cy else f"{out} += {e}.data")
            self.emit(ind + 1, "else:")
            before = len(self.lines)
            self.enc_struct(ind + 2, out, et, f.fields, version, flexible, e)
            self.eflush()
            if len(self.lines) == before:  # a struct with nothing to write at this version
                self.emit(ind + 2, "pass")
        elif et == "uuid":
            self.epush(ind + 1, out, "16s", f"_ub({e})")
        else:
            self.enc_sized(ind + 1, out, et, e, flexible, False)
        self.eflush()

    def enc_struct(self, ind: int, out: str, name: str, fields: tuple[Field, ...], version: int,
                   flexible: bool, x: str) -> None:
        _, cname = self.cls(name, fields)
        regular: list[tuple[Field, bool, str]] = []
        tagged: list[tuple[int, Field, bool, str]] = []
        reads: list[tuple[str, str, str]] = []  # (var, field name, encode default expr)
        for f in fields:
            ff = field_flexible(f, version, flexible)
            if is_tagged(f, version):
                assert f.tag is not None
                v = self.var(f.name)
                tagged.append((f.tag, f, ff, v))
            elif version in f.versions:
                v = self.var(f.name)
                regular.append((f, ff, v))
            else:
                continue
            reads.append((v, f.name, self.edefault(f)))
        if reads:
            self.eemit(ind, f"if {self.cls_of(x)} is {cname}:")
            for v, fname, _ in reads:
                self.emit(ind + 1, f"{v} = {x}.{fname}")
            self.emit(ind, f"elif {x} is None or isinstance({x}, dict):")
            g = self.var("g")
            if self.cy:  # a C-typed dict: .get is one PyDict lookup, no method call
                self.dicts.add(g)
                self.emit(ind + 1, f"{g} = <dict>({x} if {x} is not None else _EMPTY)")
            else:
                self.emit(ind + 1, f"{g} = ({x} if {x} is not None else _EMPTY).get")
            for v, fname, d in reads:
                self.emit(ind + 1, f"{v} = {g}.get({fname!r}, {d})" if self.cy else f"{v} = {g}({fname!r}, {d})")
            self.emit(ind, "else:")
            for v, fname, d in reads:
                self.emit(ind + 1, f"{v} = getattr({x}, {fname!r}, {d})")
        for f, ff, v in regular:
            self.enc_value(ind, out, f, version, ff, v)
        if not flexible:
            return
        if not tagged:
            self.epush(ind, out, "x", None)
            return
        tb, tk = self.var("tb"), self.var("tk", c_int=True)
        if self.cy:
            self.enc_tagged_cy(ind, version, tb, tk, tagged)
            return
        self.eemit(ind, f"{tb} = None")
        self.emit(ind, f"{tk} = 0")
        for t, f, ff, v in sorted(tagged, key=lambda x: x[0]):
            self.emit(ind, f"if not ({self.is_default_expr(f, version, v)}):")
            tbuf = self.var("t")
            self.emit(ind + 1, f"{tbuf} = bytearray()")
            self.enc_value(ind + 1, tbuf, f, version, ff, v)
            self.eflush()
            self.emit(ind + 1, f"if {tb} is None:")
            self.emit(ind + 2, f"{tb} = bytearray()")
            self.emit(ind + 1, f"{tb} += _uv({t})")
            self.emit(ind + 1, f"{tb} += _uv(len({tbuf}))")
            self.emit(ind + 1, f"{tb} += {tbuf}")
            self.emit(ind + 1, f"{tk} += 1")
        self.emit(ind, f"if {tb} is None:")
        self.emit(ind + 1, f"{out}.append(0)")
        self.emit(ind, "else:")
        self.emit(ind + 1, f"{out} += _uv({tk})")
        self.emit(ind + 1, f"{out} += {tb}")

    def enc_tagged_cy(self, ind: int, version: int, tb: str, tk: str, tagged: list[tuple[int, Field, bool, str]]) -> None:
        """The Cython flavour of the tagged-field section: count the fields to write first, then encode each
        straight into ``o`` behind its tag, with a one-byte size slot that _t_close widens when the value is
        longer than 127 bytes. Allocates the same names, in the same order, as the Python flavour."""
        self.eemit(ind, f"{tk} = 0")
        body: list[str] = []
        for t, f, ff, v in sorted(tagged, key=lambda x: x[0]):
            flag = f"{tk}_{t}"
            self.ints.add(flag)
            self.emit(ind, f"{flag} = 0 if ({self.is_default_expr(f, version, v)}) else 1")
            self.emit(ind, f"{tk} += {flag}")
            tbuf = self.var("t")
            self.ints.add(tbuf)
            outer, self.lines = self.lines, []
            self.emit(ind, f"if {flag}:")
            self.emit(ind + 1, f"_p_uv(&o, {t})")
            self.emit(ind + 1, f"{tbuf} = _t_open(&o)")
            self.enc_value(ind + 1, tbuf, f, version, ff, v)
            self.eflush()
            self.emit(ind + 1, f"_t_close(&o, {tbuf})")
            body += self.lines
            self.lines = outer
        self.emit(ind, f"_p_uv(&o, {tk})")
        self.lines += body

    def cls_of(self, x: str) -> str:
        """The class of ``x``: Cython reads ``type(x)`` as the object's type pointer, ``x.__class__`` as an attribute."""
        return f"type({x})" if self.cy else f"{x}.__class__"

    def is_default_expr(self, f: Field, version: int, x: str) -> str:
        """Expression: is value ``x`` the field's default (so a tagged field is not written)?"""
        explicit_null = f.has_default and f.default is None
        if f.is_array:
            return f"{x} is None" if explicit_null else f"not {x}"
        if f.is_struct:
            if explicit_null:
                return f"{x} is None"
            return f"{x} is {self.edefault(f)} or {self.struct_checker(f, version)}({x})"
        if f.type == "uuid":
            return f"_uuid_isdef({x})"
        if f.type == "records":
            return f"{x} is None"
        d = default_value(f)
        if d is None:
            return f"{x} is None"
        return f"{x} == {self.const(d)}"

    def struct_checker(self, f: Field, version: int) -> str:
        key = (f.element_type + f"@{version}", f.fields)
        name = self._checkers.get(key)
        if name is None:
            name = self._checkers[key] = self.var("isdef")
            d = self.edefault(f)
            conds = []
            for c in f.fields:
                if version in c.versions:
                    sub = f"_get(x, {c.name!r}, {self.edefault(c)})"
                    conds.append(f"({self.is_default_expr(c, version, sub)})")
            body = " and ".join(conds) or "True"
            self.pre.extend([f"def {name}(x):", f"    return x is None or x is {d} or ({body})"])
        return name


def generate(schema: MessageSchema, version: int) -> tuple[str, dict[str, Any]]:
    """Source text of the module for (schema, version) and the namespace it must be run in."""
    source, ns, _ = generate_typed(schema, version)
    return source, ns


def generate_typed(schema: MessageSchema, version: int,
                   cy: bool = False) -> tuple[str, dict[str, Any], dict[str, set[str]]]:
    """``generate`` (``cy``: its Cython flavour, same names), plus per function ('encode', 'decode') the local
    variables that only ever hold integers of C size (positions, lengths, counts), and ('encode_dicts') the
    encoder's locals that hold a dict: the Cython twin (broker.protocol.gen_pyx) declares them ``cdef``."""
    flexible = version in schema.flexible
    g = _Gen(cy)
    if cy:  # writes into the C view ``o`` of bytearray w (gen_pyx's prelude: _w_open grows it, _w_close trims it)
        g.emit(0, "def encode(bytearray w, list ins, msg):")
        g.emit(1, "_w_open(&o, w)")
        g.emit(1, "try:")
    else:
        g.emit(0, "def encode(w, ins, msg):")
    before = len(g.lines)
    g.enc_struct(2 if cy else 1, "w", schema.name, schema.fields, version, flexible, "msg")
    g.eflush()
    if cy:
        if len(g.lines) == before:  # nothing to write at this version
            g.emit(2, "pass")
        g.emit(1, "finally:")
        g.emit(2, "_w_close(&o)")
    g.emit(1, "return None")
    enc_lines = g.lines
    enc_ints = g.ints
    g.lines = []
    g.ints = set()
    g.emit(0, "def decode(data, Py_ssize_t pos=0):" if cy else "def decode(data, pos=0):")
    g.emit(1, "if data.__class__ is bytes:")
    g.emit(2, "buf = _mv(data)")
    g.emit(1, "else:")
    g.emit(2, "buf = data if data.__class__ is _mv else _mv(data)")
    g.emit(2, "if buf.format != 'B' or buf.ndim != 1:")
    g.emit(3, "buf = buf.cast('B')")
    g.emit(1, "ln = len(buf)")
    if cy:
        g.ints.add("ln")
        g.emit(1, "cdef const unsigned char[:] cb = buf")
        g.emit(1, "cdef const unsigned char *cp = &cb[0] if ln else _NOTHING")
    g.emit(1, "try:")
    o = g.dec_struct(2, schema.name, schema.fields, version, flexible)
    g.dflush(2)
    g.emit(1, "except (_struct_error, IndexError, ValueError, OverflowError, MemoryError) as exc:")
    g.ns["_what"] = f"{schema.name} v{version}"  # a name, not a literal: versions with the same layout share text
    g.emit(2, "raise _Mal(f'{_what}: {exc}') from None")
    g.emit(1, f"return {o}, pos")
    header = f"# generated by broker.protocol.gen for {schema.name} v{version}\n"
    source = header + "\n".join(g.pre + [""] + enc_lines + [""] + g.lines) + "\n"
    return source, g.ns, {"encode": enc_ints, "decode": g.ints, "encode_dicts": g.dicts}


def generate_element_encoder(schema: MessageSchema, path: tuple[str, ...], version: int) -> tuple[str, dict[str, Any]]:
    """Source of ``encode(w, ins, element)`` for one element of the struct array at ``path`` (as it is
    encoded inside a ``schema`` message of ``version``), and the namespace it must be run in."""
    fields, name = schema.fields, schema.name
    for step in path:
        f = next((x for x in fields if x.name == step), None)
        if f is None or not (f.is_array and f.is_struct) or version not in f.versions:
            raise ValueError(f"{schema.name}: {'.'.join(path)} is not an array of structs at v{version}")
        fields, name = f.fields, f.element_type
    g = _Gen()
    g.emit(0, "def encode(w, ins, msg):")
    g.enc_struct(1, "w", name, fields, version, version in schema.flexible, "msg")
    g.eflush()
    g.emit(1, "return None")
    header = f"# generated by broker.protocol.gen for {schema.name} {'.'.join(path)} v{version}\n"
    return header + "\n".join(g.pre + [""] + g.lines) + "\n", g.ns


def compile_element_encoder(schema: MessageSchema, path: tuple[str, ...], version: int) -> Callable[..., None]:
    """``encode(w, ins, element)`` of one element of the struct array at ``path`` (see codec.element_encoder)."""
    source, ns = generate_element_encoder(schema, path, version)
    filename = f"<kafka-codec {schema.name} {'.'.join(path)} v{version}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), ns)  # noqa: S102 - source generated from our own schemas
    return ns["encode"]


def run_source(schema: MessageSchema, version: int, source: str, ns: dict[str, Any]) -> tuple[Callable[..., None],
                                                                                          Callable[..., Any]]:
    """(encode, decode) of ``generate``'s output, run as Python (the pure twin of the compiled codecs)."""
    filename = f"<kafka-codec {schema.name} v{version}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), ns)  # noqa: S102 - source generated from our own schemas
    return ns["encode"], ns["decode"]


def compile_codec(schema: MessageSchema, version: int) -> tuple[Callable[..., None], Callable[..., Any], str]:
    """(encode, decode, source) for (schema, version), as Python."""
    source, ns = generate(schema, version)
    encode, decode = run_source(schema, version, source, ns)
    return encode, decode, source
