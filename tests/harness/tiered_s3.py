"""Helpers of the process tests that tier to a real S3 server (S3Proxy, tests/harness/s3_server.py) from a cluster of
our brokers: the broker settings that make them run ``broker.storage.remote.S3RemoteStorageManager`` against it with
the remote log manager on short timers, what the bucket holds for one partition (a broker's Prometheus samples:
tests.harness.tiered.scrape_metrics)."""
from __future__ import annotations

import re
from typing import Dict, Tuple

from tests.harness.s3_server import S3Server

S3_RSM = "broker.storage.remote.S3RemoteStorageManager"


def s3_tiered_overrides(s3: S3Server, bucket: str) -> Dict[str, str]:
    """Broker settings: tiered storage on ``bucket`` of ``s3`` (2 attempts of 5 s per S3 call, so an outage shows
    quickly), an RF-3 ``__remote_log_metadata`` of 3 partitions, and the copy/retention tasks every 0.5-1 s."""
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": S3_RSM,
        **{f"rsm.config.{k}": v for k, v in s3.rsm_configs(bucket, **{"s3.retry.max.attempts": 2,
                                                                        "s3.api.call.timeout.ms": 5000}).items()},
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "3",
        "remote.log.manager.task.interval.ms": "500",
        "log.retention.check.interval.ms": "1000",
        "log.initial.task.delay.ms": "500",
        "remote.fetch.max.wait.ms": "2000",
    }


def bucket_segments(s3: S3Server, bucket: str, topic: str, partition: int = 0) -> Dict[str, Tuple[int, int]]:
    """segment id -> (start offset, size) of the partition's segment objects (``.log``) in the bucket."""
    out: Dict[str, Tuple[int, int]] = {}
    for page in s3.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{topic}-{partition}-"):
        for obj in page.get("Contents", []):
            m = re.search(r"/(\d{20})-([^/]+)\.log$", obj["Key"])
            if m:
                out[m.group(2)] = (int(m.group(1)), int(obj["Size"]))
    return out
