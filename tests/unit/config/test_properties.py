from broker.config.properties import parse_properties


def test_separators_and_comments() -> None:
    text = "# comment\n! also comment\n  a=1\nb:2\nc 3\nd  =  4  \ne\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "4  ", "e": ""}


def test_continuation_lines_drop_leading_whitespace() -> None:
    text = "listeners=PLAINTEXT://a:1,\\\n    SSL://b:2\nnext=x\n"
    assert parse_properties(text) == {"listeners": "PLAINTEXT://a:1,SSL://b:2", "next": "x"}


def test_even_backslashes_do_not_continue() -> None:
    assert parse_properties("a=x\\\\\nb=y\n") == {"a": "x\\", "b": "y"}


def test_escapes() -> None:
    text = "key\\ with\\=odd\\:chars = tab\\there\\u0041\\n\n"
    assert parse_properties(text) == {"key with=odd:chars": "tab\thereA\n"}


def test_comment_marker_inside_value_is_kept() -> None:
    assert parse_properties("a=b#c\n") == {"a": "b#c"}


def test_later_duplicates_win() -> None:
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


def test_continuation_at_end_of_file() -> None:
    assert parse_properties("a=1,\\") == {"a": "1,"}


from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config.properties import format_properties

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_text.filter(lambda k: k != ""), _text, max_size=6))
def test_format_then_parse_round_trips(props: dict) -> None:
    assert parse_properties(format_properties(props)) == props


def test_only_java_line_terminators_split_lines() -> None:
    assert parse_properties("a=x\fy\u2028z\r\nb=1\rc=2") == {"a": "x\fy\u2028z", "b": "1", "c": "2"}


def test_a_file_that_is_not_utf8_is_read_as_java_reads_it(tmp_path) -> None:
    """Java's Properties.load(InputStream) reads ISO-8859-1: a Latin-1 byte is a character, never a decoding error
    (which would end broker start-up with a traceback)."""
    from broker.config.properties import load_properties
    f = tmp_path / "server.properties"
    f.write_bytes(b"a=caf\xe9\nb=\xc3\xa9t\xc3\xa9\n")
    assert load_properties(str(f)) == {"a": "caf\u00e9", "b": "\u00c3\u00a9t\u00c3\u00a9"}
    f.write_bytes("a=café\n".encode())
    assert load_properties(str(f)) == {"a": "café"}
