"""The driver's side of flow control: the flow's byte rate shared among its tasks (and a target
cluster's among its flows), and the answer each task's report gets.

A flow's limit holds across all its tasks wherever they run: every task's report says what it read
and how long it waited for its budget since the last one, and the answer gives it its share of the
flow's rate, max-min fair by what each task showed it wants (:func:`~sparkmirror.core.control.share`).
A target cluster's limit (``<target>.sparkmirror.throttle.bytes.per.second``) is shared the same
way among the flows into it that run in this process. A change of the operator's record is in
effect (``status`` says ``paused``) once every task of the job has reported that it follows it:
each answer carries the change's version and each report the version its task follows.

Shares add up to the limit, and each task's bucket holds half a second of its share, so any 10 s
window stays within 5% of the limit plus one read (measured in tests/integration/test_flow_control.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sparkmirror.core.control import FlowControl, share, wanted
from sparkmirror.pipeline.reports import Answer, Report


@dataclass
class _Window:
    """What one task showed in its last report: its rate, whether it was held back, and the share it was
    last given."""

    rate: float = 0.0
    held: bool = False
    reported: bool = False
    granted: float = 0.0

    @property
    def wants(self) -> float | None:
        """What the task wants of the limit (None: as much as it can get; a task not heard from yet too)."""
        return wanted(self.rate, self.held) if self.reported else None


class TargetShares:
    """Each target cluster's byte limit shared among the flows into it in this process."""

    def __init__(self, limits: Mapping[str, int | None]) -> None:
        self.limits = {t: v for t, v in limits.items() if v}
        self._wants: dict[str, dict[str, float | None]] = {}
        self._lock = threading.Lock()

    def limit(self, target: str, flow: str, want: float | None) -> float | None:
        """``flow``'s share of its target's limit, now that it wants ``want`` (``None``: no limit)."""
        total = self.limits.get(target)
        if total is None:
            return None
        with self._lock:
            wants = self._wants.setdefault(target, {})
            wants[flow] = want
            return share(total, wants)[flow]

    def leave(self, target: str, flow: str) -> None:
        with self._lock:
            self._wants.get(target, {}).pop(flow, None)


class FlowThrottle:
    """One streaming job's flow control: the operator's record, the limit, each task's share."""

    def __init__(
        self,
        flow: str,
        target: str,
        *,
        configured: int | None,
        targets: TargetShares | None = None,
    ) -> None:
        self.flow = flow
        self.target = target
        self.configured = configured
        self.targets = targets
        self.control = FlowControl(flow)
        self._windows: dict[int, _Window] = {}
        self._lock = threading.Lock()
        #: Seconds the flow was held back by its limit (its tasks' waits, averaged over the tasks).
        self.held_s = 0.0
        self._paused: tuple[str, ...] = ()
        self._topics: tuple[str, ...] = ()
        #: Each change of the record (or of the topics it resolves to) is a new version; the version each
        #: task reported it follows; and the record and paused topics every task follows (in effect).
        self.version = 0
        self._followed: dict[int, int] = {}
        self.in_effect: tuple[FlowControl, tuple[str, ...]] = (self.control, ())

    def tasks(self, tasks: Iterable[int]) -> None:
        """A new job's tasks (what the last one's showed is forgotten); they start with the current version."""
        with self._lock:
            self._windows = {t: _Window() for t in tasks}
            self._followed = dict.fromkeys(self._windows, self.version)
            self.in_effect = (self.control, self._paused)

    def stopped(self) -> None:
        """No task runs: nothing copies, whatever the record says, so it is in effect as it is."""
        with self._lock:
            self._windows, self._followed = {}, {}
            self.in_effect = (self.control, self._paused)

    def follow(self, control: FlowControl, topics: Iterable[str]) -> None:
        """The operator's record as of now, and the flow's source topics (to resolve its regexes)."""
        self._topics = tuple(sorted(topics))
        paused = tuple(t for t in self._topics if control.is_paused(t))
        with self._lock:
            if (control, paused) == (self.control, self._paused):
                return
            self.control = control
            self._paused = paused
            self.version += 1
            if not self._windows:
                self.in_effect = (control, paused)

    @property
    def paused_topics(self) -> tuple[str, ...]:
        return self._paused

    def limit(self) -> float | None:
        """The flow's bytes per second now: its own limit, within its share of its target's."""
        own = self.control.limit(self.configured)
        if self.targets is None:
            return own
        with self._lock:
            wants = [w.wants for w in self._windows.values()]
        # A new job (no report yet) or a task held back: as much as the target allows.
        want = None if not wants or any(w is None for w in wants) else sum(w for w in wants if w is not None)
        if own is not None and want is not None:
            want = min(float(own), want)
        elif own is not None:
            want = float(own)
        target = self.targets.limit(self.target, self.flow, want)
        if target is None:
            return own
        return target if own is None else min(float(own), target)

    def first(self, tasks: int) -> Answer:
        """What every task of a new job follows until its first answer: an even share of the limit."""
        self.tasks(range(tasks))
        limit = self.limit()
        rate = None if limit is None else limit / max(1, tasks)
        with self._lock:
            for w in self._windows.values():
                w.granted = rate or 0.0
        return Answer(rate=rate, paused=self._paused, version=self.version)

    def answer(self, report: Report, stop: bool) -> Answer:
        """What ``report``'s task is told: stop, its byte rate, what is paused.

        The task's share is at most what the others' last grants leave of the limit: each task's share
        is worked out at its own report from the others' older windows, and grants that added up to
        more than the limit would let the flow exceed it until the next reports."""
        with self._lock:
            self.held_s += report.held_s / max(1, len(self._windows))
            if report.final:  # the task ends: its share and its version no longer count
                self._windows.pop(report.task, None)
                self._followed.pop(report.task, None)
            else:
                w = self._windows.setdefault(report.task, _Window())
                self._followed[report.task] = report.control_version
                if report.window_s > 0:
                    w.rate = report.copied_bytes / report.window_s
                    # Held back for a tenth of the window or more: it would have copied more.
                    w.held = report.held_s >= 0.1 * report.window_s
                    w.reported = True
            if all(v == self.version for v in self._followed.values()):
                self.in_effect = (self.control, self._paused)
        limit = self.limit()
        with self._lock:
            rate = None
            mine = self._windows.get(report.task)
            if limit is not None and mine is not None:
                shares = share(limit, {t: x.wants for t, x in self._windows.items()})
                others = sum(x.granted for t, x in self._windows.items() if t != report.task)
                rate = mine.granted = max(0.0, min(shares[report.task], limit - others))
            return Answer(stop=stop, rate=rate, paused=self._paused, version=self.version)

    def close(self) -> None:
        if self.targets is not None:
            self.targets.leave(self.target, self.flow)
