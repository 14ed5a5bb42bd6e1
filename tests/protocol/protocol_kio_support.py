"""Test support: map between kio's entities and our generated message classes.

kio (https://github.com/Aiven-Open/kio) is an independent implementation of the Kafka protocol
generated from the same JSON specs.  Its entity fields follow the spec's field order for each
version, so a kio entity and our struct line up field by field; only a few names differ (kio
turns ``*TimeMs``/``*TimeoutMs`` into ``timedelta``/``datetime`` values).
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import importlib.util
import io
import sys
import types
import typing
import uuid
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import i32Timedelta, i64Timedelta

from bmq.protocol.primitives import ZERO_UUID

REPO = Path(__file__).resolve().parents[2]

_MS = datetime.timedelta(milliseconds=1)


def load_generator(module: str) -> types.ModuleType:
    """A module of the generator's package, tools/protocol_gen (tools/ is no package)."""
    tools = str(REPO / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    return importlib.import_module(f"protocol_gen.{module}")


@cache
def messages() -> dict[str, Any]:
    """Message name -> the generator's MessageSpec."""
    return {m.name: m for m in load_generator("spec").load_all()}


def our_module(msg: Any) -> types.ModuleType:
    return importlib.import_module(f"bmq.protocol.messages.{msg.module}")


def kio_class(msg: Any, version: int) -> type | None:
    base = msg.module if msg.kind == "data" else msg.module.rsplit("_", 1)[0]
    try:
        mod = importlib.import_module(f"kio.schema.{base}.v{version}.{msg.kind}")
    except ImportError:
        return None
    cls = getattr(mod, msg.name, None)
    return cls if isinstance(cls, type) else None


def kio_encode(cls: type, entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(cls)(buf, entity)
    return buf.getvalue()


# --------------------------------------------------------------------------- strategies


def _unwrap(tp: Any) -> tuple[Any, bool, bool]:
    """(inner type, nullable, is_array) of a kio field annotation."""
    nullable = False
    is_array = False
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        assert len(args) == 1, tp
        tp = args[0]
        nullable = True
    if typing.get_origin(tp) is tuple:
        tp = typing.get_args(tp)[0]
        is_array = True
    return tp, nullable, is_array


_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}


def _primitive(kafka_type: str) -> st.SearchStrategy[Any]:
    if kafka_type in _INT_RANGES:
        lo, hi = _INT_RANGES[kafka_type]
        return st.integers(lo, hi)
    if kafka_type == "float64":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "string":
        return st.text(max_size=12)
    if kafka_type in ("bytes", "records"):
        return st.binary(max_size=24)
    if kafka_type == "uuid":
        # kio models the zero UUID as None (and writes tagged UUIDs unless they are None), so
        # zero comes from the None branch of the (always optional) kio UUID fields.
        return st.uuids().filter(lambda u: u.int != 0)
    if kafka_type == "error_code":
        return st.sampled_from(list(ErrorCode))
    if kafka_type == "timedelta_i32":
        return st.integers(-(2**31), 2**31 - 1).map(
            lambda ms: i32Timedelta.parse(datetime.timedelta(milliseconds=ms))
        )
    if kafka_type == "timedelta_i64":
        return st.integers(-(10**15), 10**15).map(
            lambda ms: i64Timedelta.parse(datetime.timedelta(milliseconds=ms))
        )
    if kafka_type == "datetime_i64":
        # kio's TZAware wants whole seconds and a non-negative timestamp
        return st.integers(0, 2**34).map(lambda s: tz_aware_from_i64(s * 1000))
    raise AssertionError(f"no strategy for kafka_type {kafka_type!r}")


@cache
def entity_strategy(cls: type) -> st.SearchStrategy[Any]:
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in dataclasses.fields(cls):
        inner, nullable, is_array = _unwrap(f.type)
        if dataclasses.is_dataclass(inner):
            elem = st.deferred(lambda inner=inner: entity_strategy(inner))
        else:
            elem = _primitive(f.metadata["kafka_type"])
        s = st.lists(elem, max_size=3).map(tuple) if is_array else elem
        if nullable:
            s = st.one_of(st.none(), s)
        kwargs[f.name] = s
    return st.builds(cls, **kwargs)


# --------------------------------------------------------------------------- kio -> ours


def _scalar(kafka_type: str | None, value: Any) -> Any:
    if value is None:
        if kafka_type == "uuid":
            return ZERO_UUID
        if kafka_type == "datetime_i64":
            return -1
        return None
    if isinstance(value, datetime.timedelta):
        return value // _MS
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):  # includes ErrorCode and kio's phantom ints
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, uuid.UUID):
        return value
    raise AssertionError(f"unexpected kio value {value!r}")


def to_ours(msg: Any, struct_name: str, entity: Any, version: int) -> Any:
    """Build our dataclass equivalent of the kio ``entity`` (a struct of ``msg``)."""
    spec = msg.structs[struct_name]
    cls = getattr(our_module(msg), struct_name)
    ours = spec.fields_in(version)
    kio_fields = dataclasses.fields(entity)
    assert len(ours) == len(kio_fields), (struct_name, version)
    kwargs: dict[str, Any] = {}
    for f, kf in zip(ours, kio_fields, strict=True):
        value = getattr(entity, kf.name)
        kafka_type = kf.metadata.get("kafka_type")
        if f.is_struct:
            if value is None:
                kwargs[f.attr] = None
            elif f.is_array:
                kwargs[f.attr] = [to_ours(msg, f.elem, e, version) for e in value]
            else:
                kwargs[f.attr] = to_ours(msg, f.elem, value, version)
        elif f.is_array:
            kwargs[f.attr] = None if value is None else [_scalar(kafka_type, e) for e in value]
        else:
            kwargs[f.attr] = _scalar(kafka_type, value)
    return cls(**kwargs)
