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
