"""Names of the constructs a backend can declare unsupported.

A backend lists some of these in ``TargetSpec(unsupported=...)``; every
conformance case that needs one of them is then reported as
``unsupported`` (a pytest skip whose reason starts with ``unsupported:``)
instead of failed.  This module is standard-library only.
"""

from __future__ import annotations

CONSTRUCTS: dict[str, str] = {
    "copy": "T.copy between global memory and an on-chip tile",
    "elementwise": "T.Parallel loops over register tiles (T.alloc_fragment)",
    "float16": "float16 tensors and arithmetic",
    "bfloat16": "bfloat16 tensors and arithmetic",
    "reduce": "T.reduce_sum / T.reduce_max along a tile's rows",
    "gemm": "T.gemm with float16 operands and float32 accumulation",
    "odd_shape": "tensor shapes that the tile size does not divide (partial boundary tiles)",
    "out_idx": "kernels whose outputs tilelang allocates and returns (out_idx)",
    "jit": "@tilelang.jit, as a kernel factory and stacked on a @T.prim_func",
    "grid": "the kernel[grid](...) launch syntax",
    "tensor_supply": "kernel.get_profiler(tensor_supply_type=...) input generation",
    "profiler": "Profiler.do_bench and Profiler.assert_allclose",
    "disk_cache": "loading a compiled kernel from tilelang's disk cache in a new process",
    "argument_checks": "tilecore.KernelArgumentError for arguments of the wrong dtype, shape or count",
}
