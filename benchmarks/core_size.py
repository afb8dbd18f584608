"""Size of the core by layer at a git revision: files, lines and code lines (neither blank, comment nor docstring).

    python benchmarks/core_size.py [REV ...]      # default: HEAD; e.g. 2c0d434 HEAD for before/after

Layers are found by definition, not by file name (issue 21):

* contract: the modules that define what a vendor uses (``TargetSpec``, ``TargetOption``, ``Upstream``,
  ``TensorParam``, ``CompiledKernel``, ``KernelAdapter``, ``Toolchain``, ``TilecoreError``, the hook
  markers and specs); target <= 350 code lines;
* helpers: what a backend may call (``tilecore/kit/``; before the split, the same modules at the top);
* features: the remote cache, the executor, the CLI, the conformance suite and the backend template;
* machinery: the rest (registry, bridge, launch, activation, the package face); target: helpers and
  machinery together <= 2,400 code lines, and no module of ``tilecore/`` over 350 lines.
"""

from __future__ import annotations

import ast
import subprocess
import sys

VENDOR_NAMES = {
    "TargetSpec",
    "TargetOption",
    "Upstream",
    "TensorParam",
    "CompiledKernel",
    "KernelAdapter",
    "Toolchain",
    "TilecoreError",
    "hookimpl",
    "hookspec",
    "tilecore_declare_targets",
}
HELPERS = ("tilecore/kit/", *(f"tilecore/{m}.py" for m in ("supply", "artifacts", "paths", "host_compiler", "testing")))
FEATURES = ("tilecore/remote/", "tilecore/executor/", "tilecore/cli/", "tilecore/conformance/", "tilecore/template.py")
LAYERS = ("contract", "helpers", "machinery", "features")
CONTRACT_MAX, CORE_MAX, MODULE_MAX = 350, 2400, 350


def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def docstring_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def defines(tree: ast.Module) -> set[str]:
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def layer_of(path: str, tree: ast.Module) -> str:
    if path.startswith(FEATURES):
        return "features"
    if path.startswith(HELPERS):
        return "helpers"
    if defines(tree) & VENDOR_NAMES:
        return "contract"
    return "machinery"


def measure(rev: str) -> tuple[dict[str, list[int]], tuple[int, str]]:
    """Per layer ``[files, lines, code lines]``, and the largest module (lines, path) outside the templates."""
    figures = {layer: [0, 0, 0] for layer in LAYERS}
    largest = (0, "")
    for path in git("ls-tree", "-r", "--name-only", rev, "tilecore").split():
        if not path.endswith(".py"):
            continue
        source = git("show", f"{rev}:{path}")
        tree = ast.parse(source)
        lines = source.splitlines()
        docs = docstring_lines(tree)
        code = sum(1 for n, line in enumerate(lines, 1) if line.strip() and not line.strip().startswith("#") and n not in docs)
        row = figures[layer_of(path, tree)]
        row[0] += 1
        row[1] += len(lines)
        row[2] += code
        largest = max(largest, (len(lines), path))
    return figures, largest


if __name__ == "__main__":
    for rev in sys.argv[1:] or ["HEAD"]:
        figures, (most, where) = measure(rev)
        print(f"{rev}:")
        print(f"  {'layer':<10} {'files':>6} {'lines':>7} {'code lines':>11}")
        for layer in LAYERS:
            files, total, code = figures[layer]
            print(f"  {layer:<10} {files:>6} {total:>7} {code:>11}")
        core = figures["helpers"][2] + figures["machinery"][2]
        contract = figures["contract"][2]
        print(f"  contract {contract} code lines (target <= {CONTRACT_MAX}): {'met' if contract <= CONTRACT_MAX else 'NOT met'}")
        print(f"  helpers + machinery {core} code lines (target <= {CORE_MAX}): {'met' if core <= CORE_MAX else 'NOT met'}")
        print(f"  largest module {where}: {most} lines (target <= {MODULE_MAX}): {'met' if most <= MODULE_MAX else 'NOT met'}")
