"""Flow control's pure rules: the control record, the commands' changes, the fair share, the budget."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkmirror.core.control import BURST_S, FlowControl, TokenBucket, latest_control, share, wanted
from sparkmirror.core.exceptions import FormatError


def test_a_control_record_round_trips() -> None:
    c = FlowControl("A->B", paused=True, paused_topics=("orders.*",), bytes_per_second=5000, updated_ms=7, by="u@h")
    assert FlowControl.decode(c.key_bytes(), c.value_bytes()) == c


@pytest.mark.parametrize(
    "value",
    [b"nope", b"[]", b'{"version": 1, "flow": "A->B"}', b'{"version": 0}', b'{"version": 0, "flow": "C->B"}',
     b'{"version": 0, "flow": "A->B", "paused_topics": "x"}', b'{"version": 0, "flow": "A->B", "paused_topics": ["("]}',
     b'{"version": 0, "flow": "A->B", "bytes_per_second": -1}'],
)  # fmt: skip
def test_a_bad_control_record_is_refused_naming_the_key(value: bytes) -> None:
    with pytest.raises(FormatError, match="A->B"):
        FlowControl.decode(b"A->B", value)


def test_the_last_record_of_a_flow_counts_and_a_tombstone_forgets_it() -> None:
    a1 = FlowControl("A->B", paused=True)
    a2 = FlowControl("A->B", bytes_per_second=10)
    c = FlowControl("C->B", paused=True)
    records = [(a1.key_bytes(), a1.value_bytes()), (c.key_bytes(), c.value_bytes()), (a2.key_bytes(), a2.value_bytes())]
    assert latest_control(records, "A->B") == a2 and latest_control(records, "C->B") == c
    assert latest_control([*records, (b"C->B", None), (None, b"x")], "C->B") == FlowControl("C->B")
    # another flow's unreadable (or newer) record is not this flow's concern
    assert latest_control([*records, (b"D->B", b'{"version": 9}')], "A->B") == a2


def test_pause_and_resume_the_whole_flow_or_topics_by_their_pattern() -> None:
    c = FlowControl("A->B").pause("orders.*", at_ms=1, by="u")
    assert c.is_paused("orders.eu") and not c.is_paused("payments") and not c.paused
    assert not c.is_paused("xorders")  # a full match, as MM2's topic lists
    c = c.pause(None, at_ms=2, by="u")
    assert c.is_paused("payments") and c.paused_topics == ("orders.*",)
    with pytest.raises(ValueError, match="'orders.*'.*whole flow is paused"):
        c.resume("orders.eu", at_ms=3, by="u")
    c = c.resume(None, at_ms=4, by="v")
    assert not c.is_paused("orders.eu") and c.paused_topics == () and c.by == "v" and c.updated_ms == 4


def test_resuming_one_pattern_keeps_the_others() -> None:
    c = FlowControl("A->B").pause("a", at_ms=1, by="u").pause("b", at_ms=1, by="u").pause("a", at_ms=1, by="u")
    assert c.paused_topics == ("b", "a")
    c = c.resume("a", at_ms=2, by="u")
    assert c.is_paused("b") and not c.is_paused("a")


def test_a_bad_pattern_is_refused_before_it_is_written() -> None:
    with pytest.raises(FormatError, match=r"--topics '\('"):
        FlowControl("A->B").pause("(", at_ms=1, by="u")


def test_the_limit_is_the_operators_else_the_configured_one_and_zero_lifts_it() -> None:
    c = FlowControl("A->B")
    assert c.limit(None) is None and c.limit(100) == 100
    assert c.throttle(50, at_ms=1, by="u").limit(100) == 50
    assert c.throttle(0, at_ms=1, by="u").limit(100) is None
    assert c.throttle(50, at_ms=1, by="u").throttle(None, at_ms=2, by="u").limit(100) == 100


def test_a_share_gives_each_at_most_what_it_wants_and_the_rest_to_the_others() -> None:
    assert share(100, {"a": None, "b": None}) == {"a": 50, "b": 50}
    assert share(100, {"a": 10, "b": None, "c": None}) == {"a": 10, "b": 45, "c": 45}
    # nobody wants it all: the rest spread on top, so a task waking up has room
    assert share(100, {"a": 10, "b": 30}) == {"a": 40, "b": 60}
    assert share(100, {}) == {}


@given(
    st.floats(min_value=1, max_value=1e9),
    st.dictionaries(st.integers(0, 50), st.none() | st.floats(min_value=0, max_value=1e9), min_size=1),
)
def test_shares_add_up_to_the_limit_and_nobody_held_gets_less_than_an_even_part(total, wants) -> None:
    shares = share(total, wants)
    assert set(shares) == set(wants)
    assert sum(shares.values()) == pytest.approx(total, rel=1e-9)
    for k, v in shares.items():
        w = wants[k]
        assert v >= min(total / len(wants), w if w is not None else total) * (1 - 1e-9)


def test_a_task_held_back_wants_more_one_that_was_not_wants_what_it_copied_and_some() -> None:
    assert wanted(1000, held=True) is None
    assert wanted(1000, held=False) == 1250


def test_a_bucket_lets_through_the_rate_over_a_window_and_at_most_one_burst_more() -> None:
    b = TokenBucket()
    b.set_rate(1000, 0.0)
    now, copied = 0.0, 0
    while now < 10.0:
        wait = b.wait_s(now)
        if wait > 0:
            wait = max(wait, 1e-6)  # as a sleep: the clock moves
            b.held(wait)
            now += wait
            continue
        n = b.room(now, 100) * 100  # records of 100 bytes
        b.take(n, n // 100, now)
        copied += n
        now += 0.001
    assert 10 * 1000 <= copied <= 10 * 1000 + 1000 * BURST_S + 100
    assert b.held_s > 5


def test_without_a_rate_a_bucket_never_holds_and_a_read_takes_what_it_may() -> None:
    b = TokenBucket()
    b.take(10**9, 10, 0.0)
    assert b.wait_s(0.0) == 0 and b.room(0.0, 500) == 500
    b.set_rate(100, 1.0)
    assert b.room(1.0, 500) == 1  # a new limit starts with no stored burst
    b.set_rate(None, 2.0)
    assert b.wait_s(2.0) == 0


def test_the_first_read_under_a_limit_takes_one_record_to_learn_their_size() -> None:
    b = TokenBucket()
    b.set_rate(1000, 0.0)
    assert b.room(5.0, 500) == 1
    b.take(100, 1, 5.0)
    assert b.room(5.0, 500) == 4  # 500 bytes of burst at 100 bytes a record, less the one taken
