"""The tasks' pause of Python's cyclic garbage collector (docs/performance.md: a fifth of the copy's CPU)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from sparkmirror.pipeline.executor.tasks import collector_paused


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_collector_is_off_inside_and_on_again_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collector_comes_back_when_the_copy_raises() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("the batch failed")
    assert gc.isenabled()


def test_nested_pauses_leave_it_to_the_outermost() -> None:
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()
