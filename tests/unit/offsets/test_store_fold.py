"""OffsetMapStore.fold and prune with chains: what reaches the topic, in which order, and what the
map holds when a write fails (the crash-safety rule: chains durable before any tombstone)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sparkmirror.core import Segment
from sparkmirror.core.formats import decode_offset_map_key
from sparkmirror.kafka.internal import InternalTopicError
from sparkmirror.offsets.store import OffsetMapStore

T = "orders"


class _Producer:
    """Records what is produced; refuses tombstones while ``refuse_tombstones`` is set."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, bytes | None]] = []
        self.pending: list[tuple[Any, bytes | None]] = []
        self.refuse_tombstones = False

    def produce(self, topic: str, key: bytes, value: bytes | None, on_delivery: Any = None) -> None:
        self.pending.append((on_delivery, value))
        if not (self.refuse_tombstones and value is None):
            self.sent.append((key, value))

    def flush(self, timeout: float) -> int:
        for cb, value in self.pending:
            if cb is not None:
                err = (
                    SimpleNamespace(str=lambda: "broker refused") if self.refuse_tombstones and value is None else None
                )
                cb(err, None)
        self.pending = []
        return 0


def _store() -> tuple[OffsetMapStore, _Producer]:
    clients = SimpleNamespace(flow=SimpleNamespace(name="A->B", source="A"), internal_producer={})
    store = OffsetMapStore(clients)  # type: ignore[arg-type]
    producer = _Producer()
    store._producer = producer  # type: ignore[assignment]
    store.map.mark_loaded()
    return store, producer


def _eos(n: int, start: int = 0) -> list[Segment]:
    return [Segment(T, 0, i * 10, i * 11, 10) for i in range(start, start + n)]


def _answers(store: OffsetMapStore) -> list[tuple[int | None, int | None]]:
    return [
        (store.translate(T, 0, g).downstream_offset, store.reverse_translate(T, 0, g).upstream_offset)
        for g in range(120)
    ]


def test_fold_writes_the_chain_before_the_tombstones_of_the_segments_it_replaces() -> None:
    store, producer = _store()
    store.apply(_eos(6))
    before = _answers(store)
    assert store.fold() == 5  # the last segment written stays a segment
    kinds = [(decode_offset_map_key(k)[0], v is None) for k, v in producer.sent]
    assert kinds == [(1, False)] + [(0, True)] * 5
    pm = store.map.partition(T, 0)
    assert pm is not None and [len(c) for c in pm.chains()] == [5] and len(pm._segments) == 1
    assert _answers(store) == before
    producer.sent.clear()
    store.apply(_eos(3, start=6))
    assert store.fold() == 3  # the open chain grows under its key
    (key, value), *tombs = producer.sent
    assert decode_offset_map_key(key) == (1, T, 0, 0) and value is not None and len(tombs) == 3


def test_refused_tombstones_leave_the_segments_held_and_the_next_fold_sends_them() -> None:
    store, producer = _store()
    store.apply(_eos(4))
    before = _answers(store)
    producer.refuse_tombstones = True
    with pytest.raises(InternalTopicError, match="tombstones of offset map segments folded into chains"):
        store.fold()
    pm = store.map.partition(T, 0)
    assert pm is not None and len(pm.chains()) == 1 and len(pm._segments) == 4  # both, as on the topic
    assert _answers(store) == before
    producer.refuse_tombstones = False
    producer.sent.clear()
    assert store.fold() == 3
    assert [(decode_offset_map_key(k)[0], v) for k, v in producer.sent] == [(0, None)] * 3
    assert _answers(store) == before


def test_prune_rewrites_a_chain_under_its_key_or_tombstones_it() -> None:
    store, producer = _store()
    store.apply(_eos(6))
    store.fold()
    producer.sent.clear()
    assert store.prune({(T, 0): 25}) == 1  # batches 0 and 1 end at or below 25
    [(key, value)] = producer.sent
    assert decode_offset_map_key(key) == (1, T, 0, 0) and value is not None
    pm = store.map.partition(T, 0)
    assert pm is not None and pm.chains()[0].upstream_start == 20
    producer.sent.clear()
    store.prune({(T, 0): 1_000})  # never the last segment: a batch may be extending it
    assert [(decode_offset_map_key(k)[0], v) for k, v in producer.sent] == [(1, None)]
