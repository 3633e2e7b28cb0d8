"""The principal Kafka derives from a TLS client certificate.

Kafka takes the subject as Java's ``X500Principal.getName()`` prints it (RFC 2253 form, with Java's own choices of
keywords and escapes), runs it through ``ssl.principal.mapping.rules`` and prefixes ``User:``. ACLs name principals by
that exact string, so the DN rendering below follows Java character for character.
"""
from __future__ import annotations

import re
from typing import Callable

from broker.security.der import oid_text, read_tlv

ANONYMOUS = "User:ANONYMOUS"
DEFAULT_RULES = "DEFAULT"

# The only attribute types Java's RFC 2253 output names by keyword; all others print as dotted OIDs.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# ASN.1 string tags Java renders as text; any other value prints as #hex. Java (checked against 17) decodes the
# content bytes of all of them as UTF-8, even BMPString and T61String, replacing malformed input with U+FFFD.
_STRING_TAGS = frozenset({
    0x0C,  # UTF8String
    0x13,  # PrintableString
    0x14,  # T61String
    0x16,  # IA5String
    0x1B,  # GeneralString
    0x1E,  # BMPString
})
# Java escapes these with a backslash anywhere in a value (RFC 2253's set plus '=' and '#').
_ESCAPED = set(',=+<>#;"\\')


class NoMatchingRule(ValueError):
    """No ``ssl.principal.mapping.rules`` entry matched the DN; Kafka then fails the authentication."""


# --- DER ----------------------------------------------------------------------------------------------------------


_tlv = read_tlv


def _children(der: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, header start, value start, value end) of each element in der[start:end]."""
    out = []
    pos = start
    while pos < end:
        tag, vstart, vend = _tlv(der, pos)
        out.append((tag, pos, vstart, vend))
        pos = vend
    return out


_oid = oid_text


def _subject_span(cert_der: bytes) -> tuple[int, int]:
    """Span (header included) of tbsCertificate.subject: after [0] version, serial, signature, issuer, validity."""
    tag, start, end = _tlv(cert_der, 0)
    if tag != 0x30:
        raise ValueError("not a certificate")
    tag, tstart, tend = _tlv(cert_der, start)
    if tag != 0x30:
        raise ValueError("not a certificate")
    fields = _children(cert_der, tstart, tend)
    if fields and fields[0][0] == 0xA0:
        fields = fields[1:]
    if len(fields) < 5 or fields[4][0] != 0x30:
        raise ValueError("certificate has no subject")
    return fields[4][1], fields[4][3]


# --- RFC 2253 rendering -------------------------------------------------------------------------------------------


def distinguished_name_rfc2253(cert_der: bytes) -> str:
    """The certificate's subject exactly as Java's ``X500Principal.getName()`` prints it (what Kafka maps)."""
    try:
        start, end = _subject_span(cert_der)
        return name_rfc2253(cert_der[start:end])
    except (ValueError, IndexError) as e:
        raise ValueError(f"cannot read the certificate subject: {e}") from None


def name_rfc2253(name_der: bytes) -> str:
    """RFC 2253 text of a DER X.501 Name: RDNs last to first, joined by ',', multi-valued RDNs by '+'."""
    tag, start, end = _tlv(name_der, 0)
    if tag != 0x30:
        raise ValueError("Name is not a SEQUENCE")
    rdns = []
    for rtag, _, rstart, rend in _children(name_der, start, end):
        if rtag != 0x31:
            raise ValueError("RDN is not a SET")
        avas = []
        for atag, _, astart, aend in _children(name_der, rstart, rend):
            if atag != 0x30:
                raise ValueError("attribute is not a SEQUENCE")
            parts = _children(name_der, astart, aend)
            if len(parts) != 2 or parts[0][0] != 0x06:
                raise ValueError("malformed attribute")
            oid = _oid(name_der[parts[0][2]:parts[0][3]])
            vtag, vhead, vstart, vend = parts[1]
            avas.append(_ava(oid, vtag, name_der[vhead:vend], name_der[vstart:vend]))
        rdns.append("+".join(avas))  # in encoded order, as Java keeps them
    return ",".join(reversed(rdns))


def _ava(oid: str, tag: int, encoded: bytes, content: bytes) -> str:
    keyword = _RFC2253_KEYWORDS.get(oid)
    if keyword is None or tag not in _STRING_TAGS:
        return f"{keyword or oid}=#{encoded.hex()}"
    return f"{keyword}={_escape(content.decode('utf-8', errors='replace'))}"


def _escape(value: str) -> str:
    """Java's escaping: backslash before each special, ``\\00`` for NUL, then every leading/trailing space or CR."""
    escaped = "".join("\\" + c if c in _ESCAPED else ("\\00" if c == "\x00" else c) for c in value)
    lead = 0
    while lead < len(escaped) and escaped[lead] in " \r":
        lead += 1
    trail = len(escaped) - 1
    while trail >= 0 and escaped[trail] in " \r":
        trail -= 1
    return "".join("\\" + c if (i < lead or i > trail) else c for i, c in enumerate(escaped))


# --- ssl.principal.mapping.rules ----------------------------------------------------------------------------------

# Kafka's rule grammar: DEFAULT, or RULE:pattern/replacement/[LU] where pattern and replacement may hold commas and
# escaped characters (so "\/" for a slash) but no bare '/'; anything else is caught by the last branch and refused.
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


class _Rule:
    """One mapping rule: full-match the DN, then Java's replaceAll with the replacement, then the case flag."""

    def __init__(self, pattern: str | None = None, replacement: str = "", case: str = "") -> None:
        self.source_pattern, self.replacement, self.case = pattern, replacement, case
        if pattern is None:
            return
        try:
            self.regex = re.compile(_java_regex(pattern))
        except re.error as e:
            raise ValueError(f"Invalid rule pattern {pattern!r}: {e}") from None
        self.expand = _java_replacement(replacement, self.regex)

    def apply(self, dn: str) -> str | None:
        if self.source_pattern is None:
            return dn
        if self.regex.fullmatch(dn) is None:
            return None
        result = self.regex.sub(self.expand, dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.source_pattern is None:
            return "DEFAULT"
        return f"RULE:{self.source_pattern}/{self.replacement}" + (f"/{self.case}" if self.case else "")


class SslPrincipalMapper:
    """Kafka's ``ssl.principal.mapping.rules``: the first rule that matches the DN names the principal."""

    def __init__(self, rules_text: str | None = DEFAULT_RULES) -> None:
        text = DEFAULT_RULES if rules_text is None else rules_text
        self.rules = [rule for rule in map(_parse_rule, _split_rules(text)) if rule is not None]

    def principal_name(self, dn: str) -> str:
        """The mapped name; raises NoMatchingRule when no rule applies (an empty rule list matches nothing)."""
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{', '.join(map(str, self.rules))}]")

    def __repr__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"


def ssl_principal(cert_der: bytes | None, mapper: SslPrincipalMapper | None = None) -> str:
    """``User:<mapped DN>`` for a client certificate, ``User:ANONYMOUS`` when the client sent none."""
    if cert_der is None:
        return ANONYMOUS
    return "User:" + (mapper or SslPrincipalMapper()).principal_name(distinguished_name_rfc2253(cert_der))


def _split_rules(text: str) -> list[str]:
    return [m.group(1) for m in _RULE_SPLITTER.finditer(text.strip())]


def _parse_rule(rule: str) -> _Rule | None:
    m = _RULE_PARSER.match(rule)
    if m is None:
        raise ValueError(f"Invalid rule: {rule}")
    if m.end() != len(rule):
        raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[m.end():]}`")
    if m.group(1) is not None:
        return _Rule()
    if m.group(2) is not None:
        return _Rule(m.group(2), m.group(3), m.group(4))
    return None  # empty entries (",,") are ignored


def _java_regex(pattern: str) -> str:
    """Adapt the Java regex constructs Python spells differently: named groups and the \\z / \\Z anchors."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append({"z": r"\Z", "Z": r"(?=\n?\Z)"}.get(nxt, c + nxt))
            i += 2
            continue
        if pattern.startswith("(?<", i) and i + 3 < len(pattern) and pattern[i + 3] not in "=!":
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _java_replacement(replacement: str, regex: re.Pattern[str]) -> Callable[[re.Match[str]], str]:
    """Compile a Java replacement string (``$1``, ``${name}``, ``\\x`` escapes) into a re.sub callback.

    Like Kafka, a ``$n`` naming a group the pattern lacks is kept as literal text (``$12`` with one group is
    group 1 then ``2``, as in Java).
    """
    groups = regex.groups
    parts: list[tuple[bool, str | int]] = []  # (is_group, literal text or group key)
    literal: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\":
            if i + 1 >= len(replacement):
                raise ValueError(f"Invalid rule replacement {replacement!r}: trailing backslash")
            literal.append(replacement[i + 1])
            i += 2
            continue
        if c != "$":
            literal.append(c)
            i += 1
            continue
        if replacement.startswith("${", i):
            close = replacement.find("}", i)
            name = replacement[i + 2:close] if close > 0 else ""
            if not name or name not in regex.groupindex:
                raise ValueError(f"Invalid rule replacement {replacement!r}: no group named {name!r}")
            parts += [(False, "".join(literal)), (True, name)]
            literal = []
            i = close + 1
            continue
        j = i + 1
        if j >= len(replacement) or not replacement[j].isdigit():
            raise ValueError(f"Invalid rule replacement {replacement!r}: illegal group reference")
        number = int(replacement[j])
        j += 1
        while j < len(replacement) and replacement[j].isdigit() and number * 10 + int(replacement[j]) <= groups:
            number = number * 10 + int(replacement[j])
            j += 1
        if number > groups:
            if groups == 0:
                raise ValueError(f"Invalid rule replacement {replacement!r}: the pattern has no group {number}")
            literal.append("$")  # Kafka keeps a reference to a missing group as text
            i += 1
            continue
        parts += [(False, "".join(literal)), (True, number)]
        literal = []
        i = j
    parts.append((False, "".join(literal)))

    def expand(match: re.Match[str]) -> str:
        return "".join((match.group(key) or "") if is_group else key for is_group, key in parts)  # type: ignore[misc]

    return expand
