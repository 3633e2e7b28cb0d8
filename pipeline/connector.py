"""Spark's Kafka connector jars and the SparkSession that uses them.

``scripts/install.sh`` resolves ``org.apache.spark:spark-sql-kafka-0-10_2.13`` at the pinned pyspark's version
(plus its runtime dependencies) from Maven Central into ``.cache/spark-kafka-<version>/jars`` with
``pipeline/maven/pom.xml``. Sessions get those files through ``spark.jars``, so nothing is downloaded when Spark
starts; a missing jar stops everything with :class:`ConnectorJarsMissing` naming the artifact (never a silent
fallback to a Spark without ``format("kafka")``).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Artifact:
    group: str
    name: str
    version: str

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.name}:{self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.name}-{self.version}.jar"


class ConnectorJarsMissing(RuntimeError):
    """A jar of Spark's Kafka connector is not where the install step puts it."""


def spark_version() -> str:
    """The installed pyspark's version: the connector must be built for exactly this Spark."""
    import pyspark

    return str(pyspark.__version__)


def required_artifacts(version: Optional[str] = None) -> List[Artifact]:
    """The connector and the runtime dependencies pyspark does not ship itself (see pipeline/maven/pom.xml).

    kafka-clients and commons-pool2 are matched by name only: their versions are the connector's choice."""
    v = version or spark_version()
    return [Artifact("org.apache.spark", "spark-sql-kafka-0-10_2.13", v),
            Artifact("org.apache.spark", "spark-token-provider-kafka-0-10_2.13", v),
            Artifact("org.apache.kafka", "kafka-clients", "*"),
            Artifact("org.apache.commons", "commons-pool2", "*")]


def jars_dir(version: Optional[str] = None) -> Path:
    env = os.environ.get("PIPELINE_SPARK_KAFKA_JARS")
    if env:
        return Path(env)
    return ROOT / ".cache" / f"spark-kafka-{version or spark_version()}" / "jars"


def connector_jars(directory: Optional[Path] = None, version: Optional[str] = None) -> List[Path]:
    """Paths of every jar the connector needs; :class:`ConnectorJarsMissing` names the first one absent."""
    d = Path(directory) if directory is not None else jars_dir(version)
    found: List[Path] = []
    for a in required_artifacts(version):
        pattern = f"{a.name}-*.jar" if a.version == "*" else a.file_name
        matches = sorted(d.glob(pattern)) if d.is_dir() else []
        if not matches:
            raise ConnectorJarsMissing(
                f"Spark's Kafka connector is incomplete: {a.coordinates} ({pattern}) is missing from {d}; "
                "run bash scripts/install.sh (it resolves the connector from Maven Central with "
                "pipeline/maven/pom.xml)")
        found.append(matches[-1])
    return found


#: Settings for a small machine (2 cores shared with brokers): few shuffle partitions, no UI, quiet logs.
DEFAULT_CONF: Dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.sql.adaptive.enabled": "false",
}


def spark_session(app_name: str = "pipeline", master: str = "local[2]",
                  conf: Optional[Mapping[str, str]] = None) -> "SparkSession":
    """A SparkSession with the connector on its classpath (``spark.jars``), or ConnectorJarsMissing."""
    jars = connector_jars()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    settings = dict(DEFAULT_CONF)
    settings.update(conf or {})
    # PIPELINE_SPARK_CONF="key=value;key=value" adds settings without code changes (tests, benchmarks, users)
    for item in filter(None, os.environ.get("PIPELINE_SPARK_CONF", "").split(";")):
        k, _, v = item.partition("=")
        settings[k.strip()] = v.strip()
    settings["spark.jars"] = ",".join(str(j) for j in jars)
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("PIPELINE_SPARK_LOG_LEVEL", "WARN"))
    return spark
