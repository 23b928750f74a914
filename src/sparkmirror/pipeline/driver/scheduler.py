"""Periodic chores of a flow (checkpoints, group sync, topic refresh, offset-map pruning,
heartbeats, progress), each on its own interval, run from the supervisor's loop.

A chore runs when its time has come; the next run is due one interval after it *started*, so a
slow chore does not drift the others. A failing chore raises to the caller (the supervisor backs
off); it is not retried before its next turn.
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


class Scheduler:
    """Named chores with intervals; :meth:`run_due` runs those whose time has come."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.chores: dict[str, Chore] = {}

    def every(self, name: str, interval_s: float, run: Callable[[], object], *, now: bool = False) -> None:
        """Run ``run`` every ``interval_s`` seconds, the first time at once (``now``) or after one interval."""
        start = self.clock()
        self.chores[name] = Chore(name, interval_s, run, start if now else start + interval_s)

    def run_due(self) -> list[str]:
        """Run every chore that is due, in the order they were added; returns their names."""
        ran = []
        for chore in list(self.chores.values()):
            started = self.clock()
            if started >= chore.due:
                chore.due = started + chore.interval_s
                chore.run()
                ran.append(chore.name)
        return ran

    def postpone(self, delay_s: float, *names: str) -> None:
        """Move the chores named (all when none) ``delay_s`` from now: back-off after a failure."""
        until = self.clock() + delay_s
        for chore in self.chores.values():
            if not names or chore.name in names:
                chore.due = max(chore.due, until)

    def clear(self) -> None:
        self.chores.clear()
