"""Construct coverage of a differential program: the named features it exercises.

Long runs (``benchmarks/tpu_differential.py --summary``) count, per feature, the programs
drawn with it, those tpu ran and matched, and those both targets ran and matched -- so a
"0 disagreements" claim says what it covered.
"""

from __future__ import annotations

from .program import Node, Program


def _ops(node: Node, found: set[str]) -> None:
    if node.op == "cast":
        found.add(f"op cast {node.args[0].dtype}->{node.dtype}")
    elif node.dtype == "bool" and node.op in ("and_", "or_"):
        found.add(f"op {node.op} of conditions")
    else:
        found.add(f"op {node.op}")
    if node.dtype != "bool":
        found.add(f"value dtype {node.dtype}")
    for arg in node.args:
        _ops(arg, found)


def features(prog: Program) -> set[str]:
    """The features ``prog`` exercises (mode, tile shape class, index maps, scopes, operators, casts, dtypes)."""
    found = {
        f"mode {prog.mode}" + (f" {prog.reduce}" if prog.mode in ("reduce", "serial") else ""),
        f"out dtype {prog.out_dtype}",
        f"out scope {prog.out_scope}",
        f"BM {prog.BM}",
        "M not divisible by BM" if prog.M % prog.BM else "M divisible by BM",
        f"threads {prog.threads}",
        f"inputs {len(prog.inputs)}",
    }
    if prog.order and list(prog.order) != sorted(prog.order):
        found.add("parameters shuffled")
    for x in prog.inputs:
        found.add(f"view {x.view}")
        found.add(f"scope {x.scope}")
        found.add(f"input dtype {x.dtype}")
    _ops(prog.expr, found)
    size = prog.expr.size()
    found.add("tree size " + ("1" if size == 1 else "2-4" if size <= 4 else "5-9" if size <= 9 else "10+"))
    return found
