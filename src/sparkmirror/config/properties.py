"""A reader for the java.util.Properties text format, the format of MM2's ``mm2.properties``.

It follows ``Properties.load``: ``#``/``!`` comment lines, ``=``, ``:`` or whitespace
between key and value, backslash line continuation (leading whitespace of the next
line dropped), escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\<any>`` = ``<any>``, last
assignment wins. It only turns text into strings; it never interprets keys.
"""

from __future__ import annotations

import re

from sparkmirror.errors import ConfigError

__all__ = ["parse_properties", "parse_properties_with_lines"]

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
    return parse_properties_with_lines(text, source=source)[0]
