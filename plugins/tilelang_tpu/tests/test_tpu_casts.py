"""Float casts on the BM1690 emulator, bit for bit against torch's ``.to()`` (issue 10).

PPL's fp32 -> fp16 and fp32 -> bf16 ``tiu::cast`` saturate (``inf -> 65504``,
``1e6 -> 65504``, ``inf -> 3.39e38`` in bf16, measured); IEEE round-to-nearest-even,
which torch and TileLang on GPUs follow, gives ``±inf``.  ``codegen.emit.cast.emit_cast``
sends those elements to ``±inf``.  One kernel covers every cast site of the code
generator: a cast in ``T.Parallel`` (whole tile and one half of it), ``T.Parallel``
stores to global memory and reads of it, a tile -> tile ``T.copy`` (whole and by
halves, so at a lane offset), and the casting global -> tile and tile -> global
``T.copy`` (clipped at the tensor's edge: the shapes do not divide the blocks), for
fp32 -> fp16/bf16, fp16/bf16 -> fp32 and fp16 <-> bf16.  Inputs: random values over a
wide range of magnitudes, random bit patterns (NaNs, infinities and subnormals
included) and the edge values of each cast.

One known difference is accepted and checked as such: an fp32 subnormal
(``|x| < 2^-126``) becomes ``±0`` in bf16 (torch keeps a bf16 subnormal).
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch

M, N, BM, BN = 130, 100, 64, 64
HALF = BM // 2

#: fp32 edge values: infinities, NaN, the fp16 and bf16 overflow thresholds and their
#: neighbours, ties, fp16 subnormals and fp32 subnormals.
_EDGE_VALUES = [
    *(float("inf"), float("-inf"), float("nan"), 0.0, -0.0),
    *(65504.0, -65504.0, 65519.0, -65519.0, 65519.99609375, -65519.99609375, 65520.0, -65520.0, 1e6, -1e6),
    *(3.4e38, -3.4e38, 3.39e38, -3.39e38, 3.4028235e38, -3.4028235e38),
    *(1e-5, -1e-5, 6e-8, 5.96e-8, 2.98e-8, 3e-8, 6.1e-5, 1.0009765625, 1.00048828125, 2049.0, 2051.0, 1e-40, -1e-40),
]
#: fp32 bit patterns: the bf16 threshold 0x7F7F8000 and neighbours (both signs), bf16
#: ties, quiet/signalling/negative NaNs.
_EDGE_BITS = [
    *(0x7F7F8000, 0x7F7F7FFF, 0x7F7F8001, 0xFF7F8000, 0xFF7F7FFF, 0xFF7F8001),
    *(0x3F808000, 0x3F818000, 0x3F808001, 0x7FC00000, 0x7F800001, 0xFFC00000, 0x387FC000, 0x387FE000),
]


def _casts() -> Any:
    @T.prim_func
    def casts(
        X: T.Tensor((M, N), "float32"),
        H: T.Tensor((M, N), "float16"),
        B: T.Tensor((M, N), "bfloat16"),
        Unused: T.Tensor((N,), "float32"),
        Par16: T.Tensor((M, N), "float16"),  # T.Parallel cast (one half of the tile from an fp32 temporary)
        ParB: T.Tensor((M, N), "bfloat16"),
        Tile16: T.Tensor((M, N), "float16"),  # tile -> tile T.copy (whole tile / by halves)
        TileB: T.Tensor((M, N), "bfloat16"),
        Store16: T.Tensor((M, N), "float16"),  # fp32 tile -> fp16/bf16 global T.copy
        StoreB: T.Tensor((M, N), "bfloat16"),
        Load16: T.Tensor((M, N), "float16"),  # fp32 global -> fp16/bf16 tile T.copy
        LoadB: T.Tensor((M, N), "bfloat16"),
        Direct16: T.Tensor((M, N), "float16"),  # T.Parallel store to global memory
        Read16: T.Tensor((M, N), "float16"),  # T.Parallel read of global memory, cast
        H2F: T.Tensor((M, N), "float32"),  # fp16 -> fp32, T.Parallel
        B2F: T.Tensor((M, N), "float32"),  # bf16 -> fp32, tile -> tile T.copy
        H2B: T.Tensor((M, N), "bfloat16"),  # fp16 -> bf16, T.Parallel
        B2H: T.Tensor((M, N), "float16"),  # bf16 -> fp16, tile -> tile T.copy
        HLoad: T.Tensor((M, N), "float32"),  # fp16 global -> fp32 tile T.copy
        BStore: T.Tensor((M, N), "float32"),  # bf16 tile -> fp32 global T.copy
    ):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            x = T.alloc_shared((BM, BN), "float32")
            h = T.alloc_shared((BM, BN), "float16")
            b = T.alloc_shared((BM, BN), "bfloat16")
            par16 = T.alloc_fragment((BM, BN), "float16")
            parb = T.alloc_fragment((BM, BN), "bfloat16")
            tile16 = T.alloc_fragment((BM, BN), "float16")
            tileb = T.alloc_fragment((BM, BN), "bfloat16")
            load16 = T.alloc_fragment((BM, BN), "float16")
            loadb = T.alloc_fragment((BM, BN), "bfloat16")
            read16 = T.alloc_fragment((BM, BN), "float16")
            wide_h = T.alloc_fragment((BM, BN), "float32")
            wide_b = T.alloc_fragment((BM, BN), "float32")
            h2b = T.alloc_fragment((BM, BN), "bfloat16")
            b2h = T.alloc_fragment((BM, BN), "float16")
            hload = T.alloc_fragment((BM, BN), "float32")
            T.copy(X[by * BM, bx * BN], x)
            T.copy(H[by * BM, bx * BN], h)
            T.copy(B[by * BM, bx * BN], b)
            for i, j in T.Parallel(BM, BN):
                par16[i, j] = T.cast(x[i, j], "float16")
                parb[i, j] = T.cast(x[i, j], "bfloat16")
            for i, j in T.Parallel(HALF, BN):  # a sub-domain of the tile, through an fp32 temporary
                par16[i, j] = T.cast(x[i, j] * 1.0, "float16")
            T.copy(x, tileb)
            T.copy(x[0:HALF, 0:BN], tile16[0:HALF, 0:BN])
            T.copy(x[HALF:BM, 0:BN], tile16[HALF:BM, 0:BN])
            T.copy(X[by * BM, bx * BN], load16)
            T.copy(X[by * BM, bx * BN], loadb)
            for i, j in T.Parallel(BM, BN):
                read16[i, j] = T.cast(X[by * BM + i, bx * BN + j], "float16")
            for i, j in T.Parallel(BM, BN):
                Direct16[by * BM + i, bx * BN + j] = T.cast(x[i, j], "float16")
            for i, j in T.Parallel(BM, BN):
                wide_h[i, j] = T.cast(h[i, j], "float32")
                h2b[i, j] = T.cast(h[i, j], "bfloat16")
            T.copy(b, wide_b)
            T.copy(b, b2h)
            T.copy(H[by * BM, bx * BN], hload)
            T.copy(par16, Par16[by * BM, bx * BN])
            T.copy(parb, ParB[by * BM, bx * BN])
            T.copy(tile16, Tile16[by * BM, bx * BN])
            T.copy(tileb, TileB[by * BM, bx * BN])
            T.copy(x, Store16[by * BM, bx * BN])
            T.copy(x, StoreB[by * BM, bx * BN])
            T.copy(load16, Load16[by * BM, bx * BN])
            T.copy(loadb, LoadB[by * BM, bx * BN])
            T.copy(read16, Read16[by * BM, bx * BN])
            T.copy(wide_h, H2F[by * BM, bx * BN])
            T.copy(wide_b, B2F[by * BM, bx * BN])
            T.copy(h2b, H2B[by * BM, bx * BN])
            T.copy(b2h, B2H[by * BM, bx * BN])
            T.copy(hload, HLoad[by * BM, bx * BN])
            T.copy(b, BStore[by * BM, bx * BN])

    return casts


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}[t.dtype])


def _fp32_inputs(gen: torch.Generator) -> torch.Tensor:
    """Random values over magnitudes 1e-30 .. 1e30, a quarter random bit patterns, edge values first."""
    x = torch.randn(M, N, generator=gen) * torch.exp(torch.randn(M, N, generator=gen) * 8)
    x[: M // 4] = torch.randint(-(2**31), 2**31 - 1, (M // 4, N), generator=gen, dtype=torch.int32).view(torch.float32)
    bits = torch.tensor(_EDGE_BITS, dtype=torch.int64)
    edges = torch.cat([torch.tensor(_EDGE_VALUES), torch.where(bits >= 2**31, bits - 2**32, bits).to(torch.int32).view(torch.float32)])
    x.view(-1)[: edges.numel()] = edges
    x.view(-1)[-edges.numel() :] = edges  # in the clipped edge tile too
    return x


def _half_inputs(dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Random 16-bit patterns (every class of value: NaN, inf, subnormals) plus edge values."""
    x = torch.randint(-(2**15), 2**15, (M, N), generator=gen, dtype=torch.int32).to(torch.int16).view(dtype)
    edges = torch.tensor([float("inf"), float("-inf"), float("nan"), 65504.0, -65504.0, 65280.0, 65536.0, -65536.0, 1e-7, 3e38])
    x.view(-1)[: edges.numel()] = edges.to(dtype)
    return x


def _assert_bits(name: str, actual: torch.Tensor, expected: torch.Tensor, source: torch.Tensor) -> None:
    """Bit-for-bit equal (any NaN where a NaN is expected)."""
    assert actual.dtype == expected.dtype, name
    nan = expected.isnan()
    same = (_bits(actual) == _bits(expected)) | (nan & actual.isnan())
    if not bool(same.all()):
        at = (~same).nonzero()[:8].tolist()
        found = [(source[i, j].item(), actual[i, j].item(), expected[i, j].item()) for i, j in at]
        pytest.fail(f"{name}: {int((~same).sum())} elements differ from torch; (source, got, expected): {found}")


@pytest.mark.usefixtures("toolchain")
def test_casts_match_torch_bit_for_bit() -> None:
    func = _casts()
    names = [func.buffer_map[p].name for p in func.params][4:]
    kernel = tilelang.compile(func, target="tpu", out_idx=list(range(4, 4 + len(names))))
    source = kernel.get_kernel_source()
    # 12 fp32 -> fp16/bf16 casts with two compare-selects each; the 6 others are a plain tiu::cast
    assert source.count("tiu::cast(") == 18 and source.count("tiu::gt_select(") == 24
    gen = torch.Generator().manual_seed(10)
    x, h, b = _fp32_inputs(gen), _half_inputs(torch.float16, gen), _half_inputs(torch.bfloat16, gen)
    unused = torch.full((N,), 7.0)
    inputs = [x, h, b, unused]
    before = [t.clone() for t in inputs]
    outs = dict(zip(names, kernel(*inputs), strict=True))
    for original, tensor in zip(before, inputs, strict=True):
        assert torch.equal(_bits(tensor), _bits(original)), "the kernel wrote one of its inputs"

    # fp32 -> bf16: fp32 subnormals become ±0 on BM1690 (the one accepted difference)
    x_ftz = torch.where(x.abs() < torch.finfo(torch.float32).tiny, torch.zeros_like(x).copysign(x), x)
    fp16_ref, bf16_ref = x.to(torch.float16), x_ftz.to(torch.bfloat16)
    for name in ("Par16", "Tile16", "Store16", "Load16", "Direct16", "Read16"):
        _assert_bits(name, outs[name], fp16_ref, x)
    for name in ("ParB", "TileB", "StoreB", "LoadB"):
        _assert_bits(name, outs[name], bf16_ref, x)
    # the accepted difference is what it is said to be: without it, only fp32 subnormals differ
    differs = (_bits(outs["ParB"]) != _bits(x.to(torch.bfloat16))) & ~x.isnan()
    assert bool((differs <= (x.abs() < torch.finfo(torch.float32).tiny)).all())
    assert bool(outs["Par16"].isinf().sum() > 100) and bool(outs["ParB"].isinf().sum() >= 10)  # the fix is exercised

    _assert_bits("H2F", outs["H2F"], h.to(torch.float32), h)
    _assert_bits("B2F", outs["B2F"], b.to(torch.float32), b)
    _assert_bits("HLoad", outs["HLoad"], h.to(torch.float32), h)
    _assert_bits("BStore", outs["BStore"], b.to(torch.float32), b)
    _assert_bits("H2B", outs["H2B"], h.to(torch.bfloat16), h)
    _assert_bits("B2H", outs["B2H"], b.to(torch.float16), b)


def test_bm1684x_keeps_the_plain_cast() -> None:
    """BM1684X's cmodel casts fp32 -> fp16/bf16 to ±inf already (measured), and its compare-select
    refuses an fp32 comparison writing fp16/bf16: no selects there."""
    from test_tpu_codegen import device_module
    from tilelang_tpu import codegen

    device, tvm_target = device_module(_casts())
    assert codegen.generate(device, tvm_target, "bm1684x").count("tiu::gt_select(") == 0
    assert codegen.generate(device, tvm_target, "bm1690").count("tiu::gt_select(") == 24
