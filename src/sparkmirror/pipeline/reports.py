"""The streaming engine's report channel: what each long-running task tells the driver, and back.

A streaming task never ends while the flow runs, so Spark hands nothing of it to the driver until
it does. Every commit interval, after its progress is durable on the target, a task sends (from a
thread of its own, so it never waits for the driver) one line of JSON to the driver over TCP: its
token, the partitions' results of the interval
(:class:`~sparkmirror.pipeline.executor.results.PartitionResult` rows: records, bytes, segments,
a refusal), the positions and source ends that changed since it last sent them, and what it copied and how long it
waited for its byte budget since its last report. The driver answers with one line
(:class:`Answer`): whether the task is to stop, the bytes per second it may copy, and which of the
flow's source topics are paused (flow control, :mod:`sparkmirror.core.control`).

What the channel must never carry is correctness: progress is on the target before it is
reported, so a lost report costs a metric, never a record (the driver reloads the offset map from
the target on every start). The token, a random secret in the pickled plan, keeps other processes
on the network from feeding the driver's metrics or stopping nothing; it is never logged.
"""

from __future__ import annotations

import hmac
import json
import logging
import socket
import socketserver
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

#: Seconds a task waits to connect to the driver, and for the driver's answer to one report.
CONNECT_S = 30.0
ANSWER_S = 60.0
#: The longest report line the driver reads (a task of 1,000 partitions sends about 300 KB), and the
#: longest first line (the token), read before anything else.
MAX_LINE = 64 * 1024 * 1024
HELLO_MAX = 4096
#: Seconds the driver waits for a task's next line (tasks report at least every second).
IDLE_S = 300.0

#: One partition's position in a report: (topic, partition, next offset to copy, source end as the
#: consumer last saw it (-1: unknown), how far the task has read it (past transaction markers)).
Position = tuple[str, int, int, int, int]


@dataclass
class Report:
    """One report of one task: the interval's result rows and the task's positions."""

    task: int
    attempt: int
    #: PartitionResult.as_row() of each partition written in the interval.
    results: list[list[object]] = field(default_factory=list)
    #: Each partition's :data:`Position` (see StreamTask._positions).
    positions: list[Position] = field(default_factory=list)
    #: The task's last report: it ends after this one (a refusal, ``--once`` at its end, a stop).
    final: bool = False
    #: Key and value bytes the task read since its last report, the seconds that took, and the part
    #: of them it waited for its byte budget (throttled).
    copied_bytes: int = 0
    window_s: float = 0.0
    held_s: float = 0.0
    #: The version of the flow control the task follows (:attr:`Answer.version`): the driver says a
    #: change is in effect (``status``: ``paused``) once every task reported it.
    control_version: int = 0

    def to_json(self, token: str) -> bytes:
        body = {
            "token": token,
            "task": self.task,
            "attempt": self.attempt,
            "results": self.results,
            "positions": self.positions,
            "final": self.final,
            "copied_bytes": self.copied_bytes,
            "window_s": round(self.window_s, 6),
            "held_s": round(self.held_s, 6),
            "control_version": self.control_version,
        }
        return json.dumps(body, separators=(",", ":")).encode() + b"\n"

    @classmethod
    def from_json(cls, body: dict[str, object]) -> Report:
        positions = body.get("positions") or []
        assert isinstance(positions, list)
        results = body.get("results") or []
        assert isinstance(results, list)
        return cls(
            task=int(body["task"]),  # type: ignore[call-overload]
            attempt=int(body["attempt"]),  # type: ignore[call-overload]
            results=results,
            positions=[_position(x) for x in positions],
            final=bool(body.get("final")),
            copied_bytes=int(body.get("copied_bytes") or 0),  # type: ignore[call-overload]
            window_s=float(body.get("window_s") or 0.0),  # type: ignore[arg-type]
            held_s=float(body.get("held_s") or 0.0),  # type: ignore[arg-type]
            control_version=int(body.get("control_version") or 0),  # type: ignore[call-overload]
        )


def _position(x: list[object]) -> Position:
    """A position as sent: (topic, partition, next, end, read); an older task's has no ``read``."""
    t, p, n, e = str(x[0]), int(x[1]), int(x[2]), int(x[3])  # type: ignore[call-overload]
    return t, p, n, e, int(x[4]) if len(x) > 4 else n  # type: ignore[call-overload]


@dataclass(frozen=True)
class Answer:
    """The driver's answer to one report: stop, and the flow control the task is to follow."""

    stop: bool = False
    #: Bytes per second the task may copy (``None``: no limit).
    rate: float | None = None
    #: The flow's source topics that are not to be read (the task pauses its partitions of them).
    paused: tuple[str, ...] = ()
    #: Which change of the flow control this is (the task reports it back once it follows it).
    version: int = 0
    #: Source topics deleted and re-created since the job began, as (topic, its id then, its id now): a
    #: task copying one of them fails at once (the driver's check: ``Flow._watch_topic_ids``).
    recreated: tuple[tuple[str, str, str], ...] = ()

    def to_json(self) -> bytes:
        body: dict[str, object] = {
            "stop": self.stop, "rate": self.rate, "paused": list(self.paused), "version": self.version
        }  # fmt: skip
        if self.recreated:
            body["recreated"] = [list(r) for r in self.recreated]
        return json.dumps(body, separators=(",", ":")).encode() + b"\n"

    @classmethod
    def from_json(cls, line: bytes) -> Answer:
        body = json.loads(line)
        rate = body.get("rate")
        return cls(
            stop=bool(body.get("stop")),
            rate=None if rate is None else float(rate),
            paused=tuple(str(t) for t in body.get("paused") or ()),
            version=int(body.get("version") or 0),
            recreated=tuple((str(t), str(was), str(now)) for t, was, now in body.get("recreated") or ()),
        )


class ReportClient:
    """A task's end of the channel: one connection for the task's life, written by a thread of its own.

    :meth:`post` never waits for the driver: the driver's answer to one report can take a while
    when it is busy (a report of 500 partitions took 140 ms, p100 600 ms, with 1,000 groups'
    checkpoints on the same driver), and a task that waited would not read meanwhile. Reports
    queued while one is on its way go as one (:func:`merge`), so a slow driver never makes the
    queue grow. :meth:`send` is for the last report: it waits for the answer.
    """

    def __init__(self, address: tuple[str, int], token: str) -> None:
        self.token = token
        self.sock = socket.create_connection(address, timeout=CONNECT_S)
        self.sock.settimeout(ANSWER_S)
        self.reader = self.sock.makefile("rb")
        # The token first, on a short line: the driver reads nothing large from a peer without it.
        self.sock.sendall(json.dumps({"token": token}).encode() + b"\n")
        self._queued: list[Report] = []
        self._waiters: list[threading.Event] = []
        self._wake = threading.Condition()
        self._closed = False
        #: The driver has told the task to stop (in an answer to any report).
        self._stop = False
        #: The driver's last answer (its flow control), and how many answers came so far.
        self.answer = Answer()
        self.answers = 0
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._send_queued, name="sparkmirror-report", daemon=True)
        self._thread.start()

    def post(self, report: Report) -> bool:
        """Queue ``report`` for the driver; True when the driver has said (answering an earlier report)
        that the task is to stop. Raises if the channel failed."""
        with self._wake:
            self._check()
            self._queued.append(report)
            self._wake.notify()
            return self._stop

    @property
    def stop_requested(self) -> bool:
        """Whether the driver has said, answering any report so far, that the task is to stop."""
        return self._stop

    def send(self, report: Report) -> bool:
        """Send ``report`` after everything queued, and wait for the driver's answer; True: stop."""
        done = threading.Event()
        with self._wake:
            self._check()
            self._queued.append(report)
            self._waiters.append(done)
            self._wake.notify()
        if not done.wait(ANSWER_S + CONNECT_S):
            raise TimeoutError(f"the driver did not answer a report within {ANSWER_S + CONNECT_S:.0f}s")
        with self._wake:
            self._check()
            return self._stop

    def _check(self) -> None:
        if self._failure is not None:
            raise ConnectionError(f"the report channel to the driver failed: {self._failure}") from None

    def _send_queued(self) -> None:
        while True:
            with self._wake:
                while not self._queued and not self._closed:
                    self._wake.wait()
                if not self._queued:
                    return
                report = merge(self._queued)
                waiters, self._queued, self._waiters = self._waiters, [], []
            try:
                self.sock.sendall(report.to_json(self.token))
                line = self.reader.readline(MAX_LINE)
                if not line:
                    raise ConnectionError("the driver closed the report channel")
                answer = Answer.from_json(line)
            except BaseException as exc:  # noqa: BLE001 - any failure ends the channel, said by the next post
                with self._wake:
                    self._failure = exc
                for done in waiters:
                    done.set()
                return
            with self._wake:
                self._stop = self._stop or answer.stop
                self.answer = answer
                self.answers += 1
            for done in waiters:
                done.set()

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout=ANSWER_S)
        try:
            self.reader.close()
            self.sock.close()
        except OSError:
            pass


def merge(reports: list[Report]) -> Report:
    """Reports queued one after another, as one: every interval's rows in order, the latest positions
    of each partition, final if the last one is."""
    if len(reports) == 1:
        return reports[0]
    positions: dict[tuple[str, int], Position] = {}
    for r in reports:
        for pos in r.positions:
            positions[(pos[0], pos[1])] = pos
    last = reports[-1]
    return Report(
        task=last.task,
        attempt=last.attempt,
        results=[row for r in reports for row in r.results],
        positions=list(positions.values()),
        final=last.final,
        control_version=last.control_version,
        copied_bytes=sum(r.copied_bytes for r in reports),
        window_s=sum(r.window_s for r in reports),
        held_s=sum(r.held_s for r in reports),
    )


OnReport = Callable[[Report], "Answer | bool"]


class ReportServer:
    """The driver's end: takes every task's reports, answers whether to stop. One per process (a
    fixed port serves every flow): each flow's job registers its token and what to do with a report.

    ``on_report(report)`` runs on the connection's thread (one per task) and returns the
    :class:`Answer` (or just whether to stop); it must be thread-safe.
    """

    def __init__(self, *, bind: str, advertise: str, port: int = 0) -> None:
        self._handlers: dict[str, OnReport] = {}
        self._lock = threading.Lock()
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(IDLE_S)
                try:
                    outer._serve(self.rfile, self.wfile, self.client_address)
                except OSError as exc:  # a task gone (timeout, reset): its next attempt connects anew
                    log.debug("report channel: %s: %s", self.client_address, exc)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server((bind, port), Handler)
        self.address = (advertise, int(self.server.server_address[1]))
        self.thread = threading.Thread(target=self.server.serve_forever, name="sparkmirror-reports", daemon=True)
        self.thread.start()

    def register(self, token: str, on_report: OnReport) -> None:
        with self._lock:
            self._handlers[token] = on_report

    def unregister(self, token: str) -> None:
        with self._lock:
            self._handlers.pop(token, None)

    def _handler(self, token: str) -> OnReport | None:
        with self._lock:
            handlers = list(self._handlers.items())
        found = None
        for known, handler in handlers:  # every token compared, in constant time each
            if hmac.compare_digest(token.encode(), known.encode()):
                found = handler
        return found

    def _serve(self, rfile: object, wfile: object, peer: object) -> None:
        try:
            hello = json.loads(rfile.readline(HELLO_MAX))  # type: ignore[attr-defined]
            token = str(hello.get("token", "")) if isinstance(hello, dict) else ""
        except ValueError:
            token = ""
        if self._handler(token) is None:
            log.warning("report channel: a connection from %s without a running job's token; closed", peer)
            return
        while True:
            line = rfile.readline(MAX_LINE)  # type: ignore[attr-defined]
            if not line:
                return
            try:
                body = json.loads(line)
            except ValueError:
                log.warning("report channel: a malformed report from %s; connection closed", peer)
                return
            if not hmac.compare_digest(str(body.get("token", "")).encode(), token.encode()):
                log.warning("report channel: a report from %s with another token; connection closed", peer)
                return
            on_report = self._handler(token)
            # A job that has ended (stopped, failed) tells its remaining tasks to stop.
            answer = Answer(stop=True) if on_report is None else on_report(Report.from_json(body))
            if isinstance(answer, bool):
                answer = Answer(stop=answer)
            wfile.write(answer.to_json())  # type: ignore[attr-defined]
            wfile.flush()  # type: ignore[attr-defined]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
