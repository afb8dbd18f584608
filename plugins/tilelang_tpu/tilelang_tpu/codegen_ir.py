"""Shared vocabulary of the PPL code generator: the error, the tile/tensor records and
small TIR helpers every construct module uses (no emission here)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tilelang_tpu.codegen_layout import to4

__all__ = [
    "GLOBAL_SCOPES",
    "LOCAL_SCOPES",
    "RESERVED",
    "CodegenError",
    "GlobalTensor",
    "Namer",
    "Operand",
    "Tile",
]


class CodegenError(Exception):
    """Raised for a construct the tpu codegen does not support (wrapped by codegen.py)."""

    def __init__(self, construct: str, where: str, hint: str = "") -> None:
        self.construct = construct
        self.where = where
        self.hint = hint
        super().__init__(construct)


GLOBAL_SCOPES = ("global",)
LOCAL_SCOPES = ("shared", "shared.dyn", "local.fragment", "local")


@dataclass
class Namer:
    """Unique C identifiers for one kernel, and the C name given to each TIR variable."""

    of_var: dict[Any, str] = field(default_factory=dict)  # TIR var -> C identifier
    used: set[str] = field(default_factory=set)
    counter: int = 0

    def reserve(self, name: str) -> None:
        self.used.add(name)

    def fresh(self, base: str) -> str:
        """A new identifier like ``base`` (sanitised; suffixed when taken or reserved by C/PPL)."""
        base = re.sub(r"\W", "_", base) or "v"
        if base[0].isdigit():
            base = "v" + base
        name = base
        while name in self.used or name in RESERVED:
            self.counter += 1
            name = f"{base}_{self.counter}"
        self.used.add(name)
        return name


@dataclass
class Tile:
    """A local tensor: its C name, element dtype, TileLang shape and PPL block."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    block: list[str]
    layout: str = "lanes"

    @property
    def shape4(self) -> list[str]:
        return to4([str(s) for s in self.shape], self.layout)


@dataclass
class GlobalTensor:
    """A kernel's tensor parameter: its gtensor's C name, element dtype and dimensions.

    ``dims`` holds an ``int`` per static dimension and the device function's TIR ``Var``
    per symbolic one (``T.symbolic``/``T.dynamic``), whose value the entry receives as an
    ``int`` parameter (:class:`tilelang_tpu.abi.ShapeSlot`).  Code that handles symbolic
    dimensions reads :meth:`extent`; :attr:`shape` is for code that needs static sizes
    and refuses a symbolic tensor by name, so no construct can mistake a symbol for a size.
    """

    name: str
    dtype: str
    dims: tuple[Any, ...]
    tensor: str = ""  #: the parameter's name in the user's kernel (for messages)

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.dims)

    @property
    def shape(self) -> tuple[int, ...]:
        """The static shape; a :class:`CodegenError` for a tensor with a symbolic dimension."""
        if not self.is_static:
            raise CodegenError(
                f"tensor {self.tensor or self.name}[{', '.join(str(d) for d in self.dims)}], which has symbolic dimensions, "
                "in a construct that needs static shapes",
                "",
                "give the tensor a static shape, or use it only through T.copy (which clips to the runtime size)",
            )
        return tuple(int(d) for d in self.dims)

    def extent(self, axis: int) -> Any:
        """Dimension ``axis`` as a TIR expression (an ``int32`` constant or the shape variable)."""
        from tvm import tirx

        dim = self.dims[axis]
        return tirx.const(dim, "int32") if isinstance(dim, int) else dim


@dataclass
class Operand:
    """A value inside an element-wise expression: a tile view or a C scalar."""

    text: str
    dtype: str
    is_tile: bool


RESERVED = {
    *("ppl", "tiu", "dma", "dim4", "tensor", "gtensor", "GLOBAL", "make_tensor", "quick_pooling", "fexp", "min", "max", "align"),
    *("fp32", "fp16", "bf16", "int8", "int16", "int32", "uint8", "uint16", "uint32"),
    *("auto", "bool", "break", "case", "char", "class", "const", "continue", "default", "delete", "do", "double", "else"),
    *("enum", "false", "float", "for", "if", "int", "long", "namespace", "new", "return", "short", "signed", "sizeof"),
    *("static", "struct", "switch", "template", "this", "true", "typedef", "union", "unsigned", "using", "void", "while"),
}


def op_name(call: Any) -> str:
    op = call.op
    return str(op.name) if hasattr(op, "name") else str(op)


def region(arg: Any) -> tuple[Any, list[Any], list[Any]]:
    """(buffer, mins, extents) of a ``tl.region`` argument."""
    from tvm import tirx

    if isinstance(arg, tirx.Call) and op_name(arg) == "tl.region":
        load = arg.args[0]
        extents = list(arg.args[2:])
        mins = list(load.indices)
        if len(extents) < len(mins):
            extents = [tirx.const(1, "int32")] * (len(mins) - len(extents)) + extents
        return load.buffer, mins, extents
    if isinstance(arg, tirx.BufferLoad):
        return arg.buffer, list(arg.indices), [tirx.const(1, "int32")] * len(arg.indices)
    raise CodegenError(f"tile-op operand {arg}", str(arg))


def pipelinable_grid_loop(body: Any) -> Any:
    """The innermost T.Kernel grid loop, if ppl-compile can pipeline its body.

    MaterializeKernelLaunch turns the grid into the kernel's outermost serial loops.
    Their iterations are independent blocks, so pipelining the innermost one is
    always correct.  It is skipped when the body has a loop of its own (that loop
    is the one to pipeline) or an in-place element-wise update (``x[i, j] = f(x[i, j])``):
    ppl-compile 1.7 (tpu_mlir 1.30.2) crashes with SIGSEGV on such bodies in a
    pipelined loop.
    """
    from tvm import tirx

    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    rest = [s for s in stmts if not isinstance(s, tirx.DeclBuffer) and not is_ret(s)]
    if len(rest) != 1 or not is_grid_loop(rest[0]):
        return None
    loop = rest[0]
    while is_grid_loop(loop.body):
        loop = loop.body
    blockers: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.For) and node.kind != tirx.ForKind.PARALLEL:
            blockers.append(node)
        elif isinstance(node, tirx.BufferStore):
            reads: list[Any] = []
            tirx.stmt_functor.post_order_visit(
                tirx.Evaluate(node.value),
                lambda n: reads.append(n) if isinstance(n, tirx.BufferLoad) and n.buffer.data.same_as(node.buffer.data) else None,
            )
            if reads:
                blockers.append(node)

    tirx.stmt_functor.post_order_visit(loop.body, visit)
    return None if blockers else loop


#: Annotation lowering puts on the serial loops MaterializeKernelLaunch makes of the T.Kernel grid
#: (tilelang_tpu.codegen_multicore.mark_grid_loops).
GRID_LOOP = "tilelang_tpu.grid_loop"


def is_grid_loop(stmt: Any) -> bool:
    from tvm import tirx

    return isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.SERIAL and set(stmt.annotations) <= {GRID_LOOP}


def is_ret(stmt: Any) -> bool:
    from tvm import tirx

    return isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tirx.Call) and op_name(stmt.value) == "tirx.ret"


def tile_call(stmt: Any, op: str) -> Any:
    from tvm import tirx

    if isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tirx.Call) and op_name(stmt.value) == op:
        return stmt.value
    return None


def whole(buf: Any, mins: list[Any], extents: list[Any]) -> bool:
    return (
        all(is_zero(m) for m in mins)
        and all(is_const(e) for e in extents)
        and all(is_const(x) for x in buf.shape)
        and [int(e) for e in extents] == [int(x) for x in buf.shape]
    )


_FREE_DECL = re.compile(r"^\s*\w+ = T\.(Buffer|handle|int\d+|uint\d+|float\d+|bfloat16|bool|Var)\(")


def stmt_text(node: Any) -> str:
    try:
        text = node.script() if hasattr(node, "script") else str(node)
    except Exception:
        text = str(node)
    # TVMScript prints free buffers and variables as declarations first; they are not the statement.
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#") and not _FREE_DECL.match(ln)]
    if len(lines) > 6:
        lines = [*lines[:6], "..."]
    return "\n".join(lines)


def is_zero(e: Any) -> bool:
    return is_const(e) and int(e) == 0


def is_const(e: Any) -> bool:
    from tvm import tirx

    return isinstance(e, tirx.IntImm)


def same_index(a: Any, b: Any) -> bool:
    """Both the same variable, or both the same integer constant."""
    from tvm import tirx

    if isinstance(a, tirx.IntImm) and isinstance(b, tirx.IntImm):
        return int(a) == int(b)
    return same_var(a, b)


def same_var(a: Any, b: Any) -> bool:
    from tvm import tirx

    return isinstance(a, tirx.Var) and a.same_as(b)


def min_extent_range(lo: Any, extent: Any) -> Any:
    from tvm import ir

    return ir.Range.from_min_extent(lo, extent)


def squeeze(extents: list[Any]) -> list[str]:
    return [str(e) for e in extents if not (is_const(e) and int(e) == 1)]


def local_dims(lext: list[Any], gext: list[Any], real: list[str]) -> list[str]:
    """Extents of the local side of a DMA: the local region's extents, each non-unit
    one replaced by the (possibly clipped) global extent it pairs with, in order."""
    gpairs = [r for e, r in zip(gext, real, strict=True) if not (is_const(e) and int(e) == 1)]
    out = []
    for e in lext:
        out.append("1" if is_const(e) and int(e) == 1 else gpairs.pop(0))
    return out


def check_contiguous(em: Any, buf: Any) -> None:
    """Refuse a tensor whose strides are not row-major (compared symbolically: a dimension
    may be a shape variable)."""
    from tvm import tirx

    if not len(buf.strides):
        return
    expected: list[Any] = []
    acc: Any = tirx.const(1, buf.shape[-1].dtype)
    for dim in reversed(list(buf.shape)):
        expected.append(acc)
        acc = acc * dim
    if not all(em.analyzer.can_prove_equal(s, e) for s, e in zip(buf.strides, reversed(expected), strict=True)):
        raise em.fail(f"tensor {buf.name} has strides {list(buf.strides)}; the tpu target needs contiguous (row-major) tensors", em.func)


def float_imm(text: str, dtype: str) -> Any:
    from tvm import tirx

    return tirx.FloatImm(dtype, float(text))


def as_float(text: str) -> str:
    return text if text.endswith("f") else f"(float)({text})"
