"""Topic, group and config-property filters (MM2 defaults, full-match regexes)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkmirror.core import (
    DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
    DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_TOPICS_EXCLUDE,
    ConfigPropertyFilter,
    GroupFilter,
    TopicFilter,
)
from sparkmirror.errors import ConfigError


def test_default_constants_are_mm2s() -> None:
    assert DEFAULT_TOPICS_EXCLUDE == (r".*[\-\.]internal", r".*\.replica", r"__.*")
    assert DEFAULT_GROUPS_EXCLUDE == ("console-consumer-.*", "connect-.*", "__.*")
    assert len(DEFAULT_CONFIG_PROPERTIES_EXCLUDE) == 6


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        ("orders", True),
        ("A.orders", True),
        ("mm2-offsets.A.internal", False),
        ("connect-configs-internal", False),
        ("orders.replica", False),
        ("__consumer_offsets", False),
        ("internal", True),
        ("orders.replicas", True),
    ],
)
def test_topic_filter_defaults(topic: str, expected: bool) -> None:
    assert TopicFilter().matches(topic) is expected


@pytest.mark.parametrize(
    ("group", "expected"),
    [("app", True), ("console-consumer-123", False), ("connect-mirror", False), ("__internal", False)],
)
def test_group_filter_defaults(group: str, expected: bool) -> None:
    assert GroupFilter().matches(group) is expected


def test_regexes_match_the_whole_name() -> None:
    f = TopicFilter(["orders"], [])
    assert f.matches("orders")
    assert not f.matches("orders-v2")
    assert not f.matches("my-orders")
    g = TopicFilter(["orders.*", "pay"], ["orders-test"])
    assert g.matches("orders-v2") and g.matches("pay")
    assert not g.matches("orders-test") and not g.matches("payments")


def test_alternation_inside_one_regex_stays_anchored() -> None:
    f = TopicFilter(["a|b"], [])
    assert f.matches("a") and f.matches("b")
    assert not f.matches("ab")


def test_empty_lists() -> None:
    assert not TopicFilter([], []).matches("orders")
    assert TopicFilter([".*"], []).matches("__consumer_offsets")
    assert TopicFilter([" orders ", ""], []).matches("orders")


@given(st.text(alphabet="abcXYZ09._-", min_size=1, max_size=30))
def test_literal_include_matches_only_itself(name: str) -> None:
    import re

    f = TopicFilter([re.escape(name)], [])
    assert f.matches(name)
    assert not f.matches(name + "x")


@pytest.mark.parametrize(
    ("build", "key"),
    [
        (lambda: TopicFilter(["ok", "(bad"], []), "topics"),
        (lambda: TopicFilter([".*"], ["[bad"]), "topics.exclude"),
        (lambda: GroupFilter(["*bad"], []), "groups"),
        (lambda: GroupFilter([".*"], ["(bad"]), "groups.exclude"),
        (lambda: ConfigPropertyFilter(["(bad"]), "config.properties.exclude"),
        (lambda: TopicFilter(["(bad"], [], include_key="A->B.topics"), "A->B.topics"),
    ],
)
def test_bad_regex_names_key_and_regex(build: object, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        build()  # type: ignore[operator]
    assert err.value.key == key
    assert str(err.value).startswith(f"{key}: invalid regex")
    assert "bad" in str(err.value)


def test_config_property_filter() -> None:
    f = ConfigPropertyFilter()
    assert not f.should_replicate("min.insync.replicas")
    assert not f.should_replicate("unclean.leader.election.enable")
    assert f.should_replicate("retention.ms")
    assert f.should_replicate("cleanup.policy")
    # dots are escaped in MM2's default: no accidental match
    assert f.should_replicate("minXinsyncXreplicas")
    assert ConfigPropertyFilter([]).should_replicate("min.insync.replicas")
    assert not ConfigPropertyFilter(["retention\\..*"]).should_replicate("retention.bytes")


def test_filter_repr() -> None:
    assert "orders" in repr(TopicFilter(["orders"], []))
