"""tilelang-cuda: the NVIDIA GPU backend of tilecore.

Target ``"cuda"`` is delegated to upstream TileLang's own CUDA backend
(``TargetSpec(upstream=tilecore.Upstream("cuda", ...))``): upstream lowers,
generates CUDA C++, compiles it with nvcc and launches it.  This distribution
owns what is CUDA-specific on the tilecore side, in the four modules of a
backend that delegates to upstream: the target, its ``arch`` option with GPU
detection and the TVM attributes handed upstream (``target``), finding nvcc and
the setup notes about the arch and upstream's execution backends (``setup``),
CUDA-event timing (``profiling``), and the hook implementations (``plugin``).
"""

__version__ = "0.2.0"
