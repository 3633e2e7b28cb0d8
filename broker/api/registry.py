"""Which APIs this broker serves, at which versions; the source of the ApiVersions answer.

Only APIs registered here are advertised, so ApiVersions never promises something that
does not work. Each handler module declares its own version range.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Dict, Iterator, List, Optional

Handler = Callable[[Any, Any], Awaitable[Any]]

#: What a handler returns when the connection must be closed instead of answered (e.g. a failed acks=0 produce).
CLOSE_CONNECTION: Any = object()


@dataclass(frozen=True)
class ApiEntry:
    api_key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler


class ApiRegistry:
    """api_key -> handler with its supported version range."""

    def __init__(self) -> None:
        self._entries: Dict[int, ApiEntry] = {}
        #: ApiVersions version -> the api_keys array's elements, encoded once (every connection asks first)
        self._encoded_keys: Dict[int, List[Any]] = {}

    def register(self, api_key: int, name: str, min_version: int, max_version: int, handler: Handler) -> None:
        if api_key in self._entries:
            raise ValueError(f"API {name} ({api_key}) registered twice")
        self._entries[int(api_key)] = ApiEntry(int(api_key), name, min_version, max_version, handler)
        self._encoded_keys.clear()

    def get(self, api_key: int) -> Optional[ApiEntry]:
        return self._entries.get(api_key)

    def __iter__(self) -> Iterator[ApiEntry]:
        return iter(sorted(self._entries.values(), key=lambda e: e.api_key))

    def api_versions_body(self, error_code: int = 0, throttle_time_ms: int = 0) -> dict:
        """The ApiVersions response body (any version: absent fields are dropped by the encoder).

        With UNSUPPORTED_VERSION (a request version this broker does not know) the table holds only ApiVersions'
        own range, as Kafka's ApiVersionsRequest.getErrorResponse: enough for the client to retry at a version
        both know."""
        return {
            "error_code": error_code,
            "api_keys": [{"api_key": e.api_key, "min_version": e.min_version, "max_version": e.max_version}
                         for e in self if error_code != 35 or e.api_key == 18],
            "throttle_time_ms": throttle_time_ms,
        }

    def api_versions_answer(self, version: int) -> dict:
        """The ApiVersions v``version`` body with the API table already encoded for that version: the first
        request of every connection, answered in a few microseconds instead of ~150 (a reconnect storm of ten
        thousand clients pays it ten thousand times)."""
        keys = self._encoded_keys.get(version)
        if keys is None:
            from broker.protocol.api import ApiKey, response_schema
            from broker.protocol.codec import element_encoder
            encode = element_encoder(response_schema(ApiKey.API_VERSIONS, version), ("api_keys",), version)
            keys = self._encoded_keys[version] = [encode(k) for k in self.api_versions_body()["api_keys"]]
        return {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}
