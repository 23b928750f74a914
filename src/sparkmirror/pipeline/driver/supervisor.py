"""Supervises one flow: starts it, restarts it with back-off after a failure, stops it.

A failure is retried unless retrying cannot fix it: a record the target refuses for good (the
sink's terminal error), a cluster that refuses our principal or an operation (AccessDenied, one
line naming cluster, principal and operation), an executor environment that cannot run the job (a missing module, code
that cannot be shipped), a configuration error. ``--once`` gives up after a few failures in a
row. A cluster that cannot be reached is not a reason to stop: a failed start is tried again after
a back-off (1 s doubling to 60 s), and while the copy runs a failed chore makes the topic refresh
and config sync due again after that back-off.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from sparkmirror.errors import ConfigError
from sparkmirror.kafka.access import AccessDenied
from sparkmirror.pipeline.driver.flow import CONFIG_SYNC, REFRESH, Flow
from sparkmirror.pipeline.exceptions import (
    TERMINAL_MARKER,
    FlowFailed,
    terminal_message,
)

log = logging.getLogger(__name__)

#: Seconds before the n-th restart in a row (the last one repeats).
RESTART_BACKOFF_S = (1, 2, 5, 10, 30, 60)
#: ``--once`` stops after this many failures in a row.
ONCE_MAX_FAILURES = 5

# Failures that replaying cannot fix: the executors' Python lacks a module, or the job's code
# cannot be shipped. Everything else is retried.
_ENVIRONMENT_ERRORS = re.compile(r"\b(ModuleNotFoundError|ImportError|PicklingError|SyntaxError): ?([^\n]*)")

#: The longest line a failure is said in (the whole text is logged at debug level).
MAX_ERROR_CHARS = 400
#: Errors that only wrap the one that failed.
_WRAPPERS = ("Py4JJavaError", "SparkException", "PythonException", "An error occurred while calling")
#: The error of the task attempt that failed the job last, as Spark words a stage failure.
_TASK_FAILURE = re.compile(r"most recent failure: .*?\): ([\w.$]+(?:Error|Exception)\b[^\n]*)")


def summary(text: str) -> str:
    """One line that says what failed: a terminal error's sentence (with its marker), else the first
    line naming an error that is not Py4J's or Spark's wrapper, at most :data:`MAX_ERROR_CHARS`."""
    idx = text.find(TERMINAL_MARKER)
    failure = _TASK_FAILURE.search(text)
    if idx >= 0:
        line = text[idx:].splitlines()[0]
    elif failure is not None and not any(w in failure.group(1).split(":", 1)[0] for w in _WRAPPERS):
        line = failure.group(1)  # a JVM task's own error, inside Spark's "stage failure"
    else:
        lines = [ln.strip().removeprefix(": ").strip() for ln in text.splitlines()]
        lines = [ln for ln in lines if ln and not ln.startswith(("at ", "Traceback", "File ", "..."))]
        named = [ln for ln in lines if re.match(r"^[\w.$]*(Error|Exception)\b", ln)]
        own = [ln for ln in named if not any(w in ln.split(":", 1)[0] or ln.startswith(w) for w in _WRAPPERS)]
        line = (own or named or lines or [text])[0]
    line = line.replace("py4j.protocol.Py4JJavaError: ", "").replace("An error occurred while calling", "calling")
    return re.sub(r"\s+", " ", line)[:MAX_ERROR_CHARS]


class FlowSupervisor:
    """Start, back-off, stop: nothing else."""

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.failures = 0
        self._restart_at: float | None = None

    def start(self) -> None:
        """The first start; a failure retrying can fix (a cluster that went away since the run's start
        check) is tried again after the back-off, as a failed restart is."""
        self._guarded(self.flow.start, "cannot start", starting=True)

    def request_stop(self) -> None:
        self.flow.stop_requested.set()

    def poll(self) -> None:
        """Called periodically from the main thread; raises FlowFailed, ConfigError or AccessDenied only."""
        self._guarded(self._poll, "", starting=False)

    def _guarded(self, step: Callable[[], None], what: str, *, starting: bool) -> None:
        """Run one step. A failure retrying cannot fix is reported as ``failed`` and raised; any other
        is logged and tried again after the back-off: the flow starts again if it was starting or its
        copy is gone, or its chores (topic refresh, config sync) are due again if it still runs."""
        try:
            step()
        except (FlowFailed, ConfigError, AccessDenied) as exc:
            self.flow.report("failed", str(exc))
            raise
        except Exception as exc:  # noqa: BLE001 - transient by assumption; logged each time
            denied = self.flow.access_denied(str(exc))
            if denied is not None:
                self.flow.report("failed", str(denied))
                raise denied from None
            self._retry_later(exc, what, running=not starting and self.flow.copy_job is not None)

    def _retry_later(self, exc: Exception, what: str, *, running: bool) -> None:
        delay = self._failed()
        error = f"{type(exc).__name__}: {first_line(str(exc))}"
        self.flow.report("running" if running else "restarting", error)
        log.warning(
            "flow=%s %s; trying again in %ds", self.flow.flow.name, f"{what}: {error}" if what else error, delay
        )
        try:
            self._give_up_once(str(exc))
        except FlowFailed as failed:
            self.flow.report("failed", str(failed))
            raise
        if running:
            self.flow.scheduler.due_in(delay, REFRESH, CONFIG_SYNC)
        else:
            self._restart_at = time.monotonic() + delay

    def _poll(self) -> None:
        flow = self.flow
        if flow.recorder.succeeded:
            flow.recorder.succeeded = False
            self.failures = 0
        if self._restart_at is not None:
            if time.monotonic() >= self._restart_at and not flow.stop_requested.is_set():
                self._restart_at = None
                flow.progress.restarts += 1
                if flow.metrics is not None:
                    flow.metrics.restarted()
                flow.start()
            return
        if flow.copy_job is not None and not flow.copy_job.isActive:
            self._on_copy_end()
            return
        flow.poll()

    def _on_copy_end(self) -> None:
        flow = self.flow
        error = flow.take_ended_copy()
        if error is None:
            if flow.once or flow.stop_requested.is_set():
                flow.finish()
                return
            # The copy runs until stopped: one that ends without an error had its thread die (a JVM error
            # Spark did not record). Finishing here would leave the flow silently idle: start it again.
            text = shown = "the copy's job ended without an error (see the Spark log above)"
        else:
            text = str(error)
            shown = summary(text)
            log.debug("flow=%s the copy's job failed: %s", flow.flow.name, text)
        terminal = terminal_message(text)
        if terminal is not None:
            raise FlowFailed(terminal)
        denied = flow.access_denied(text, copying=True)
        if denied is not None:
            raise denied
        broken = _ENVIRONMENT_ERRORS.search(text)
        if broken is not None:
            raise FlowFailed(f"flow={flow.flow.name} cannot run: {broken.group(1)}: {broken.group(2).strip()}")
        if flow.stop_requested.is_set():
            # Stopping: what the tasks had not made durable is copied again by the next run.
            log.info(
                "flow=%s stopped; its tasks ended on an error (%s), and the next run starts from the target",
                flow.flow.name,
                shown,
            )
            flow.finished = True
            return
        delay = self._failed()
        self.flow.report("restarting", shown)
        self._give_up_once(shown)
        log.warning(
            "flow=%s copy failed (%s); starting again from the progress on the target in %ds",
            flow.flow.name,
            shown,
            delay,
        )
        self._restart_at = time.monotonic() + delay

    def _failed(self) -> int:
        """Count a failure; the back-off before the next attempt."""
        self.failures += 1
        return RESTART_BACKOFF_S[min(self.failures - 1, len(RESTART_BACKOFF_S) - 1)]

    def _give_up_once(self, last: str) -> None:
        if self.flow.once and self.failures >= ONCE_MAX_FAILURES:
            raise FlowFailed(f"flow={self.flow.flow.name} failed {self.failures} times in a row: {last}") from None

    def stop(self) -> None:
        self.flow.close()


def first_line(text: str) -> str:
    """The first line of an error dump that says something (no traceback frame)."""
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ")):
            return re.sub(r"\s+", " ", line)[:300]
    return text[:300]
