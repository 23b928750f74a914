"""The status reporter is best effort: a target that does not answer must not hold the driver's loop."""

from __future__ import annotations

from collections.abc import Callable

from sample_configs import PLAIN_A_TO_B, load_props
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.status.reporter import StatusReporter

PROPS = PLAIN_A_TO_B


class _Producer:
    """Stands in for the status producer: ``answering`` says whether the target acknowledges."""

    def __init__(self) -> None:
        self.answering = False
        self.pending: list[Callable[[object, object], None]] = []
        self.flushes: list[float] = []

    def produce(self, topic: str, *, key: bytes, value: bytes, on_delivery: Callable[[object, object], None]) -> None:
        self.pending.append(on_delivery)

    def _serve(self) -> None:
        if self.answering:
            for callback in self.pending:
                callback(None, None)
            self.pending = []

    def poll(self, timeout: float) -> int:
        self._serve()
        return 0

    def flush(self, timeout: float) -> int:
        self.flushes.append(timeout)
        self._serve()
        return len(self.pending)

    def __len__(self) -> int:
        return len(self.pending)


def test_while_the_target_does_not_answer_reports_are_queued_without_waiting(tmp_path) -> None:  # type: ignore[no-untyped-def]
    reporter = StatusReporter(FlowClients(load_props(tmp_path, PROPS).flows[0]), interval_s=10)
    reporter._topic_ready = True
    producer = _Producer()
    reporter._producer = producer  # type: ignore[assignment]

    reporter.report("running")  # the first write that is not acknowledged waits, then the outage starts
    assert producer.flushes == [5.0] and reporter._failing
    reporter.report("running")
    reporter.report("restarting", error="target away")
    assert producer.flushes == [5.0]  # queued, not waited for
    assert len(producer) == 3

    producer.answering = True
    reporter.report("running")  # acknowledged: the outage is over, and writes wait for their ack again
    assert not reporter._failing and len(producer) == 0
    reporter.report("running")
    assert producer.flushes == [5.0, 5.0]


def test_closing_waits_for_what_is_queued(tmp_path) -> None:  # type: ignore[no-untyped-def]
    reporter = StatusReporter(FlowClients(load_props(tmp_path, PROPS).flows[0]), interval_s=10)
    reporter._topic_ready = True
    producer = _Producer()
    reporter._producer = producer  # type: ignore[assignment]
    reporter.report("running")
    reporter.report("stopped")
    producer.answering = True
    reporter.close()
    assert producer.flushes[-1] == 5.0 and len(producer) == 0
