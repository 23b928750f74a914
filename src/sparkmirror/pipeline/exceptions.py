"""The pipeline's errors: what a task raises when a record cannot be written, what a flow raises
when it stops for good.

They cross process boundaries (Spark ships a task's exception to the driver as text), so a
terminal error carries :data:`TERMINAL_MARKER` in its message and every class stays picklable.
"""

from __future__ import annotations

from sparkmirror.errors import SparkMirrorError

#: Marker the driver looks for in a failed batch's error text.
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


#: How a re-created source topic's refusal starts its terminal message.
TOPIC_RECREATED_PREFIX = "topic re-created:"

#: How a source-loss refusal (``sparkmirror.source.loss = fail``) starts its terminal message.
SOURCE_LOSS_PREFIX = "source loss:"


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
