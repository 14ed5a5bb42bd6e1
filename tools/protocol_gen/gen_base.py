"""What the decoder and encoder emitters of one message module share."""

from __future__ import annotations

import json
from collections.abc import Iterator

from protocol_gen.code import cond_expr
from protocol_gen.spec import FieldSpec, MessageSpec, Range, StructSpec
from protocol_gen.wire_types import FIXED, PRIMITIVES, PY_TYPES, ZERO


class GenBase:
    """The state of one module's generation (imports used, struct formats, defaults needed), the
    mapping of a field's type to Python's, and what the decoder and encoder share."""

    def __init__(self, msg: MessageSpec) -> None:
        self.msg = msg
        self.structs_fmt: dict[str, str] = {}  # fmt -> name
        self.used: set[str] = set()
        self.defaults_needed: list[str] = []  # struct names needing _DEFAULT_<name>

    # ------------------------------------------------------------------ helpers
    def fmt(self, chars: str) -> str:
        name = "_S_" + chars.replace("?", "o")
        self.structs_fmt[chars] = name
        return name

    def use(self, name: str) -> str:
        self.used.add(name)
        return name

    def flex_of(self, f: FieldSpec) -> Range | None:
        if f.flexible is True:
            return self.msg.flexible
        assert not isinstance(f.flexible, bool)
        return f.flexible

    def py_elem(self, f: FieldSpec) -> str:
        e = f.elem
        if e in PRIMITIVES:
            return PY_TYPES[e]
        return e

    def annotation(self, f: FieldSpec) -> str:
        if f.elem == "records":
            self.use("RecordsInput")
            return "RecordsInput"
        if f.elem == "uuid":
            self.use("UUID")
        t = self.py_elem(f)
        if f.is_array:
            t = f"list[{t}]"
        if f.nullable is not None:
            t += " | None"
        return t

    def default_expr(self, f: FieldSpec) -> tuple[str, bool]:
        """(expression, is_factory) for the dataclass field default."""
        raw = f.default
        if f.elem == "records":
            return ("None" if f.nullable is not None else 'b""'), False
        if raw == "null":
            assert f.nullable is not None, (self.msg.name, f.name)
            return "None", False
        if f.is_array:
            assert raw in (None, ""), (self.msg.name, f.name, raw)
            return "list", True
        if f.is_struct:
            assert raw in (None, ""), (self.msg.name, f.name, raw)
            return f.elem, True
        py = PY_TYPES[f.elem]
        if raw is None or (raw == "" and py != "str"):
            if py == "UUID":
                self.use("ZERO_UUID")
            return ZERO[py], False
        if py == "bool":
            if isinstance(raw, bool):
                return repr(raw), False
            assert raw in ("true", "false"), raw
            return ("True" if raw == "true" else "False"), False
        if py == "int":
            return str(raw if isinstance(raw, int) else int(str(raw), 0)), False
        if py == "float":
            return repr(float(raw)), False  # type: ignore[arg-type]
        if py == "str":
            return json.dumps(raw), False
        raise ValueError(f"{self.msg.name}.{f.name}: unsupported default {raw!r}")

    def value_default(self, f: FieldSpec) -> str:
        """An expression producing the default value (a fresh one for mutables)."""
        expr, factory = self.default_expr(f)
        if factory:
            return "[]" if expr == "list" else f"{expr}()"
        return expr

    def compare_default(self, f: FieldSpec) -> str:
        """Expression to compare against when deciding whether a tagged field is written."""
        expr, factory = self.default_expr(f)
        if factory:
            if expr == "list":
                return "[]"
            if expr not in self.defaults_needed:
                self.defaults_needed.append(expr)
            return f"_DEFAULT_{expr}"
        return expr


    def nullable_cond(self, f: FieldSpec, ctx: Range) -> str | bool:
        cond = cond_expr(f.nullable, ctx)
        if cond is None:
            return False
        return True if cond == "" else cond


    def groups(self, s: StructSpec) -> Iterator[tuple[str, list[FieldSpec]]]:
        """Regular fields grouped into (condition, fields); fixed-size runs are merged."""
        assert s.ctx is not None
        cur: list[FieldSpec] = []
        cur_cond = ""
        for f in s.fields:
            cond = cond_expr(f.regular_range(), s.ctx)
            if cond is None:
                continue
            fixed = f.elem in FIXED and not f.is_array
            if fixed and cur and cond == cur_cond and self._fits_group([*cur, f]):
                cur.append(f)
                continue
            if cur:
                yield cur_cond, cur
                cur = []
            if fixed:
                cur = [f]
                cur_cond = cond
            else:
                yield cond, [f]
        if cur:
            yield cur_cond, cur

    @staticmethod
    def _fits_group(fs: list[FieldSpec]) -> bool:
        return len(fs) <= 32


    @staticmethod
    def _lazy_struct(f: FieldSpec) -> bool:
        return f.is_struct and not f.is_array and f.nullable is None
