from collections.abc import Callable

_Buffer = bytes | bytearray | memoryview

class KeyMap:
    size: int
    limit: int
    def __init__(self, slots: int) -> None: ...
    def add_batches(self, data: _Buffer, aborted: bytes, from_offset: int,
                    decompress: Callable[[int, bytes], bytes]) -> tuple[int, bool]: ...
    def retain_batches(self, data: _Buffer, aborted: bytes, drop_tombstones: bool,
                       decompress: Callable[[int, bytes], bytes],
                       compress: Callable[[int, bytes], bytes],
                       crc: Callable[[bytes], int]
                       ) -> tuple[bytes, int, int, int, int, int, bytes]: ...
