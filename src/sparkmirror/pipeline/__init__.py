"""The Spark job: source, writer (in the executors), supervision."""
