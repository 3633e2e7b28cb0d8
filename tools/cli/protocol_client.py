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

One request is in flight per connection; responses are matched by correlation id. Failures raise
``ProtocolClientError`` with one line naming the broker and the cause.
"""
from __future__ import annotations

import socket
import struct
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

from broker.errors import ErrorCode
from broker.protocol.api import API_VERSIONS_RANGE, ApiKey, decode_response_with_header, encode_request
from broker.security.plain import plain_client_message
from broker.security.scram import ScramClient

from .client_config import Security

__all__ = ["ProtocolClientError", "BrokerNode", "ProtocolClient", "error_name"]

_I32 = struct.Struct(">i")
#: FindCoordinator/coordinator errors after which Kafka's admin client looks the coordinator up again
_RETRY_COORDINATOR = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                      ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


class ProtocolClientError(Exception):
    """A connection, login or protocol failure; the message is one line."""


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
            raise ProtocolClientError(f"Cannot connect to {self.address}: {e.strerror or e}") from None
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
            except socket.timeout:
                raise ProtocolClientError(f"Timed out waiting for a response from {self.address}") from None
            except OSError as e:
                raise ProtocolClientError(f"Connection to {self.address} failed: {e.strerror or e}") from None
            if not b:
                raise ProtocolClientError(f"Connection to {self.address} was closed by the broker")
            chunks.append(b)
            n -= len(b)
        return b"".join(chunks)

    def request(self, api_key: int, version: int, body: Any) -> Any:
        self._cid = (self._cid + 1) & 0x7FFFFFFF
        try:
            self.sock.sendall(encode_request(api_key, version, self._cid, self.client_id, body))
        except OSError as e:
            raise ProtocolClientError(f"Connection to {self.address} failed: {e.strerror or e}") from None
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
    """Blocking requests to the brokers of one cluster; use as a context manager (closes every connection)."""

    def __init__(self, bootstrap_servers: str, security: Optional[Security] = None,
                 client_id: str = "kafka-tools", timeout_s: float = 30.0) -> None:
        self.bootstrap = [_split_host_port(s) for s in bootstrap_servers.split(",") if s.strip()]
        if not self.bootstrap:
            raise ProtocolClientError("No bootstrap server given")
        self.security = security or Security()
        self.client_id = client_id
        self.timeout_s = timeout_s
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
    def _any_connection(self) -> _Connection:
        if self._bootstrap_conn is not None:
            return self._bootstrap_conn
        errors: List[str] = []
        for host, port in self.bootstrap:
            try:
                self._bootstrap_conn = _Connection(host, port, self.security, self.client_id, self.timeout_s)
                return self._bootstrap_conn
            except ProtocolClientError as e:
                errors.append(str(e))
        raise ProtocolClientError("; ".join(errors))

    def _connection(self, node_id: int) -> _Connection:
        conn = self._conns.get(node_id)
        if conn is None:
            node = self.node(node_id)
            conn = _Connection(node.host, node.port, self.security, self.client_id, self.timeout_s)
            self._conns[node_id] = conn
        return conn

    def node(self, node_id: int) -> BrokerNode:
        if node_id not in self._nodes:
            self.refresh_metadata()
        try:
            return self._nodes[node_id]
        except KeyError:
            raise ProtocolClientError(f"Broker {node_id} is not in the cluster's metadata") from None

    def nodes(self) -> List[BrokerNode]:
        self.refresh_metadata()
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
        conn = self._any_connection() if node_id is None else self._connection(node_id)
        return dict(conn.versions)

    def send_any(self, api_key: int, body: Any, max_version: Optional[int] = None) -> Any:
        conn = self._any_connection()
        return conn.request(api_key, self._version(conn, api_key, max_version), body)

    def send_to(self, node_id: int, api_key: int, body: Any, max_version: Optional[int] = None) -> Any:
        conn = self._connection(node_id)
        return conn.request(api_key, self._version(conn, api_key, max_version), body)

    def version_for(self, api_key: int, node_id: Optional[int] = None, max_version: Optional[int] = None) -> int:
        """The version ``send_*`` would use (bodies differ by version, so callers may need it first)."""
        conn = self._any_connection() if node_id is None else self._connection(node_id)
        return self._version(conn, api_key, max_version)

    def send_to_controller(self, api_key: int, body: Any, max_version: Optional[int] = None) -> Any:
        if self.controller_id < 0:
            self.refresh_metadata()
        if self.controller_id < 0:
            raise ProtocolClientError("The cluster has no controller right now")
        return self.send_to(self.controller_id, api_key, body, max_version)

    def refresh_metadata(self, topics: Optional[List[str]] = None) -> Any:
        """Metadata for ``topics`` (None = all); updates the known brokers and controller."""
        conn = self._any_connection()
        version = self._version(conn, ApiKey.METADATA, 12)
        body = {"topics": None if topics is None else [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
                "allow_auto_topic_creation": False}
        r = conn.request(ApiKey.METADATA, version, body)
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
