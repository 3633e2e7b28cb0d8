"""Tiered storage above the storage layer (Kafka's kafka.log.remote and its topic-based metadata manager): today the
``__remote_log_metadata`` record serde (metadata_serde.py); the RemoteLogManager and the topic-based
RemoteLogMetadataManager come here next. Kept out of broker/storage/ because it speaks Kafka's message formats
through broker.protocol's codecs, which the storage layer never imports (tests/unit/test_source_quality.py)."""
