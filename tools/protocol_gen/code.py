"""Writing Python source: lines wrapped the way ``ruff format`` wraps them, version
conditions, docstrings."""

from __future__ import annotations

from protocol_gen.spec import Range, intersect

LINE = 100


class Code:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 0

    def __call__(self, line: str = "") -> None:
        self.lines.append(("    " * self.level + line) if line else "")

    def call(self, prefix: str, args: list[str], suffix: str) -> None:
        """Emit ``prefix + args + suffix`` wrapped the way ruff format wraps a call."""
        ind = "    " * self.level
        one = f"{prefix}{', '.join(args)}{suffix}"
        if len(ind) + len(one) <= LINE:
            self(one)
            return
        inner = ", ".join(args)
        self(prefix)
        if len(ind) + 4 + len(inner) <= LINE:
            self.lines.append(ind + "    " + inner)
        else:
            for a in args:
                self.lines.append(ind + "    " + a + ",")
        self(suffix.lstrip())

    def assign(self, targets: list[str], rhs: str) -> None:
        """Emit ``a, b, c = rhs`` wrapped the way ruff format wraps it."""
        ind = "    " * self.level
        lhs = ", ".join(targets)
        head, _, args = rhs.partition("(")
        if len(ind) + len(lhs) + 3 + len(rhs) <= LINE:
            self(f"{lhs} = {rhs}")
        elif len(ind) + len(lhs) + 3 + len(head) + 1 <= LINE:
            self(f"{lhs} = {head}(")
            self.lines.append(ind + "    " + args[:-1])
            self(")")
        elif len(ind) + len(lhs) + 4 <= LINE and len(ind) + 4 + len(rhs) <= LINE:
            self(f"{lhs} = (")
            self.lines.append(ind + "    " + rhs)
            self(")")
        else:
            self("(")
            for t in targets:
                self.lines.append(ind + "    " + t + ",")
            self(f") = {rhs}")

    def wrap(self, prefix: str, inner: str, suffix: str) -> None:
        """Emit ``prefix + inner + suffix``, splitting inside the brackets if too long."""
        ind = "    " * self.level
        if len(ind) + len(prefix) + len(inner) + len(suffix) <= LINE:
            self(prefix + inner + suffix)
        else:
            self(prefix)
            self.lines.append(ind + "    " + inner)
            self(suffix)

    def indent(self) -> _Indent:
        return _Indent(self)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n" if self.lines else ""


class _Indent:
    def __init__(self, c: Code) -> None:
        self.c = c

    def __enter__(self) -> None:
        self.c.level += 1

    def __exit__(self, *a: object) -> None:
        self.c.level -= 1


def cond_expr(need: Range | None, ctx: Range) -> str | None:
    """Python condition on ``version`` for ``need`` given that ``version`` is within ``ctx``.

    Returns "" when always true, None when never true.
    """
    r = intersect(need, ctx)
    if r is None:
        return None
    lo_ok = r[0] <= ctx[0]
    hi_ok = r[1] >= ctx[1]
    if lo_ok and hi_ok:
        return ""
    if lo_ok:
        return f"version <= {r[1]}"
    if hi_ok:
        return f"version >= {r[0]}"
    if r[0] == r[1]:
        return f"version == {r[0]}"
    return f"{r[0]} <= version <= {r[1]}"


def doc_string(text: str) -> str:
    text = " ".join(text.split()).replace("\\", "\\\\")
    if not text:
        return ""
    if text.endswith('"'):
        text += " "
    return f'"""{text}"""'
