"""Codegen: upstream TileLang's CUDA codegen and nvcc build; this plugin generates nothing.

Upstream's ``DeviceCodegen("cuda")`` emits CUDA C++ (what
``kernel.get_kernel_source()`` shows) and compiles it with nvcc into a cubin
(``-arch=<arch> --cubin -O3 -std=c++20`` plus its ``tl_templates`` and CUTLASS
headers; a fatbin when the target carries a ``code`` list), caching binaries
under ``$TILELANG_CACHE_DIR/<version>/cuda-binaries``.  ``tilecore_codegen`` is
never called for this target.

The one codegen input this plugin decides is the TVM target it hands upstream,
built by :func:`tvm_attrs`: ``{"kind": "cuda", "arch": <arch>}``, exactly the
target upstream builds for the same GPU, so the source and the cubin cache key
do not change when tilecore is active.
"""

from __future__ import annotations

from collections.abc import Mapping


def tvm_attrs(options: Mapping[str, str]) -> dict[str, str]:
    """TVM target attributes for resolved options (the ``kind`` is added by tilecore)."""
    return {"arch": options["arch"]}
