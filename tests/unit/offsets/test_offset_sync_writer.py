"""MM2's offset syncs: where they are kept, and that a disabled writer touches no cluster."""

from __future__ import annotations

from types import SimpleNamespace

from sample_configs import PLAIN_A_TO_B, load_props
from sparkmirror.core.formats import OffsetSync
from sparkmirror.core.offsetmap import Segment
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.offsets.syncs import HELD_SYNCS_FLUSH_S, OffsetSyncWriter

PROPS = PLAIN_A_TO_B


class _Recording(FlowClients):
    """Records which cluster's admin or producer the writer asks for; admins find the topic present."""

    def __init__(self, flow) -> None:  # type: ignore[no-untyped-def]
        super().__init__(flow)
        self.asked: list[str] = []

    def _admin(self, which: str):  # type: ignore[no-untyped-def]
        self.asked.append(f"{which} admin")
        topic = SimpleNamespace(error=None)
        metadata = SimpleNamespace(topics={"mm2-offset-syncs.B.internal": topic}, brokers={1: None})
        return SimpleNamespace(list_topics=lambda timeout: metadata)

    @property
    def source_admin(self):  # type: ignore[no-untyped-def]
        return self._admin("source")

    @property
    def target_admin(self):  # type: ignore[no-untyped-def]
        return self._admin("target")


def _clients(tmp_path, extra: str = "") -> _Recording:  # type: ignore[no-untyped-def]
    return _Recording(load_props(tmp_path, PROPS + extra).flows[0])


def test_offset_syncs_are_kept_on_the_source_by_default(tmp_path) -> None:  # type: ignore[no-untyped-def]
    clients = _clients(tmp_path)
    writer = OffsetSyncWriter(clients)
    writer.ensure_topic()
    assert writer.topic == "mm2-offset-syncs.B.internal"  # named after the target, as MM2 does
    assert clients.asked == ["source admin"]


def test_offset_syncs_on_the_target_when_configured(tmp_path) -> None:  # type: ignore[no-untyped-def]
    clients = _clients(tmp_path, "offset-syncs.topic.location = target\n")
    OffsetSyncWriter(clients).ensure_topic()
    assert clients.asked == ["target admin"]


def test_disabled_offset_syncs_touch_no_cluster(tmp_path) -> None:  # type: ignore[no-untyped-def]
    clients = _clients(tmp_path, "emit.offset-syncs.enabled = false\n")
    writer = OffsetSyncWriter(clients)
    writer.ensure_topic()
    writer.emit([Segment("t", 0, 10, 20, 5)])
    writer.close()
    assert clients.asked == [] and writer._producer is None


class _Producer:
    """Keeps what is produced (decoded) and how often it was flushed."""

    def __init__(self) -> None:
        self.syncs: list[tuple[int, int]] = []
        self.flushes = 0

    def produce(self, topic: str, key: bytes, value: bytes) -> None:
        sync = OffsetSync.decode(key, value)
        self.syncs.append((sync.upstream_offset, sync.downstream_offset))

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        self.flushes += 1
        return 0


def _writer(tmp_path, monkeypatch, now: list[float]):  # type: ignore[no-untyped-def]
    monkeypatch.setattr("sparkmirror.offsets.syncs.time.monotonic", lambda: now[0])
    writer = OffsetSyncWriter(_clients(tmp_path))
    producer = _Producer()
    writer._producer = producer  # type: ignore[assignment]
    return writer, producer


def test_a_partition_gone_quiet_gets_its_newest_pair_written_by_the_chores_tick(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    now = [0.0]
    writer, producer = _writer(tmp_path, monkeypatch, now)
    writer.emit([Segment("t", 0, 10, 20, 5)])
    assert producer.syncs == [(10, 20)]  # the run's start; (14, 24) held
    now[0] = HELD_SYNCS_FLUSH_S - 1
    writer.tick()
    assert producer.syncs == [(10, 20)]
    now[0] = HELD_SYNCS_FLUSH_S
    writer.tick()  # no report came: the records stopped
    assert producer.syncs == [(10, 20), (14, 24)]


def test_close_writes_the_held_pairs_and_a_late_report_after_it_is_written_at_once(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    now = [0.0]
    writer, producer = _writer(tmp_path, monkeypatch, now)
    writer.emit([Segment("t", 0, 0, 0, 5)])
    writer.close()
    assert producer.syncs == [(0, 0), (4, 4)] and producer.flushes == 1
    late = _Producer()
    writer._producer = late  # type: ignore[assignment]
    writer.emit([Segment("t", 0, 0, 0, 8)])  # a task's last report, recorded after the flow's end
    assert late.syncs == [(7, 7)] and late.flushes == 1
