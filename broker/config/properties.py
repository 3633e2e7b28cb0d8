"""Java .properties parsing (java.util.Properties.load semantics), so Kafka's own files load unchanged.

Rules: a logical line may continue over physical lines ending in an odd number of backslashes (leading whitespace of
the continuation is dropped); lines whose first non-blank character is '#' or '!' are comments; the key ends at the
first unescaped '=', ':' or whitespace, after which blanks and at most one '='/':' are skipped; escapes \\t \\n \\r
\\f \\uXXXX are decoded and any other escaped character stands for itself. Later keys win.
"""
from __future__ import annotations

import re

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_BLANK = " \t\f"


def _logical_lines(text: str) -> list[str]:
    out: list[str] = []
    current: str | None = None
    for raw in re.split(r"\r\n|\r|\n", text):  # Java's line terminators only (not str.splitlines')
        line = raw.lstrip(_BLANK) if current is not None else raw
        if current is None:
            stripped = line.lstrip(_BLANK)
            if not stripped or stripped[0] in "#!":
                continue
            line = stripped
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            current = (current or "") + line[:-1]
            continue
        out.append((current or "") + line)
        current = None
    if current is not None:
        out.append(current)
    return out


def _unescape(s: str) -> str:
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "u" and i + 6 <= len(s):
                try:
                    out.append(chr(int(s[i + 2:i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    raise ValueError(f"Malformed \\uxxxx encoding in {s!r}") from None
            out.append(_ESCAPES.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    text = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in text):  # \uXXXX surrogate pairs -> one character
        text = text.encode("utf-16", "surrogatepass").decode("utf-16")
    return text


def _split(line: str) -> tuple[str, str]:
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _BLANK:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _BLANK:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _BLANK:
            j += 1
    return key, line[j:]


def parse_properties(text: str) -> dict[str, str]:
    """Parse .properties text into an ordered dict (later duplicates win, as in Java)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        props[_unescape(key)] = _unescape(value)
    return props


def load_properties(path: str) -> dict[str, str]:
    # Java reads .properties as ISO-8859-1; Kafka files are ASCII, and UTF-8 is the friendlier choice here (a file
    # that is not UTF-8 is read as Java reads it, never a decoding error).
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("iso-8859-1")
    return parse_properties(text)


def _escape(s: str, is_key: bool) -> str:
    out = []
    for i, c in enumerate(s):
        if c == "\\":
            out.append("\\\\")
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif c in "=:#!" or (c == " " and (is_key or i == 0)):
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.extend(f"\\u{b:04x}" for b in _utf16_units(c))
        else:
            out.append(c)
    return "".join(out)


def _utf16_units(c: str) -> list[int]:
    data = c.encode("utf-16-be")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


def format_properties(props: dict[str, str]) -> str:
    """Write props as .properties text that parse_properties (and Java) reads back unchanged."""
    return "".join(f"{_escape(k, True)}={_escape(v, False)}\n" for k, v in props.items())
