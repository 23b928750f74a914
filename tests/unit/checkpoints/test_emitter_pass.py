"""One checkpoint pass of the emitter, without a broker: the reader and the checkpoints topic are stand-ins."""

from __future__ import annotations

from sample_configs import PLAIN_A_TO_B, load_props
from sparkmirror.checkpoints.emitter import CheckpointEmitter
from sparkmirror.core.formats import Checkpoint
from sparkmirror.core.offsetmap import Segment
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.groupreader import GroupReads, Positions
from sparkmirror.offsets.store import OffsetMapStore

PROPS = PLAIN_A_TO_B


class _Reader:
    """Answers from a dict the test changes between passes."""

    def __init__(self) -> None:
        self.positions: dict[str, Positions] = {}
        self.asked: list[list[str]] = []

    def read(self, groups, *, timeout_s: float = 10.0) -> GroupReads:  # type: ignore[no-untyped-def]
        self.asked.append(list(groups))
        return GroupReads(positions={g: dict(self.positions[g]) for g in groups})

    def close(self) -> None:
        pass


class _Emitter(CheckpointEmitter):
    def __init__(self, clients: FlowClients, store: OffsetMapStore, reader: _Reader) -> None:
        super().__init__(clients, store)
        self._readers["source"] = reader  # type: ignore[assignment]
        self.written: list[list[Checkpoint]] = []

    def source_groups(self) -> list[str]:
        return sorted(self._readers["source"].positions)  # type: ignore[attr-defined]

    def _write(self, checkpoints: list[Checkpoint]) -> None:
        self.written.append(checkpoints)


def _emitter(tmp_path) -> tuple[_Emitter, _Reader]:  # type: ignore[no-untyped-def]
    clients = FlowClients(load_props(tmp_path, PROPS).flows[0])
    store = OffsetMapStore(clients)
    store.map.mark_loaded()
    store.apply([Segment("t", p, 0, 0, 1000) for p in range(2)])
    reader = _Reader()
    emitter = _Emitter(clients, store, reader)
    emitter.state.restore([])
    return emitter, reader


def test_only_moved_groups_are_re_emitted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    emitter, reader = _emitter(tmp_path)
    reader.positions = {f"g{i}": {("t", 0): (10 * i, ""), ("t", 1): (5, "")} for i in range(1, 4)}
    assert emitter.emit({"t": 2}) == 6
    # Nothing moved: nothing is written, not even an empty batch.
    assert emitter.emit({"t": 2}) == 0
    assert len(emitter.written) == 1
    # One group moved on one partition: only that checkpoint is written.
    reader.positions["g2"][("t", 1)] = (7, "")
    assert emitter.emit({"t": 2}) == 1
    (moved,) = emitter.written[-1]
    assert (moved.group, moved.topic, moved.partition, moved.upstream_offset) == ("g2", "A.t", 1, 7)
    # One read for all groups per pass.
    assert reader.asked == [["g1", "g2", "g3"]] * 3


def test_partitions_not_mirrored_are_not_checkpointed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    emitter, reader = _emitter(tmp_path)
    reader.positions = {"g": {("t", 0): (3, ""), ("t", 1): (4, ""), ("other", 0): (9, "")}}
    assert emitter.emit({"t": 1}) == 1
    assert [(c.topic, c.partition) for c in emitter.written[0]] == [("A.t", 0)]


def test_a_group_is_confirmed_by_every_pass_that_read_it_moved_or_not(tmp_path) -> None:  # type: ignore[no-untyped-def]
    emitter, reader = _emitter(tmp_path)
    reader.positions = {"g1": {("t", 0): (10, "")}, "g2": {("t", 0): (20, "")}}
    emitter.emit({"t": 1})
    first = dict(emitter.confirmed)
    assert set(first) == {"g1", "g2"}
    # g1 unchanged is confirmed again; g2 is gone from the source and no longer watched.
    del reader.positions["g2"]
    emitter.emit({"t": 1})
    assert set(emitter.confirmed) == {"g1"} and emitter.confirmed["g1"] >= first["g1"]


def test_a_group_whose_offsets_could_not_be_read_keeps_its_last_confirmation(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import sparkmirror.checkpoints.emitter as emitter_module

    emitter, reader = _emitter(tmp_path)
    reader.positions = {"g1": {("t", 0): (10, "")}}
    emitter.emit({"t": 1})
    before = emitter.confirmed["g1"]

    def unreadable(*_a: object, **_k: object) -> object:
        raise RuntimeError("coordinator away")

    # Neither the batched read nor the consumer fallback can read g1 this pass.
    monkeypatch.setattr(reader, "read", lambda groups, *, timeout_s=10.0: GroupReads(failed={"g1": "away"}))
    monkeypatch.setattr(emitter_module, "committed_positions", unreadable)
    emitter.emit({"t": 1})
    assert emitter.confirmed["g1"] == before


def test_a_pass_read_in_slices_reads_every_group_once_and_emits_what_a_whole_pass_would(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from sparkmirror.core.checkpoints import CheckpointPass

    (tmp_path / "whole").mkdir()
    (tmp_path / "sliced").mkdir()
    whole, whole_reader = _emitter(tmp_path / "whole")
    sliced, sliced_reader = _emitter(tmp_path / "sliced")
    positions = {f"g{i:02}": {("t", 0): (i, ""), ("t", 1): (2 * i, "")} for i in range(1, 8)}
    whole_reader.positions = {g: dict(p) for g, p in positions.items()}
    sliced_reader.positions = {g: dict(p) for g, p in positions.items()}
    whole.emit({"t": 2})
    plan = CheckpointPass(sliced.begin_pass(), 5.0, 0.0, slice_size=3)
    while not plan.done:
        plan.slice_done(0.0, sliced.emit_groups({"t": 2}, plan.next_slice()))
    assert plan.written == 14
    assert sliced_reader.asked == [["g01", "g02", "g03"], ["g04", "g05", "g06"], ["g07"]]
    assert [c for batch in sliced.written for c in batch] == [c for batch in whole.written for c in batch]
    assert set(sliced.confirmed) == set(positions)


def test_a_group_below_the_retained_history_is_warned_of_once_not_every_pass(tmp_path, caplog) -> None:  # type: ignore[no-untyped-def]
    import logging

    emitter, reader = _emitter(tmp_path)
    emitter.store.map.discard("t", 0, 0)  # the map keeps t[0] from upstream 500 on (pruned below)
    emitter.store.apply([Segment("t", 0, 500, 500, 500)])
    reader.positions = {"old": {("t", 0): (10, "")}, "new": {("t", 0): (600, "")}}
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            emitter.emit({"t": 1})
    warnings = [r for r in caplog.records if "below the offset map's retained history" in r.getMessage()]
    assert len(warnings) == 1 and "group old" in warnings[0].getMessage()
    assert emitter.below_history == {("old", "t", 0)}
    # It caught up, then fell behind the history again: warned again.
    reader.positions["old"] = {("t", 0): (700, "")}
    emitter.emit({"t": 1})
    assert emitter.below_history == set()
    reader.positions["old"] = {("t", 0): (5, "")}
    with caplog.at_level(logging.WARNING):
        emitter.emit({"t": 1})
    assert len([r for r in caplog.records if "retained history" in r.getMessage()]) == 2
