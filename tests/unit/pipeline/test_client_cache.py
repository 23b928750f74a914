"""The worker's cache of Kafka clients: close_all empties it and closes what it held."""

from __future__ import annotations

import threading

import pytest

from sparkmirror.pipeline.executor import clients


class _Client:
    def __init__(self, fail: bool = False) -> None:
        self.closed = False
        self.fail = fail

    def close(self) -> None:
        self.closed = True
        if self.fail:
            raise RuntimeError("already closed")


def test_close_all_closes_every_cached_client_and_the_next_ask_makes_a_new_one() -> None:
    first, failing = _Client(), _Client(fail=True)
    assert clients._cached(("test", "a"), lambda: first) is first
    assert clients._cached(("test", "b"), lambda: failing) is failing

    clients.close_all()  # a close that raises does not stop the others

    assert first.closed and failing.closed
    second = _Client()
    assert clients._cached(("test", "a"), lambda: second) is second
    clients.close_all()


class _Librdkafka:
    """A librdkafka consumer's cached watermarks: none known (-1001 is librdkafka's "invalid") for one
    partition, an error for another."""

    def get_watermark_offsets(self, tp, cached=False):  # noqa: ANN001, ANN201 - confluent-kafka's signature
        assert cached, "the ends are looked at in the cache only"
        if tp.partition == 2:
            raise RuntimeError("unknown partition")
        return (-1001, -1001) if tp.partition == 1 else (0, 40 + tp.partition)


def test_cached_ends_of_a_librdkafka_consumer_leave_out_what_it_does_not_know() -> None:
    assert clients.cached_ends(_Librdkafka(), [("t", 0), ("t", 1), ("t", 2), ("t", 3)]) == [
        (("t", 0), 40),
        (("t", 3), 43),
    ]


def test_a_client_being_made_holds_up_only_the_asks_for_the_same_client() -> None:
    """Making a client can take seconds (an exactly-once producer's ``init_transactions`` on a rested
    group): an ask for another client is served meanwhile, and a second ask for the same one waits for
    it and gets it, not a second client."""
    started, release = threading.Event(), threading.Event()
    slow, made = _Client(), []

    def make_slow() -> _Client:
        made.append(slow)
        started.set()
        assert release.wait(10)
        return slow

    got: dict[str, object] = {}
    first = threading.Thread(target=lambda: got.setdefault("first", clients._cached(("test", "slow"), make_slow)))
    first.start()
    assert started.wait(10)
    try:
        other = _Client()
        assert clients._cached(("test", "other"), lambda: other) is other  # not behind the slow one
        second = threading.Thread(
            target=lambda: got.setdefault("second", clients._cached(("test", "slow"), lambda: _Client()))
        )
        second.start()
        second.join(0.2)
        assert second.is_alive(), "the same client's second ask waits for the first to be made"
    finally:
        release.set()
    first.join(10)
    second.join(10)
    assert got == {"first": slow, "second": slow} and made == [slow]
    clients.close_all()


def test_a_client_whose_making_failed_is_made_again_at_the_next_ask() -> None:
    def fail() -> _Client:
        raise RuntimeError("coordinator not available")

    with pytest.raises(RuntimeError, match="coordinator"):
        clients._cached(("test", "flaky"), fail)
    fresh = _Client()
    assert clients._cached(("test", "flaky"), lambda: fresh) is fresh
    clients.close_all()
