"""tilelang-democpu: the example backend of the vendor guide.

It compiles TileLang kernels for target ``"democpu"`` through upstream's
portable CPU lowering and C codegen, builds them with the host C++ compiler
and calls them with ctypes.  Every plugin in this repository has the same
module layout: ``target`` (declaration), ``setup`` (toolchain), ``lowering``,
``codegen``, ``runtime`` (adapter), ``profiling``, and ``plugin`` (the hook
implementations wiring them to tilecore).
"""

__version__ = "0.2.0"
