"""The data pipeline: long-running Spark tasks copy each flow's partitions with librdkafka.

``driver/`` runs in the ``sparkmirror run`` process (the flows, their supervision, chores, target
preparation, the copy's job and the tasks' reports); ``executor/`` runs inside Spark's tasks (the
streaming task, the one sink and its commits); ``reports.py`` is the channel between them and
``session.py`` the one place that builds Spark's session. See docs/architecture.md.
"""
