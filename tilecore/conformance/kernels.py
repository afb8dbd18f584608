"""The conformance kernels, their inputs and their torch references.

Every kernel is small (tens of rows and columns) so an emulator runs it in
well under a second, and each one exists in two *styles*:

``portable``
    What tilelang's portable CPU lowering (``tilecore.upstream.lower_with_host_pipeline``)
    accepts: at most one ``T.alloc_shared`` per kernel, reductions and GEMM
    operands in ``T.alloc_local`` buffers (the CPU reduce and fill lower only
    local buffers), fragments only where a ``T.Parallel`` loop gives them a layout.
``gpu``
    The canonical GPU forms of tilelang's own examples (``T.alloc_shared``
    GEMM operands, ``T.alloc_fragment`` accumulators and reduction buffers),
    for targets delegated to one of tilelang's GPU lowerings.

Copy and element-wise kernels are the same in both styles.  :func:`style_for`
picks the style of a target (``--tilecore-kernel-style`` overrides it).  Kernels are built by name through
:data:`KERNELS` so a second process (the disk-cache case) can rebuild exactly
the same ``PrimFunc``, hence the same cache key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from tilecore.targets import ResolvedTarget

STYLES = ("portable", "gpu")


def style_for(target: ResolvedTarget) -> str:
    """``gpu`` for a target delegated upstream to a TVM target kind with the ``gpu`` key
    (tilelang's GPU lowerings), else ``portable`` (backend-owned and CPU targets)."""
    if target.spec.upstream is None:
        return "portable"
    from tvm.target import Target

    from tilecore import _bridge

    return "gpu" if "gpu" in Target(_bridge.tvm_config(target)).keys else "portable"


# ----------------------------------------------------------------------------------------
# Kernel factories (tilelang.language is imported lazily: importing this module is cheap)
# ----------------------------------------------------------------------------------------


# Typing note: tilelang is untyped, so ``@T.prim_func`` is an untyped decorator, and the
# parameters' ``T.Tensor(shape, dtype)`` annotations are TileLang DSL expressions, not Python
# types: hence the two targeted ignores on each kernel definition.


def copy_kernel(M: int, N: int, BM: int, BN: int, dtype: str) -> Any:
    """``B = A`` through one shared tile per block."""
    import tilelang.language as T

    @T.prim_func  # type: ignore[untyped-decorator]  # tilelang ships no type information
    def conformance_copy(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)) -> None:  # type: ignore[valid-type]  # TileLang DSL, see above
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            tile = T.alloc_shared((BM, BN), dtype)
            T.copy(A[by * BM, bx * BN], tile)
            T.copy(tile, B[by * BM, bx * BN])

    return conformance_copy


def elementwise_kernel(M: int, N: int, BM: int, BN: int, dtype: str) -> Any:
    """``C = A * B + A`` on register tiles (``T.Parallel`` gives the fragments a layout)."""
    import tilelang.language as T

    @T.prim_func  # type: ignore[untyped-decorator]  # tilelang ships no type information
    def conformance_elementwise(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)) -> None:  # type: ignore[valid-type]  # TileLang DSL, see above
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            a = T.alloc_fragment((BM, BN), dtype)
            b = T.alloc_fragment((BM, BN), dtype)
            c = T.alloc_fragment((BM, BN), dtype)
            T.copy(A[by * BM, bx * BN], a)
            T.copy(B[by * BM, bx * BN], b)
            for i, j in T.Parallel(BM, BN):
                c[i, j] = a[i, j] * b[i, j] + a[i, j]
            T.copy(c, C[by * BM, bx * BN])

    return conformance_elementwise


def axpy_kernel(M: int, N: int, BM: int, BN: int, alpha: float, dtype: str) -> Any:
    """``C = alpha * A + B`` (the ``@tilelang.jit`` factory case; ``alpha`` is baked in)."""
    import tilelang.language as T

    @T.prim_func  # type: ignore[untyped-decorator]  # tilelang ships no type information
    def conformance_axpy(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)) -> None:  # type: ignore[valid-type]  # TileLang DSL, see above
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            a = T.alloc_fragment((BM, BN), dtype)
            b = T.alloc_fragment((BM, BN), dtype)
            T.copy(A[by * BM, bx * BN], a)
            T.copy(B[by * BM, bx * BN], b)
            for i, j in T.Parallel(BM, BN):
                b[i, j] = a[i, j] * alpha + b[i, j]
            T.copy(b, C[by * BM, bx * BN])

    return conformance_axpy


def param_order_kernel(M: int, N: int, BM: int, BN: int, dtype: str) -> Any:
    """``Out = x * 2 + Bias`` declared ``(Out, x, Unused, Bias)``.

    The declared order is not the sorted-name order (``Bias, Out, Unused, x``), the
    output comes first and ``Unused`` is never read: a backend that binds tensors by
    name order, or drops unused parameters, reads and writes the wrong tensors.
    """
    import tilelang.language as T

    @T.prim_func  # type: ignore[untyped-decorator]  # tilelang ships no type information
    def conformance_param_order(
        Out: T.Tensor((M, N), dtype),  # type: ignore[valid-type]  # TileLang DSL
        x: T.Tensor((M, N), dtype),  # type: ignore[valid-type]  # TileLang DSL
        Unused: T.Tensor((M, N), dtype),  # type: ignore[valid-type]  # TileLang DSL
        Bias: T.Tensor((M, N), dtype),  # type: ignore[valid-type]  # TileLang DSL
    ) -> None:
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            a = T.alloc_fragment((BM, BN), dtype)
            b = T.alloc_fragment((BM, BN), dtype)
            c = T.alloc_fragment((BM, BN), dtype)
            T.copy(x[by * BM, bx * BN], a)
            T.copy(Bias[by * BM, bx * BN], b)
            for i, j in T.Parallel(BM, BN):
                c[i, j] = a[i, j] * 2.0 + b[i, j]
            T.copy(c, Out[by * BM, bx * BN])

    return conformance_param_order


def row_reduce_kernel(M: int, N: int, BM: int, dtype: str, style: str) -> Any:
    """``S = A.sum(1)`` and ``X = A.amax(1)``: two outputs from one kernel."""
    import tilelang.language as T

    alloc = T.alloc_fragment if style == "gpu" else T.alloc_local

    @T.prim_func  # type: ignore[untyped-decorator]  # tilelang ships no type information
    def conformance_row_reduce(A: T.Tensor((M, N), dtype), S: T.Tensor((M,), dtype), X: T.Tensor((M,), dtype)) -> None:  # type: ignore[valid-type]  # TileLang DSL, see above
        with T.Kernel(T.ceildiv(M, BM), threads=128) as bx:
            a = alloc((BM, N), dtype)
            s = alloc((BM,), dtype)
            x = alloc((BM,), dtype)
            T.copy(A[bx * BM, 0], a)
            T.reduce_sum(a, s, dim=1)
            T.reduce_max(a, x, dim=1)
            T.copy(s, S[bx * BM])
            T.copy(x, X[bx * BM])

    return conformance_row_reduce


def gemm_kernel(M: int, N: int, K: int, BM: int, BN: int, BK: int, dtype: str, accum: str, style: str) -> Any:
    """``C = A @ B`` with ``accum`` accumulation, tiled over M, N and K."""
    import tilelang.language as T

    operand = T.alloc_shared if style == "gpu" else T.alloc_local
    accumulator = T.alloc_fragment if style == "gpu" else T.alloc_local

    @T.prim_func  # type: ignore[untyped-decorator]  # tilelang ships no type information
    def conformance_gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum)) -> None:  # type: ignore[valid-type]  # TileLang DSL, see above
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            a = operand((BM, BK), dtype)
            b = operand((BK, BN), dtype)
            c = accumulator((BM, BN), accum)
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, BK), num_stages=2):
                T.copy(A[by * BM, k * BK], a)
                T.copy(B[k * BK, bx * BN], b)
                T.gemm(a, b, c)
            T.copy(c, C[by * BM, bx * BN])

    return conformance_gemm


# ----------------------------------------------------------------------------------------
# Named kernels: factory, compile arguments, inputs, reference, tolerance
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelCase:
    """One kernel of the battery.

    ``inputs`` are (shape, dtype) of the kernel's input tensors in order;
    ``reference`` maps the inputs to the expected outputs (computed by torch in
    float32 on the CPU, then cast to the output dtype).
    """

    name: str
    build: Callable[[str], Any]
    inputs: tuple[tuple[tuple[int, ...], torch.dtype], ...]
    reference: Callable[..., Sequence[torch.Tensor]]
    out_idx: int | list[int] | None
    atol: float
    rtol: float
    requires: frozenset[str] = field(default_factory=frozenset)


def _f32(*tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.detach().to("cpu", torch.float32) for t in tensors]


def _elementwise_ref(a: torch.Tensor, b: torch.Tensor) -> list[torch.Tensor]:
    fa, fb = _f32(a, b)
    return [(fa * fb + fa).to(a.dtype)]


def _reduce_ref(a: torch.Tensor) -> list[torch.Tensor]:
    (fa,) = _f32(a)
    return [fa.sum(dim=1).to(a.dtype), fa.amax(dim=1).to(a.dtype)]


def _gemm_ref(a: torch.Tensor, b: torch.Tensor) -> list[torch.Tensor]:
    fa, fb = _f32(a, b)
    return [fa @ fb]


_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
#: Element-wise tolerance per dtype: one rounding of the result in that dtype.
_EW_TOL = {"float32": (1e-5, 1e-5), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2)}


def _elementwise_case(dtype: str, M: int, N: int, BM: int, BN: int, name: str, requires: set[str]) -> KernelCase:
    t = _DTYPES[dtype]
    atol, rtol = _EW_TOL[dtype]
    return KernelCase(
        name=name,
        build=lambda style: elementwise_kernel(M, N, BM, BN, dtype),
        inputs=(((M, N), t), ((M, N), t)),
        reference=_elementwise_ref,
        out_idx=[-1],
        atol=atol,
        rtol=rtol,
        requires=frozenset(requires | ({dtype} if dtype != "float32" else set())),
    )


KERNELS: dict[str, KernelCase] = {
    case.name: case
    for case in (
        KernelCase(
            name="copy",
            build=lambda style: copy_kernel(64, 64, 32, 32, "float32"),
            inputs=(((64, 64), torch.float32),),
            reference=lambda a: [a.detach().cpu()],
            out_idx=-1,
            atol=0.0,
            rtol=0.0,
            requires=frozenset({"copy"}),
        ),
        KernelCase(
            name="copy_in_place",
            build=lambda style: copy_kernel(64, 64, 32, 32, "float32"),
            inputs=(((64, 64), torch.float32),),
            reference=lambda a: [a.detach().cpu()],
            out_idx=None,
            atol=0.0,
            rtol=0.0,
            requires=frozenset({"copy"}),
        ),
        _elementwise_case("float32", 64, 64, 32, 32, "elementwise_float32", {"elementwise"}),
        _elementwise_case("float16", 64, 64, 32, 32, "elementwise_float16", {"elementwise"}),
        _elementwise_case("bfloat16", 64, 64, 32, 32, "elementwise_bfloat16", {"elementwise"}),
        # 50 x 37 with 16 x 16 tiles: the last row and column of blocks are partial.
        _elementwise_case("float32", 50, 37, 16, 16, "elementwise_odd_shape", {"elementwise", "odd_shape"}),
        KernelCase(
            name="param_order",
            # out_idx=[0]: the caller passes (x, Unused, Bias), in declared order.
            build=lambda style: param_order_kernel(48, 40, 16, 16, "float32"),
            inputs=(((48, 40), torch.float32), ((48, 40), torch.float32), ((48, 40), torch.float32)),
            reference=lambda x, unused, bias: [(_f32(x)[0] * 2.0 + _f32(bias)[0])],
            out_idx=[0],
            atol=1e-5,
            rtol=1e-5,
            requires=frozenset({"copy", "elementwise", "odd_shape", "out_idx"}),
        ),
        KernelCase(
            name="param_order_in_place",
            build=lambda style: param_order_kernel(48, 40, 16, 16, "float32"),
            inputs=(((48, 40), torch.float32),) * 4,
            reference=lambda out, x, unused, bias: [],
            out_idx=None,
            atol=1e-5,
            rtol=1e-5,
            requires=frozenset({"copy", "elementwise", "odd_shape"}),
        ),
        KernelCase(
            name="row_reduce",
            # N is a power of two: tilelang's GPU layout inference finds no fragment
            # layout for a 16 x 48 reduction tile with 128 threads.
            build=lambda style: row_reduce_kernel(64, 64, 16, "float32", style),
            inputs=(((64, 64), torch.float32),),
            reference=_reduce_ref,
            out_idx=[-2, -1],
            atol=1e-4,
            rtol=1e-5,
            requires=frozenset({"reduce"}),
        ),
        KernelCase(
            name="gemm",
            build=lambda style: gemm_kernel(64, 64, 64, 32, 32, 32, "float16", "float32", style),
            inputs=(((64, 64), torch.float16), ((64, 64), torch.float16)),
            reference=_gemm_ref,
            out_idx=[-1],
            atol=1e-2,
            rtol=1e-2,
            requires=frozenset({"gemm", "float16"}),
        ),
    )
}


def make_inputs(case: KernelCase, device: str | torch.device, seed: int = 0) -> list[torch.Tensor]:
    """Seeded random inputs (standard normal) for ``case`` on ``device``."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator).to(dtype).to(device) for shape, dtype in case.inputs]


def _prefixed(prefix: str) -> Callable[[str], str]:
    """A ``msg`` callable for ``torch.testing.assert_close`` that prefixes its message."""
    return lambda message: f"{prefix}: {message}"


def compare(case: KernelCase, outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]) -> None:
    """Raise ``AssertionError`` unless ``outputs`` match torch's result on ``inputs``."""
    expected = case.reference(*inputs)
    if len(outputs) != len(expected):
        raise AssertionError(f"{case.name}: kernel produced {len(outputs)} outputs, torch {len(expected)}")
    for index, (got, want) in enumerate(zip(outputs, expected, strict=True)):
        if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
            raise AssertionError(f"{case.name}: output {index} is {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}")
        torch.testing.assert_close(got.detach().cpu(), want, atol=case.atol, rtol=case.rtol, msg=_prefixed(f"{case.name} output {index}"))
