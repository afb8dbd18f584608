"""The program model of the differential tests: typed expression trees over what a user
writes in ``T.Parallel`` (or a ``T.serial`` loop), inputs read through affine index maps,
and the kernel around them.  A :class:`Program` renders itself as TileLang source (the
source is what gets compiled, so a printed failure is exactly what ran) and evaluates the
same tree with torch on the whole output at once.

Values are kept where every target must agree bit-for-bit or within rounding:
integer sub-trees are bounded so they never overflow their dtype, float-to-int casts and
float comparisons only see exactly representable values (input reads, constants, indices),
``log``/``sqrt``/``rsqrt``/division get arguments kept away from their poles.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int8", "int32")
DTYPES = FLOATS + INTS
TORCH = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int8": torch.int8,
    "int32": torch.int32,
}
#: Largest magnitude a sub-tree of each dtype may reach (no overflow, fp16 far from inf).
LIMIT = {"float32": 1e6, "float16": 1e3, "bfloat16": 1e6, "int8": 127, "int32": 2**30}
#: Relative tolerance of a float result (times the output's largest magnitude, see runner).
TOLERANCE = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 8e-2}

#: Index maps: how the element (tile row i, column j) of an input is read.
VIEWS = ("direct", "transposed", "row_bcast", "col_bcast", "offset", "reversed", "global")


@dataclass(frozen=True)
class Node:
    """One expression node.  ``op`` names the operator; ``args`` are sub-trees; ``value``
    holds a constant, an input's name, an index name or a cast/compare/logic detail."""

    op: str
    dtype: str  # "bool" for conditions
    args: tuple[Node, ...] = ()
    value: object = None
    bound: float = 0.0  # largest magnitude the node can take
    exact: bool = False  # its value is exactly representable on every target

    def size(self) -> int:
        return 1 + sum(a.size() for a in self.args)


@dataclass(frozen=True)
class Input:
    """One tensor parameter read by the expression, with the index map it is read through."""

    name: str
    dtype: str
    view: str
    scope: str  # "shared", "fragment" or "local" (where its tile is copied)
    offset: int = 0  # columns skipped by the "offset" view


@dataclass(frozen=True)
class Program:
    """A kernel: ``Out = f(inputs)`` per element, then optionally reduced along the row."""

    M: int
    N: int
    BM: int
    inputs: tuple[Input, ...]
    expr: Node
    mode: str  # "parallel" (copy out) | "store" (guarded global store) | "reduce" | "serial"
    reduce: str = "sum"  # reduce kind (reduce mode) or accumulation ("sum"/"max", serial mode)
    order: tuple[int, ...] = ()  # parameter order: indices into inputs + [Out, Unused]
    threads: int = 1
    out_scope: str = "fragment"  # where the output tile (and the reduced row) live: fragment | local
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def out_dtype(self) -> str:
        return self.expr.dtype

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.M, self.N) if self.mode in ("parallel", "store") else (self.M,)


# ---------------------------------------------------------------- rendering


def _const(dtype: str, value: object) -> str:
    if dtype in INTS:
        v = int(value)  # type: ignore[call-overload]
        return str(v) if dtype == "int32" else f'T.cast({v}, "{dtype}")'
    return f"T.{dtype}({float(value)!r})"  # type: ignore[arg-type]


def _read(inp: Input, N: int, BM: int) -> str:
    t = f"{inp.name.lower()}_t"
    return {
        "direct": f"{t}[i, j]",
        "transposed": f"{t}[j, i]",
        "row_bcast": f"{t}[j]",
        "col_bcast": f"{t}[i]",
        "offset": f"{t}[i, j + {inp.offset}]",
        "reversed": f"{t}[i, {N - 1} - j]",
        "global": f"{inp.name}[bx * {BM} + i, j]",
    }[inp.view]


BINARY = {"add": "+", "sub": "-", "mul": "*", "and_": "&", "or_": "|", "xor": "^", "shl": "<<", "shr": ">>"}
COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def render(node: Node, prog: Program) -> str:
    """TileLang source of one expression (inside a loop over tile row ``i`` and column ``j``)."""
    a = [render(x, prog) for x in node.args]
    op = node.op
    if op == "const":
        return _const(node.dtype, node.value)
    if op == "read":
        inp = next(x for x in prog.inputs if x.name == node.value)
        text = _read(inp, prog.N, prog.BM)
        if inp.view == "global":  # rows past M do not exist: guarded as users write it
            zero = _const(inp.dtype, 0)
            text = f"T.if_then_else(bx * {prog.BM} + i < {prog.M}, {text}, {zero})"
        return text
    if op == "index":
        name = {"i": "i", "j": "j", "r": f"(bx * {prog.BM} + i)"}[str(node.value)]
        return name if node.dtype == "int32" else f'T.cast({name}, "{node.dtype}")'
    if op in BINARY:
        return f"({a[0]} {BINARY[op]} {a[1]})"
    if op in COMPARE:
        return f"({a[0]} {COMPARE[op]} {a[1]})"
    if op == "neg":
        return f"(-{a[0]})"
    if op == "div":  # float: a / (|b| + 1)
        return f"({a[0]} / (T.abs({a[1]}) + {_const(node.dtype, 1)}))"
    if op == "floordiv":
        return f"({a[0]} // {a[1]})"
    if op == "floormod":
        return f"({a[0]} % {a[1]})"
    if op in ("min", "max"):
        return f"T.{op}({a[0]}, {a[1]})"
    if op in ("abs", "exp", "sqrt"):
        inner = f"T.abs({a[0]})" if op == "sqrt" else a[0]
        return f"T.{op}({inner})"
    if op == "log":
        return f"T.log(T.abs({a[0]}) + {_const(node.dtype, 1)})"
    if op == "rsqrt":
        return f"T.rsqrt(T.abs({a[0]}) + {_const(node.dtype, 1)})"
    if op == "sigmoid":  # written out, as users do
        one = _const(node.dtype, 1)
        return f"({one} / ({one} + T.exp(-{a[0]})))"
    if op == "clamp":
        lo, hi = node.value  # type: ignore[misc]
        return f"T.clamp({a[0]}, {_const(node.dtype, lo)}, {_const(node.dtype, hi)})"
    if op == "cast":
        return f'T.cast({a[0]}, "{node.dtype}")'
    if op == "select":
        return f"T.if_then_else({a[0]}, {a[1]}, {a[2]})"
    if op in ("land", "lor"):
        return f"({a[0]} {'and' if op == 'land' else 'or'} {a[1]})"
    raise ValueError(f"unknown op {op}")


def source(prog: Program) -> str:
    """The whole program as TileLang source: a module with ``build()`` returning the prim_func."""
    M, N, BM = prog.M, prog.N, prog.BM
    od = prog.out_dtype
    params = {x.name: f'{x.name}: T.Tensor({_global_shape(x, M, N)}, "{x.dtype}")' for x in prog.inputs}
    params["Out"] = f'Out: T.Tensor({prog.out_shape!r}, "{od}")'
    params["Unused"] = f'Unused: T.Tensor(({M}, {N}), "float32")'
    names = [x.name for x in prog.inputs] + ["Out", "Unused"]
    order = prog.order or tuple(range(len(names)))
    lines = [
        "import tilelang.language as T",
        "",
        "",
        "def build():",
        "    @T.prim_func",
        "    def diff_kernel(" + ", ".join(params[names[k]] for k in order) + "):",
        f"        with T.Kernel(T.ceildiv({M}, {BM}), threads={prog.threads}) as bx:",
    ]
    body: list[str] = []
    for x in prog.inputs:
        t = f"{x.name.lower()}_t"
        alloc = f"T.alloc_{x.scope}"
        shape, src = _tile(x, M, N, BM)
        if shape is not None:
            body.append(f'{t} = {alloc}({shape!r}, "{x.dtype}")')
            body.append(f"T.copy({src}, {t})")
    expr = render(prog.expr, prog)
    if prog.mode in ("parallel", "reduce"):
        body.append(f'o_t = T.alloc_{prog.out_scope}(({BM}, {N}), "{od}")')
        body.append(f"for i, j in T.Parallel({BM}, {N}):")
        body.append(f"    o_t[i, j] = {expr}")
        if prog.mode == "parallel":
            body.append(f"T.copy(o_t, Out[bx * {BM}, 0])")
        else:
            body.append(f'r_t = T.alloc_{prog.out_scope}(({BM},), "{od}")')
            body.append(f"T.reduce_{prog.reduce}(o_t, r_t, dim=1)")
            body.append(f"T.copy(r_t, Out[bx * {BM}])")
    elif prog.mode == "store":
        body.append(f"for i, j in T.Parallel({BM}, {N}):")
        body.append(f"    if bx * {BM} + i < {M}:")
        body.append(f"        Out[bx * {BM} + i, j] = {expr}")
    else:  # serial: a T.alloc_var accumulator per row
        body.append(f'r_t = T.alloc_{prog.out_scope}(({BM},), "{od}")')
        body.append(f'acc = T.alloc_var("{od}")')
        body.append(f"for i in T.serial({BM}):")
        body.append(f"    acc = {_const(od, 0) if prog.reduce == 'sum' else _const(od, _lowest(od))}")
        body.append(f"    for j in T.serial({N}):")
        step = f"acc + {expr}" if prog.reduce == "sum" else f"T.max(acc, {expr})"
        body.append(f"        acc = {step}")
        body.append("    r_t[i] = acc")
        body.append(f"T.copy(r_t, Out[bx * {BM}])")
    lines += ["            " + b for b in body]
    lines += ["", "    return diff_kernel", ""]
    return "\n".join(lines)


def _lowest(dtype: str) -> float:
    return -127 if dtype == "int8" else (-(2**30) if dtype == "int32" else -1e4)


def _global_shape(x: Input, M: int, N: int) -> tuple[int, ...]:
    return {
        "direct": (M, N),
        "reversed": (M, N),
        "global": (M, N),
        "transposed": (N, M),
        "row_bcast": (N,),
        "col_bcast": (M,),
        "offset": (M, N + x.offset),
    }[x.view]


def _tile(x: Input, M: int, N: int, BM: int) -> tuple[tuple[int, ...] | None, str]:
    """Shape of the tile an input is copied to, and the copy's source region."""
    if x.view in ("direct", "reversed"):
        return (BM, N), f"{x.name}[bx * {BM}, 0]"
    if x.view == "transposed":
        return (N, BM), f"{x.name}[0, bx * {BM}]"
    if x.view == "row_bcast":
        return (N,), x.name
    if x.view == "col_bcast":
        return (BM,), f"{x.name}[bx * {BM}]"
    if x.view == "offset":
        return (BM, N + x.offset), f"{x.name}[bx * {BM}, 0]"
    return None, ""  # "global": read in place


# ---------------------------------------------------------------- torch reference


def gather(x: Input, tensor: torch.Tensor, M: int, N: int) -> torch.Tensor:
    """The (M, N) matrix of what element (r, j) of the output reads from ``tensor``."""
    if x.view in ("direct", "global"):
        return tensor
    if x.view == "transposed":
        return tensor.t()
    if x.view == "row_bcast":
        return tensor.unsqueeze(0).expand(M, N)
    if x.view == "col_bcast":
        return tensor.unsqueeze(1).expand(M, N)
    if x.view == "offset":
        return tensor[:, x.offset :]
    return tensor.flip(1)  # reversed


def evaluate(node: Node, env: dict[str, torch.Tensor]) -> torch.Tensor:
    """The tree on whole (M, N) matrices, each operation in its node's dtype (as the kernel)."""
    a = [evaluate(x, env) for x in node.args]
    op = node.op
    dt = TORCH.get(node.dtype, torch.bool)
    shape = env["I"].shape
    if op == "const":
        return torch.full(shape, node.value, dtype=dt)  # type: ignore[arg-type]
    if op == "read":
        return env[str(node.value)]
    if op == "index":
        return env[str(node.value).upper()].to(dt)
    simple = {
        "add": torch.add,
        "sub": torch.sub,
        "mul": torch.mul,
        "and_": torch.bitwise_and,
        "or_": torch.bitwise_or,
        "xor": torch.bitwise_xor,
        "shl": torch.bitwise_left_shift,
        "shr": torch.bitwise_right_shift,
        "min": torch.minimum,
        "max": torch.maximum,
        "lt": torch.lt,
        "le": torch.le,
        "gt": torch.gt,
        "ge": torch.ge,
        "eq": torch.eq,
        "ne": torch.ne,
        "land": torch.logical_and,
        "lor": torch.logical_or,
    }
    if op in simple:
        return simple[op](a[0], a[1])  # type: ignore[no-any-return,operator]
    one = torch.ones((), dtype=dt)
    if op == "neg":
        return -a[0]
    if op == "div":
        return a[0] / (a[1].abs() + one)
    if op == "floordiv":
        return torch.div(a[0], a[1], rounding_mode="floor")
    if op == "floormod":
        return torch.remainder(a[0], a[1])
    if op == "abs":
        return a[0].abs()
    if op == "exp":
        return a[0].exp()
    if op == "sqrt":
        return a[0].abs().sqrt()
    if op == "log":
        return (a[0].abs() + one).log()
    if op == "rsqrt":
        return (a[0].abs() + one).rsqrt()
    if op == "sigmoid":
        return one / (one + (-a[0]).exp())
    if op == "clamp":
        lo, hi = node.value  # type: ignore[misc]
        return a[0].clamp(lo, hi)
    if op == "cast":
        return a[0].to(dt)
    if op == "select":
        return torch.where(a[0], a[1], a[2])
    raise ValueError(f"unknown op {op}")


def reference(prog: Program, tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, float]:
    """Torch's result for the program's output, in the output dtype (float64 for reductions),
    and the magnitude its rounding error scales with (the largest |element| before a
    reduction, times the row length for a sum)."""
    M, N = prog.M, prog.N
    rows = torch.arange(M).unsqueeze(1).expand(M, N)
    env = {
        "R": rows,
        "I": rows % prog.BM,
        "J": torch.arange(N).unsqueeze(0).expand(M, N),
    }
    for x in prog.inputs:
        env[x.name] = gather(x, tensors[x.name], M, N)
    full = evaluate(prog.expr, env)
    wide = full.double()
    scale = float(wide.abs().nan_to_num(0.0).amax().item()) if wide.numel() else 0.0
    if prog.mode in ("parallel", "store"):
        return full, scale
    kind = prog.reduce
    if kind == "sum":
        return wide.sum(1), scale * N
    if kind == "abssum":
        return wide.abs().sum(1), scale * N
    if kind == "max":
        return (wide.amax(1) if prog.mode == "reduce" else wide.amax(1).clamp(min=_lowest(prog.out_dtype))), scale
    if kind == "min":
        return wide.amin(1), scale
    return wide.abs().amax(1), scale  # absmax
