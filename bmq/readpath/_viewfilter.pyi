from collections.abc import Callable

def filter_batches(data: bytes | bytearray | memoryview, program: bytes,
                   headers: tuple[bytes, ...],
                   decompress: Callable[[int, bytes], bytes]) -> bytes: ...
