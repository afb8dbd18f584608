"""Fixtures of the tilelang-hip tests: the two kernels (from hip_kernels.py), and device gates."""

# No ``from __future__ import annotations`` here: tilelang evaluates the kernels' annotations.
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

# hip_kernels.py is imported by name here and by the subprocess scripts of the tests;
# --import-mode=importlib does not put test folders on sys.path by itself.
HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from hip_kernels import make_add, make_gemm  # noqa: E402


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
