"""Kafka's field types: their struct formats and widths, their Python types and zero values."""

# Types with a fixed width, by their struct format char (big-endian).
FIXED = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "uint32": ("I", 4),
    "float64": ("d", 8),
    "bool": ("?", 1),
}
VARIABLE = {"string", "bytes", "uuid", "records"}
PRIMITIVES = set(FIXED) | VARIABLE
PY_TYPES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "int",
    "uint16": "int",
    "uint32": "int",
    "float64": "float",
    "bool": "bool",
    "string": "str",
    "bytes": "bytes",
    "uuid": "UUID",
    "records": "RecordsInput",
}
ZERO = {
    "int": "0",
    "float": "0.0",
    "bool": "False",
    "str": '""',
    "bytes": 'b""',
    "UUID": "ZERO_UUID",
}
