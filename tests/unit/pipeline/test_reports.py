"""The streaming engine's report channel on loopback: tokens, answers, a job that has ended."""

from __future__ import annotations

import socket
import threading

import pytest

from sparkmirror.pipeline.reports import Report, ReportClient, ReportServer


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
        (1, rows, [("t", 0, 3, 5)], False),
        (1, [], [("t", 0, 3, 5)], True),
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
