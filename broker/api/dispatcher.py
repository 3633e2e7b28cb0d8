"""From a request frame to response parts: header, version check, decode, handler, encode.

This is where Kafka's ``KafkaApis.handle`` sits. Errors become wire codes here and in the
handlers, exactly once. A peer's protocol violation (unknown API key, unsupported version
of an API other than ApiVersions, a body that does not parse) closes the connection, as
Kafka does; an unexpected exception in a handler also closes it, with a logged traceback.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, List, Optional, Union

from broker.api import sasl_authenticator as sasl
from broker.api.registry import CLOSE_CONNECTION, ApiRegistry
from broker.api.throttling import RequestThrottler
from broker.stats import RequestMetrics
from broker.protocol import api as proto
from broker.util import request_time
from broker.util.file_slice import FileSlice

if TYPE_CHECKING:
    from broker.api.sasl_authenticator import SaslServerAuthenticator

log = logging.getLogger(__name__)
request_log = logging.getLogger("kafka.request.logger")  # Kafka's logger name, so kafka-configs --entity-type broker-loggers works as on Kafka

Parts = List[Union[bytes, FileSlice]]


class ConnectionContext:
    """What a handler may know about the peer (never the transport itself)."""

    __slots__ = ("connection_id", "client_host", "client_port", "listener_name", "security_protocol", "principal",
                 "throttle_time_ms", "sasl_mechanism", "token_authenticated", "client_certificate", "authenticator",
                 "received_ns")

    def __init__(self, connection_id: str, client_host: str, client_port: int, listener_name: str,
                 security_protocol: str = "PLAINTEXT") -> None:
        self.connection_id = connection_id
        self.client_host = client_host
        self.client_port = client_port
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        #: "User:<name>" once authenticated (SASL or TLS client certificate); User:ANONYMOUS otherwise
        self.principal = "User:ANONYMOUS"
        #: set by a handler (quotas) to keep the connection muted this long after its response is sent
        self.throttle_time_ms = 0
        #: SASL mechanism the connection authenticated with (None: no SASL)
        self.sasl_mechanism: Optional[str] = None
        #: authenticated with a delegation token (such a connection may not create or renew tokens)
        self.token_authenticated = False
        #: DER bytes of the TLS client certificate, if the peer presented one
        self.client_certificate: Optional[bytes] = None
        #: SASL state on a SASL listener (None elsewhere)
        self.authenticator: Optional["SaslServerAuthenticator"] = None
        #: monotonic ns when the request being handled was read off the socket (request queue time starts there)
        self.received_ns = 0


class RequestContext:
    """Everything a handler knows about the request besides its body."""

    __slots__ = ("connection", "api_key", "api_version", "correlation_id", "client_id", "received_ns")

    def __init__(self, connection: ConnectionContext, header: Any) -> None:
        self.connection = connection
        self.api_key: int = header.api_key
        self.api_version: int = header.api_version
        self.correlation_id: int = header.correlation_id
        self.client_id: Optional[str] = header.client_id
        self.received_ns = time.monotonic_ns()

    @property
    def listener_name(self) -> str:
        return self.connection.listener_name


class RequestDispatcher:
    """Routes frames to the registered handler of their API."""

    #: returned by :meth:`handle` when the connection must be closed
    CLOSE = CLOSE_CONNECTION

    def __init__(self, registry: ApiRegistry, throttler: Optional[RequestThrottler] = None,
                 metrics: Optional[RequestMetrics] = None) -> None:
        self._registry = registry
        self._throttler = throttler
        #: RequestMetrics of the Prometheus endpoint (None: endpoint off, nothing recorded)
        self._metrics = metrics

    async def handle(self, connection: ConnectionContext, frame: memoryview) -> Union[Parts, None, object]:
        auth = connection.authenticator
        if auth is not None and auth.raw_tokens:
            return self._sasl_outcome(auth.handle_raw_token(connection, frame))
        try:
            header, body_offset = proto.decode_request_header(frame)
        except proto.MalformedMessageError as exc:
            log.warning("Closing %s: unreadable request header (%s)", connection.connection_id, exc)
            return self.CLOSE
        api_key = header.api_key
        version = header.api_version
        if auth is not None:
            if auth.intercepts() or (api_key == proto.ApiKey.SASL_HANDSHAKE and auth.can_reauthenticate()):
                outcome = auth.handle_request(connection, header, frame, body_offset)
                if outcome is not sasl.PASS:
                    return self._sasl_outcome(outcome)
            elif auth.session_expired(time.monotonic_ns()):
                log.info("Closing %s: its SASL session expired (connections.max.reauth.ms) without "
                         "re-authentication", connection.connection_id)
                return self.CLOSE
        entry = self._registry.get(api_key)
        if entry is None:
            log.warning("Closing %s: unknown or unsupported API key %d (client %s)", connection.connection_id,
                        api_key, header.client_id)
            return self.CLOSE
        if not entry.min_version <= version <= entry.max_version:
            if api_key == proto.ApiKey.API_VERSIONS:
                # KIP-511: answer with a v0 response carrying UNSUPPORTED_VERSION and ApiVersions' own range.
                return proto.encode_response(api_key, 0, header.correlation_id,
                                             self._registry.api_versions_body(error_code=35))
            log.warning("Closing %s: unsupported version %d of API %s (client %s)", connection.connection_id,
                        version, entry.name, header.client_id)
            return self.CLOSE
        try:
            request = proto.decode_request(api_key, version, frame, body_offset)
        except proto.MalformedMessageError as exc:
            log.warning("Closing %s: malformed %s v%d request (%s)", connection.connection_id, entry.name, version,
                        exc)
            return self.CLOSE
        ctx = RequestContext(connection, header)
        if request_log.isEnabledFor(logging.DEBUG):
            request_log.debug("%s v%d correlation %d from %s (%s)", entry.name, version, header.correlation_id,
                              header.client_id, connection.connection_id)
        throttler = self._throttler
        charge = throttler is not None and throttler.active
        if charge:
            parked = request_time.begin()
            started = time.monotonic_ns()
        try:
            response = await entry.handler(ctx, request)
            if charge:
                throttler.after_handler(ctx, len(frame), time.monotonic_ns() - started - parked[0],  # type: ignore
                                        response)
        except Exception:
            log.exception("Unexpected error handling %s v%d from %s; closing the connection", entry.name, version,
                          connection.connection_id)
            return self.CLOSE
        if response is None or response is self.CLOSE:
            if self._metrics is not None and response is None:
                self._record(connection, ctx, request)
            return response
        parts = proto.encode_response(api_key, version, header.correlation_id, response)
        if self._metrics is not None:
            self._record(connection, ctx, request)
        return parts

    def _record(self, connection: ConnectionContext, ctx: RequestContext, request: Any) -> None:
        """RequestMetrics of one answered request: queue time (arrival to handler) and total time."""
        arrived = connection.received_ns or ctx.received_ns
        self._metrics.record(ctx.api_key, ctx.api_version, ctx.received_ns - arrived,  # type: ignore[union-attr]
                             time.monotonic_ns() - arrived, request)

    def _sasl_outcome(self, outcome: object) -> object:
        if isinstance(outcome, sasl.Respond):
            return outcome.parts
        if isinstance(outcome, sasl.RespondAndClose):
            return outcome
        return self.CLOSE
