"""Kafka's ZooKeeper registry: znode layouts (paths) and the blocking kazoo client (client)."""
from broker.zk.client import KafkaZkClient
from broker.zk.errors import BrokerIdInUseError, NoSuchTopicError, TopicExistsError, ZkError, ZkUnavailableError
from broker.zk.paths import BrokerInfo, LeaderAndIsr

__all__ = ["BrokerIdInUseError", "BrokerInfo", "KafkaZkClient", "LeaderAndIsr", "NoSuchTopicError",
           "TopicExistsError", "ZkError", "ZkUnavailableError"]
