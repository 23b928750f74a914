"""The copy tasks' transport: Kafka's Java clients, one JVM per executor, serving the tasks' Python.

``sparkmirror.transport = java``: a task's source consumer and its producers are objects of
:mod:`.client`, which speak the frames of :mod:`.frames` to the executor's transport JVM
(``java/TransportServer.java``, compiled by :mod:`.build`, started by :mod:`.launcher`). They have the
part of confluent-kafka's ``Consumer`` and ``Producer`` that ``pipeline/executor/stream.py`` and
``sink.py`` use, so every record rule stays written once, in Python. Why: docs/decisions.md, "Java
clients as the task's transport".
"""
