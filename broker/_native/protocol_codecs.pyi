from typing import Any, Callable

# generated at build time by broker.protocol.gen_pyx (build/gen_pyx/protocol_codecs.pyx); see broker.protocol.compiled
FACTORIES: dict[tuple[str, int], tuple[Callable[[dict[str, Any]], Callable[..., Any]], str]]
ENCODERS: dict[tuple[str, int], tuple[Callable[[dict[str, Any]], Callable[..., None]], str]]
DIGEST: str
