"""Tiered storage (KIP-405) parts of the storage layer that do not touch the running log: the metadata model
(metadata.py; its ``__remote_log_metadata`` serde is broker/remote_log/metadata_serde.py, above this layer), the
RemoteStorageManager interface (storage_manager.py) and its implementations: Kafka's LocalTieredStorage layout
(local_tiered_storage.py) and S3 (s3_storage.py, boto3 imported only when used). The RemoteLogManager that uses them is
broker/remote_log/, run by broker/replica/tiered_storage.py."""
