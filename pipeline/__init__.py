"""The project's data pipeline on PySpark with Spark's own Kafka connector (spark-sql-kafka-0-10).

Modules: ``events`` (the deterministic event stream), ``topics``, ``generator`` (confluent-kafka producer),
``connector`` (the connector's jars, the SparkSession), ``streaming`` (the Structured Streaming job), ``batch``
(the batch job), ``checkpoint`` (reads a query's offset and commit logs), ``progress`` (per-batch progress),
``expected`` (the aggregates computed in Python), ``runner`` (``python -m pipeline``).
"""
