"""Carry out a checked plan: commit the translated offsets on the destination, then read them back.

Safe to run twice: a second run finds every offset already in place (``unchanged``) and commits
nothing. The groups' emptiness is checked again right before committing, since consumers may
have started between planning and applying (the broker would also refuse a commit to an active
group; the check turns that into a clear message naming the members).
"""

from __future__ import annotations

import logging

from sparkmirror.config.model import MirrorConfig
from sparkmirror.core.failover import FailoverPlan, FailoverRefused, RefusalKind
from sparkmirror.errors import SparkMirrorError
from sparkmirror.failover.plan import Cluster, describe_groups
from sparkmirror.kafka.groups import commit_offsets, committed_offsets

log = logging.getLogger(__name__)


class ApplyError(SparkMirrorError):
    """Offsets were committed but did not read back as committed."""


def apply_plan(cfg: MirrorConfig, plan: FailoverPlan) -> int:
    """Commit what ``plan`` says on its destination; returns the number of offsets committed.

    Raises :class:`FailoverRefused` when a check fails (nothing is committed then).
    """
    plan.check()
    commits = plan.commits()
    if not commits:
        return 0
    dst = Cluster.of(cfg, plan.destination)
    now = describe_groups(dst, sorted(commits))
    active = {g: s for g, s in now.items() if s.active}
    if active:
        names = ", ".join(f"{g} ({len(s.members)} members)" for g, s in sorted(active.items()))
        raise FailoverRefused(
            f"groups became active on {plan.destination} after planning: {names}; nothing was committed",
            RefusalKind.ACTIVE_GROUPS.value,
        )
    done = 0
    for group, offsets in sorted(commits.items()):
        commit_offsets(dst.consumer, group, offsets)
        back = committed_offsets(dst.consumer, group, list(offsets))
        wrong = {tp: (want, back.get(tp)) for tp, want in offsets.items() if back.get(tp) != want}
        if wrong:
            detail = ", ".join(f"{t}[{p}] wanted {w} got {g}" for (t, p), (w, g) in sorted(wrong.items())[:5])
            raise ApplyError(f"group {group} on {plan.destination}: committed offsets did not read back: {detail}")
        done += len(offsets)
        log.info("group %s: committed %d offsets on %s (%s)", group, len(offsets), plan.destination, plan.command)
    return done
