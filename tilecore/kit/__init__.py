"""Helpers a backend may call: tensor supply, timing, build artifacts, cache paths, the host compiler.

Each module imports only the contract (:mod:`tilecore.errors`, :mod:`tilecore.kernel`,
:mod:`tilecore.targets`), never the machinery, so a backend that uses none of them
needs none of them.  Importing this package imports nothing else.
"""
