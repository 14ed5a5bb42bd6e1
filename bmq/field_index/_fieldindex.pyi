"""Types of the C module bmq/field_index/_fieldindex.c (see its comment)."""


Buffer = bytes | bytearray | memoryview

def scan(records: Buffer, base_offset: int, count: int,
         fields: tuple[tuple[int, tuple[bytes, ...]], ...], by_record: bool = False, /
         ) -> tuple[int, tuple[bytes, ...]]: ...
def build(entries: Buffer, start: int, end: int, records: int, malformed: int, max_bits: int,
          target: int, /) -> bytes: ...
def hash(text: Buffer, /) -> int: ...
