from typing import Any, Callable

# generated at build time by broker.protocol.gen_pyx (build/gen_pyx/protocol_codecs.pyx); see broker.protocol.compiled
# (message name, version) -> (factory of (decode, encode), sha256 of the generated Python source)
FACTORIES: dict[tuple[str, int], tuple[Callable[[dict[str, Any]], tuple[Callable[..., Any], Callable[..., None]]], str]]
DIGEST: str
