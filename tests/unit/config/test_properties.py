"""java.util.Properties text format."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkmirror.config.properties import parse_properties, parse_properties_with_lines, read_properties_file
from sparkmirror.errors import ConfigError


def parse(text: str) -> dict[str, str]:
    return parse_properties(text, source="test.properties")


def test_separators() -> None:
    assert parse("a=1\nb:2\nc 3\nd\t4\ne = 5\nf : 6\ng   =   7") == {
        "a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6", "g": "7",
    }  # fmt: skip


def test_whitespace_then_separator_char_once() -> None:
    assert parse("a = = b") == {"a": "= b"}
    assert parse("a  :x") == {"a": "x"}
    assert parse("a==b") == {"a": "=b"}


def test_comments_and_blank_lines() -> None:
    text = "# comment\n! other\n   # indented comment\n\n   \nkey=value # not a comment\n"
    assert parse(text) == {"key": "value # not a comment"}


def test_comment_line_ending_in_backslash_does_not_continue() -> None:
    assert parse("# comment \\\nkey=value") == {"key": "value"}


def test_leading_whitespace_and_trailing_kept() -> None:
    assert parse("   key = value  ") == {"key": "value  "}


def test_key_without_value() -> None:
    assert parse("lonely\nempty=") == {"lonely": "", "empty": ""}


def test_line_continuation() -> None:
    text = "fruits = apple, \\\n         banana, \\\n    cherry\nnext=1"
    assert parse(text) == {"fruits": "apple, banana, cherry", "next": "1"}


def test_even_backslashes_do_not_continue() -> None:
    assert parse("path=C:\\\\\nnext=1") == {"path": "C:\\", "next": "1"}


def test_continuation_at_end_of_file() -> None:
    assert parse("a=b\\") == {"a": "b"}


def test_continued_line_that_looks_like_a_comment_is_value() -> None:
    assert parse("a=1\\\n  # 2") == {"a": "1# 2"}


def test_escapes() -> None:
    assert parse(r"a=tab\there\nnew\rret\fff") == {"a": "tab\there\nnew\rret\fff"}
    assert parse(r"a=\u0041\u00e9") == {"a": "Aé"}
    assert parse(r"a=\q\\") == {"a": "q\\"}
    assert parse(r"emoji=\uD83D\uDE00") == {"emoji": "\U0001f600"}


def test_escaped_separators_in_key() -> None:
    assert parse(r"my\=key\:x\ y=v") == {"my=key:x y": "v"}
    assert parse(r"A->B.enabled=true") == {"A->B.enabled": "true"}


def test_malformed_unicode_escape() -> None:
    with pytest.raises(ConfigError) as err:
        parse("ok=1\nbad=\\u12G4")
    assert "test.properties:2" in str(err.value)
    assert "\\uXXXX" in str(err.value)


def test_last_assignment_wins_and_line_numbers() -> None:
    props, lines = parse_properties_with_lines("a=1\n\nb=2\na=3\n", source="x")
    assert props == {"a": "3", "b": "2"}
    assert lines == {"a": 4, "b": 3}


def test_line_endings() -> None:
    assert parse("a=1\r\nb=2\rc=3\n") == {"a": "1", "b": "2", "c": "3"}


@given(
    st.dictionaries(
        st.text(alphabet="abcdefghij.->_", min_size=1, max_size=12),
        st.text(alphabet="abc xyz,.*=:#!\\", max_size=20),
        max_size=8,
    )
)
def test_round_trip_with_escaped_writer(props: dict[str, str]) -> None:
    def esc(s: str, key: bool) -> str:
        out = s.replace("\\", "\\\\").replace("=", "\\=").replace(":", "\\:")
        if key:
            out = out.replace(" ", "\\ ")
        elif out.startswith(" "):
            out = "\\" + out
        return out.replace("#", "\\#").replace("!", "\\!")

    text = "\n".join(f"{esc(k, True)}={esc(v, False)}" for k, v in props.items())
    assert parse(text) == props


# -- files, read as MM2 reads them ------------------------------------------------------------


def test_file_is_read_as_iso_8859_1(tmp_path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_bytes(b"topics = caf\xe9, na\\u00efve\n")
    assert read_properties_file(path) == {"topics": "café, naïve"}


def test_utf8_file_is_read_as_mm2_reads_it_with_a_warning(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "mm2.properties"
    path.write_bytes("a = 1\ntopics = café\n".encode())
    assert read_properties_file(path)["topics"] == "cafÃ©"
    assert any(f"{path}:2" in r.getMessage() and "\\uXXXX" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "data", [b"\x00\x01\x02binary", b"clusters = A\n\x89PNG\r\n\x1a\n", "clusters=A".encode("utf-16")]
)
def test_binary_file_is_refused_with_line_and_column(tmp_path, data: bytes) -> None:
    path = tmp_path / "mm2.properties"
    path.write_bytes(data)
    with pytest.raises(ConfigError, match=r"not a properties file: control character 0x.. at column \d+") as exc:
        read_properties_file(path)
    assert str(path) in str(exc.value)


def test_utf8_byte_order_mark_is_refused(tmp_path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_bytes(b"\xef\xbb\xbfclusters = A, B\n")
    with pytest.raises(ConfigError, match="byte order mark"):
        read_properties_file(path)


def test_unreadable_file_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        read_properties_file(tmp_path / "missing.properties")
