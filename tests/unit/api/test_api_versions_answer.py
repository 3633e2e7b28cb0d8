"""ApiVersions answers with its API table encoded once per version: the same bytes as encoding the table each time."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace as ns

from broker.api import api_versions
from broker.api.registry import ApiRegistry
from broker.protocol import api as proto


async def _noop(ctx: object, request: object) -> None:
    return None


def test_the_pre_encoded_table_gives_the_same_bytes_at_every_version() -> None:
    reg = ApiRegistry()
    for key, low, high in [(0, 0, 11), (1, 0, 17), (3, 0, 12), (18, 0, 4), (68, 0, 0)]:
        reg.register(key, f"api-{key}", low, high, _noop)
    request = ns(client_software_name="librdkafka", client_software_version="2.15.1")
    for version in range(api_versions.MIN_VERSION, api_versions.MAX_VERSION + 1):
        for _ in range(2):  # built, then from the cache
            body = asyncio.run(api_versions.handle(ns(api_version=version), request, registry=reg))
            assert proto.encode_response(18, version, 7, body) == proto.encode_response(
                18, version, 7, reg.api_versions_body()), version
    reg.register(2, "api-2", 0, 9, _noop)  # a later registration is in the next answer
    body = asyncio.run(api_versions.handle(ns(api_version=3), request, registry=reg))
    assert proto.encode_response(18, 3, 7, body) == proto.encode_response(18, 3, 7, reg.api_versions_body())
