"""Hypothesis strategies that build random valid messages (plain dicts) from our schemas."""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from broker.protocol.codec import default_value
from broker.protocol.schema import Field

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def plain_default(field: Field) -> Any:
    """The field's default as decode().to_dict() shows it."""
    v = default_value(field)
    return v.to_dict() if hasattr(v, "to_dict") else v


def _primitive(ftype: str) -> st.SearchStrategy[Any]:
    if ftype in _INT_RANGES:
        lo, hi = _INT_RANGES[ftype]
        return st.integers(lo, hi)
    if ftype == "bool":
        return st.booleans()
    if ftype == "float64":
        return st.floats(allow_nan=False)
    if ftype == "string":
        return st.text(max_size=12)
    if ftype in ("bytes", "records"):
        return st.binary(max_size=24)
    if ftype == "uuid":
        return st.uuids()
    raise AssertionError(ftype)


def field_strategy(field: Field, version: int) -> st.SearchStrategy[Any]:
    tagged = field.tag is not None and version in field.tagged_versions
    if version not in field.versions and not tagged:
        return st.just(plain_default(field))
    nullable = version in field.nullable
    if field.is_struct:
        elem: st.SearchStrategy[Any] = struct_strategy(field.fields, version)
    else:
        elem = _primitive(field.element_type)
    if field.is_array:
        value: st.SearchStrategy[Any] = st.lists(elem, max_size=3)
    else:
        value = elem
    if nullable:
        value = st.one_of(st.none(), value)
    return value


def struct_strategy(fields: tuple[Field, ...], version: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({f.name: field_strategy(f, version) for f in fields})
