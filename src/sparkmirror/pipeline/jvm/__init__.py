"""The JVM writer (``sparkmirror.writer = jvm``): batches copied, at least once or exactly once, by a
Spark job of the JVM's own, no Python worker on the data path.

``java/RangeCopier.java`` is the task (a Java consumer and producer per task, or exactly once a
transactional producer per transaction group; each record's target offset from its own send
callback); :mod:`.build` compiles it once into the jar cache against pyspark's and the Kafka
connector's jars; :mod:`.writer` is the driver's side: the plan and the ranges as JSON in,
:class:`~sparkmirror.pipeline.executor.results.PartitionResult` rows out. Why it exists, and what it
costs and saves: docs/decisions.md ("The JVM writer").
"""
