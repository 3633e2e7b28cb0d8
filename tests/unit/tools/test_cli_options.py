"""The joptsimple-style option parser and help table of tools/cli (tools.cli.options)."""
from __future__ import annotations

import pytest

from tools.cli.options import CommandError, HelpOrVersion, OptionParser, UsageError, format_table


def parser() -> OptionParser:
    p = OptionParser("A tool.")
    p.arg("bootstrap-server", "REQUIRED: The server to connect to.", "server to connect to")
    p.arg("partitions", "Partition count.", "# of partitions", "Integer")
    p.arg("property", "A property.", "prop")
    p.arg("state", "A state filter.", optional=True)
    p.arg("timeout", "Timeout.", "ms", "Long", default=5000, optional=True)
    p.flag("list", "List.")
    p.refuse("zookeeper", "the tools talk to brokers only", "ZooKeeper connect string.", described_as="urls")
    return p


def test_space_and_equals_forms_and_repeated_values() -> None:
    o = parser().parse(["--bootstrap-server", "h:1", "--partitions=3", "--property", "a=b", "--property=c=d",
                        "--list", "stray"])
    assert o.value("bootstrap-server") == "h:1"
    assert o.value("partitions") == 3
    assert o.values("property") == ["a=b", "c=d"]
    assert o.has("list") and not o.has("state")
    assert o.positional == ["stray"]
    assert [n for n, _ in o.sequence] == ["bootstrap-server", "partitions", "property", "property", "list"]


def test_a_required_argument_takes_the_next_token_even_if_it_starts_with_a_dash() -> None:
    assert parser().parse(["--property", "-x"]).value("property") == "-x"


def test_optional_argument_and_its_default() -> None:
    p = parser()
    o = p.parse(["--state", "--list"])
    assert o.has("state") and not o.has_argument("state") and o.value("state") is None
    assert p.parse(["--state", "stable"]).value("state") == "stable"
    assert p.parse(["--timeout"]).value("timeout") == 5000      # present without a value: the default
    assert p.parse([]).value("timeout") == 5000
    assert p.parse(["--timeout", "-5"]).value("timeout") == -5  # a negative number is an argument, not an option


@pytest.mark.parametrize("argv,message", [
    (["--bogus"], "bogus is not a recognized option"),
    (["--lis"], "lis is not a recognized option"),                      # no abbreviations, as Kafka's parsers
    (["--bootstrap-server"], "Option bootstrap-server requires an argument"),
    (["--partitions", "x"], "Cannot parse argument 'x' of option partitions"),
    (["--partitions", "3000000000"], "Cannot parse argument '3000000000' of option partitions"),
    (["--list=yes"], "Option list does not take an argument"),
])
def test_usage_errors(argv: list, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parser().parse(argv)


def test_two_values_where_one_is_expected() -> None:
    o = parser().parse(["--bootstrap-server", "a:1", "--bootstrap-server", "b:1"])
    with pytest.raises(UsageError, match="Found multiple arguments for option bootstrap-server"):
        o.value("bootstrap-server")


def test_a_refused_option_names_its_reason() -> None:
    with pytest.raises(CommandError) as e:
        parser().parse(["--zookeeper", "zk:2181"])
    assert str(e.value) == "--zookeeper is not supported by this broker's tools: the tools talk to brokers only"


def test_help_and_version() -> None:
    with pytest.raises(HelpOrVersion) as h:
        parser().parse(["--list", "--help"])
    assert (h.value.stream, h.value.exit_code) == ("stderr", 1)  # Kafka 3.9: usage on stderr, exit status 1
    lines = h.value.text.splitlines()
    assert lines[0] == "A tool."
    assert lines[1].startswith("Option") and "Description" in lines[1] and lines[2].startswith("------")
    assert any(line.startswith("--bootstrap-server <String: server to") for line in lines)
    assert any(line.startswith("--state [String]") for line in lines)
    assert "Not supported by this broker's tools" in " ".join(line.strip() for line in lines)
    with pytest.raises(HelpOrVersion) as v:
        parser().parse(["--version"])
    assert (v.value.stream, v.value.exit_code) == ("stdout", 0) and "Apache Kafka 3.9" in v.value.text


def test_invalid_combination_and_required() -> None:
    p = parser()
    o = p.parse(["--list", "--partitions", "1"])
    with pytest.raises(UsageError, match=r'Option "\[partitions\]" can\'t be used with option "\[list\]"'):
        p.check_invalid(o, "partitions", ["list"])
    with pytest.raises(UsageError, match=r'Missing required argument "\[bootstrap-server\]"'):
        p.check_required(o, "bootstrap-server")


def test_table_layout_is_joptsimples() -> None:
    """Kafka 3.9's kafka-delete-records.sh --help, rebuilt from its option specs, byte for byte."""
    p = OptionParser("This tool helps to delete records of the given partitions down to the specified offset.")
    p.arg("bootstrap-server", "REQUIRED: The server to connect to.", "server(s) to use for bootstrapping")
    p.arg("command-config", "A property file containing configs to be passed to Admin Client.",
          "command config property file path")
    p.arg("offset-json-file", "REQUIRED: The JSON file with offset per partition. The format to use is:\n"
                              "{\"partitions\":\n  [{\"topic\": \"foo\", \"partition\": 1, \"offset\": 1}],\n"
                              " \"version\":1\n}", "Offset json file path")
    expected = (
        "Option                                 Description                           \n"
        "------                                 -----------                           \n"
        "--bootstrap-server <String: server(s)  REQUIRED: The server to connect to.   \n"
        "  to use for bootstrapping>                                                  \n"
        "--command-config <String: command      A property file containing configs to \n"
        "  config property file path>             be passed to Admin Client.          \n"
        "--help                                 Print usage information.              \n"
        "--offset-json-file <String: Offset     REQUIRED: The JSON file with offset   \n"
        "  json file path>                        per partition. The format to use is:\n"
        "                                       {\"partitions\":                        \n"
        "                                         [{\"topic\": \"foo\", \"partition\": 1,   \n"
        "                                         \"offset\": 1}],                      \n"
        "                                        \"version\":1                          \n"
        "                                       }                                     \n"
        "--version                              Display Kafka version.                \n")
    assert p.help_table() == expected


def test_table_wraps_long_words_after_dots_and_hyphens() -> None:
    out = format_table([("--a-rather-long-option-name <String: what it means>",
                         "valid: follower.replication.throttled.replicas and --bootstrap-server options")])
    lines = out.splitlines()
    assert len({len(line) for line in lines}) == 1 and len(lines[0]) <= 80  # every line padded to one width
    assert lines[0].rstrip().endswith("valid: follower.replication.throttled.")
    assert lines[1].strip() == "what it means>                        replicas and --bootstrap-server"
    assert lines[2].strip() == "options"
