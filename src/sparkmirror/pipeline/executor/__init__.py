"""The executor side of the pipeline: what runs inside Spark's tasks.

A streaming task (:mod:`.stream`) reads its source partitions with one librdkafka consumer; one
sink writes the records to the target (:mod:`.sink`), made final every commit interval at least
once or in transactions (:mod:`.commit`); :mod:`.tasks` sets up the worker. Nothing here imports
the driver side.
"""
