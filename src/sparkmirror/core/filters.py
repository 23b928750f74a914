"""Topic, consumer-group and topic-config filters with MirrorMaker 2's semantics.

A filter is a list of include regexes and a list of exclude regexes; a name is
selected when it fully matches an include regex and no exclude regex (Java's
``Matcher.matches()``, i.e. Python's ``re.fullmatch``). The defaults are MM2's
(Kafka 4.x). Patterns are written in Java syntax in the config file; the common
subset (classes, quantifiers, alternation, escapes) means the same in Python.
This module must never import pyspark or a Kafka client.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sparkmirror.errors import ConfigError

__all__ = [
    "DEFAULT_CONFIG_PROPERTIES_EXCLUDE",
    "DEFAULT_GROUPS_EXCLUDE",
    "DEFAULT_GROUPS_INCLUDE",
    "DEFAULT_TOPICS_EXCLUDE",
    "DEFAULT_TOPICS_INCLUDE",
    "ConfigPropertyFilter",
    "GroupFilter",
    "TopicFilter",
    "compile_pattern_list",
]

#: MM2's default for ``topics``: every topic.
DEFAULT_TOPICS_INCLUDE: tuple[str, ...] = (".*",)
#: MM2's default for ``topics.exclude``: internal topics, legacy ``.replica`` topics, ``__`` topics.
DEFAULT_TOPICS_EXCLUDE: tuple[str, ...] = (r".*[\-\.]internal", r".*\.replica", r"__.*")
#: MM2's default for ``groups``: every group.
DEFAULT_GROUPS_INCLUDE: tuple[str, ...] = (".*",)
#: MM2's default for ``groups.exclude``: console consumers, Connect workers, ``__`` groups.
DEFAULT_GROUPS_EXCLUDE: tuple[str, ...] = (r"console-consumer-.*", r"connect-.*", r"__.*")
#: MM2's default for ``config.properties.exclude``: topic configs that are cluster-specific.
DEFAULT_CONFIG_PROPERTIES_EXCLUDE: tuple[str, ...] = (
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.type",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)


def compile_pattern_list(patterns: Sequence[str], *, key: str) -> re.Pattern[str] | None:
    """Compile a list of regexes into one alternation; None for an empty list (matches nothing).

    Each regex is compiled on its own first so that an error names the offending one
    and the config ``key`` it came from.
    """
    cleaned = [p.strip() for p in patterns if p.strip()]
    for pattern in cleaned:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"{key}: invalid regex {pattern!r}: {exc}", key=key) from None
    if not cleaned:
        return None
    return re.compile("|".join(f"(?:{p})" for p in cleaned))


def _fullmatch(pattern: re.Pattern[str] | None, name: str) -> bool:
    return pattern is not None and pattern.fullmatch(name) is not None


class _IncludeExcludeFilter:
    """Selects names that fully match an include regex and no exclude regex."""

    def __init__(
        self,
        include: Sequence[str],
        exclude: Sequence[str],
        *,
        include_key: str,
        exclude_key: str,
    ) -> None:
        self.include: tuple[str, ...] = tuple(include)
        self.exclude: tuple[str, ...] = tuple(exclude)
        self._include = compile_pattern_list(self.include, key=include_key)
        self._exclude = compile_pattern_list(self.exclude, key=exclude_key)

    def matches(self, name: str) -> bool:
        """True when ``name`` is included and not excluded."""
        return _fullmatch(self._include, name) and not _fullmatch(self._exclude, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(include={list(self.include)!r}, exclude={list(self.exclude)!r})"


class TopicFilter(_IncludeExcludeFilter):
    """MM2's DefaultTopicFilter: keys ``topics`` and ``topics.exclude``."""

    def __init__(
        self,
        include: Sequence[str] = DEFAULT_TOPICS_INCLUDE,
        exclude: Sequence[str] = DEFAULT_TOPICS_EXCLUDE,
        *,
        include_key: str = "topics",
        exclude_key: str = "topics.exclude",
    ) -> None:
        super().__init__(include, exclude, include_key=include_key, exclude_key=exclude_key)


class GroupFilter(_IncludeExcludeFilter):
    """MM2's DefaultGroupFilter: keys ``groups`` and ``groups.exclude``."""

    def __init__(
        self,
        include: Sequence[str] = DEFAULT_GROUPS_INCLUDE,
        exclude: Sequence[str] = DEFAULT_GROUPS_EXCLUDE,
        *,
        include_key: str = "groups",
        exclude_key: str = "groups.exclude",
    ) -> None:
        super().__init__(include, exclude, include_key=include_key, exclude_key=exclude_key)


class ConfigPropertyFilter:
    """MM2's DefaultConfigPropertyFilter: topic configs matching ``config.properties.exclude`` stay put."""

    def __init__(
        self,
        exclude: Sequence[str] = DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
        *,
        key: str = "config.properties.exclude",
    ) -> None:
        self.exclude: tuple[str, ...] = tuple(exclude)
        self._exclude = compile_pattern_list(self.exclude, key=key)

    def should_replicate(self, config_name: str) -> bool:
        """True when the topic config ``config_name`` is copied to the remote topic."""
        return not _fullmatch(self._exclude, config_name)

    def __repr__(self) -> str:
        return f"ConfigPropertyFilter(exclude={list(self.exclude)!r})"
