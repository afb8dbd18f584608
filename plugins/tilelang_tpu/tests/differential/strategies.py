"""Hypothesis strategies drawing random differential programs (:mod:`.program`).

Every choice is a hypothesis draw, so a failing program shrinks (smaller trees, fewer
inputs, smaller shapes) to its smallest form.  Bounds are tracked per node so that integer
sub-trees never overflow, fp16 stays far from inf and ``exp`` never overflows; a choice that
would break a bound falls back to a safe operand instead of being rejected (no filtering, so
generation never stalls).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from .program import FLOATS, INTS, LIMIT, Input, Node, Program

TILE_HEIGHTS = (1, 63, 64, 65, 128)
WIDTHS = (1, 7, 16, 40, 65)
INPUT_DTYPES = ("float32", "float16", "bfloat16", "int8", "int32")
#: Magnitudes of the random inputs per dtype (the runner draws values within them).
INPUT_BOUND = {"float32": 4.0, "float16": 4.0, "bfloat16": 4.0, "int8": 20, "int32": 1000}
FLOAT_UNARY = ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "sigmoid", "clamp")
FLOAT_BINARY = ("add", "sub", "mul", "div", "min", "max")
INT_UNARY = ("neg", "abs", "clamp")
INT_BINARY = ("add", "sub", "mul", "floordiv", "floormod", "min", "max", "and_", "or_", "xor", "shl", "shr")
BIT_OPS = ("and_", "or_", "xor")
COMPARES = ("lt", "le", "gt", "ge", "eq", "ne")


def _safe_leaf(dtype: str) -> Node:
    return Node("const", dtype, value=1 if dtype in INTS else 1.0, bound=1, exact=True)


def _cast(node: Node, dtype: str) -> Node:
    """``node`` as ``dtype``: a float made an integer is clamped into range first (and only
    exact floats are cast: a value computed with rounding could truncate either way)."""
    if node.dtype == dtype:
        return node
    if node.dtype in FLOATS and dtype in INTS:
        if not node.exact:
            return _safe_leaf(dtype)
        lim = 100 if dtype == "int8" else 1000
        if node.bound > lim:
            node = Node("clamp", node.dtype, (node,), value=(-lim, lim), bound=lim, exact=True)
        return Node("cast", dtype, (node,), bound=node.bound, exact=True)
    if dtype == "int8" and node.bound > 127:  # narrowing: wrap-around is the same everywhere
        return Node("cast", dtype, (node,), bound=127, exact=True)
    bound = node.bound
    if dtype == "float16" and bound > LIMIT["float16"]:
        node = Node("clamp", node.dtype, (node,), value=(-500, 500), bound=500, exact=node.exact)
        bound = 500
    exact = node.exact and (node.dtype in INTS and bound <= (2048 if dtype == "float16" else 256))
    exact = exact or (node.exact and dtype == "float32")
    return Node("cast", dtype, (node,), bound=bound, exact=exact)


@st.composite
def leaves(draw: Any, dtype: str, inputs: tuple[Input, ...]) -> Node:
    """An input read, a constant or a loop index, as ``dtype``."""
    kind = draw(st.sampled_from(("read", "read", "const", "index")))
    if kind == "read" and inputs:
        x = draw(st.sampled_from(inputs))
        return _cast(Node("read", x.dtype, value=x.name, bound=INPUT_BOUND[x.dtype], exact=True), dtype)
    if kind == "index":
        which = draw(st.sampled_from(("i", "j", "r")))
        return _cast(Node("index", "int32", value=which, bound=300, exact=True), dtype)
    if dtype in INTS:
        v = draw(st.integers(-9, 9))
        return Node("const", dtype, value=v, bound=abs(v), exact=True)
    v = draw(st.sampled_from((0.0, 0.5, 1.0, -1.5, 2.0, 0.25, -3.0)))
    return Node("const", dtype, value=v, bound=abs(v), exact=True)


@st.composite
def conditions(draw: Any, inputs: tuple[Input, ...], depth: int = 1) -> Node:
    """A boolean: comparisons of exact values, joined with and/or/&/|."""
    if depth > 0 and draw(st.booleans()):
        op = draw(st.sampled_from(("land", "lor", "and_", "or_")))
        a, b = draw(conditions(inputs, depth - 1)), draw(conditions(inputs, depth - 1))
        return Node(op, "bool", (a, b))
    dtype = draw(st.sampled_from(("float32", "int32", "float16")))
    a = draw(leaves(dtype, inputs))
    b = draw(leaves(dtype, inputs))
    return Node(draw(st.sampled_from(COMPARES)), "bool", (a, b))


@st.composite
def expressions(draw: Any, dtype: str, inputs: tuple[Input, ...], depth: int) -> Node:
    """A random tree of ``dtype`` at most ``depth`` operators deep."""
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        return draw(leaves(dtype, inputs))
    kind = draw(st.sampled_from(("unary", "binary", "binary", "select", "cast")))
    if kind == "cast":
        other = draw(st.sampled_from([d for d in FLOATS + INTS if d != dtype]))
        return _cast(draw(expressions(other, inputs, depth - 1)), dtype)
    if kind == "select":
        c = draw(conditions(inputs))
        a = draw(expressions(dtype, inputs, depth - 1))
        b = draw(expressions(dtype, inputs, depth - 1))
        return Node("select", dtype, (c, a, b), bound=max(a.bound, b.bound), exact=a.exact and b.exact)
    if kind == "unary":
        return _unary(draw, dtype, draw(expressions(dtype, inputs, depth - 1)))
    a = draw(expressions(dtype, inputs, depth - 1))
    b = draw(expressions(dtype, inputs, depth - 1))
    return _binary(draw, dtype, a, b)


def _unary(draw: Any, dtype: str, a: Node) -> Node:
    if dtype in INTS:
        op = draw(st.sampled_from(INT_UNARY))
        if op == "clamp":
            lo = draw(st.integers(-9, 0))
            return Node("clamp", dtype, (a,), value=(lo, lo + draw(st.integers(0, 12))), bound=min(a.bound, 21), exact=True)
        if dtype == "int8" and a.bound >= 127:  # -(-128) overflows int8
            a = Node("clamp", dtype, (a,), value=(-100, 100), bound=100, exact=True)
        return Node(op, dtype, (a,), bound=a.bound, exact=True)
    op = draw(st.sampled_from(FLOAT_UNARY))
    if op in ("exp", "sigmoid") and a.bound > 6:
        a = Node("clamp", dtype, (a,), value=(-4.0, 4.0), bound=4.0, exact=a.exact)
    if op == "clamp":
        lo = draw(st.sampled_from((-2.0, -0.5, 0.0)))
        hi = lo + draw(st.sampled_from((0.5, 1.0, 3.0)))
        return Node("clamp", dtype, (a,), value=(lo, hi), bound=max(abs(lo), abs(hi)), exact=a.exact)
    if op == "exp":
        bound = 2.72 ** min(a.bound, 50.0)
    elif op == "sqrt":
        bound = a.bound**0.5 + 1
    elif op in ("rsqrt", "sigmoid"):
        bound = 1.0
    else:  # neg, abs, log
        bound = a.bound
    return Node(op, dtype, (a,), bound=bound, exact=a.exact and op in ("neg", "abs"))


def _binary(draw: Any, dtype: str, a: Node, b: Node) -> Node:
    ops = INT_BINARY if dtype in INTS else FLOAT_BINARY
    op = draw(st.sampled_from(ops))
    lim = LIMIT[dtype]
    if op in ("add", "sub") and a.bound + b.bound > lim:
        op = "max"
    if op == "mul" and a.bound * b.bound > lim:
        op = "min"
    if op in ("floordiv", "floormod"):  # a constant non-zero divisor (tilelang folds none)
        d = draw(st.sampled_from((1, 2, 3, 5, 7, -3, -4)))
        divisor = Node("const", dtype, value=d, bound=abs(d), exact=True)
        bound = a.bound if op == "floordiv" else abs(d)
        return Node(op, dtype, (a, divisor), bound=bound + 1, exact=True)
    if op == "shl":
        k = draw(st.integers(0, 3))
        if a.bound * 2**k > lim:
            k = 0
        return Node("shl", dtype, (a, Node("const", dtype, value=k, bound=k, exact=True)), bound=a.bound * 2**k, exact=True)
    if op == "shr":
        k = draw(st.integers(0, 4))
        return Node("shr", dtype, (a, Node("const", dtype, value=k, bound=k, exact=True)), bound=a.bound, exact=True)
    if op in BIT_OPS:  # two's complement: the result fits in the next power of two of the bound
        p = 1
        while p <= max(a.bound, b.bound):
            p *= 2
        if p > lim + 1:
            return Node("max", dtype, (a, b), bound=max(a.bound, b.bound), exact=True)
        return Node(op, dtype, (a, b), bound=p, exact=True)
    if op == "div":
        return Node("div", dtype, (a, b), bound=a.bound, exact=False)
    bound = {"add": a.bound + b.bound, "sub": a.bound + b.bound, "mul": a.bound * b.bound}.get(op, max(a.bound, b.bound))
    if dtype in FLOATS:
        exact = a.exact and b.exact and op in ("min", "max", "add", "sub") and bound <= 16
        exact = exact and (op in ("min", "max") or (a.op in ("read", "const") and b.op in ("read", "const")))
    else:
        exact = True
    return Node(op, dtype, (a, b), bound=bound, exact=exact)


@st.composite
def inputs_strategy(draw: Any, serial: bool) -> tuple[Input, ...]:
    """1-3 inputs; ``T.alloc_local`` tiles only in T.serial programs (TileLang rejects a local
    buffer indexed by a T.Parallel variable)."""
    scopes = ("shared", "fragment", "local", "local") if serial else ("shared", "fragment", "fragment")
    n = draw(st.integers(1, 3))
    out = []
    for k in range(n):
        view = draw(st.sampled_from(("direct", "direct", "transposed", "row_bcast", "col_bcast", "offset", "reversed", "global")))
        out.append(
            Input(
                name=f"X{k}",
                dtype=draw(st.sampled_from(INPUT_DTYPES)),
                view=view,
                scope=draw(st.sampled_from(scopes)),
                offset=draw(st.integers(1, 9)) if view == "offset" else 0,
            )
        )
    return tuple(out)


@st.composite
def programs(draw: Any, max_depth: int = 4) -> Program:
    """A whole differential program."""
    BM = draw(st.sampled_from(TILE_HEIGHTS))
    N = draw(st.sampled_from(WIDTHS))
    M = draw(st.sampled_from((BM, 2 * BM + 5 if BM > 1 else 3, BM + 1)))  # edges the tile does not divide
    mode = draw(st.sampled_from(("parallel", "parallel", "store", "reduce", "serial")))
    ins = draw(inputs_strategy(mode == "serial"))
    dtype = draw(st.sampled_from(("float32", "float32", "float16", "bfloat16", "int32", "int8")))
    reduce = "sum"
    if mode in ("reduce", "serial"):
        if dtype == "int8":
            dtype = "int32"
        choices = ("sum", "max", "min", "abssum", "absmax") if mode == "reduce" else ("sum", "max")
        reduce = draw(st.sampled_from(choices))
    expr = draw(expressions(dtype, ins, draw(st.integers(0, max_depth))))
    if mode in ("reduce", "serial") and reduce in ("sum", "abssum") and expr.bound * N > LIMIT[dtype]:
        expr = Node("clamp", dtype, (expr,), value=(-8, 8) if dtype in INTS else (-8.0, 8.0), bound=8, exact=expr.exact)
    order = draw(st.permutations(range(len(ins) + 2)))
    out_scope = draw(st.sampled_from(("fragment", "local"))) if mode == "serial" else "fragment"
    return Program(M=M, N=N, BM=BM, inputs=ins, expr=expr, mode=mode, reduce=reduce, order=tuple(order), out_scope=out_scope)
