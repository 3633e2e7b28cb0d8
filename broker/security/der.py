"""The two DER primitives the hand-written readers need (JKS keys, certificate subjects): one element's bounds,
and an OBJECT IDENTIFIER's dotted text."""
from __future__ import annotations


def read_tlv(der: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, value start, value end) of the DER element at ``pos``; ValueError if it does not fit."""
    if pos + 2 > len(der):
        raise ValueError("truncated DER")
    tag, length = der[pos], der[pos + 1]
    pos += 2
    if length & 0x80:
        n = length & 0x7F
        if n == 0 or n > 4 or pos + n > len(der):
            raise ValueError("unsupported DER length")
        length = int.from_bytes(der[pos:pos + n], "big")
        pos += n
    if pos + length > len(der):
        raise ValueError("DER element overruns its buffer")
    return tag, pos, pos + length


def oid_text(content: bytes) -> str:
    """Dotted form of an OBJECT IDENTIFIER's content octets ("" for none)."""
    arcs, value = [], 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if not arcs:
        return ""
    first = min(arcs[0] // 40, 2)
    return ".".join(str(a) for a in [first, arcs[0] - 40 * first] + arcs[1:])


__all__ = ["read_tlv", "oid_text"]
