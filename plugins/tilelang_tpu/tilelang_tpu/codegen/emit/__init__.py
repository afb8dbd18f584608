"""The construct emitters: one module per TileLang construct family, each printing PPL
through the emit context (:class:`tilelang_tpu.codegen.context.EmitContext`).

They import the context, the values, the TIR queries, the layouts and lower emitters only --
never the walker or the construct table, which sit above them.  Bottom to top:
``cast``, ``transpose``, ``slices``, ``ops`` (primitives); ``gather``, ``gemm``, ``reduce_int``,
``domain``, ``index_tiles``; ``copy``, ``select``, ``reduce``; ``operands``, ``atomic``;
``parallel``, ``fill``, ``scan``.
"""
