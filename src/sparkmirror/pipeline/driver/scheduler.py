"""Periodic chores of a flow (checkpoints, group sync, topic refresh, offset-map pruning,
heartbeats, progress), each on its own interval, run from the supervisor's loop.

A chore runs when its time has come (and, if it has a condition, when that holds: a chore that
waits for its condition keeps its turn); the next run is due one interval after it *started*, so
a slow chore does not drift the others. A failing chore raises to the caller; the supervisor
decides which chores are tried again sooner (:meth:`Scheduler.due_in`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Chore:
    name: str
    interval_s: float
    run: Callable[[], object]
    due: float
    #: Run only while this holds (None: always).
    when: Callable[[], bool] | None = None


class Scheduler:
    """Named chores with intervals; :meth:`run_due` runs those whose time has come."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.chores: dict[str, Chore] = {}

    def every(
        self,
        name: str,
        interval_s: float,
        run: Callable[[], object],
        *,
        now: bool = False,
        when: Callable[[], bool] | None = None,
    ) -> None:
        """Run ``run`` every ``interval_s`` seconds, the first time at once (``now``) or after one
        interval; with ``when``, only while it holds."""
        start = self.clock()
        self.chores[name] = Chore(name, interval_s, run, start if now else start + interval_s, when)

    def run_due(self) -> list[str]:
        """Run every chore that is due, in the order they were added; returns their names."""
        ran = []
        for chore in list(self.chores.values()):
            started = self.clock()
            if started >= chore.due and (chore.when is None or chore.when()):
                chore.due = started + chore.interval_s
                chore.run()
                ran.append(chore.name)
        return ran

    def due_in(self, delay_s: float, *names: str) -> None:
        """The chores named are next due ``delay_s`` from now (sooner or later than their turn)."""
        due = self.clock() + delay_s
        for name in names:
            if name in self.chores:
                self.chores[name].due = due

    def restart(self, *names: str) -> None:
        """The chores named are next due one interval from now, as when they were added."""
        now = self.clock()
        for name in names:
            if name in self.chores:
                self.chores[name].due = now + self.chores[name].interval_s
