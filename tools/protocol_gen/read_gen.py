"""Emitting a struct's decoder: straight-line ``struct`` reads on ``Reader.buf``."""

from __future__ import annotations

from protocol_gen.code import Code, cond_expr
from protocol_gen.gen_base import GenBase
from protocol_gen.spec import FieldSpec, Range, StructSpec, intersect
from protocol_gen.wire_types import FIXED, PRIMITIVES


class ReadGen(GenBase):
    def emit_read_scalar(
        self, c: Code, elem: str, target: str, compact: bool, nullable: str | bool
    ) -> None:
        """Read one string/bytes/records/uuid value into ``target``."""
        if elem == "uuid":
            c(f"{target} = {self.use('read_uuid')}(buf, pos)")
            c("pos += 16")
            return
        self.emit_read_length(c, compact, 2 if elem == "string" else 4)
        decode_error = self.use("DecodeError")
        if nullable:
            ncond = "_n == -1" if nullable is True else f"_n == -1 and {nullable}"
            c(f"if {ncond}:")
            with c.indent():
                c(f"{target} = None")
            c("else:")
            c.level += 1
        c("_m = buf[pos : pos + _n]")
        c("if len(_m) != _n:")
        with c.indent():
            c(f'raise {decode_error}("truncated or invalid {elem} length")')
        c("pos += _n")
        if elem == "string":
            c(f"{target} = _m.tobytes().decode()")
        elif elem == "bytes":
            c(f"{target} = _m.tobytes()")
        else:
            c(f"{target} = _m")
        if nullable:
            c.level -= 1

    def emit_read_length(self, c: Code, compact: bool, width: int) -> None:
        """Set ``_n`` to a classic (int16/int32) or compact (uvarint - 1) length."""
        if compact:
            c("_n = buf[pos]")
            c("pos += 1")
            c("if _n > 127:")
            with c.indent():
                c(f"_n, pos = {self.use('read_uvarint')}(buf, pos - 1)")
            c("_n -= 1")
        else:
            s = self.fmt("h" if width == 2 else "i")
            c(f"_n = {s}.unpack_from(buf, pos)[0]")
            c(f"pos += {width}")

    def emit_read_value(
        self, c: Code, f: FieldSpec, target: str, compact: bool, nullable: str | bool
    ) -> None:
        decode_error = self.use("DecodeError")
        if f.is_array:
            self.emit_read_length(c, compact, 4)
            if nullable:
                ncond = "_n == -1" if nullable is True else f"_n == -1 and {nullable}"
                c(f"if {ncond}:")
                with c.indent():
                    c(f"{target} = None")
                c("else:")
                c.level += 1
            c("if _n < 0 or _n > len(buf) - pos:")
            with c.indent():
                c(f'raise {decode_error}("invalid array length")')
            e = f.elem
            if e in FIXED:
                ch, width = FIXED[e]
                self.use("struct")
                c(f'{target} = list(struct.unpack_from(">%d{ch}" % _n, buf, pos))')
                c(f"pos += {width} * _n" if width > 1 else "pos += _n")
            elif e in PRIMITIVES:
                c(f"{target} = []")
                c("for _ in range(_n):")
                with c.indent():
                    ev = f"e_{f.attr}"
                    self.emit_read_scalar(c, e, ev, compact, False)
                    c(f"{target}.append({ev})")
            else:
                c("r.pos = pos")
                c.wrap(f"{target} = [", f"_read_{e}(r, version) for _ in range(_n)", "]")
                c("pos = r.pos")
            if nullable:
                c.level -= 1
        elif f.is_struct:
            if nullable:
                s = self.fmt("b")
                ncond = f"{s}.unpack_from(buf, pos)[0] < 0"
                c(f"if {ncond}:")
                with c.indent():
                    c("pos += 1")
                    c(f"{target} = None")
                c("else:")
                c.level += 1
                c("r.pos = pos + 1")
            else:
                c("r.pos = pos")
            c(f"{target} = _read_{f.elem}(r, version)")
            c("pos = r.pos")
            if nullable:
                c.level -= 1
        elif f.elem in FIXED:
            ch, width = FIXED[f.elem]
            c(f"{target} = {self.fmt(ch)}.unpack_from(buf, pos)[0]")
            c(f"pos += {width}")
        else:
            self.emit_read_scalar(c, f.elem, target, compact, nullable)


    def emit_read_field(self, c: Code, f: FieldSpec, ctx: Range, tagged: bool) -> None:
        """Read a variable-size field (ctx = versions in which this code runs)."""
        target = f"f_{f.attr}"
        nullable = self.nullable_cond(f, ctx)
        flex = self.flex_of(f)
        if tagged:
            self.emit_read_value(c, f, target, True, nullable)
            return
        fc = cond_expr(flex, ctx)
        if fc is None or (not f.is_array and (f.is_struct or f.elem in FIXED)):
            self.emit_read_value(c, f, target, fc == "", nullable)
        elif fc == "":
            self.emit_read_value(c, f, target, True, nullable)
        else:
            c(f"if {fc}:")
            with c.indent():
                assert flex is not None
                sub = intersect(ctx, flex)
                assert sub is not None
                self.emit_read_value(c, f, target, True, self.nullable_cond(f, sub))
            c("else:")
            with c.indent():
                sub = intersect(ctx, (0, flex[0] - 1))
                assert sub is not None
                self.emit_read_value(c, f, target, False, self.nullable_cond(f, sub))


    def gen_read(self, c: Code, s: StructSpec) -> None:
        assert s.ctx is not None
        ctx = s.ctx
        c.call(f"def _read_{s.name}(", ["r: Reader", "version: int"], f") -> {s.name}:")
        with c.indent():
            c("buf = r.buf")
            c("pos = r.pos")
            for f in s.fields:
                present = intersect(f.versions, ctx)
                if present is None:
                    continue
                ann = self.annotation(f)
                if cond_expr(f.regular_range(), ctx) == "":
                    c(f"f_{f.attr}: {ann}")
                elif self._lazy_struct(f):
                    # build the default struct only if the field was not read
                    c(f"f_{f.attr}: {ann} | None = None")
                else:
                    c(f"f_{f.attr}: {ann} = {self.value_default(f)}")
            for cond, fs in self.groups(s):
                if cond:
                    c(f"if {cond}:")
                    c.level += 1
                sub = ctx if not cond else intersect(ctx, fs[0].regular_range())
                assert sub is not None
                if fs[0].elem in FIXED and not fs[0].is_array:
                    fmt = "".join(FIXED[f.elem][0] for f in fs)
                    size = sum(FIXED[f.elem][1] for f in fs)
                    sname = self.fmt(fmt)
                    if len(fs) == 1:
                        c(f"f_{fs[0].attr} = {sname}.unpack_from(buf, pos)[0]")
                    else:
                        c.assign([f"f_{f.attr}" for f in fs], f"{sname}.unpack_from(buf, pos)")
                    c(f"pos += {size}")
                else:
                    self.emit_read_field(c, fs[0], sub, tagged=False)
                if cond:
                    c.level -= 1
            self.gen_read_tags(c, s)
            c("r.pos = pos")
            present = [f for f in s.fields if intersect(f.versions, ctx) is not None]
            args = []
            for f in present:
                value = f"f_{f.attr}"
                if cond_expr(f.regular_range(), ctx) != "" and self._lazy_struct(f):
                    value = f"{value} or {f.elem}()"
                if len(present) != len(s.fields):
                    # some fields are never present where this struct is used: keyword call
                    value = f"{f.attr}={value}"
                args.append(value)
            c.call(f"return {s.name}(", args, ")")


    def gen_read_tags(self, c: Code, s: StructSpec) -> None:
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
        c("_n = buf[pos]")
        c("pos += 1")
        c("if _n:")
        with c.indent():
            if not tagged:
                c(f"pos = {self.use('skip_tagged_fields')}(buf, pos - 1)")
            else:
                rv = self.use("read_uvarint")
                de = self.use("DecodeError")
                c("if _n > 127:")
                with c.indent():
                    c(f"_n, pos = {rv}(buf, pos - 1)")
                c("for _ in range(_n):")
                with c.indent():
                    c(f"_tag, pos = {rv}(buf, pos)")
                    c(f"_size, pos = {rv}(buf, pos)")
                    c("_end = pos + _size")
                    c("if _end > len(buf):")
                    with c.indent():
                        c(f'raise {de}("truncated tagged field")')
                    first = True
                    for f in tagged:
                        tc = cond_expr(f.tagged_range(), fctx)
                        cond = f"_tag == {f.tag}" + (f" and {tc}" if tc else "")
                        c(f"{'if' if first else 'elif'} {cond}:")
                        first = False
                        with c.indent():
                            sub = intersect(fctx, f.tagged_range())
                            assert sub is not None
                            self.emit_read_field(c, f, sub, tagged=True)
                            c("if pos > _end:")
                            with c.indent():
                                c(f'raise {de}("tagged field overruns its size")')
                    c("pos = _end")
        if fcond:
            c.level -= 1
