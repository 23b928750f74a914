"""The data pipeline: Spark plans what to copy, executor tasks copy it with librdkafka.

``driver/`` runs in the ``sparkmirror run`` process (the flows, their supervision, chores,
target preparation, the streaming query, each micro-batch); ``executor/`` runs inside Spark's
tasks (the two sources, the one sink and its commits); ``session.py`` and ``ranges.py`` are the
two places that know Spark itself (the session; the planned offset ranges read from Spark's
internals). See docs/architecture.md.
"""
