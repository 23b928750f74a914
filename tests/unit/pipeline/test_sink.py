"""The sink's per-batch work without a broker: headers from Arrow in bulk, the size bound, and the
pairing of delivery reports with upstream offsets (report order = produce order, verified)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from sparkmirror.core.policy import DefaultReplicationPolicy
from sparkmirror.pipeline.exceptions import WriteError
from sparkmirror.pipeline.executor.plan import WritePlan
from sparkmirror.pipeline.executor.sink import (
    PartitionWrite,
    Sink,
    check_report_order,
    finish_segments,
    record_size,
)
from sparkmirror.pipeline.executor.sources import _headers, _runs

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
CASES = [
    [[{"key": "a", "value": b"1"}], [{"key": "b", "value": None}]],  # one header each
    [[{"key": "a", "value": b"1"}, {"key": "c", "value": b"22"}], [], None, [{"key": "d", "value": b"x"}]],
    [None, None],
    [[{"key": "a", "value": b"1"}, {"key": "b", "value": b"2"}], []],  # as many headers as rows, unevenly
]


def _batch(headers: list[Any], topics: list[str] | None = None, partitions: list[int] | None = None) -> Any:
    n = len(headers)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([b"k"] * (n - 1) + [None], pa.binary()),
            pa.array([b"vv"] * n, pa.binary()),
            pa.array(topics or ["t"] * n),
            pa.array(partitions or [0] * n, pa.int32()),
            pa.array(range(n), pa.int64()),
            pa.array([1] * n, pa.int64()),
            pa.array(headers, HEADER_TYPE),
        ],
        names=["key", "value", "topic", "partition", "offset", "timestamp_ms", "headers"],
    )


@pytest.mark.parametrize("rows", CASES)
def test_headers_from_arrow_match_the_rows(rows: list[Any]) -> None:
    want = [[(h["key"], h["value"]) for h in r] if r else None for r in rows]
    assert _headers(pa.array(rows, HEADER_TYPE)) == want


@pytest.mark.parametrize("rows", CASES)
def test_a_record_over_the_limit_is_refused_before_it_is_sent(rows: list[Any]) -> None:
    class Never:
        def produce(self, *_a: Any, **_k: Any) -> None:
            raise AssertionError("a record over the limit reached the producer")

        def poll(self, _t: float = 0) -> int:
            return 0

    class Commit:
        def producer_for(self, _p: Any) -> Any:
            return Never()

        def open(self, _parts: Any) -> None:
            pass

        def begin(self, w: PartitionWrite) -> None:
            w.begun = True

    batch = _batch(rows)
    keys = batch.column(0).to_pylist()
    headers = _headers(batch.column(6))
    for i in range(len(rows)):
        limit = record_size(keys[i], b"vv", headers[i]) - 1
        plan = WritePlan(
            flow="A->B",
            source_alias="A",
            policy=DefaultReplicationPolicy(),
            producer_config={},
            max_record_bytes={"A.t": limit},
        )
        sink = Sink(plan, Commit())  # type: ignore[arg-type]
        sink.write(("t", 0), [(7, keys[i], b"vv", 1, headers[i])])
        w = sink.parts[("t", 0)]
        assert [f[0] for f in w.record_failures] == [7] and w.local_refusals == 1


def test_runs_split_a_batch_by_source_partition() -> None:
    batch = _batch([None] * 5, topics=["t", "t", "u", "u", "t"], partitions=[0, 0, 0, 1, 1])
    assert _runs(batch) == [(0, 2, "t", 0), (2, 3, "u", 0), (3, 4, "u", 1), (4, 5, "t", 1)]
    assert _runs(_batch([None] * 3)) == [(0, 3, "t", 0)]


class _Err:
    def __init__(self, name: str) -> None:
        self._name = name

    def name(self) -> str:
        return self._name

    def str(self) -> str:
        return self._name.lower()


class _Msg:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"v"

    def headers(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (1, 5)


def _plan() -> WritePlan:
    return WritePlan(flow="A->B", source_alias="A", policy=DefaultReplicationPolicy(), producer_config={})


def test_reports_pair_with_upstream_offsets_in_produce_order() -> None:
    w = PartitionWrite("t", "A.t", 0, None, None)  # type: ignore[arg-type]
    w.sent = [10, 11, 12, 13]
    w.first_offset, w.last_offset = 10, 13
    w.delivered(None, _Msg(100))
    w.delivered(_Err("MSG_SIZE_TOO_LARGE"), _Msg(-1))
    assert w.pending == 2
    w.delivered(None, _Msg(101))
    w.delivered(None, _Msg(102))
    assert w.pending == 0
    assert w.acknowledged() == [10, 12, 13] and w.ds == [100, 101, 102]
    assert [f[0] for f in w.record_failures] == [11]
    assert (w.first_target, w.last_target) == (100, 102)
    finish_segments(_plan(), [w])
    assert [(s.upstream_start, s.downstream_start, s.count) for s in w.segments] == [(10, 100, 1), (12, 101, 2)]


def test_reports_out_of_produce_order_fail_the_batch() -> None:
    w = PartitionWrite("t", "A.t", 0, None, None)  # type: ignore[arg-type]
    w.sent = [10, 11]
    w.delivered(None, _Msg(101))
    w.delivered(None, _Msg(100))
    with pytest.raises(WriteError, match="out of produce order"):
        check_report_order(_plan(), [w])


def test_zip_directories_are_kept_between_tasks(tmp_path: Any) -> None:
    import importlib
    import sys
    import zipfile
    import zipimport

    from sparkmirror.pipeline.executor.tasks import keep_zip_directories

    archive = tmp_path / "pkgs.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped_mod_for_test.py", "X = 1\n")
    original = zipimport.zipimporter.invalidate_caches
    sys.path.insert(0, str(archive))
    try:
        importlib.import_module("zipped_mod_for_test")  # the path now has a zipimporter
        reads: list[str] = []
        real_read = zipimport._read_directory  # type: ignore[attr-defined]
        zipimport._read_directory = lambda path: reads.append(path) or real_read(path)  # type: ignore[attr-defined]
        try:
            importlib.invalidate_caches()  # what PySpark does before every task
            assert reads == [str(archive)], "this Python re-reads zip directories on invalidate_caches"
            keep_zip_directories()
            keep_zip_directories()  # idempotent
            reads.clear()
            importlib.invalidate_caches()
            assert reads == []
        finally:
            zipimport._read_directory = real_read  # type: ignore[attr-defined]
    finally:
        sys.path.remove(str(archive))
        sys.modules.pop("zipped_mod_for_test", None)
        zipimport.zipimporter.invalidate_caches = original  # type: ignore[method-assign]
