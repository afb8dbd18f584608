"""Codegen for the tpu target: lowered device PrimFunc -> PPL source.

``generate`` returns one complete PPL translation unit with exactly one
``__KERNEL__`` function (the ABI in :mod:`tilelang_tpu.abi`); ppl-compile then
places the local tensors in local memory and emits device C.  What each TileLang
construct becomes is tabulated in :mod:`tilelang_tpu.codegen.table`.

The package is layered, each layer importing only those below it:

* :mod:`~.layout`, :mod:`~.values`, :mod:`~.ir`, :mod:`~.scalar` -- PPL layouts and dtypes,
  the records passed around, TIR queries, scalar C expressions;
* :mod:`~.plan` -- IR analysis: whole-kernel decisions made before anything is printed;
* :mod:`~.ranges`, :mod:`~.masked_gemm` -- IR analysis of a statement and those before it
  (value ranges of tiles; where a causal mask can change something);
* :mod:`~.context` -- the emit context, the only mutable state;
* :mod:`~.emit` -- the construct emitters (copy, gemm, reduce, T.Parallel bodies, ...);
* :mod:`~.entry` -- the kernel signature; :mod:`~.table` -- the construct table, holding
  the tile-op handlers; :mod:`~.walk` -- the statement walker;
* this module -- the pipeline: plan -> context -> entry -> walk -> PPL text.
"""

from __future__ import annotations

from typing import Any

from tilecore.errors import Owner, TilecoreError
from tilelang_tpu import __version__, abi
from tilelang_tpu.chips import DEFAULT_CORES, check_cores, cores_of
from tilelang_tpu.codegen import entry, walk
from tilelang_tpu.codegen.context import EmitContext
from tilelang_tpu.codegen.layout import LayoutError
from tilelang_tpu.codegen.values import CodegenError

__all__ = ["BUILD_FUNCTION", "TpuCodegenError", "generate", "kernel_functions", "register_build_function"]

DISTRIBUTION = "tilelang-tpu"

#: TVM global function name of the codegen, the one SophGo's TileLang fork registers.
BUILD_FUNCTION = "target.build.tilelang_ppl"


class TpuCodegenError(TilecoreError, ValueError):
    """A TileLang construct the tpu code generator cannot translate to PPL."""

    def __init__(self, kernel: str, construct: str, where: str, hint: str = "") -> None:
        self.kernel = kernel
        self.construct = construct
        self.where = where
        message = (
            f"kernel {kernel!r} uses {construct}, which the tpu code generator does not support.\n"
            f"  in: {where.strip().replace(chr(10), chr(10) + '      ')}"
        )
        if hint:
            message += f"\n  fix: {hint}"
        message += "\n  (run `tilelang-tpu constructs` for the supported constructs and what to write instead)"
        super().__init__(message, owner=Owner(DISTRIBUTION, __version__, target="tpu"))


def kernel_functions(device_mod: Any) -> list[tuple[str, Any]]:
    """(global symbol, PrimFunc) of the kernels in a lowered device module."""
    from tvm import tirx

    out = []
    for gvar, func in device_mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs else gvar.name_hint
            out.append((name, func))
    return out


def generate(device_mod: Any, tvm_target: Any, chip: str, cores: int = 1) -> str:
    """PPL source of the single kernel in ``device_mod`` for ``chip`` (a ppl-compile chip name),
    its grid split over ``cores`` TPU cores where that is safe (:func:`tilelang_tpu.codegen.plan.grid_split`)."""
    check_cores(chip, cores)
    kernels = kernel_functions(device_mod)
    if len(kernels) != 1:
        names = ", ".join(n for n, _ in kernels) or "none"
        raise TpuCodegenError(
            "<module>",
            f"{len(kernels)} device kernels ({names})",
            "the lowered module",
            "the tpu target compiles one T.Kernel per prim_func; split the program into separate kernels",
        )
    device_name, func = kernels[0]
    # The runtime knows the kernel by the user's prim_func name (abi.py).
    name = str(func.attrs[abi.KERNEL_NAME_ATTR]) if func.attrs is not None and abi.KERNEL_NAME_ATTR in func.attrs else device_name
    entry_point = abi.entry_name(name)
    context = EmitContext(func, chip, cores=cores)
    try:
        params = entry.params(context)
        walk.run(context)
    except CodegenError as err:
        raise TpuCodegenError(name, err.construct, err.where, err.hint) from None
    except LayoutError as err:
        raise TpuCodegenError(
            name,
            str(err),
            context.stmt_text,
            "fp32 T.gemm operands ([M, K] rows_n) and per-column vectors (1-D row) have one rank each; "
            "for rank-3/4 operands (bshd attention, GQA) copy each head's [rows, dim] slice into a 2-D tile",
        ) from None
    if chip != "bm1690" and context.shape_symbols:
        raise TpuCodegenError(
            name,
            f"symbolic dimensions ({', '.join(context.shape_symbols)}) on {chip}",
            "the kernel signature",
            f"run on chip bm1690 (its runtime passes the sizes as scalar arguments; {chip}'s does not), or give the tensors static shapes",
        )
    if chip != "bm1690" and any(not ty.endswith("*") for ty, _ in params):
        raise TpuCodegenError(
            name,
            f"scalar kernel parameters on {chip}",
            "the kernel signature",
            "run on chip bm1690 (its runtime packs scalar arguments), or capture the value as a Python constant",
        )
    signature = ", ".join(f"{ty}{ptr}" for ty, ptr in params)
    header = [
        f"// PPL generated by {DISTRIBUTION} {__version__} from TileLang kernel {name!r} for chip {chip}.",
        '#include "ppl.h"',
        '#include "ppl_wrapper_func.h"',
        "using namespace ppl;",
        "",
        f"__KERNEL__ void {entry_point}({signature}) {{",
    ]
    if context.split.loops:
        # Every core runs this kernel; each walks its own chunk of the grid (the runtime
        # launches as many cores as set_core_num says: grid.launch_cores).
        header.append(f"  ppl::set_core_num({context.split.cores});")
    return "\n".join(header + context.lines + ["}", ""])


def _build(device_mod: Any, tvm_target: Any) -> Any:
    """``target.build.tilelang_ppl``: a TVM source module holding the PPL text."""
    import tvm_ffi

    chip, cores = "bm1690", DEFAULT_CORES
    libs = tvm_target.attrs.get("libs", ()) if tvm_target is not None else ()
    for lib in libs:
        key, _, value = str(lib).partition("=")
        if key == "chip":
            chip = value
        elif key == "cores":
            cores = value
    return tvm_ffi.get_global_func("runtime.SourceModuleCreate")(generate(device_mod, tvm_target, chip, cores_of(chip, cores)), "ppl")


def register_build_function() -> None:
    """Register :data:`BUILD_FUNCTION` with TVM, for code that looks the codegen up by name
    as the fork's engine did (tilecore itself calls :func:`generate` through the plugin)."""
    import tvm_ffi

    tvm_ffi.register_global_func(BUILD_FUNCTION, _build, override=True)


register_build_function()
