"""tilelang-cuda: the NVIDIA GPU backend of tilecore.

Target ``"cuda"`` is delegated to upstream TileLang's own CUDA backend
(``TargetSpec(upstream=tilecore.Upstream("cuda", ...))``): upstream lowers,
generates CUDA C++, compiles it with nvcc and launches it.  This distribution
owns what is CUDA-specific on the tilecore side: the target and its ``arch``
option with GPU detection (``target``), finding nvcc (``setup``), the record
of what upstream does in each stage (``lowering``, ``codegen``, ``runtime``),
tensor supply on the current GPU and CUDA-event timing (``profiling``), and
the hook implementations (``plugin``).
"""

__version__ = "0.1.0"
