"""A small blocking Kafka client on the project's own protocol codec, for what confluent-kafka's AdminClient lacks.

Kafka's tools call admin APIs that librdkafka does not expose (DescribeClientQuotas/AlterClientQuotas, OffsetDelete,
a broker's whole ApiVersions table ...). This client speaks them with ``broker.protocol.api`` (the codec the broker
itself uses, so every field and version of Kafka 3.9's schemas is available):

- one TCP connection per broker, opened on first use: TLS when the security protocol asks for it, then
  ApiVersions (v3, falling back to v0 as Kafka's clients do), then the SASL login (SaslHandshake v1 +
  SaslAuthenticate, PLAIN or SCRAM);
- each request goes out at the highest version both sides support (``max_version`` can cap it);
- ``send_any`` uses the bootstrap connection, ``send_to`` one broker, ``send_to_controller`` the controller and
  ``send_to_coordinator`` a group's coordinator (FindCoordinator, with the retries Kafka's admin client makes).

A broker that cannot be reached is retried as Kafka's admin client retries it: with ``retry_timeout_s`` set (the
tools pass ``default.api.timeout.ms``), each failed connection logs Kafka's NetworkClient warning (``Connection to
node -1 (localhost/127.0.0.1:9999) could not be established. Node may not be available.``), the next attempt
follows Kafka's reconnect backoff (50 ms doubling to 1 s), and when the time is up the call fails with
``NodeAssignmentTimeout``, Kafka's ``TimeoutException: Timed out waiting for a node assignment. Call: <call>``
(``<call>`` is the admin client's name of the call: ``listTopics``, ``createTopics`` ...). A controller that cannot be
reached (killed, or no longer the controller) is looked up again in the metadata of any live broker until then.
Without ``retry_timeout_s`` a connection is tried once. TLS and SASL failures are never retried.

One request is in flight per connection; responses are matched by correlation id. Failures raise
``ProtocolClientError`` with one line naming the broker and the cause.
"""
from __future__ import annotations

import socket
import ssl
import struct
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

from broker.errors import ErrorCode
from broker.protocol.api import API_VERSIONS_RANGE, ApiKey, decode_response_with_header, encode_request
from broker.security.plain import plain_client_message
from broker.security.scram import ScramClient

from .client_config import Security
from .client_log import NETWORK_CLIENT, ReconnectBackoff, connection_warning, log

__all__ = ["ProtocolClientError", "ConnectFailed", "NodeAssignmentTimeout", "BrokerNode", "ProtocolClient",
           "error_name", "CALL_NAMES"]

_I32 = struct.Struct(">i")
#: FindCoordinator/coordinator errors after which Kafka's admin client looks the coordinator up again
_RETRY_COORDINATOR = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                      ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


class ProtocolClientError(Exception):
    """A connection, login or protocol failure; the message is one line."""


class ConnectFailed(ProtocolClientError):
    """The broker could not be reached (refused, unreachable, closed before answering): worth another try."""


class NodeAssignmentTimeout(ProtocolClientError):
    """No broker (or no controller) could be reached before the call's deadline. ``str()`` is Kafka's exception
    line; ``message`` its getMessage()."""

    def __init__(self, call: str) -> None:
        self.call = call
        self.message = f"Timed out waiting for a node assignment. Call: {call}"
        super().__init__(f"org.apache.kafka.common.errors.TimeoutException: {self.message}")


#: the admin client's call name per request, as Kafka's TimeoutException names it
CALL_NAMES = {
    ApiKey.METADATA: "listNodes", ApiKey.CREATE_TOPICS: "createTopics", ApiKey.DELETE_TOPICS: "deleteTopics",
    ApiKey.CREATE_PARTITIONS: "createPartitions", ApiKey.DESCRIBE_CONFIGS: "describeConfigs",
    ApiKey.ALTER_CONFIGS: "alterConfigs", ApiKey.INCREMENTAL_ALTER_CONFIGS: "incrementalAlterConfigs",
    ApiKey.DESCRIBE_ACLS: "describeAcls", ApiKey.CREATE_ACLS: "createAcls", ApiKey.DELETE_ACLS: "deleteAcls",
    ApiKey.LIST_PARTITION_REASSIGNMENTS: "listPartitionReassignments",
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: "alterPartitionReassignments", ApiKey.ELECT_LEADERS: "electLeaders",
    ApiKey.DESCRIBE_LOG_DIRS: "describeLogDirs", ApiKey.ALTER_REPLICA_LOG_DIRS: "alterReplicaLogDirs",
    ApiKey.DESCRIBE_CLIENT_QUOTAS: "describeClientQuotas", ApiKey.ALTER_CLIENT_QUOTAS: "alterClientQuotas",
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: "describeUserScramCredentials",
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: "alterUserScramCredentials",
    ApiKey.CREATE_DELEGATION_TOKEN: "createDelegationToken", ApiKey.RENEW_DELEGATION_TOKEN: "renewDelegationToken",
    ApiKey.EXPIRE_DELEGATION_TOKEN: "expireDelegationToken",
    ApiKey.DESCRIBE_DELEGATION_TOKEN: "describeDelegationToken", ApiKey.UPDATE_FEATURES: "updateFeatures",
    ApiKey.API_VERSIONS: "describeFeatures", ApiKey.LIST_GROUPS: "listConsumerGroups",
    ApiKey.DELETE_RECORDS: "deleteRecords", ApiKey.LIST_OFFSETS: "listOffsets",
    ApiKey.LIST_TRANSACTIONS: "listTransactions", ApiKey.DESCRIBE_PRODUCERS: "describeProducers",
    ApiKey.DESCRIBE_TRANSACTIONS: "describeTransactions", ApiKey.OFFSET_DELETE: "deleteConsumerGroupOffsets",
}


def call_name(api_key: int) -> str:
    try:
        return CALL_NAMES.get(ApiKey(api_key), ApiKey(api_key).name.lower())
    except ValueError:
        return f"api{api_key}"


def error_name(code: int) -> str:
    """Kafka's name of an error code (``UNKNOWN_TOPIC_OR_PARTITION``)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


class BrokerNode:
    """A broker as Metadata describes it."""

    __slots__ = ("node_id", "host", "port", "rack")

    def __init__(self, node_id: int, host: str, port: int, rack: Optional[str] = None) -> None:
        self.node_id, self.host, self.port, self.rack = node_id, host, port, rack

    def __str__(self) -> str:
        """Kafka's Node.toString: ``host:port (id: 1 rack: null)``."""
        return f"{self.host}:{self.port} (id: {self.node_id} rack: {self.rack if self.rack is not None else 'null'})"


class _Connection:
    def __init__(self, host: str, port: int, security: Security, client_id: str, timeout_s: float) -> None:
        self.address = f"{host}:{port}"
        self.client_id = client_id
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as e:
            raise ConnectFailed(f"Cannot connect to {self.address}: {e.strerror or e}") from None
        if security.uses_tls:
            try:
                sock = security.ssl_context().wrap_socket(sock, server_hostname=host)
            except (OSError, ValueError) as e:
                sock.close()
                raise ProtocolClientError(f"TLS handshake with {self.address} failed: {e}") from None
        self.sock = sock
        self._cid = 0
        self.versions: Dict[int, Tuple[int, int]] = {}
        try:
            self._api_versions()
            if security.uses_sasl:
                self._sasl_login(security)
        except ConnectFailed as e:
            self.close()
            if security.uses_tls:  # closed right after the TLS handshake: the broker refused the session (TLS 1.3
                raise ProtocolClientError(str(e)) from None  # reports a missing client certificate that way)
            raise
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            try:
                b = self.sock.recv(n)
            except socket.timeout:  # Kafka's client drops the connection and tries again (request.timeout.ms)
                raise ConnectFailed(f"Timed out waiting for a response from {self.address}") from None
            except ssl.SSLError as e:  # the broker refused the TLS session (e.g. no client certificate): not retried
                raise ProtocolClientError(f"Connection to {self.address} failed: {e.strerror or e}") from None
            except OSError as e:
                raise ConnectFailed(f"Connection to {self.address} failed: {e.strerror or e}") from None
            if not b:
                raise ConnectFailed(f"Connection to {self.address} was closed by the broker")
            chunks.append(b)
            n -= len(b)
        return b"".join(chunks)

    def request(self, api_key: int, version: int, body: Any) -> Any:
        self._cid = (self._cid + 1) & 0x7FFFFFFF
        try:
            self.sock.sendall(encode_request(api_key, version, self._cid, self.client_id, body))
        except ssl.SSLError as e:
            raise ProtocolClientError(f"Connection to {self.address} failed: {e.strerror or e}") from None
        except OSError as e:
            raise ConnectFailed(f"Connection to {self.address} failed: {e.strerror or e}") from None
        size = _I32.unpack(self._recv_exact(4))[0]
        frame = _I32.pack(size) + self._recv_exact(size)
        cid, response = decode_response_with_header(api_key, version, frame)
        if cid != self._cid:
            raise ProtocolClientError(f"Response from {self.address} out of step (correlation id {cid})")
        return response

    def _api_versions(self) -> None:
        r = self.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "kafka-tools-python",
                                                  "client_software_version": "1.0"})
        if r.error_code == ErrorCode.UNSUPPORTED_VERSION:
            r = self.request(ApiKey.API_VERSIONS, 0, {})
        if r.error_code:
            raise ProtocolClientError(f"ApiVersions to {self.address} failed: {error_name(r.error_code)}")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}

    def _sasl_login(self, security: Security) -> None:
        mech = security.sasl_mechanism
        hs = self.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mech})
        if hs.error_code:
            raise ProtocolClientError(f"SASL handshake with {self.address} failed: {error_name(hs.error_code)} "
                                      f"(enabled mechanisms: {', '.join(hs.mechanisms)})")
        version = min(2, self.versions.get(ApiKey.SASL_AUTHENTICATE, (0, 0))[1])

        def step(token: bytes) -> bytes:
            r = self.request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token})
            if r.error_code:
                raise ProtocolClientError(f"Authentication failed: {r.error_message or error_name(r.error_code)}")
            return bytes(r.auth_bytes or b"")

        assert security.username is not None and security.password is not None
        if mech == "PLAIN":
            step(plain_client_message(security.username, security.password))
            return
        client = ScramClient(mech, security.username, security.password)
        server_first = step(client.first_message())
        server_final = step(client.final_message(server_first))
        try:
            client.verify_server_final(server_final)
        except Exception as e:
            raise ProtocolClientError(f"Authentication failed: {e}") from None


class ProtocolClient:
    """Blocking requests to the brokers of one cluster; use as a context manager (closes every connection).

    ``retry_timeout_s``: how long a call keeps trying to reach a broker (None: one try); ``log_label``: the
    ``[AdminClient clientId=...]`` of the connection warnings then logged on stderr."""

    def __init__(self, bootstrap_servers: str, security: Optional[Security] = None,
                 client_id: str = "kafka-tools", timeout_s: float = 30.0, retry_timeout_s: Optional[float] = None,
                 log_label: Optional[str] = None, backoff_ms: Tuple[int, int] = (50, 1000)) -> None:
        self.bootstrap = [_split_host_port(s) for s in bootstrap_servers.split(",") if s.strip()]
        if not self.bootstrap:
            raise ProtocolClientError("No bootstrap server given")
        self.security = security or Security()
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.retry_timeout_s = retry_timeout_s
        self.log_label = log_label or f"AdminClient clientId={client_id}"
        self.backoff_ms = backoff_ms
        self._backoff: Dict[Any, ReconnectBackoff] = {}
        self._bootstrap_conn: Optional[_Connection] = None
        self._conns: Dict[int, _Connection] = {}
        self._nodes: Dict[int, BrokerNode] = {}
        self.controller_id: int = -1
        self.cluster_id: Optional[str] = None

    def __enter__(self) -> "ProtocolClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for c in list(self._conns.values()) + ([self._bootstrap_conn] if self._bootstrap_conn else []):
            c.close()
        self._conns.clear()
        self._bootstrap_conn = None

    # ---------------------------------------------------------------------------------------------- connections
    def deadline(self) -> Optional[float]:
        """The deadline of a call starting now (None: no retries)."""
        return None if self.retry_timeout_s is None else time.monotonic() + self.retry_timeout_s

    def _try_connect(self, key: Any, node_id: int, host: str, port: int) -> Optional[_Connection]:
        """One attempt, if the node's backoff allows it now; a failure logs Kafka's warning (when retrying)."""
        backoff = self._backoff.setdefault(key, ReconnectBackoff(*self.backoff_ms))
        now = time.monotonic()
        if not backoff.ready(now):
            return None
        try:
            conn = _Connection(host, port, self.security, self.client_id, self.timeout_s)
        except ConnectFailed:
            if self.retry_timeout_s is None:
                raise
            log("WARN", connection_warning(self.log_label, node_id, host, port), NETWORK_CLIENT)
            backoff.failed(now)
            return None
        backoff.reset()
        return conn

    def _wait_for_backoff(self, keys: List[Any], deadline: float, call: str) -> None:
        now = time.monotonic()
        if now >= deadline:
            raise NodeAssignmentTimeout(call)
        ready_at = min((self._backoff[k].next_at for k in keys if k in self._backoff), default=now)
        time.sleep(max(0.0, min(ready_at, deadline) - now) or 0.01)

    def _any_connection(self, call: str = "listNodes", deadline: Optional[float] = None) -> _Connection:
        """A connection to any broker: the bootstrap one, or the first bootstrap server that answers."""
        if self._bootstrap_conn is not None:
            return self._bootstrap_conn
        if self.retry_timeout_s is None:
            errors: List[str] = []
            for host, port in self.bootstrap:
                try:
                    self._bootstrap_conn = _Connection(host, port, self.security, self.client_id, self.timeout_s)
                    return self._bootstrap_conn
                except ProtocolClientError as e:
                    errors.append(str(e))
            raise ProtocolClientError("; ".join(errors))
        deadline = deadline if deadline is not None else self.deadline()
        assert deadline is not None
        keys = [("bootstrap", i) for i in range(len(self.bootstrap))]
        # brokers already known from metadata count as well (Kafka's least-loaded node)
        while True:
            for i, (host, port) in enumerate(self.bootstrap):
                conn = self._try_connect(keys[i], -(i + 1), host, port)
                if conn is not None:
                    self._bootstrap_conn = conn
                    return conn
            for node in list(self._nodes.values()):
                conn = self._try_connect(("node", node.node_id), node.node_id, node.host, node.port)
                if conn is not None:
                    self._bootstrap_conn = conn
                    return conn
            self._wait_for_backoff(keys + [("node", n) for n in self._nodes], deadline, call)

    def _connection(self, node_id: int, call: str = "listNodes", deadline: Optional[float] = None) -> _Connection:
        conn = self._conns.get(node_id)
        if conn is not None:
            return conn
        deadline = deadline if deadline is not None else self.deadline()
        node = self.node(node_id, call, deadline)
        if deadline is None:
            conn = _Connection(node.host, node.port, self.security, self.client_id, self.timeout_s)
        else:
            while True:
                conn = self._try_connect(("node", node_id), node_id, node.host, node.port)
                if conn is not None:
                    break
                self._wait_for_backoff([("node", node_id)], deadline, call)
        self._conns[node_id] = conn
        return conn

    def _drop(self, conn: _Connection) -> None:
        conn.close()
        if self._bootstrap_conn is conn:
            self._bootstrap_conn = None
        for k, c in list(self._conns.items()):
            if c is conn:
                del self._conns[k]

    def node(self, node_id: int, call: str = "listNodes", deadline: Optional[float] = None) -> BrokerNode:
        if node_id not in self._nodes:
            self.refresh_metadata(call=call, deadline=deadline)
        try:
            return self._nodes[node_id]
        except KeyError:
            raise ProtocolClientError(f"Broker {node_id} is not in the cluster's metadata") from None

    def nodes(self, call: str = "listNodes") -> List[BrokerNode]:
        self.refresh_metadata(call=call)
        return [self._nodes[k] for k in sorted(self._nodes)]

    # ---------------------------------------------------------------------------------------------- requests
    @staticmethod
    def _version(conn: _Connection, api_key: int, max_version: Optional[int]) -> int:
        ours = API_VERSIONS_RANGE.get(ApiKey(api_key))
        theirs = conn.versions.get(api_key)
        if ours is None or theirs is None:
            raise ProtocolClientError(f"The broker at {conn.address} does not support {ApiKey(api_key).name}")
        hi = min(ours[1], theirs[1], max_version if max_version is not None else ours[1])
        if hi < max(ours[0], theirs[0]):
            raise ProtocolClientError(f"No common version of {ApiKey(api_key).name} with the broker at "
                                      f"{conn.address}")
        return hi

    def api_versions(self, node_id: Optional[int] = None) -> Dict[int, Tuple[int, int]]:
        """The (min, max) version per API key that a broker (default: the bootstrap one) advertised."""
        call = call_name(ApiKey.API_VERSIONS)
        conn = self._any_connection(call) if node_id is None else self._connection(node_id, call)
        return dict(conn.versions)

    def _send_any(self, api_key: int, body: Any, max_version: Optional[int], call: str,
                  deadline: Optional[float]) -> Any:
        """To any live broker: a broker lost between calls is replaced by another until the deadline."""
        while True:
            conn = self._any_connection(call, deadline)
            try:
                return conn.request(api_key, self._version(conn, api_key, max_version), body)
            except ConnectFailed:
                self._drop(conn)
                if deadline is None or time.monotonic() >= deadline:
                    raise  # (a broker that closes the connection on this request fails it at the deadline)
                time.sleep(self.backoff_ms[0] / 1000.0)

    def send_any(self, api_key: int, body: Any, max_version: Optional[int] = None, call: Optional[str] = None) -> Any:
        return self._send_any(api_key, body, max_version, call or call_name(api_key), self.deadline())

    def send_to(self, node_id: int, api_key: int, body: Any, max_version: Optional[int] = None,
                call: Optional[str] = None, once: bool = False) -> Any:
        """To one broker (``once``: one connection attempt, no retry and no warning, whatever ``retry_timeout_s``)."""
        if once and node_id not in self._conns:
            node = self.node(node_id, call or call_name(api_key))
            self._conns[node_id] = _Connection(node.host, node.port, self.security, self.client_id, self.timeout_s)
        conn = self._connection(node_id, call or call_name(api_key))
        return conn.request(api_key, self._version(conn, api_key, max_version), body)

    def version_for(self, api_key: int, node_id: Optional[int] = None, max_version: Optional[int] = None) -> int:
        """The version ``send_*`` would use (bodies differ by version, so callers may need it first)."""
        call = call_name(api_key)
        conn = self._any_connection(call) if node_id is None else self._connection(node_id, call)
        return self._version(conn, api_key, max_version)

    def controller_version(self, api_key: int, max_version: Optional[int] = None, call: Optional[str] = None) -> int:
        """The version ``send_to_controller`` would use, from the controller's own ApiVersions."""
        conn = self._controller_connection(call or call_name(api_key), self.deadline())
        return self._version(conn, api_key, max_version)

    def _controller_connection(self, call: str, deadline: Optional[float]) -> _Connection:
        """The controller's connection: looked up in the metadata of any live broker, and looked up again (as
        Kafka's admin client does) while the broker named there cannot be reached, until the deadline."""
        if self.controller_id >= 0 and self.controller_id in self._conns:
            return self._conns[self.controller_id]
        while True:
            self.refresh_metadata(call=call, deadline=deadline)
            cid = self.controller_id
            if cid >= 0 and cid in self._nodes:
                node = self._nodes[cid]
                if deadline is None:
                    conn = _Connection(node.host, node.port, self.security, self.client_id, self.timeout_s)
                else:
                    conn = self._try_connect(("node", cid), cid, node.host, node.port)
                if conn is not None:
                    self._conns[cid] = conn
                    return conn
            if deadline is None:
                raise ProtocolClientError("The cluster has no controller right now")
            keys = [("node", cid)] if cid >= 0 else []
            if not keys:
                self._backoff.setdefault("controller", ReconnectBackoff(*self.backoff_ms)).failed()
                keys = ["controller"]
            self._wait_for_backoff(keys, deadline, call)

    def send_to_controller(self, api_key: int, body: Any, max_version: Optional[int] = None,
                           call: Optional[str] = None, not_controller: Any = None) -> Any:
        """Send to the controller, retrying on another controller while it cannot be reached or (when
        ``not_controller(response)`` says so) answers NOT_CONTROLLER, until ``retry_timeout_s``."""
        call = call or call_name(api_key)
        deadline = self.deadline()
        while True:
            conn = self._controller_connection(call, deadline)
            try:
                r = conn.request(api_key, self._version(conn, api_key, max_version), body)
            except ConnectFailed:
                self._drop(conn)
                self.controller_id = -1
                if deadline is None or time.monotonic() >= deadline:
                    raise
                time.sleep(self.backoff_ms[0] / 1000.0)
                continue
            if not_controller is None or not not_controller(r) or deadline is None:
                return r
            self._drop(conn)
            self.controller_id = -1
            if time.monotonic() >= deadline:
                return r  # still NOT_CONTROLLER at the deadline: the caller reports that answer
            time.sleep(0.1)

    def refresh_metadata(self, topics: Optional[List[str]] = None, call: Optional[str] = None,
                         deadline: Optional[float] = None) -> Any:
        """Metadata for ``topics`` (None = all) from any live broker; updates the known brokers and controller."""
        body = {"topics": None if topics is None else [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
                "allow_auto_topic_creation": False}
        deadline = deadline if deadline is not None else self.deadline()
        r = self._send_any(ApiKey.METADATA, body, 12, call or ("listNodes" if topics is None else "describeTopics"),
                           deadline)
        self._nodes = {b.node_id: BrokerNode(b.node_id, b.host, b.port, b.rack) for b in r.brokers}
        self.controller_id = r.controller_id
        self.cluster_id = r.cluster_id
        return r

    def find_coordinator(self, group_id: str, key_type: int = 0) -> int:
        """The coordinator's broker id for a group (key_type 0) or transactional id (1)."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            conn = self._any_connection()
            version = self._version(conn, ApiKey.FIND_COORDINATOR, None)
            if version >= 4:
                r = conn.request(ApiKey.FIND_COORDINATOR, version, {"key_type": key_type,
                                                                    "coordinator_keys": [group_id]})
                c = r.coordinators[0]
                code, node_id, message = c.error_code, c.node_id, c.error_message
                host, port = c.host, c.port
            else:
                r = conn.request(ApiKey.FIND_COORDINATOR, version, {"key": group_id, "key_type": key_type})
                code, node_id, message, host, port = r.error_code, r.node_id, r.error_message, r.host, r.port
            if code == 0:
                self._nodes.setdefault(node_id, BrokerNode(node_id, host, port))
                return int(node_id)
            if code not in _RETRY_COORDINATOR or time.monotonic() > deadline:
                raise ProtocolClientError(f"FindCoordinator for '{group_id}' failed: {error_name(code)}"
                                          + (f" ({message})" if message else ""))
            time.sleep(0.2)

    def send_to_coordinator(self, group_id: str, api_key: int, body: Any, error_of: Any = None,
                            max_version: Optional[int] = None) -> Any:
        """Send to the group's coordinator, looking it up again (as Kafka's admin client does) while the answer
        says NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS; ``error_of(response)`` gives the code to check."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            node_id = self.find_coordinator(group_id)
            r = self.send_to(node_id, api_key, body, max_version)
            code = error_of(r) if error_of is not None else getattr(r, "error_code", 0)
            if code not in _RETRY_COORDINATOR or time.monotonic() > deadline:
                return r
            time.sleep(0.2)


def _split_host_port(server: str) -> Tuple[str, int]:
    server = server.strip()
    host, sep, port = server.rpartition(":")
    if not sep or not port.isdigit():
        raise ProtocolClientError(f"Invalid url in bootstrap.servers: {server}")
    return host.strip("[]"), int(port)
