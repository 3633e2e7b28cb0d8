from typing import Union

Buffer = Union[bytes, bytearray, memoryview]

HARDWARE: bool

def crc32c(data: Buffer, value: int = 0) -> int: ...
def _crc32c_software(data: Buffer, value: int = 0) -> int: ...
