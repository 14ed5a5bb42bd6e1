"""Indexed fields: their spec syntax (topic config ``bmq.index.fields``) and how a record's
value of a field is read, the same way when an index is built and when a query checks a record.

A spec is a comma-separated list of fields, each one of:

* ``key``: the record key (its bytes);
* ``header:NAME``: the value of the record's first header ``NAME`` (its bytes);
* ``PATH`` or ``value:PATH``: a dot path into the record value parsed as a JSON object, such as
  ``order_id`` or ``order.id`` (``value:key`` is a JSON field named ``key``). A path segment is
  letters, digits, ``_``, ``-``, ``$`` or ``@``.

A field's text is what queries compare with: a JSON string's contents (unescaped), a number as
it is written (``42``, ``4.20``, ``1e3``), ``true``, ``false`` or ``null``; so ``order_id=42``
matches ``42`` and ``"42"`` (but not ``42.0``). Objects and arrays, and records without the
field (or whose value is not a JSON object), have no text and are not indexed. A value that is
not JSON (or not UTF-8) is skipped and counted as malformed. The C module ``_fieldindex`` reads
fields when indexes are built and this module when queries check records: both the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from bmq.protocol.record_codec import Record

INDEX_FIELDS = "bmq.index.fields"
MAX_FIELDS = 16
MAX_SPEC_CHARS = 200
_PATH = re.compile(r"[A-Za-z0-9_$@-]+(\.[A-Za-z0-9_$@-]+)*")
_HEADER = re.compile(r"[^,=\s][^,=]*")

Kind = Literal["key", "header", "json"]
_SCAN_KINDS: dict[Kind, int] = {"key": 0, "header": 1, "json": 2}


class FieldSpecError(ValueError):
    """A field spec that does not parse; the message says which part and why."""


@dataclass(frozen=True, slots=True)
class Field:
    """One indexed field; ``name`` is its canonical spec (what ``--where`` names)."""

    name: str
    kind: Kind
    path: tuple[str, ...] = ()      # the JSON path, or (header name,)

    @property
    def scan_spec(self) -> tuple[int, tuple[bytes, ...]]:
        """The field as ``_fieldindex.scan`` takes it."""
        return _SCAN_KINDS[self.kind], tuple(step.encode() for step in self.path)

    @property
    def dir_name(self) -> str:
        """A name safe on every storage for the field's index directory."""
        return "f-" + self.name.encode().hex()


def parse_field(spec: str) -> Field:
    text = spec.strip()
    if not text:
        raise FieldSpecError("empty field")
    if len(text) > MAX_SPEC_CHARS:
        raise FieldSpecError(f"field {text[:20]!r}... is longer than {MAX_SPEC_CHARS} characters")
    if text == "key":
        return Field("key", "key")
    if text.startswith("header:"):
        header = text[len("header:"):]
        if not _HEADER.fullmatch(header):
            raise FieldSpecError(f"{text!r}: expected header:NAME (a NAME without ',' or '=')")
        return Field(text, "header", (header,))
    path = text[len("value:"):] if text.startswith("value:") else text
    if not _PATH.fullmatch(path):
        raise FieldSpecError(
            f"{text!r}: expected key, header:NAME or a JSON dot path such as order.id "
            "(letters, digits, _ - $ @ between the dots)")
    # value:order.id is order.id; only a JSON field named key keeps its prefix
    name = "value:key" if path == "key" else path
    return Field(name, "json", tuple(path.split(".")))


def parse_fields(spec: str) -> list[Field]:
    """The fields of a ``bmq.index.fields`` value, in order; an empty value means none."""
    if not spec.strip():
        return []
    fields = [parse_field(part) for part in spec.split(",")]
    names = [f.name for f in fields]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise FieldSpecError(f"field {duplicates[0]!r} is listed twice")
    if len(fields) > MAX_FIELDS:
        raise FieldSpecError(f"{len(fields)} fields: at most {MAX_FIELDS} may be indexed")
    return fields


def format_fields(fields: list[Field]) -> str:
    return ",".join(f.name for f in fields)


def ever_indexed(configs: Mapping[str, str]) -> bool:
    """Whether a topic has or had indexed fields (``keep_index_marker``): only then may index
    files of dropped fields lie beside its segments for the builder to remove."""
    return INDEX_FIELDS in configs


def keep_index_marker(old: Mapping[str, str], new: dict[str, str]) -> dict[str, str]:
    """``new`` configs of a topic; if they drop ``bmq.index.fields`` altogether, it stays, empty:
    the owner, even one that starts later, then knows to remove the dropped fields' files
    (without the marker it would list the storage of every partition of every topic)."""
    if INDEX_FIELDS in old and INDEX_FIELDS not in new:
        return {**new, INDEX_FIELDS: ""}
    return new


def configured_fields(configs: Mapping[str, str]) -> list[Field]:
    """The indexed fields a topic's configs declare (validated when they were set)."""
    try:
        return parse_fields(configs.get(INDEX_FIELDS, ""))
    except FieldSpecError:
        return []


class MalformedValue(ValueError):
    """A record value that is not JSON (a JSON field cannot be read from it)."""


def scalar_text(value: object) -> bytes | None:
    """The text of a JSON scalar as ``parse_value`` gives it (numbers as written, as str);
    None for objects and arrays."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if value is True:
        return b"true"
    if value is False:
        return b"false"
    if value is None:
        return b"null"
    return None


def json_text(document: object, path: tuple[str, ...]) -> bytes | None:
    for step in path:
        if not isinstance(document, dict) or step not in document:
            return None
        document = document[step]
    return scalar_text(document)


def _not_json(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def parse_value(value: bytes | None) -> object:
    """A record value as JSON, numbers kept as written (str); None for a null value. Raises
    ``MalformedValue``."""
    if value is None:
        return None
    try:
        return json.loads(value.decode("utf-8"), parse_int=str, parse_float=str,
                          parse_constant=_not_json)
    except (ValueError, RecursionError) as error:   # UnicodeDecodeError is a ValueError
        raise MalformedValue(str(error)) from None


def field_text(field: Field, record: Record, document: object) -> bytes | None:
    """The text of ``field`` in ``record`` (``document``: its value parsed, for JSON fields)."""
    if field.kind == "key":
        return record.key
    if field.kind == "header":
        wanted = field.path[0]
        for name, value in record.headers:
            if name == wanted:
                return value
        return None
    return json_text(document, field.path)
