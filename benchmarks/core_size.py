"""Size of the core: ``tilecore/**/*.py`` at a git revision, without the conformance suite and
the backend template (what issue 12 measures), as lines and as code lines (neither blank,
comment nor docstring).

    python benchmarks/core_size.py [REV ...]      # default: HEAD
"""

from __future__ import annotations

import ast
import subprocess
import sys

EXCLUDED = ("tilecore/conformance/", "tilecore/templates/")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def docstring_lines(source: str) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def size(rev: str) -> tuple[int, int, int]:
    """(files, lines, code lines) of the core at ``rev``."""
    files = [f for f in git("ls-tree", "-r", "--name-only", rev, "tilecore").split() if f.endswith(".py") and not f.startswith(EXCLUDED)]
    total = code = 0
    for path in files:
        source = git("show", f"{rev}:{path}")
        lines = source.splitlines()
        docs = docstring_lines(source)
        total += len(lines)
        code += sum(1 for number, line in enumerate(lines, 1) if line.strip() and not line.strip().startswith("#") and number not in docs)
    return len(files), total, code


if __name__ == "__main__":
    for rev in sys.argv[1:] or ["HEAD"]:
        files, total, code = size(rev)
        print(f"{rev}: {files} files, {total} lines, {code} code lines")
