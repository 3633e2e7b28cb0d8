"""Tiered storage above the storage layer (Kafka's kafka.log.remote and its topic-based metadata manager): the
``__remote_log_metadata`` record serde (metadata_serde.py), the topic-based RemoteLogMetadataManager, the
RemoteLogManager's tasks, the copy quota and the RemoteLogReader; the running broker wires them in
broker/replica/tiered_storage.py. Kept out of broker/storage/ because it speaks Kafka's message formats through
broker.protocol's codecs, which the storage layer never imports (tests/unit/test_source_quality.py)."""
