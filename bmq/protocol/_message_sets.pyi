from collections.abc import Callable

class LegacyFormatError(ValueError):
    """args: (Kafka error code, message)."""

def up(data: bytes | bytearray | memoryview,
       decompress: Callable[[int, bytes], bytes]) -> tuple[bytes, int, int, int, int]: ...
def down(data: bytes | bytearray | memoryview, magic: int, first_offset: int,
         decompress: Callable[[int, bytes], bytes],
         compress: Callable[[int, bytes], bytes]) -> tuple[bytes, int]: ...
