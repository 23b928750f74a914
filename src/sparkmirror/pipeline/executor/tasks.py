"""What every copy task sets up in its Python worker before it moves records (:mod:`.stream`)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Generator


@contextlib.contextmanager
def collector_paused() -> Generator[None, None, None]:
    """Python's cyclic garbage collector off while a task moves records; as it was afterwards.

    Every record makes container objects (librdkafka's messages, the record tuples, a delivery
    report each) that live until their run is produced and acknowledged, so they outlive the
    young generation and keep triggering collections of the whole heap: with the collector on,
    a fifth of a task's CPU went to it (measured with the since-retired ``bench/direct_path.py``,
    docs/performance.md). The copy
    makes no reference cycles (records, lists and bound methods are freed by reference counting),
    so nothing waits for the collector meanwhile. Nested pauses leave it to the outermost one.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def keep_zip_directories() -> None:
    """Stop PySpark's Python workers from re-reading every zip on their path before each task.

    PySpark calls ``importlib.invalidate_caches()`` at the start of every task; on Python 3.11 each
    ``zipimporter`` then re-reads its archive's whole directory, and a worker holds one per package
    imported from ``pyspark.zip``, the py4j zip and the spark-core jar: tens of milliseconds per
    task, whatever its size (docs/performance.md has the measurement). Those archives do not
    change while a worker lives (a file added to the job later is a new path with its own
    importer), so keeping what was read is safe. Idempotent; called in the executors only.
    """
    import zipimport

    current = zipimport.zipimporter.invalidate_caches
    if getattr(current, "_sparkmirror_keeps", False):
        return

    def keep(self: zipimport.zipimporter) -> None:
        return None

    keep._sparkmirror_keeps = True  # type: ignore[attr-defined]
    zipimport.zipimporter.invalidate_caches = keep  # type: ignore[method-assign]
