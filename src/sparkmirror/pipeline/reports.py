"""The streaming engine's report channel: what each long-running task tells the driver, and back.

A streaming task never ends while the flow runs, so Spark hands nothing of it to the driver until
it does. Every commit interval, after its progress is durable on the target, a task sends one
line of JSON to the driver over TCP: its token, the partitions' results of the interval
(:class:`~sparkmirror.pipeline.executor.results.PartitionResult` rows: records, bytes, segments,
a refusal), and every assigned partition's position and source end. The driver answers with one
line: whether the task is to stop.

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


@dataclass
class Report:
    """One report of one task: the interval's result rows and the task's positions."""

    task: int
    attempt: int
    #: PartitionResult.as_row() of each partition written in the interval.
    results: list[dict[str, object]] = field(default_factory=list)
    #: (topic, partition, next offset to copy, source end as the consumer last saw it; -1 unknown).
    positions: list[tuple[str, int, int, int]] = field(default_factory=list)
    #: The task's last report: it ends after this one (a refusal, ``--once`` at its end, a stop).
    final: bool = False

    def to_json(self, token: str) -> bytes:
        body = {
            "token": token,
            "task": self.task,
            "attempt": self.attempt,
            "results": self.results,
            "positions": self.positions,
            "final": self.final,
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
            positions=[(str(t), int(p), int(n), int(e)) for t, p, n, e in positions],
            final=bool(body.get("final")),
        )


class ReportClient:
    """A task's end of the channel: one connection for the task's life."""

    def __init__(self, address: tuple[str, int], token: str) -> None:
        self.token = token
        self.sock = socket.create_connection(address, timeout=CONNECT_S)
        self.sock.settimeout(ANSWER_S)
        self.reader = self.sock.makefile("rb")
        # The token first, on a short line: the driver reads nothing large from a peer without it.
        self.sock.sendall(json.dumps({"token": token}).encode() + b"\n")

    def send(self, report: Report) -> bool:
        """Send ``report``; True when the driver says the task is to stop."""
        self.sock.sendall(report.to_json(self.token))
        line = self.reader.readline(MAX_LINE)
        if not line:
            raise ConnectionError("the driver closed the report channel")
        return bool(json.loads(line).get("stop"))

    def close(self) -> None:
        try:
            self.reader.close()
            self.sock.close()
        except OSError:
            pass


class ReportServer:
    """The driver's end: takes every task's reports, answers whether to stop. One per process (a
    fixed port serves every flow): each flow's job registers its token and what to do with a report.

    ``on_report(report)`` runs on the connection's thread (one per task) and returns True to stop
    the task; it must be thread-safe.
    """

    def __init__(self, *, bind: str, advertise: str, port: int = 0) -> None:
        self._handlers: dict[str, Callable[[Report], bool]] = {}
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

    def register(self, token: str, on_report: Callable[[Report], bool]) -> None:
        with self._lock:
            self._handlers[token] = on_report

    def unregister(self, token: str) -> None:
        with self._lock:
            self._handlers.pop(token, None)

    def _handler(self, token: str) -> Callable[[Report], bool] | None:
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
            stop = True if on_report is None else on_report(Report.from_json(body))
            wfile.write(json.dumps({"stop": stop}).encode() + b"\n")  # type: ignore[attr-defined]
            wfile.flush()  # type: ignore[attr-defined]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
