"""A weight-only int4 GEMM (w4a16) on a SophGo TPU, written as TileLang users write it:
upstream's ``examples/dequantize_gemm`` form.  Two signed int4 weights are packed per
``uint8`` (the low nibble first); each weight tile is unpacked in ``T.Parallel`` with shifts
and masks (``(b >> 4 * (j % 2)) & 0xF``, then sign-extended by ``reinterpret`` to int8 and an
arithmetic shift), scaled per group of ``group_size`` input channels, and fed to ``T.gemm``.

    python examples/tpu/dequant_gemm_int4.py
"""

import tilelang
import tilelang.language as T
import torch


def _u8_to_i4_to_i8(val, pos):
    """The signed int4 at nibble ``pos`` (0: low, 1: high) of the uint8 ``val``, as int8."""
    i4 = (val >> (T.Cast("uint8", pos) * T.uint8(4))) & T.uint8(0xF)
    return T.reinterpret(i4 << T.uint8(4), "int8") >> T.int8(4)


def w4a16_gemm(M, N, K, group_size=32, block_M=64, block_N=64, block_K=64, dtype="float16"):
    assert K % block_K == 0 and block_K % group_size == 0

    @T.prim_func
    def main(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((N, K // 2), "uint8"),
        Scale: T.Tensor((N, K // group_size), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), dtype)
            b_s = T.alloc_shared((block_N, block_K // 2), "uint8")
            s_s = T.alloc_shared((block_N, block_K // group_size), dtype)
            b_dq = T.alloc_fragment((block_N, block_K), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(B[bx * block_N, k * block_K // 2], b_s)
                T.copy(Scale[bx * block_N, k * block_K // group_size], s_s)
                for i, j in T.Parallel(block_N, block_K):
                    b_dq[i, j] = T.Cast(dtype, _u8_to_i4_to_i8(b_s[i, j // 2], j % 2)) * s_s[i, j // group_size]
                T.gemm(a_s, b_dq, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """``[N, K]`` int8 values in [-8, 7] -> ``[N, K // 2]`` uint8, the even column in the low nibble."""
    nibbles = (q.to(torch.int16) & 0xF).to(torch.uint8)
    return nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    pairs = torch.stack((packed & 0xF, packed >> 4), dim=-1).reshape(packed.shape[0], -1).to(torch.int8)
    return (pairs << 4) >> 4


def reference(a: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, group_size: int) -> torch.Tensor:
    w = unpack_int4(packed).float() * scale.float().repeat_interleave(group_size, dim=1)
    return (a.float() @ w.to(torch.float16).float().T).to(torch.float16)


def main() -> None:
    M, N, K, group_size = 65, 100, 256, 32
    a = torch.randn(M, K, dtype=torch.float16)
    q = torch.randint(-8, 8, (N, K), dtype=torch.int8)
    packed = pack_int4(q)
    assert torch.equal(unpack_int4(packed), q)
    scale = (torch.rand(N, K // group_size) * 0.05 + 0.01).to(torch.float16)
    kernel = tilelang.compile(w4a16_gemm(M, N, K, group_size), target="tpu", out_idx=[-1])
    c = kernel(a, packed, scale)
    torch.testing.assert_close(c, reference(a, packed, scale, group_size), rtol=1e-2, atol=1e-2)
    print("dequant_gemm_int4: matches torch")

    profiler = kernel.get_profiler()
    latency = profiler.do_bench(n_warmup=1, n_repeat=3)
    print(f"dequant_gemm_int4 {M}x{N}x{K}: {latency:.3f} ms per call (emulator wall time when no card is present)")


if __name__ == "__main__":
    main()
