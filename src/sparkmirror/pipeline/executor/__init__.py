"""The executor side of the pipeline: what runs inside Spark's tasks.

Two sources yield records per source partition (:mod:`.sources`: the Arrow batches of Spark's
Kafka source, and the ranges Spark planned, read with librdkafka); one sink writes them to the
target (:mod:`.sink`), committed at least once or in transactions (:mod:`.commit`); the task
bodies Spark calls are in :mod:`.tasks`. Nothing here imports the driver side.
"""
