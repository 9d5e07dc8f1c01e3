"""The code's rooms, measured (issue 34): modules, lines and packages of mirror/, the
modules over 500 lines and classes over 300 (tests/test_quality.py refuses both), and the
largest modules with their fan-out (how many of mirror's own modules each imports) and
their largest class.

Usage: python bench/code_size.py [CHECKOUT] [--top 12]
(CHECKOUT: a folder holding mirror/, default this one; run it on two checkouts, or on a
`git worktree` of an older commit, to compare.)
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES, MAX_CLASS_LINES = 500, 300


def measure(path: Path) -> tuple[int, int, tuple[str, int]]:
    """(lines, fan-out, (largest class, its lines)) of one module."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mirror"):
            own.add(node.module)
        elif isinstance(node, ast.Import):
            own |= {a.name for a in node.names if a.name.startswith("mirror")}
    classes = [(c.name, (c.end_lineno or c.lineno) - c.lineno + 1)
               for c in ast.walk(tree) if isinstance(c, ast.ClassDef)]
    return len(text.splitlines()), len(own), max(classes, key=lambda c: c[1], default=("", 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", nargs="?", type=Path, default=ROOT)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    package = args.checkout / "mirror"
    rows = [(*measure(p), str(p.relative_to(args.checkout))) for p in sorted(package.rglob("*.py"))]
    print(f"modules {len(rows)}, lines {sum(r[0] for r in rows):,}, "
          f"packages {len({Path(r[3]).parent for r in rows})}")
    print(f"modules over {MAX_MODULE_LINES} lines: {sum(r[0] > MAX_MODULE_LINES for r in rows)}; "
          f"classes over {MAX_CLASS_LINES}: {sum(r[2][1] > MAX_CLASS_LINES for r in rows)}")
    for lines, fan_out, (cls, size), name in sorted(rows, reverse=True)[:args.top]:
        print(f"{lines:5d}  fan-out {fan_out:2d}  {name}  (largest class {cls or '-'} {size})")


if __name__ == "__main__":
    main()
