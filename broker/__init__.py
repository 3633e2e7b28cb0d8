"""A Kafka-compatible broker (Apache Kafka 3.9, ZooKeeper mode) in Python with Cython hot paths."""

#: the package version (pyproject.toml reads it from here; ``kafka-server-start --version`` prints it)
__version__ = "0.1.0"
#: the Apache Kafka release whose wire protocol, on-disk layout and ZooKeeper layout this broker follows
KAFKA_VERSION = "3.9"
