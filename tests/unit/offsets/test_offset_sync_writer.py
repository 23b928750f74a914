"""MM2's offset syncs: where they are kept, and that a disabled writer touches no cluster."""

from __future__ import annotations

from types import SimpleNamespace

from sample_configs import PLAIN_A_TO_B, load_props
from sparkmirror.core.offsetmap import Segment
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.offsets.syncs import OffsetSyncWriter

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
