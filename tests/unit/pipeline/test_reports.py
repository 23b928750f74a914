"""The streaming engine's report channel on loopback: tokens, answers, a job that has ended."""

from __future__ import annotations

import socket
import threading
import time
from types import SimpleNamespace

import pytest

from sparkmirror.pipeline.driver import stream as stream_module
from sparkmirror.pipeline.reports import Answer, Report, ReportClient, ReportServer, merge


@pytest.fixture
def server() -> ReportServer:
    s = ReportServer(bind="127.0.0.1", advertise="127.0.0.1")
    yield s
    s.close()


def test_a_report_reaches_its_jobs_handler_and_the_answer_comes_back(server: ReportServer) -> None:
    got: list[Report] = []
    stop = threading.Event()

    def on_report(report: Report) -> bool:
        got.append(report)
        return stop.is_set()

    server.register("t1", on_report)
    server.register("t2", lambda _r: True)
    client = ReportClient(server.address, "t1")
    rows = [{"topic": "t", "partition": 0, "records": 3}]
    assert client.send(Report(1, 0, rows, [("t", 0, 3, 5)])) is False
    stop.set()
    assert client.send(Report(1, 0, [], [("t", 0, 3, 5)], final=True)) is True
    client.close()
    assert [(r.task, r.results, r.positions, r.final) for r in got] == [
        # a position without how far it was read (an older task's) reads as read up to its next offset
        (1, rows, [("t", 0, 3, 5, 3)], False),
        (1, [], [("t", 0, 3, 5, 3)], True),
    ]


def test_a_connection_without_a_known_token_is_closed_unheard(server: ReportServer) -> None:
    heard: list[Report] = []
    server.register("secret", lambda r: heard.append(r) or False)
    client = ReportClient(server.address, "guess")
    with pytest.raises(ConnectionError):
        client.send(Report(0, 0))
    client.close()
    assert heard == []


def test_a_job_that_ended_tells_its_tasks_to_stop(server: ReportServer) -> None:
    server.register("t", lambda _r: False)
    client = ReportClient(server.address, "t")
    assert client.send(Report(0, 0)) is False
    server.unregister("t")
    assert client.send(Report(0, 0)) is True
    client.close()


def test_nothing_large_is_read_before_the_token(server: ReportServer) -> None:
    server.register("t", lambda _r: False)
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"x" * 100_000 + b"\n")  # no token on a short first line: closed
        sock.settimeout(10)
        try:
            assert sock.recv(1) == b""
        except ConnectionResetError:
            pass  # closed with the rest unread: a reset


def test_a_post_never_waits_for_a_busy_driver_and_what_queues_meanwhile_goes_as_one(server: ReportServer) -> None:
    got: list[Report] = []
    busy = threading.Event()

    def on_report(report: Report) -> bool:
        got.append(report)
        busy.wait(10)  # the driver is busy with the first report
        return False

    server.register("t", on_report)
    client = ReportClient(server.address, "t")
    started = time.monotonic()
    assert client.post(Report(0, 0, [{"n": 1}], [("t", 0, 1, 9)])) is False
    while not got and time.monotonic() - started < 10:
        time.sleep(0.01)  # the driver has the first one and is busy with it
    assert client.post(Report(0, 0, [{"n": 2}], [("t", 0, 2, 9), ("t", 1, 5, 9)])) is False
    assert client.post(Report(0, 0, [{"n": 3}], [("t", 0, 3, 9)])) is False
    assert not busy.is_set() and len(got) == 1, "a post waited for the driver"
    threading.Timer(0.3, busy.set).start()
    assert client.send(Report(0, 0, [], [("t", 0, 4, 9)], final=True)) is False
    client.close()
    assert [r.results for r in got] == [[{"n": 1}], [{"n": 2}, {"n": 3}]]
    assert sorted(got[1].positions) == [("t", 0, 4, 9, 4), ("t", 1, 5, 9, 5)] and got[1].final


def test_merged_reports_keep_every_row_in_order_and_the_latest_positions() -> None:
    merged = merge([Report(2, 1, [{"a": 1}], [("t", 0, 1, 5)]), Report(2, 1, [{"a": 2}], [], final=True)])
    assert (merged.task, merged.attempt, merged.results, merged.positions, merged.final) == (
        2,
        1,
        [{"a": 1}, {"a": 2}],
        [("t", 0, 1, 5)],
        True,
    )


def test_a_stop_said_in_answer_to_a_post_is_seen_without_waiting(server: ReportServer) -> None:
    server.register("t", lambda _r: True)
    client = ReportClient(server.address, "t")
    client.post(Report(0, 0))
    deadline = time.monotonic() + 10
    while not client.stop_requested and time.monotonic() < deadline:
        time.sleep(0.01)
    assert client.stop_requested
    client.close()


def test_the_flow_control_in_an_answer_reaches_the_task_with_its_window(server: ReportServer) -> None:
    got: list[Report] = []

    def on_report(report: Report) -> Answer:
        got.append(report)
        return Answer(stop=False, rate=1234.5, paused=("orders",))

    server.register("t", on_report)
    client = ReportClient(server.address, "t")
    assert client.send(Report(0, 0, copied_bytes=900, window_s=1.5, held_s=0.25)) is False
    client.close()
    assert client.answer == Answer(rate=1234.5, paused=("orders",)) and client.answers == 1
    assert (got[0].copied_bytes, got[0].window_s, got[0].held_s) == (900, 1.5, 0.25)


def test_reports_merged_add_up_their_windows() -> None:
    a = Report(0, 0, copied_bytes=10, window_s=1.0, held_s=0.5)
    b = Report(0, 0, copied_bytes=5, window_s=0.5, held_s=0.0, final=True)
    m = merge([a, b])
    assert (m.copied_bytes, m.window_s, m.held_s, m.final) == (15, 1.5, 0.5, True)


def test_a_recreated_topic_in_an_answer_reaches_the_task(server: ReportServer) -> None:
    """The driver's finding of a topic deleted and re-created goes with every answer: (topic, id then, id now)."""
    recreated = (("orders", "id-old", "id-new"),)
    server.register("t", lambda report: Answer(recreated=recreated))
    client = ReportClient(server.address, "t")
    client.send(Report(0, 0))
    client.close()
    assert client.answer.recreated == recreated
    assert Answer.from_json(Answer().to_json()).recreated == ()


def test_a_report_the_driver_cannot_read_stops_the_job_saying_so() -> None:
    """Its refusals and offset-map segments could not be recorded: the flow restarts from the progress on
    the target rather than go on without them."""
    copy = SimpleNamespace(
        _lock=threading.Lock(), reported=set(), positions={}, lag=0, _moved=set(), _attempts={}, _error=None,
        recorder=SimpleNamespace(metrics=None), throttle=SimpleNamespace(answer=lambda report, stop: Answer(stop=stop)),
        _stop=threading.Event(), recreated=(), flow="A->B", plan=SimpleNamespace(commit_interval_ms=200),
    )  # fmt: skip
    answer = stream_module.StreamingCopy._on_report(copy, Report(3, 0, results=[[1, 2]]))  # type: ignore[arg-type]
    assert answer.stop and copy._stop.is_set()
    assert "task 3: unreadable report" in str(copy._error) and "restarts from the progress" in str(copy._error)
