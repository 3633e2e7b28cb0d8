"""Option parsing as Kafka's command-line tools do it (joptsimple), and their help table.

Kafka's tools accept ``--option value`` and ``--option=value``, no abbreviations, options in any order; an option
given twice keeps every value (``values``) and one asked for a single value must have exactly one. Tokens that
are not options are ignored, as Kafka's tools ignore them. ``--help`` prints the tool's one-line summary and the
option table on stderr and exits 1, ``--version`` prints the version and exits 0 (Kafka 3.9's behaviour).

The table has joptsimple's layout (80 columns, options sorted by name, ``--name <Type: meaning>`` for a required
argument, ``[Type: meaning]`` for an optional one, descriptions wrapped with a two-space indent and ``(default:
x)`` appended), so a reader of Kafka's documentation finds the same shape. An option Kafka's tool has but this
one cannot honour is still listed (so every Kafka flag is known), and using it prints one line: ``--xyz is not
supported by this broker's tools: <reason>``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, NoReturn, Optional, Sequence

from broker import KAFKA_VERSION, __version__

__all__ = ["CommandError", "UsageError", "HelpOrVersion", "OptionSpec", "OptionParser", "Options", "format_table",
           "version_line"]

_OVERALL_WIDTH = 80
_COLUMN_SEPARATOR = 2
_INDENT = 2
_INT_RANGE = {"Integer": (-2 ** 31, 2 ** 31 - 1), "Long": (-2 ** 63, 2 ** 63 - 1), "Short": (-2 ** 15, 2 ** 15 - 1)}


class UsageError(Exception):
    """A bad command line: the message, then the tool's option table, on stderr; exit status 1."""


class CommandError(Exception):
    """The command could not be carried out: the message alone (no usage) on ``stream``; exit status 1."""

    def __init__(self, message: str, stream: str = "stderr", exit_code: int = 1) -> None:
        super().__init__(message)
        self.stream = stream
        self.exit_code = exit_code


class HelpOrVersion(Exception):
    """``--help`` or ``--version`` was given: print ``text`` on ``stream`` and exit with ``exit_code``."""

    def __init__(self, text: str, stream: str, exit_code: int) -> None:
        super().__init__(text)
        self.text = text
        self.stream = stream
        self.exit_code = exit_code


def version_line() -> str:
    """What ``--version`` prints: this project's version and the Kafka release whose tools it mirrors."""
    return f"{__version__} (Apache Kafka {KAFKA_VERSION} compatible)"


@dataclass
class OptionSpec:
    """One option: ``argument`` is "none" (a flag), "required" or "optional"; ``refused`` holds the reason when
    this tool knows the option from Kafka's but cannot honour it."""

    name: str
    description: str
    argument: str = "none"
    value_type: str = "String"
    described_as: str = ""
    defaults: List[str] = field(default_factory=list)
    refused: Optional[str] = None

    def cell(self) -> str:
        """The option column of the help table."""
        text = f"--{self.name}"
        if self.argument != "none":
            inner = self.value_type + (f": {self.described_as}" if self.described_as else "")
            text += f" <{inner}>" if self.argument == "required" else f" [{inner}]"
        return text

    def description_cell(self) -> str:
        text = self.description
        if self.refused is not None:
            text = (text + " " if text else "") + f"Not supported by this broker's tools: {self.refused}"
        if self.defaults:
            text += f" (default: {', '.join(self.defaults)})"
        return text

    def convert(self, raw: str) -> Any:
        """The typed value of one argument (Integer/Long/Short/Double checked like Java's valueOf)."""
        if self.value_type in _INT_RANGE:
            lo, hi = _INT_RANGE[self.value_type]
            try:
                v = int(raw.strip() if raw.strip() == raw else "x")
            except ValueError:
                raise UsageError(f"Cannot parse argument '{raw}' of option {self.name}") from None
            if not lo <= v <= hi:
                raise UsageError(f"Cannot parse argument '{raw}' of option {self.name}")
            return v
        if self.value_type == "Double":
            try:
                return float(raw)
            except ValueError:
                raise UsageError(f"Cannot parse argument '{raw}' of option {self.name}") from None
        return raw


class Options:
    """The parsed command line: which options were given and their (typed) arguments."""

    def __init__(self, parser: "OptionParser", given: Dict[str, List[Optional[str]]], positional: List[str],
                 sequence: Optional[List[tuple]] = None) -> None:
        self._parser = parser
        self._given = given
        self.positional = positional
        #: every (option, raw argument) in command-line order, for tools whose meaning depends on it
        self.sequence: List[tuple] = list(sequence or [])

    def has(self, name: str) -> bool:
        self._parser.spec(name)
        return name in self._given

    def given(self) -> List[str]:
        """Names of the options on the command line, in first-seen order."""
        return list(self._given)

    def values(self, name: str) -> List[Any]:
        """Every argument given to the option (converted), else its defaults."""
        spec = self._parser.spec(name)
        raw = [v for v in self._given.get(name, []) if v is not None]
        if not raw:  # absent, or an optional argument left out: the defaults, as joptsimple gives them
            raw = list(spec.defaults)
        return [spec.convert(v) for v in raw]

    def value(self, name: str, default: Any = None) -> Any:
        """The option's single argument (or its default, or ``default``); two arguments are an error."""
        vals = self.values(name)
        if len(vals) > 1:
            raise UsageError(f"Found multiple arguments for option {name}, but you asked for only one")
        return vals[0] if vals else default

    def has_argument(self, name: str) -> bool:
        """For an option with an optional argument: whether one was given."""
        return any(v is not None for v in self._given.get(name, []))


class OptionParser:
    """The options of one tool, declared in Kafka's terms; ``parse`` applies joptsimple's rules."""

    def __init__(self, summary: str, with_help_and_version: bool = True) -> None:
        self.summary = summary
        self._specs: Dict[str, OptionSpec] = {}
        if with_help_and_version:
            self.flag("help", "Print usage information.")
            self.flag("version", "Display Kafka version.")

    # ---------------------------------------------------------------------------------------------- declaring
    def _add(self, spec: OptionSpec) -> str:
        assert spec.name not in self._specs, spec.name
        self._specs[spec.name] = spec
        return spec.name

    def flag(self, name: str, description: str) -> str:
        return self._add(OptionSpec(name, description))

    def arg(self, name: str, description: str, described_as: str = "", value_type: str = "String",
            default: Optional[Any] = None, optional: bool = False) -> str:
        """An option with a required (``optional=False``) or optional argument."""
        defaults = [] if default is None else [str(d) for d in (default if isinstance(default, list) else [default])]
        return self._add(OptionSpec(name, description, "optional" if optional else "required", value_type,
                                    described_as, defaults))

    def refuse(self, name: str, reason: str, description: str = "", argument: str = "required",
               described_as: str = "", value_type: str = "String") -> str:
        """An option of Kafka's tool that this one does not honour; using it fails with ``reason``."""
        return self._add(OptionSpec(name, description, argument, value_type, described_as, refused=reason))

    def spec(self, name: str) -> OptionSpec:
        return self._specs[name]

    def names(self) -> List[str]:
        return sorted(self._specs)

    # ---------------------------------------------------------------------------------------------- parsing
    def parse(self, argv: Sequence[str]) -> Options:
        """Parse ``argv``; raises UsageError for unknown options and missing or unparsable arguments,
        CommandError for a refused option, HelpOrVersion for ``--help``/``--version``."""
        given: Dict[str, List[Optional[str]]] = {}
        positional: List[str] = []
        sequence: List[tuple] = []
        args = list(argv)
        i = 0
        while i < len(args):
            token = args[i]
            i += 1
            if token == "--":
                positional.extend(args[i:])
                break
            if not token.startswith("-") or token == "-":
                positional.append(token)
                continue
            body = token[2:] if token.startswith("--") else token[1:]
            name, eq, inline = body.partition("=")
            spec = self._specs.get(name)
            if spec is None:
                raise UsageError(f"{name} is not a recognized option")
            if spec.argument == "none":
                if eq:
                    raise UsageError(f"Option {name} does not take an argument")
                value: Optional[str] = None
            elif eq:
                value = inline
            elif spec.argument == "required":
                if i >= len(args):
                    raise UsageError(f"Option {name} requires an argument")
                value = args[i]
                i += 1
            else:  # optional argument: the next token unless it looks like an option
                if i < len(args) and not (args[i].startswith("-") and not _is_number(args[i])):
                    value = args[i]
                    i += 1
                else:
                    value = None
            given.setdefault(name, []).append(value)
            sequence.append((name, value))
            if value is not None:
                spec.convert(value)
        for name in given:
            spec = self._specs[name]
            if spec.refused is not None:
                raise CommandError(f"--{name} is not supported by this broker's tools: {spec.refused}")
        if "help" in given and "help" in self._specs:
            raise HelpOrVersion(self.summary + "\n" + self.help_table(), "stderr", 1)
        if "version" in given and "version" in self._specs:
            raise HelpOrVersion(version_line() + "\n", "stdout", 0)
        return Options(self, given, positional, sequence)

    # ---------------------------------------------------------------------------------------------- errors
    def usage_error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def check_required(self, opts: Options, *names: str) -> None:
        """Kafka's CommandLineUtils.checkRequiredArgs."""
        for name in names:
            if not opts.has(name):
                raise UsageError(f'Missing required argument "[{name}]"')

    def check_invalid(self, opts: Options, used: str, invalid: Sequence[str]) -> None:
        """Kafka's CommandLineUtils.checkInvalidArgs: ``used`` cannot be combined with any of ``invalid``."""
        if opts.has(used):
            for other in invalid:
                if opts.has(other):
                    raise UsageError(f'Option "[{used}]" can\'t be used with option "[{other}]"')

    # ---------------------------------------------------------------------------------------------- help
    def help_table(self) -> str:
        rows = [(s.cell(), s.description_cell()) for s in sorted(self._specs.values(), key=lambda s: s.name)]
        return format_table([("Option", "Description"), ("------", "-----------")] + rows)


def _is_number(token: str) -> bool:
    try:
        float(token)
        return True
    except ValueError:
        return False


# -------------------------------------------------------------------------------------------------- the table
def format_table(rows: Sequence[tuple[str, str]], overall_width: int = _OVERALL_WIDTH,
                 separator: int = _COLUMN_SEPARATOR) -> str:
    """joptsimple's two-column layout: widths from the widest cells (the option column at most half the line),
    cells wrapped to them, then the widths recomputed from the wrapped pieces and every line padded."""
    def widths(cells: Sequence[tuple[str, str]]) -> tuple[int, int]:
        ow = min((overall_width - separator) // 2, max((len(o) for o, _ in cells), default=0))
        dw = min(overall_width - ow - separator, max((len(d) for _, d in cells), default=0))
        return ow, dw

    ow, dw = widths(rows)
    fitted: List[tuple[str, str]] = []
    for option, description in rows:
        opts, descs = _pieces(option, ow), _pieces(description, dw)
        for k in range(max(len(opts), len(descs))):
            fitted.append((opts[k] if k < len(opts) else "", descs[k] if k < len(descs) else ""))
    ow, dw = widths(fitted)
    return "".join(o.ljust(ow) + " " * separator + d.ljust(dw) + "\n" for o, d in fitted)


def _pieces(raw: str, width: int) -> List[str]:
    out: List[str] = []
    for line in raw.strip().split("\n"):
        out.extend(_wrap(line, width))
    return out


def _wrap(line: str, width: int) -> List[str]:
    pieces: List[str] = []
    current = ""
    for word in _words(line):
        if len(current) + len(word) > width:
            pieces.append(current.rstrip())
            current = " " * _INDENT + word
        else:
            current += word
    if current:
        pieces.append(current)
    return pieces


def _words(line: str) -> List[str]:
    """Split at line-break opportunities, roughly as Java's line BreakIterator: after spaces, after ``-``/``.``
    before a letter, after ``:``/``,`` inside a word (not ``/``), and before ``(`` that follows a letter."""
    words: List[str] = []
    start = 0
    n = len(line)
    for i, ch in enumerate(line):
        nxt = line[i + 1] if i + 1 < n else ""
        prev = line[i - 1] if i > 0 else " "
        brk = False
        if not nxt:
            brk = False
        elif ch.isspace():
            brk = not nxt.isspace()
        elif ch in "-." and nxt.isalpha() and not prev.isspace():
            brk = True
        elif ch in ":," and nxt.isalnum() and not prev.isspace():  # not after "/": "(bytes/sec)" stays whole
            brk = True
        elif nxt == "(" and ch.isalpha():
            brk = True
        if brk:
            words.append(line[start:i + 1])
            start = i + 1
    if start < n:
        words.append(line[start:])
    return words

