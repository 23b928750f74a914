"""The root of sparkmirror's exceptions.

Every error the project raises derives from :class:`SparkMirrorError` and says
whether retrying can help (``retriable``). Exceptions must stay picklable:
Spark ships them from executors to the driver.
"""

from __future__ import annotations


class SparkMirrorError(Exception):
    """Base of all sparkmirror errors."""

    #: True when the same operation may succeed if tried again.
    retriable: bool = False
    #: The CLI's exit code for this error (2 usage/config, 1 runtime).
    exit_code: int = 1


class ConfigError(SparkMirrorError):
    """A configuration key is missing or has a bad value. Names the key."""

    exit_code = 2

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key

    def __reduce__(self) -> tuple[object, ...]:  # keep the key through pickling
        return (self.__class__, (self.args[0],), {"key": self.key})


class SetupError(SparkMirrorError):
    """Something the project needs on this machine is missing."""


class DevClusterError(SparkMirrorError):
    """A local Kafka cluster could not be started, reached or stopped."""
