"""Casts to fp16/bf16 in per-element code (``T.serial`` loops), on the BM1690 emulator against torch.

Scalar code keeps fp16/bf16 values in C ``float``s, so a cast to a 16-bit type must round
there as ``.to()`` does: ``int32 257 -> bfloat16`` is 256, ``2049 -> float16`` is 2048,
``int32 -> float16 -> bfloat16 -> float32`` of -437 is -436, ``70000 -> float16`` is inf.
Before the fix an int -> 16-bit cast was printed as ``(float)x`` and kept every bit (a silent
wrong result); float -> 16-bit casts were refused.  Every case runs the same chain in
``T.Parallel`` too, so both paths are held to torch on the same values (ties, > 2^24, overflow).

Every run checks that the inputs are left untouched.
"""

from __future__ import annotations

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import run_checked

pytestmark = pytest.mark.usefixtures("toolchain")

M, N = 8, 48


def _chain(value: Any, dtypes: tuple[str, ...]) -> Any:
    for dtype in dtypes:
        value = T.cast(value, dtype)
    return value


def cast_chain_kernel(src: str, chain: tuple[str, ...], mode: str, scale: int = 1) -> Any:
    """``Y[i, j] = cast(...cast(X[i, j] * scale, chain[0])..., chain[-1])`` per element.

    ``mode``: ``serial`` reads a tile element in a T.serial nest; ``global`` reads the tensor
    element in place; ``accumulate`` adds each row's values into a ``T.alloc_var`` of
    ``chain[-1]`` (the cast feeds arithmetic, not a store); ``parallel`` is the T.Parallel form."""
    out = chain[-1]

    def source(x: Any) -> Any:
        return x if scale == 1 else T.cast(x, "int32") * scale

    if mode == "accumulate":

        @T.prim_func
        def accumulate(X: T.Tensor((M, N), src), Y: T.Tensor((M,), out)):
            with T.Kernel(1, threads=1):
                x = T.alloc_shared((M, N), src)
                y = T.alloc_fragment((M,), out)
                acc = T.alloc_var(out)
                T.copy(X, x)
                for i in T.serial(M):
                    acc = 0
                    for j in T.serial(N):
                        acc = T.max(acc, _chain(source(x[i, j]), chain))
                    y[i] = acc
                T.copy(y, Y)

        return accumulate

    @T.prim_func
    def casts(X: T.Tensor((M, N), src), Y: T.Tensor((M, N), out)):
        with T.Kernel(1, threads=1):
            x = T.alloc_shared((M, N), src)
            y = T.alloc_fragment((M, N), out)
            T.copy(X, x)
            if mode == "parallel":
                for i, j in T.Parallel(M, N):
                    y[i, j] = _chain(source(x[i, j]), chain)
            elif mode == "global":
                for i in T.serial(M):
                    for j in T.serial(N):
                        y[i, j] = _chain(source(X[i, j]), chain)
            else:
                for i in T.serial(M):
                    for j in T.serial(N):
                        y[i, j] = _chain(source(x[i, j]), chain)
            T.copy(y, Y)

    return casts


#: Ties and near-ties of the 16-bit types (bf16 keeps 8 significant bits, fp16 11), values whose
#: fp32 rounding makes a new tie (> 2^24: torch rounds int32 -> fp32 -> 16-bit), fp16's overflow.
SPECIAL_INT32 = [0, 1, -1, 255, 256, 257, 258, 259, 437, -437, 511, 513, 2047, 2049, 2051, -2049, 4097, 4099]
SPECIAL_INT32 += [65504, 65519, 65520, 70000, -70000, 16777217, 16842753, 33685505, -33685505, 2**31 - 1, -(2**31)]


def _inputs(src: str, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if src == "int8":
        return torch.randint(-128, 128, (M, N), generator=g, dtype=torch.int8)
    if src == "int32":
        x = torch.randint(-(2**26), 2**26, (M, N), generator=g, dtype=torch.int64)
        x[0] = torch.randint(-5000, 5000, (N,), generator=g)  # every fp16/bf16 tie size
        flat = x.view(-1)
        flat[N : N + len(SPECIAL_INT32)] = torch.tensor(SPECIAL_INT32)
        return x.to(torch.int32)
    x = torch.randn(M, N, generator=g, dtype=torch.float32) * 1000
    # fp32 values one fp32 ulp beside the bf16/fp16 ties, and exact ties
    x[1, :6] = torch.tensor([257.0, 257.00003, 256.99997, 2049.0, 2049.0002, 65520.0])
    return x.to(getattr(torch, src))


def _expected(x: torch.Tensor, chain: tuple[str, ...], mode: str, scale: int) -> torch.Tensor:
    value = x.to(torch.int32) * scale if scale != 1 else x
    for dtype in chain:
        value = value.to(getattr(torch, dtype))
    if mode == "accumulate":
        return value.float().clamp(min=0).amax(1).to(getattr(torch, chain[-1]))  # acc starts at 0
    return value


CASES = [
    # (source, chain of casts, scale)
    ("int32", ("bfloat16", "float32"), 1),
    ("int32", ("float16", "float32"), 1),
    ("int32", ("float16", "bfloat16", "float32"), 1),  # torch -437 -> -436 (seeds 3005 and 3019)
    ("int32", ("bfloat16", "float16", "float32"), 1),
    ("int32", ("bfloat16",), 1),  # the cast is the store's own
    ("int32", ("float16",), 1),
    ("int8", ("bfloat16", "float32"), 1),
    ("int8", ("float16", "bfloat16", "float32"), 37),  # int8 * 37 in int32: past bf16's 8 bits
    ("float32", ("bfloat16", "float32"), 1),
    ("float32", ("float16", "float32"), 1),
    ("float32", ("float16", "bfloat16"), 1),
    ("float16", ("bfloat16", "float32"), 1),
    ("bfloat16", ("float16", "float32"), 1),
]


@pytest.mark.parametrize("mode", ["serial", "global", "parallel"])
@pytest.mark.parametrize(("src", "chain", "scale"), CASES, ids=["-".join((c[0], *c[1], str(c[2]))) for c in CASES])
def test_16_bit_casts_round_as_torch(src: str, chain: tuple[str, ...], scale: int, mode: str) -> None:
    kernel = tilelang.compile(cast_chain_kernel(src, chain, mode, scale), target="tpu")
    x = _inputs(src, seed=len(chain) * 7 + scale)
    y = torch.zeros(M, N, dtype=getattr(torch, chain[-1]))
    run_checked(kernel, x, y, inputs=(0,))
    expected = _expected(x, chain, mode, scale)
    wrong = (y != expected) & ~(y.isnan() & expected.isnan())
    assert not wrong.any(), (
        f"{int(wrong.sum())} wrong, e.g. x={x[wrong][:4].tolist()} -> {y[wrong][:4].tolist()}, torch {expected[wrong][:4].tolist()}"
    )


@pytest.mark.parametrize(
    ("src", "chain"), [("int32", ("float16", "bfloat16", "float32")), ("int32", ("bfloat16",)), ("float32", ("float16",))]
)
def test_16_bit_casts_feeding_an_accumulator(src: str, chain: tuple[str, ...]) -> None:
    """The cast's value is used by arithmetic (a running ``T.max`` in a ``T.alloc_var``), not stored."""
    kernel = tilelang.compile(cast_chain_kernel(src, chain, "accumulate"), target="tpu")
    x = _inputs(src, seed=5)
    x[:, : N // 2] = x[:, : N // 2].clamp(-5000, 5000)
    y = torch.zeros(M, dtype=getattr(torch, chain[-1]))
    run_checked(kernel, x, y, inputs=(0,))
    assert torch.equal(y, _expected(x, chain, "accumulate", 1))


def half_scalars_kernel(dtype: str) -> Any:
    """A 16-bit ``T.alloc_var`` accumulating ``+1`` from 2048 (fp16) / 256 (bf16), and a 16-bit let
    binding of a product: each holds a value of its type, as on every other target."""
    start = 2048.0 if dtype == "float16" else 256.0

    @T.prim_func
    def half_scalars(X: T.Tensor((M, N), "int32"), Y: T.Tensor((M,), "float32"), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=1):
            acc = T.alloc_var(dtype)
            y = T.alloc_fragment((M,), "float32")
            z = T.alloc_fragment((M, N), "float32")
            for i in T.serial(M):
                acc = T.cast(start, dtype)
                for _j in T.serial(N):
                    acc = acc + T.cast(1.0, dtype)
                y[i] = T.cast(acc, "float32")
                for j in T.serial(N):
                    v = T.cast(X[i, j], dtype) * T.cast(3.0, dtype)
                    z[i, j] = T.cast(v, "float32")
            T.copy(y, Y)
            T.copy(z, Z)

    return half_scalars


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_scalars_hold_values_of_their_type(dtype: str) -> None:
    kernel = tilelang.compile(half_scalars_kernel(dtype), target="tpu")
    x = torch.randint(-5000, 5000, (M, N), dtype=torch.int32)
    y, z = torch.zeros(M), torch.zeros(M, N)
    run_checked(kernel, x, y, z, inputs=(0,))
    t = getattr(torch, dtype)
    acc = torch.full((M,), 2048.0 if dtype == "float16" else 256.0, dtype=t)
    for _ in range(N):
        acc = acc + torch.ones((), dtype=t)  # rounds each step: stays put
    assert torch.equal(y, acc.float())
    assert torch.equal(z, (x.to(t) * torch.tensor(3.0, dtype=t)).float())


def scalar_operand_kernel(rows: int, cols: int, block: int) -> Any:
    @T.prim_func
    def scalar_operand(X: T.Tensor((rows, cols), "bfloat16"), Y: T.Tensor((rows, cols), "bfloat16")):
        with T.Kernel(rows // block, threads=1) as bx:
            x = T.alloc_shared((block, cols), "bfloat16")
            y = T.alloc_fragment((block, cols), "bfloat16")
            T.copy(X[bx * block, 0], x)
            for i, j in T.Parallel(block, cols):
                y[i, j] = x[i, j] * T.cast(bx * 1000 + 257, "bfloat16")
            T.copy(y, Y[bx * block, 0])

    return scalar_operand


def test_16_bit_cast_of_a_block_index_as_a_tile_op_operand() -> None:
    """``T.cast(bx * 1000 + 257, "bfloat16")`` as a scalar operand of ``tiu::fmul``: the cast's lines
    (and their wait) are emitted inside the T.Parallel scope, the grid loop holding the wait is not
    pipelined, and the product is torch's (a coverage test of the scalar-cast path in a tile op: the
    bf16 ``fmul`` rounded its float operand by itself before)."""
    rows, cols, block = 256, 64, 64
    kernel = tilelang.compile(scalar_operand_kernel(rows, cols, block), target="tpu")
    assert "ppl::enable_pipeline" not in kernel.get_kernel_source()
    x = torch.randn(rows, cols).to(torch.bfloat16)
    y = torch.zeros(rows, cols, dtype=torch.bfloat16)
    run_checked(kernel, x, y, inputs=(0,))
    scale = (torch.arange(rows) // block * 1000 + 257).to(torch.bfloat16).unsqueeze(1)
    assert torch.equal(y, x * scale)


def half_arithmetic_kernel(dtype: str) -> Any:
    """Device differential run, seed 5018 #75 (refused before casts rounded, then WRONG): the
    difference of two 16-bit casts, widened to fp32, in a T.serial loop; and ``a * b + c``."""

    @T.prim_func
    def half_arithmetic(X: T.Tensor((M, N), "float16"), Ids: T.Tensor((M, N), "int32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=1):
            x = T.alloc_local((M, N), "float16")
            y = T.alloc_fragment((M, N), "float32")
            T.copy(X, x)
            for i in T.serial(M):
                for j in T.serial(N):
                    a = T.cast(x[i, j], dtype) - T.cast(T.cast(Ids[i, j], "int8"), dtype)
                    y[i, j] = T.cast(a * T.cast(x[i, N - 1 - j], dtype) + T.cast(3.0, dtype), "float32")
            T.copy(y, Y)

    return half_arithmetic


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_arithmetic_in_scalar_code_rounds_each_operation(dtype: str) -> None:
    kernel = tilelang.compile(half_arithmetic_kernel(dtype), target="tpu")
    g = torch.Generator().manual_seed(75)
    x = (torch.randn(M, N, generator=g) * 100).to(torch.float16)
    ids = torch.randint(-127, 128, (M, N), generator=g, dtype=torch.int32)
    y = torch.zeros(M, N)
    run_checked(kernel, x, ids, y, inputs=(0, 1))
    t = getattr(torch, dtype)
    a = x.to(t) - ids.to(torch.int8).to(t)
    expected = (a * x.flip(1).to(t) + torch.tensor(3.0, dtype=t)).float()
    wrong = (y != expected) & ~(y.isnan() & expected.isnan())
    assert not wrong.any(), f"{int(wrong.sum())} wrong, e.g. {y[wrong][:4].tolist()}, torch {expected[wrong][:4].tolist()}"
