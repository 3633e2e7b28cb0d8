"""Print the Python source the codec generator emits for one message at one version.

Usage: python tools/codegen/show_codec.py <MessageName | api_key> <version> [request|response]
e.g.   python tools/codegen/show_codec.py ProduceRequest 9 ;  python tools/codegen/show_codec.py 1 15 response
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker.protocol.gen import generate  # noqa: E402
from broker.protocol.schema import load_apis, load_messages  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    name, version = argv[0], int(argv[1])
    if name.isdigit():
        api = load_apis()[int(name)]
        schema = api.response if len(argv) > 2 and argv[2] == "response" else api.request
    else:
        schema = load_messages()[name]
    print(generate(schema, version)[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
