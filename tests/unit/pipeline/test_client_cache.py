"""The worker's cache of Kafka clients: close_all empties it and closes what it held."""

from __future__ import annotations

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
