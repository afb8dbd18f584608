"""Fixtures of the tilelang-hip tests: isolated caches, the two kernels, and device gates.

The kernels are the ones the issue names: an element-wise add and an fp16
GEMM written GPU-style (shared tiles, a fragment accumulator, ``T.gemm``).
"""

# No ``from __future__ import annotations`` here: tilelang evaluates the kernels' annotations.
from collections.abc import Callable
from typing import Any

import pytest
import torch

N_ADD = 4096
BLOCK = 256


@pytest.fixture(autouse=True)
def _isolated_caches(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path_factory.mktemp("caches")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(root / "tilelang"))
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(root / "tilecore"))


def make_add(n: int = N_ADD, block: int = BLOCK, dtype: str = "float32") -> Any:
    import tilelang.language as T  # here, not at the top: the runtime tests must import without tilelang

    @T.prim_func
    def add(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return add


def make_gemm(m: int = 512, n: int = 512, k: int = 512, bm: int = 64, bn: int = 64, bk: int = 32, threads: int = 256) -> Any:
    import tilelang.language as T

    @T.prim_func
    def gemm(A: T.Tensor((m, k), "float16"), B: T.Tensor((k, n), "float16"), C: T.Tensor((m, n), "float16")):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(k, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return gemm


@pytest.fixture
def add_kernel() -> Any:
    return make_add()


@pytest.fixture
def gemm_kernel() -> Any:
    return make_gemm()


@pytest.fixture
def kernels() -> dict[str, Callable[..., Any]]:
    return {"add": make_add, "gemm": make_gemm}


def rocm_device_reason() -> str | None:
    """Why ROCm GPU tests cannot run here, or ``None`` when a ROCm torch build sees an AMD GPU."""
    if getattr(torch.version, "hip", None) is None:
        return f"torch {torch.__version__} is not a ROCm build"
    if not torch.cuda.is_available():
        return f"ROCm torch {torch.__version__} sees no AMD GPU"
    return None


@pytest.fixture
def rocm_device() -> torch.device:
    """The current AMD GPU of a ROCm torch build; skips the test without one."""
    reason = rocm_device_reason()
    if reason is not None:
        pytest.skip(reason)
    return torch.device("cuda", torch.cuda.current_device())


@pytest.fixture
def nvidia_device() -> torch.device:
    """The current NVIDIA GPU of a CUDA torch build; skips the test without one."""
    if getattr(torch.version, "hip", None) is not None or getattr(torch.version, "cuda", None) is None:
        pytest.skip(f"torch {torch.__version__} is not a CUDA (NVIDIA) build")
    if not torch.cuda.is_available():
        pytest.skip(f"CUDA torch {torch.__version__} sees no GPU")
    return torch.device("cuda", torch.cuda.current_device())
