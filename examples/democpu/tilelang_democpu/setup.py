"""Environment/toolchain setup: the host C++ compiler (``$CXX``, else g++ or c++ on PATH).

The lookup rule and its error message are tilecore's
(:func:`tilecore.kit.host_compiler.find_host_compiler`), shared by every backend
that builds kernels with the host compiler.
"""

from __future__ import annotations

from tilecore import Toolchain
from tilecore.kit.host_compiler import find_host_compiler


def find_compiler() -> Toolchain:
    return find_host_compiler("c++").as_toolchain()
