"""The driver side of the pipeline: runs in the ``sparkmirror run`` process.

:mod:`.mirror` runs the flows of a configuration in one Spark session; per flow, :mod:`.flow`
wires its parts together, :mod:`.supervisor` starts, restarts with back-off and stops it,
:mod:`.scheduler` runs its periodic chores, :mod:`.target` prepares the target cluster,
:mod:`.stream` runs its copy (one Spark job of long-running tasks), :mod:`.recorder` records what
the tasks report, :mod:`.control` shares out flow control and :mod:`.progress` counts what was done.
"""
