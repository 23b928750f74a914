"""The streaming engine on the driver: one Spark job of long-running copy tasks per flow.

:class:`StreamingCopy` shares the flow's source partitions out among at most as many tasks as the
flow has cores (a transaction group in one task), starts them as one Spark job in a thread of its
own, and takes their reports (:mod:`sparkmirror.pipeline.reports`): each report's results go
through :meth:`~sparkmirror.pipeline.driver.recorder.CopyRecorder.record` (refusals, offset map,
MM2 offset syncs, progress), then to the metrics. A refusal stops every
task; a task that fails is retried by Spark (``spark.task.maxFailures``) from the progress on the
target; a job that fails ends the copy with its error and the supervisor starts it again, from
the target again. The flow and its supervisor read it as they would a Structured Streaming query
(``isActive``, ``exception()``, ``stop()``, the last progress). Each
answer carries the flow control the task is to follow (:mod:`sparkmirror.pipeline.driver.control`).

What it must never do: let a task start on a partition another task of the flow still writes (a
job at a time per flow; a stop waits for its tasks, then cancels them), or take a report as
progress: progress is what the target holds.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from sparkmirror.core.ranges import SourceRange, check_disjoint, share_out
from sparkmirror.core.transactions import group_key
from sparkmirror.pipeline.driver.control import FlowThrottle
from sparkmirror.pipeline.driver.recorder import CopyRecorder
from sparkmirror.pipeline.exceptions import WriteError
from sparkmirror.pipeline.executor.plan import WritePlan
from sparkmirror.pipeline.executor.results import PartitionResult
from sparkmirror.pipeline.executor.stream import stream_partitions
from sparkmirror.pipeline.reports import Answer, Report, ReportServer
from sparkmirror.pipeline.session import SCHEDULER_POOL, pool_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: Seconds a stop waits for the tasks to finish their interval before it cancels them.
STOP_WAIT_S = 60.0
#: Seconds a stop then waits for the cancelled tasks to end.
CANCEL_WAIT_S = 30.0
#: The longest a flow's stop waits for its tasks (``mirror.RUN_STOP_BOUND_S``: the whole run's stop).
STOP_BOUND_S = STOP_WAIT_S + CANCEL_WAIT_S
#: Seconds after the job's start by which every task should have reported (else: no free task slot).
START_WAIT_S = 60.0


_SERVERS: dict[tuple[str, int], ReportServer] = {}
_SERVERS_LOCK = threading.Lock()


def report_server(spark: SparkSession, port: int) -> ReportServer:
    """The process's report server (``sparkmirror.report.port``; 0: any free port), made at first use.

    Embedded (``local``), it listens on loopback; on a cluster on every interface, and the tasks
    reach it at ``spark.driver.host``, as they reach the driver's own ports.
    """
    local = str(spark.sparkContext.master).startswith("local")
    host = "127.0.0.1" if local else str(spark.conf.get("spark.driver.host", "127.0.0.1"))
    with _SERVERS_LOCK:
        server = _SERVERS.get((host, port))
        if server is None:
            server = ReportServer(bind="127.0.0.1" if local else "0.0.0.0", advertise=host, port=port)
            _SERVERS[(host, port)] = server
            log.info("streaming tasks report to %s:%d", host, server.address[1])
        return server


def assign(ranges: Iterable[SourceRange], tasks: int, plan: WritePlan) -> list[list[SourceRange]]:
    """The flow's partitions shared among at most ``tasks`` tasks, about as many each; exactly-once
    keeps a transaction group in one task."""
    key = group_key(plan.transaction_groups) if plan.exactly_once else None
    groups = share_out(ranges, tasks, key, weight=lambda r: 1)
    check_disjoint(groups, key)
    return groups


class StreamingCopy:
    """One flow's job of long-running copy tasks (see the module's docstring)."""

    def __init__(
        self,
        spark: SparkSession,
        recorder: CopyRecorder,
        plan: WritePlan,
        ranges: list[SourceRange],
        *,
        tasks: int,
        throttle: FlowThrottle | None = None,
    ) -> None:
        self.spark = spark
        self.recorder = recorder
        self.flow = recorder.flow.name
        self._stop = threading.Event()
        #: When a stop was first asked for (:meth:`request_stop`): its wait is counted from then.
        self._stop_asked: float | None = None
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        #: (topic, partition) -> (next offset to copy, source end (-1: not seen yet), read up to) from the
        #: tasks' last reports.
        self.positions: dict[tuple[str, int], tuple[int, int, int]] = {
            (r.topic, r.partition): (r.start, -1, r.start) for r in ranges
        }
        #: Records on the source not yet copied: the sum over :attr:`positions` of each partition's end
        #: past its next offset, kept as reports change them (the driver reads it every turn; summing
        #: 1,000 partitions each time a report came was an idle flow's largest Python cost in the driver).
        self.lag = 0
        #: Source topics a task copied or read more of since the driver's last look at their ids
        #: (:meth:`take_moved`): the only ones a re-created topic can have reached the target through.
        self._moved: set[str] = set()
        #: Each task's newest attempt that reported: an older one's positions (a zombie Spark replaced,
        #: a closed channel's last line) are not taken, since a task sends only what changed.
        self._attempts: dict[int, int] = {}
        token = secrets.token_hex(16)
        self.token = token
        self.server = report_server(spark, recorder.flow.spark.report_port)
        self.server.register(token, self._on_report)
        self.plan = dataclasses.replace(plan, report_address=self.server.address, report_token=token)
        self.groups = assign(ranges, tasks, self.plan)
        #: Flow control: what the tasks follow from their start and are told with each answer.
        self.throttle = throttle or FlowThrottle(self.flow, recorder.flow.target, configured=None)
        self.plan = dataclasses.replace(self.plan, start_control=self.throttle.first(len(self.groups)))
        self.throttle.tasks(range(len(self.groups)))
        self.group_id = f"sparkmirror-stream-{self.flow}-{secrets.token_hex(4)}"
        self.started = time.monotonic()
        #: Source topics deleted and re-created since the job began, as the driver found them
        #: (:meth:`topics_recreated`): every answer from then on tells the tasks.
        self.recreated: tuple[tuple[str, str, str], ...] = ()
        #: Tasks that have reported at least once; one that never does waits for a task slot.
        self.reported: set[int] = set()
        self._slow_start_said = False
        self._thread = threading.Thread(target=self._run, name=f"sparkmirror-stream {self.flow}", daemon=True)
        self._thread.start()

    # -- what the flow and the supervisor read (as of a StreamingQuery) ------------------------
    @property
    def isActive(self) -> bool:  # noqa: N802 - the name StreamingQuery has
        return self._thread.is_alive()

    def exception(self) -> BaseException | None:
        return self._error

    def progress_json(self) -> dict[str, object]:
        """The tasks' positions in the shape of a StreamingQueryProgress (its sources' offsets)."""
        self.check_started()
        done: dict[str, dict[str, int]] = {}
        latest: dict[str, dict[str, int]] = {}
        with self._lock:
            for (t, p), (nxt, end, _read) in self.positions.items():
                done.setdefault(t, {})[str(p)] = nxt
                latest.setdefault(t, {})[str(p)] = max(nxt, end)
        return {"sources": [{"endOffset": done, "latestOffset": latest}]}

    def read_positions(self) -> dict[tuple[str, int], tuple[int, int, int]]:
        """A copy of :attr:`positions`: (next offset to copy, source end or -1, read up to) per partition."""
        with self._lock:
            return dict(self.positions)

    def check_started(self) -> None:
        """Say once if a task has not started a minute after the job: it waits for a task slot (a core),
        and its partitions are not copied meanwhile."""
        if self._slow_start_said or time.monotonic() - self.started < START_WAIT_S or not self.isActive:
            return
        with self._lock:
            waiting = [i for i in range(len(self.groups)) if i not in self.reported]
        if not waiting:
            return
        self._slow_start_said = True
        parts = [f"{r.topic}[{r.partition}]" for i in waiting for r in self.groups[i]]
        log.error(
            "flow=%s %d of %d streaming tasks have not started after %.0fs; %d partitions (%s) are not copied "
            "until they do. Each task holds a task slot (a core) for as long as the flow runs: give the "
            "application at least as many slots as the flows' tasks (sparkmirror.spark.master = local[N], "
            "or more executor cores)",
            self.flow,
            len(waiting),
            len(self.groups),
            START_WAIT_S,
            len(parts),
            ", ".join(parts[:5]) + (" …" if len(parts) > 5 else ""),
        )

    def take_moved(self) -> set[str]:
        """The source topics whose positions moved since the last call (then forgotten)."""
        with self._lock:
            moved, self._moved = self._moved, set()
        return moved

    def topics_recreated(self, changed: Iterable[tuple[str, str, str]]) -> None:
        """``(topic, id the job began with, id now)`` of each topic: the tasks copying these topics fail at
        their next answer, before they copy more of them (a re-created topic's offsets are not the old one's)."""
        self.recreated = tuple(sorted(changed)) or self.recreated

    def request_stop(self) -> float:
        """Tell every task to stop after its current interval, without waiting (:meth:`stop` waits);
        returns when the stop was first asked for."""
        if self._stop_asked is None:
            self._stop_asked = time.monotonic()
        self._stop.set()
        return self._stop_asked

    def stop(self) -> None:
        """Tell every task to stop after its current interval; cancel what has not stopped in time,
        :data:`STOP_WAIT_S` after the stop was first asked for."""
        asked = self.request_stop()
        self._thread.join(max(0.0, asked + STOP_WAIT_S - time.monotonic()))
        if self._thread.is_alive():
            log.warning("flow=%s streaming tasks did not stop within %.0fs; cancelling them", self.flow, STOP_WAIT_S)
            self.spark.sparkContext.cancelJobGroup(self.group_id)
            self._thread.join(CANCEL_WAIT_S)
            if self._thread.is_alive():
                log.error(
                    "flow=%s streaming tasks still running %.0fs after they were cancelled", self.flow, CANCEL_WAIT_S
                )
        self.server.unregister(self.token)

    # -- the job -----------------------------------------------------------------------------
    def _run(self) -> None:
        sc = self.spark.sparkContext
        plan, groups = self.plan, self.groups
        try:
            if not groups:
                return
            sc.setLocalProperty(SCHEDULER_POOL, pool_name(self.flow))
            sc.setJobGroup(
                self.group_id,
                f"sparkmirror {self.flow}: streaming copy of {sum(len(g) for g in groups)} partitions "
                f"in {len(groups)} tasks",
                interruptOnCancel=True,
            )
            log.info(
                "flow=%s streaming engine: %d partitions in %d long-running tasks (clients: %s), progress committed "
                "every %d ms",
                self.flow,
                sum(len(g) for g in groups),
                len(groups),
                plan.transport,
                plan.commit_interval_ms,
            )

            def body(items: Iterable[tuple[int, list[SourceRange]]]) -> Iterator[PartitionResult]:
                return stream_partitions(items, plan)

            sc.parallelize(list(enumerate(groups)), len(groups)).mapPartitions(body).collect()
        except BaseException as exc:  # noqa: BLE001 - the supervisor reads it through exception()
            with self._lock:
                if self._error is None and not self._stop.is_set():
                    self._error = exc
        finally:
            self._stop.set()
            self.server.unregister(self.token)  # tasks of a failed job still reporting are told to stop

    def _on_report(self, report: Report) -> Answer:
        """One task's interval: its results recorded; the answer tells it whether to
        stop, and the flow control it is to follow."""
        try:
            results = [PartitionResult.from_row(row) for row in report.results]
        except Exception as exc:  # noqa: BLE001 - said, and the job stops on it
            # Its refusals and offset-map segments cannot be recorded: the flow starts again from the
            # progress on the target, which the task made durable before it reported.
            log.error("flow=%s task %d: unreadable report (%s); the flow restarts", self.flow, report.task, exc)
            with self._lock:
                if self._error is None:
                    self._error = WriteError(
                        f"flow={self.flow} task {report.task}: unreadable report ({exc}); "
                        "the flow restarts from the progress on the target",
                        terminal=False,
                    )
                    self._stop.set()
            results = []
        with self._lock:
            self.reported.add(report.task)
            # A task's report carries the positions that changed since it last sent them (every
            # partition's in an attempt's first): the others' stay as they were.
            newest = max(report.attempt, self._attempts.get(report.task, report.attempt))
            self._attempts[report.task] = newest
            positions = report.positions if report.attempt == newest else []
            lag = self.lag  # assigned once: the driver's loop reads it without the lock
            for t, p, nxt, end, read in positions:
                # The end never goes back: a consumer forgets a deleted topic's (-1), and that end is
                # what tells whether its records were all mirrored (pipeline/driver/deletions.py).
                held = self.positions.get((t, p))
                if held is None:
                    seen = -1
                    self._moved.add(t)
                else:
                    seen = held[1]
                    lag -= max(0, seen - held[0])
                    if held[0] != nxt or held[2] != read:
                        self._moved.add(t)
                self.positions[(t, p)] = (nxt, max(end, seen), read)
                lag += max(0, max(end, seen) - nxt)
            self.lag = lag
            if self._error is None and results:
                try:
                    self.recorder.record(results)
                except BaseException as exc:  # noqa: BLE001 - a refusal: every task stops, the flow ends on it
                    self._error = exc
                    self._stop.set()
        if self.recorder.metrics is not None and results:
            try:
                interval = report.window_s or self.plan.commit_interval_ms / 1000
                self.recorder.metrics.batch(results, interval, time.time())
            except Exception as exc:  # noqa: BLE001 - metrics must not fail the copy
                log.warning("flow=%s metrics of task %d not counted: %s", self.flow, report.task, exc)
        answer = self.throttle.answer(report, self._stop.is_set())
        return dataclasses.replace(answer, recreated=self.recreated) if self.recreated else answer
