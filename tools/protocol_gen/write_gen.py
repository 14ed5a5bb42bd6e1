"""Emitting a struct's encoder: appends to ``Writer.buf``, tagged fields last."""

from __future__ import annotations

from protocol_gen.code import Code, cond_expr
from protocol_gen.gen_base import GenBase
from protocol_gen.spec import FieldSpec, Range, StructSpec, intersect
from protocol_gen.wire_types import FIXED, PRIMITIVES


class WriteGen(GenBase):
    def emit_write_length(self, c: Code, expr: str, compact: bool, width: int, b: str) -> None:
        if compact:
            c(f"_l = {expr} + 1")
            c("if _l < 128:")
            with c.indent():
                c(f"{b}.append(_l)")
            c("else:")
            with c.indent():
                c(f"{b} += {self.use('encode_uvarint')}(_l)")
        else:
            c(f"{b} += {self.fmt('h' if width == 2 else 'i')}.pack({expr})")

    def emit_null(self, c: Code, compact: bool, width: int, b: str) -> None:
        if compact:
            c(f"{b}.append(0)")
        else:
            ff = "\\xff" * width
            c(f'{b} += b"{ff}"')

    def emit_write_scalar(
        self, c: Code, elem: str, value: str, compact: bool, w: str, b: str
    ) -> None:
        """Write a non-None string/bytes/uuid ``value``."""
        if elem == "uuid":
            c(f"{b} += {value}.bytes")
            return
        if elem == "string":
            c(f"_s = {value}.encode()")
            data = "_s"
        else:
            data = value
        self.emit_write_length(c, f"len({data})", compact, 2 if elem == "string" else 4, b)
        c(f"{b} += {data}")

    def emit_write_value(
        self, c: Code, f: FieldSpec, value: str, compact: bool, nullable: str | bool, w: str, b: str
    ) -> None:
        """Write field ``f`` whose value is the expression ``value`` (a simple name/attr)."""
        width = 2 if f.elem == "string" and not f.is_array else 4
        if f.elem == "records" and not f.is_array:
            c(f"{self.use('write_records')}({w}, {value}, {compact})")
            c(f"{b} = {w}.buf")
            return
        may_be_none = f.nullable is not None
        if f.is_struct and not f.is_array:
            if may_be_none:
                c(f"if {value} is None:")
                with c.indent():
                    if nullable is not True:
                        self.emit_not_nullable(c, f, nullable)
                    c(f'{b} += b"\\xff"')
                c("else:")
                c.level += 1
                c(f"{b}.append(1)")
            c.call(f"_write_{f.elem}(", [value, w, "version"], ")")
            if self.msg.structs[f.elem].has_records:
                c(f"{b} = {w}.buf")
            if may_be_none:
                c.level -= 1
            return
        if f.elem in FIXED and not f.is_array:
            ch, _ = FIXED[f.elem]
            c(f"{b} += {self.fmt(ch)}.pack({value})")
            return
        if may_be_none or f.is_array:
            # bind to a local for None-narrowing / repeated use
            var = f"v_{f.attr}"
            c(f"{var} = {value}")
            value = var
        if may_be_none and f.elem != "uuid":
            c(f"if {value} is None:")
            with c.indent():
                if nullable is not True:
                    self.emit_not_nullable(c, f, nullable)
                self.emit_null(c, compact, width, b)
            c("else:")
            c.level += 1
        if f.is_array:
            self.emit_write_length(c, f"len({value})", compact, 4, b)
            e = f.elem
            if e in FIXED:
                ch, _ = FIXED[e]
                self.use("struct")
                c(f'{b} += struct.pack(">%d{ch}" % len({value}), *{value})')
            elif e in PRIMITIVES:
                ev = f"e_{f.attr}"
                c(f"for {ev} in {value}:")
                with c.indent():
                    self.emit_write_scalar(c, e, ev, compact, w, b)
            else:
                ev = f"e_{f.attr}"
                c(f"for {ev} in {value}:")
                with c.indent():
                    c.call(f"_write_{e}(", [ev, w, "version"], ")")
                if self.msg.structs[e].has_records:
                    c(f"{b} = {w}.buf")
        else:
            self.emit_write_scalar(c, f.elem, value, compact, w, b)
        if may_be_none and f.elem != "uuid":
            c.level -= 1

    def emit_not_nullable(self, c: Code, f: FieldSpec, nullable: str | bool) -> None:
        msg = f'"{self.msg.name}: {f.name} is not nullable in this version"'
        if nullable is False:
            c(f"raise ValueError({msg})")
        else:
            c(f"if not ({nullable}):")
            with c.indent():
                c(f"raise ValueError({msg})")

    def emit_write_field(
        self, c: Code, f: FieldSpec, ctx: Range, tagged: bool, w: str = "w", b: str = "b"
    ) -> None:
        value = f"o.{f.attr}"
        nullable = self.nullable_cond(f, ctx)
        if tagged:
            self.emit_write_value(c, f, value, True, nullable, w, b)
            return
        flex = self.flex_of(f)
        fc = cond_expr(flex, ctx)
        if fc is None or fc == "" or (f.is_struct and not f.is_array):
            self.emit_write_value(c, f, value, fc == "", nullable, w, b)
        else:
            assert flex is not None
            c(f"if {fc}:")
            with c.indent():
                sub = intersect(ctx, flex)
                assert sub is not None
                self.emit_write_value(c, f, value, True, self.nullable_cond(f, sub), w, b)
            c("else:")
            with c.indent():
                sub = intersect(ctx, (0, flex[0] - 1))
                assert sub is not None
                self.emit_write_value(c, f, value, False, self.nullable_cond(f, sub), w, b)

    def gen_write(self, c: Code, s: StructSpec) -> None:
        assert s.ctx is not None
        ctx = s.ctx
        c.call(f"def _write_{s.name}(", ["o: " + s.name, "w: Writer", "version: int"], ") -> None:")
        with c.indent():
            c("b = w.buf")
            for cond, fs in self.groups(s):
                if cond:
                    c(f"if {cond}:")
                    c.level += 1
                sub = ctx if not cond else intersect(ctx, fs[0].regular_range())
                assert sub is not None
                if fs[0].elem in FIXED and not fs[0].is_array:
                    fmt = "".join(FIXED[f.elem][0] for f in fs)
                    sname = self.fmt(fmt)
                    c.call(f"b += {sname}.pack(", [f"o.{f.attr}" for f in fs], ")")
                else:
                    self.emit_write_field(c, fs[0], sub, tagged=False)
                if cond:
                    c.level -= 1
            self.gen_write_tags(c, s)

    def _simple_struct_default(self, f: FieldSpec) -> list[tuple[str, str]] | None:
        """(attr, default literal) pairs if ``f`` is a non-null struct of scalar fields."""
        if not self._lazy_struct(f):
            return None
        out = []
        for sf in self.msg.structs[f.elem].fields:
            if sf.is_array or sf.is_struct or sf.elem in ("records", "uuid", "float64"):
                return None
            expr, factory = self.default_expr(sf)
            if factory:
                return None
            out.append((sf.attr, expr))
        return out if 0 < len(out) <= 4 else None

    def gen_write_tags(self, c: Code, s: StructSpec) -> None:
        assert s.ctx is not None
        fcond = cond_expr(self.msg.flexible, s.ctx)
        if fcond is None:
            return
        if fcond:
            c(f"if {fcond}:")
            c.level += 1
        fctx = intersect(s.ctx, self.msg.flexible)
        assert fctx is not None
        tagged = [f for f in s.fields if cond_expr(f.tagged_range(), fctx) is not None]
        tagged.sort(key=lambda f: f.tag or 0)
        if not tagged:
            c("b.append(0)")
        else:
            names = []
            for i, f in enumerate(tagged):
                tc = cond_expr(f.tagged_range(), fctx)
                simple = self._simple_struct_default(f)
                if simple is not None:
                    # cheaper than dataclass __eq__ against a default instance
                    c(f"_v{i} = o.{f.attr}")
                    test = " or ".join(f"_v{i}.{a} != {d}" for a, d in simple)
                    if tc:
                        test = f"{tc} and ({test})" if len(simple) > 1 else f"{tc} and {test}"
                    c(f"_t{i} = {test}")
                else:
                    d = self.compare_default(f)
                    test = f"o.{f.attr} is not None" if d == "None" else f"o.{f.attr} != {d}"
                    c(f"_t{i} = {tc + ' and ' if tc else ''}{test}")
                names.append(f"_t{i}")
            c(f"b.append({' + '.join(names)})")
            enc = self.use("encode_uvarint")
            for i, f in enumerate(tagged):
                c(f"if _t{i}:")
                with c.indent():
                    c("_tw = Writer()")
                    c("_tb = _tw.buf")
                    sub = intersect(fctx, f.tagged_range())
                    assert sub is not None
                    self.emit_write_field(c, f, sub, tagged=True, w="_tw", b="_tb")
                    c("_d = _tw.getvalue()")
                    assert f.tag is not None and f.tag < 128
                    c(f'b += b"\\x{f.tag:02x}"')
                    c(f"b += {enc}(len(_d))")
                    c("b += _d")
        if fcond:
            c.level -= 1
