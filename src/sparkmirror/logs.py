"""How sparkmirror's log lines look, in the CLI's process and in the executors' Python workers.

The CLI sets up logging once for its process (:mod:`sparkmirror.cli.main`). Spark's Python workers
are processes of their own that nothing sets up: PySpark adds no handler (its
``spark.sql.pyspark.worker.logging.enabled``, off by default, adds one to the root logger for the
length of each task only), so a task's warnings reached the executor's stderr through logging's
last-resort handler: the bare message, without time, level or logger. :func:`worker_logging`,
called as every task starts, gives the ``sparkmirror`` logger a handler to stderr at WARNING once
per worker process, with the driver's :data:`FORMAT`.

What it must never do: add a handler to a process that has one (the driver's, or one running a task
in-process under pytest: every line would show twice), or change a logger's level.
"""

from __future__ import annotations

import logging
import sys

#: Every process's log lines: time, level, logger, message.
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def worker_logging() -> None:
    """In a Python worker with no logging set up: sparkmirror's warnings to stderr, as the driver's.

    Cheap enough for every task (two list lookups once done); a no-op in a process that has handlers.
    """
    ours = logging.getLogger("sparkmirror")
    if ours.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.setLevel(logging.WARNING)
    ours.addHandler(handler)
