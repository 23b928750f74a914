"""The pipeline's errors: what a task raises when a record cannot be written, what a flow raises
when it stops for good.

They cross process boundaries (Spark ships a task's exception to the driver as text), so a
terminal error carries :data:`TERMINAL_MARKER` in its message and every class stays picklable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sparkmirror.errors import SparkMirrorError

#: Marker the driver looks for in the error text of a failed copy job.
TERMINAL_MARKER = "[sparkmirror:terminal]"


class WriteError(SparkMirrorError):
    """A record could not be written; names topic, partition and offset."""

    def __init__(self, message: str, *, terminal: bool) -> None:
        super().__init__((TERMINAL_MARKER + " " if terminal else "") + message)
        self.retriable = not terminal

    def __reduce__(self) -> tuple[type[WriteError] | object, ...]:
        msg = str(self.args[0]).removeprefix(TERMINAL_MARKER + " ")
        return (_rebuild_write_error, (msg, not self.retriable))


def _rebuild_write_error(message: str, terminal: bool) -> WriteError:
    return WriteError(message, terminal=terminal)


class FlowFailed(SparkMirrorError):
    """A flow stopped on an error that retrying cannot fix."""


class SourceLossError(FlowFailed):
    """Records expired on the source before they were mirrored, and the flow was told to stop on it.

    Also the run's exit when records were lost in ``report`` mode: exit code 5 either way.
    """

    exit_code = 5


def terminal_message(error_text: str) -> str | None:
    """A terminal error's own sentence out of a Spark/Py4J error dump (``None``: not terminal)."""
    idx = error_text.find(TERMINAL_MARKER)
    if idx < 0:
        return None
    return error_text[idx + len(TERMINAL_MARKER) :].splitlines()[0].strip()


class InstanceConflict(FlowFailed):
    """Another instance runs the flow (it holds the flow's lease on the target); names it."""

    exit_code = 6


class TopicRecreatedError(FlowFailed):
    """A source topic was deleted and re-created; the flow stops until ``run --reset-topic``."""

    exit_code = 7


class ExistingRecordsError(FlowFailed):
    """A flow's first start found records on the target that neither sparkmirror's progress nor MirrorMaker
    2's committed offsets explain; nothing was copied (``run --existing-records`` or
    ``--mm2-offsets-topic`` says what to do)."""

    exit_code = 2


#: ``run``'s exit code when flows stopped with different codes: the first of these that any flow
#: has. The fault that needs an operator's hands first, and that a restart of the run cannot fix,
#: comes first: the configuration (2), a re-created source topic to reset (7), records lost on the
#: source (5), another instance running a flow (6); any other failure is 1.
EXIT_CODE_PRECEDENCE = (2, 7, 5, 6, 1)


def run_exit_code(codes: Iterable[int]) -> int:
    """The run's one exit code for the codes of its stopped flows (and of its report-mode losses, 5):
    their code when they all share it, else the first of :data:`EXIT_CODE_PRECEDENCE` among them."""
    found = set(codes)
    if len(found) == 1:
        return found.pop()
    for code in EXIT_CODE_PRECEDENCE:
        if code in found:
            return code
    return 1


class FlowsFailed(FlowFailed):
    """Several flows stopped; every flow's error in one message, the exit code by :func:`run_exit_code`."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.args[0], self.exit_code))


def stopped_flows_error(errors: Sequence[SparkMirrorError]) -> SparkMirrorError | None:
    """What ends a run whose flows stopped with ``errors``: the one error as it is, or every flow's
    error in one :class:`FlowsFailed` with the code :func:`run_exit_code` picks; None when none stopped."""
    if not errors:
        return None
    if len(errors) == 1:
        return errors[0]
    return FlowsFailed(
        f"{len(errors)} flows stopped: " + "; ".join(str(e) for e in errors), run_exit_code(e.exit_code for e in errors)
    )
