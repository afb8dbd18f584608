"""tilelang-hip: TileLang on AMD GPUs (HIP/ROCm) as a tilecore backend.

The target ``hip`` (alias ``rocm``) is delegated to upstream tilelang's own
ROCm backend (``tilelang.rocm``): its pass pipeline, its HIP codegen, its
hipcc callback and its execution adapters do the compiling and launching.
This package owns what upstream leaves to the environment: the target name
and its ``arch`` option with validation and detection, finding ROCm, tensor
supply on the right vendor's device, and HIP-event profiling.  Modules: a
delegating backend's ``target``, ``setup`` (ROCm, and the check that upstream
registers its ``rocm`` backend), ``profiling`` and ``plugin``, plus ``codegen``
(HIP source without ROCm) and ``runtime`` (which torch device may run a kernel).
"""

__version__ = "0.2.0"
DISTRIBUTION = "tilelang-hip"
