"""A reader for the java.util.Properties text format, the format of MM2's ``mm2.properties``.

It follows ``Properties.load``: ``#``/``!`` comment lines, ``=``, ``:`` or whitespace
between key and value, backslash line continuation (leading whitespace of the next
line dropped), escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\<any>`` = ``<any>``, last
assignment wins. It only turns text into strings; it never interprets keys.

A file is read as ``Properties.load(InputStream)`` (MM2's ``Utils.loadProps``) reads it: bytes as
ISO-8859-1, anything beyond it written as ``\\uXXXX``. A file that holds control bytes (NUL and
the like, never in a text file) is refused, not parsed into garbage keys.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from sparkmirror.errors import ConfigError

__all__ = ["parse_properties", "parse_properties_with_lines", "read_properties_file"]

log = logging.getLogger(__name__)

# C0 controls other than tab, line feed, form feed and carriage return: a text file has none.
_BINARY = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")

_WHITESPACE = " \t\f"
_NEWLINE = re.compile(r"\r\n|\r|\n")
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")


def _ends_with_odd_backslashes(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _unescape(text: str, *, where: str) -> str:
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:  # a lone backslash at the very end of the input is dropped, as Java does
            break
        c = text[i]
        if c == "u":
            digits = text[i + 1 : i + 5]
            if len(digits) != 4 or not set(digits) <= _HEX:
                raise ConfigError(f"{where}: malformed \\uXXXX escape (expected 4 hex digits)")
            out.append(chr(int(digits, 16)))
            i += 5
            continue
        out.append(_SIMPLE_ESCAPES.get(c, c))
        i += 1
    result = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in result):
        # \uD83D\uDE00 pairs are UTF-16 surrogates in Java; join them into one code point.
        result = result.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return result


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:":
            return line[:i], line[i + 1 :].lstrip(_WHITESPACE)
        if c in _WHITESPACE:
            rest = line[i:].lstrip(_WHITESPACE)
            if rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip(_WHITESPACE)
            return line[:i], rest
        i += 1
    return line, ""


def parse_properties_with_lines(text: str, *, source: str) -> tuple[dict[str, str], dict[str, int]]:
    """Parse ``text``; return the properties and, per key, the line its (last) assignment starts on."""
    props: dict[str, str] = {}
    lines_of: dict[str, int] = {}
    natural = _NEWLINE.split(text)
    i = 0
    while i < len(natural):
        lineno = i + 1
        line = natural[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue  # comment lines never continue, even when they end with a backslash
        while _ends_with_odd_backslashes(line):
            line = line[:-1]
            if i >= len(natural):
                break
            line += natural[i].lstrip(_WHITESPACE)
            i += 1
        raw_key, raw_value = _split_key_value(line)
        where = f"{source}:{lineno}"
        key = _unescape(raw_key, where=where)
        props[key] = _unescape(raw_value, where=f"{where} ({key})")
        lines_of[key] = lineno
    return props, lines_of


def parse_properties(text: str, *, source: str) -> dict[str, str]:
    """Parse java.util.Properties text; ``source`` (a file name) prefixes error messages."""
    _check_text(text, source=source)
    return parse_properties_with_lines(text, source=source)[0]


def _check_text(text: str, *, source: str) -> None:
    """Refuse text with control characters (a binary file, a wrong file), naming line and column."""
    bad = _BINARY.search(text)
    if bad is not None:
        line = text.count("\n", 0, bad.start()) + 1
        column = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
        raise ConfigError(
            f"{source}:{line}: not a properties file: control character {ord(bad.group()):#04x} at column "
            f"{column} (binary content?); expected text in ISO-8859-1 with \\uXXXX escapes, as MM2 reads it"
        )


def read_properties_file(path: Path) -> dict[str, str]:
    """The properties of the file at ``path``, read as MM2 reads ``mm2.properties`` (ISO-8859-1).

    Non-ASCII bytes that form UTF-8 are read as ISO-8859-1 characters, as MM2 reads them (``é``
    written in UTF-8 becomes ``Ã©``); a warning names the first such line, as the fix (``\\u00e9``)
    is the operator's to make.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        raise ConfigError(
            f"{path}:1: starts with a UTF-8 byte order mark, which MM2 reads as part of the first key; "
            "save the file without it"
        )
    text = data.decode("iso-8859-1")
    if any(b >= 0x80 for b in data):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            pass  # true ISO-8859-1 text: read exactly as MM2 does
        else:
            line = data[: next(i for i, b in enumerate(data) if b >= 0x80)].count(b"\n") + 1
            log.warning(
                "%s:%d: non-ASCII UTF-8 text read as ISO-8859-1, as MM2 reads properties files; "
                "write non-ASCII characters as \\uXXXX escapes for both to read what you meant",
                path,
                line,
            )
    return parse_properties(text, source=str(path))
