"""Generate ``bmq/protocol/messages/`` from Kafka's message JSON specs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from protocol_gen.init_gen import gen_init
from protocol_gen.module_gen import ModuleGen
from protocol_gen.spec import REPO, load_all

OUT_DIR = REPO / "bmq" / "protocol" / "messages"


def generate() -> dict[str, str]:
    """Relative file name -> content of every generated file."""
    msgs = load_all()
    out = {"__init__.py": gen_init(msgs)}
    for m in msgs:
        out[f"{m.module}.py"] = ModuleGen(m).generate()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only check the files are current")
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    args = ap.parse_args(argv)
    files = generate()
    out: Path = args.out
    stale = []
    existing = {p.name for p in out.glob("*.py")} if out.exists() else set()
    for name, text in files.items():
        p = out / name
        if not p.exists() or p.read_text() != text:
            stale.append(name)
            if not args.check:
                out.mkdir(parents=True, exist_ok=True)
                p.write_text(text)
    extra = sorted(existing - set(files))
    for name in extra:
        stale.append(name)
        if not args.check:
            (out / name).unlink()
    if args.check:
        if stale:
            print("stale generated files: " + ", ".join(sorted(stale)), file=sys.stderr)
            return 1
        return 0
    print(f"wrote {len(files)} files to {out} ({len(stale)} changed)")
    return 0
