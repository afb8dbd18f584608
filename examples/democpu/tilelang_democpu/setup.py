"""Environment/toolchain setup: the host C++ compiler (``$CXX``, else g++ or c++ on PATH).

The lookup rule and its error message are tilecore's
(:func:`tilecore.kit.host_compiler.find_host_compiler`), shared by every backend
that builds kernels with the host compiler.
"""

from __future__ import annotations

from tilecore import Toolchain
from tilecore.kit.host_compiler import find_host_compiler
from tilelang_democpu import __version__


def find_compiler() -> Toolchain:
    return find_host_compiler("c++", f"target 'democpu' (tilelang-democpu {__version__})").as_toolchain()
