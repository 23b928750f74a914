"""The driver side of the pipeline: runs in the ``sparkmirror run`` process.

:mod:`.mirror` runs the flows of a configuration in one Spark session; per flow, :mod:`.flow`
wires its parts together, :mod:`.supervisor` starts, restarts with back-off and stops it,
:mod:`.scheduler` runs its periodic chores, :mod:`.target` prepares the target cluster,
:mod:`.query` builds the Spark streaming query, :mod:`.batch` handles each micro-batch and
:mod:`.progress` counts what was done.
"""
