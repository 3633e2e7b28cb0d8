"""Fixtures for the Spark tests: Spark's real Kafka connector (spark-sql-kafka-0-10) against real broker processes.

``spark``: one SparkSession (local[2]) for the whole test session, with the connector's jars from the install step
on ``spark.jars``; missing jars fail the tests (never skip) with the name of the missing artifact.
``broker``: one broker per test module on the session's ZooKeeper, with retention and the log cleaner on short
timers so the data-loss and compaction paths happen within seconds.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator

import pytest

from pipeline.connector import ConnectorJarsMissing, connector_jars
from tests.harness.broker_process import BrokerProcess, running_broker

#: broker settings for the Spark tests: retention every second from start-up, a cleaner that runs often
BROKER_OVERRIDES = {"log.retention.check.interval.ms": "500", "log.initial.task.delay.ms": "0",
                    "log.cleaner.backoff.ms": "200", "file.delete.delay.ms": "0", "num.partitions": "1",
                    "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
                    "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                    "transaction.state.log.num.partitions": "3"}


#: C1 only: the tests' Spark jobs are short, and C2's compilations cost more on 2 shared cores than they save
FAST_JVM = "-XX:TieredStopAtLevel=1"


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    try:
        connector_jars()
    except ConnectorJarsMissing as e:
        pytest.fail(str(e), pytrace=False)
    from pipeline.connector import spark_session

    s = spark_session("broker-spark-tests", conf={"spark.sql.shuffle.partitions": "2",
                                                  "spark.driver.extraJavaOptions": FAST_JVM})
    yield s
    s.stop()


@pytest.fixture(scope="module")
def broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("spark-broker")), f"{zookeeper}/s-{uuid.uuid4().hex[:10]}",
                        broker_id=0, overrides=BROKER_OVERRIDES) as b:
        yield b
