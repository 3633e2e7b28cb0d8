"""Errors of the ZooKeeper layer (internal: callers map them, none is a wire code by itself)."""
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError

#: what a ZooKeeper request meets when the session expires or the connection drops under it (the session's state
#: listener handles the loss; callers log one line and give up the operation)
ZOOKEEPER_GONE = (SessionExpiredError, ConnectionLoss, ConnectionClosedError)


class ZkError(Exception):
    """Base class for errors raised by KafkaZkClient."""


class ZkUnavailableError(ZkError):
    """ZooKeeper could not be reached within zookeeper.connection.timeout.ms."""


class BrokerIdInUseError(ZkError):
    """Another live broker session holds /brokers/ids/<id>."""


class TopicExistsError(ZkError):
    """/brokers/topics/<topic> already exists."""


class NoSuchTopicError(ZkError):
    """The topic has no /brokers/topics/<topic> znode."""


class ControllerMovedError(ZkError):
    """A controller write failed its /controller_epoch version check (or the election lost a race): another
    broker is (or just became) controller, so this one must stop acting as controller."""


class ZkClientClosedError(ControllerMovedError):
    """A request failed because this broker closed its ZooKeeper session (it is shutting down): its controller, if
    it was one, is no more (/controller went with the session), so a controller event still in progress ends as on
    ControllerMovedError, quietly, instead of logging the failure of every write it had left."""
