"""Lowering for the tpu target: tilelang's early passes, tile ops kept as tile ops.

A TPU is programmed a whole tile at a time (``dma::load`` of a [rows, cols]
block, ``tiu::fadd`` of two blocks, ...), so the code generator wants to see
``T.copy``/``T.gemm``/``T.reduce``/``T.fill`` as the tile-op calls the user
wrote, with multi-dimensional buffers.  tilelang's portable CPU pipeline
(``tilecore.upstream.lower_with_host_pipeline``) lowers those to scalar loops
over flattened buffers first (LayoutInference, LowerTileOp, FlattenBuffer), which
would force per-element PPL.  This module therefore runs its own pass list: the
legalisation passes of the CPU pipeline up to, but not including, layout
inference and tile-op lowering, then the host/device split.  The same choice is
made by SophGo's TileLang fork, which comments those three passes out.

The TVM transforms run under a dummy ``c`` target (the tilelang wheel has no
LLVM); the kernel functions are then re-targeted to the tpu target and marked
``DEVICE_KERNEL_LAUNCH`` so tilelang hands them to the tpu codegen.
"""

from __future__ import annotations

from typing import Any

__all__ = ["HINT_OPS", "lower"]

#: TVM target kind the transforms run under (the dummy host and device target).
HOST_KIND = "c"

#: Calls that are performance hints for other targets (GPU register budgets, warp-group
#: allocation, barriers between the threads of a block).  A TPU kernel is one sequential
#: program per core: none of them changes what it computes, so they are dropped, never
#: refused (``T.disable_warp_group_reg_alloc`` and ``T.no_set_max_nreg`` are the same call;
#: ``T.sync_threads`` is ``tvm_storage_sync``).  Layout, swizzle and occupancy annotations
#: (``T.annotate_layout``, ``T.use_swizzle``, ``T.annotate_min_blocks_per_sm``, ...) become
#: block or loop attributes, which the code generator already ignores.
HINT_OPS = frozenset(
    {
        "tl.no_set_max_nreg",
        "tl.set_max_nreg",
        "tl.annotate_producer_reg_dealloc",
        "tl.annotate_consumer_reg_alloc",
        "tl.sync_warp",
        "tl.fence_proxy_async",
        "tirx.tvm_storage_sync",
    }
)


def _drop_hints(func: Any) -> Any:
    """``func`` without the statements that only call :data:`HINT_OPS`."""
    from tvm import tirx

    def post(node: Any) -> Any:
        if isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call):
            op = node.value.op
            if str(getattr(op, "name", "")) in HINT_OPS:
                return tirx.Evaluate(tirx.const(0, "int32"))
        return None

    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.Evaluate"])
    return func if body.same_as(func.body) else func.with_body(body)


def _refuse_thread_indexing(mod: Any) -> None:
    """Refuse a kernel that indexes by thread (``T.get_thread_binding``, the thread variables
    of ``T.Kernel``), by name and before tilelang's launch materialisation, whose own message
    names the dummy ``c`` target the transforms run under.

    A TPU core runs a block as one sequential program: there are no threads whose index could
    select the data a statement works on.  (tilelang's own ``c`` target refuses these kernels
    too.)  The rewrite is a tile-level kernel.
    """
    from tvm import tirx

    from tilelang_tpu.codegen import TpuCodegenError

    for gvar, func in mod.functions.items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        thread_vars: list[Any] = []

        def find(node: Any, thread_vars: list[Any] = thread_vars) -> None:
            if (
                isinstance(node, tirx.Bind)
                and isinstance(node.value, tirx.Call)
                and str(getattr(node.value.op, "name", "")) == "tl.launch_thread_idx"
            ):
                thread_vars.append(node.var)
            elif (
                isinstance(node, tirx.For)
                and node.thread_binding is not None
                and str(node.thread_binding.thread_tag).startswith("threadIdx")
            ):
                thread_vars.append(node.loop_var)

        tirx.stmt_functor.post_order_visit(func.body, find)
        if not thread_vars:
            continue
        uses: list[Any] = []

        def use(node: Any, thread_vars: list[Any] = thread_vars, uses: list[Any] = uses) -> None:
            if isinstance(node, tirx.Var) and any(node.same_as(v) for v in thread_vars):
                uses.append(node)

        tirx.stmt_functor.post_order_visit(func.body, use)
        # (The visitor does not report a binding's own variable, and each node once.)
        if not uses:
            continue
        name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs else gvar.name_hint
        used = sorted({str(u.name) for u in uses})
        raise TpuCodegenError(
            name,
            f"per-thread indexing (thread index {', '.join(used)}: T.get_thread_binding or the threads of T.Kernel)",
            "the kernel body",
            "a TPU core runs each block as one sequential program, with no threads to index by: write the block's work "
            "with tile operators -- T.copy the rows into a tile and compute in T.Parallel over the whole tile, reduce "
            "with T.reduce_sum (a GEMV: y[i] = sum_k A[i, k] * x[k] as T.Parallel(i, k) products, then T.reduce_sum(dim=1)), "
            "or T.gemm",
        )


def _restrict_dynamic_shared(func: Any) -> Any:
    """Re-scope ``shared.dyn`` buffers to ``shared``.

    ``T.alloc_shared`` allocates in ``shared.dyn``, and tilelang's
    ``LowerDeviceKernelLaunch`` (a CUDA notion) allows one such allocation per
    kernel because GPU dynamic shared memory is one block.  TPU tiles all live in
    local memory, which ppl-compile assigns per tensor, so the distinction is
    meaningless here; the static scope lets any number of tiles pass.
    """
    from tvm import ir, tirx

    vmap: dict[Any, Any] = {}

    def visit(node: Any) -> None:
        if isinstance(node, tirx.AllocBuffer) and node.buffer.scope() == "shared.dyn":
            old = node.buffer.data
            vmap[old] = tirx.Var(old.name, ir.PointerType(ir.PrimType(node.buffer.dtype), "shared"))

    tirx.stmt_functor.post_order_visit(func.body, visit)
    if not vmap:
        return func
    return func.with_body(tirx.stmt_functor.substitute(func.body, vmap))


def _map_prim_funcs(mod: Any, fn: Any) -> Any:
    from tvm import tirx

    updated = {gvar: fn(func) for gvar, func in mod.functions.items() if isinstance(func, tirx.PrimFunc)}
    for gvar, func in updated.items():
        mod[gvar] = func
    return mod


def _annotate_declared_params(mod: Any) -> Any:
    """Give each device kernel the attributes :mod:`tilelang_tpu.abi` binds by.

    ``abi.DECLARED_PARAMS_ATTR``: the host function's parameters in declared order,
    each a ``Buffer`` (a tensor parameter) or a ``Var`` (a scalar).  The kernel's
    own parameters are fresh variables, sorted by name, one per buffer its body
    uses; the host passes ``buffer.data`` for each at the call site.  Through that
    call each used declared buffer is re-declared over the kernel parameter it is
    bound to, so that :func:`tilelang_tpu.abi.bind_pointers` can match them by
    identity; unused buffers keep their host data variable (bound to nothing).
    ``abi.KERNEL_NAME_ATTR``: the host function's name, which the runtime knows the
    kernel by (the device symbol has SplitHostDevice's ``_kernel`` suffix).
    ``abi.SHAPE_VARS_ATTR``: the symbolic dimension variables of the declared tensors
    (each distinct variable once, in order of first appearance), each the kernel's own
    copy when the host passes it (the re-declared buffers' shapes use those copies).
    """
    from tvm import ir, tirx

    from tilelang_tpu import abi

    annotated: dict[Any, Any] = {}
    for func in list(mod.functions.values()):
        if not isinstance(func, tirx.PrimFunc) or not len(func.buffer_map):
            continue
        declared = [func.buffer_map.get(p, p) for p in func.params]
        host_name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs else None
        calls: list[Any] = []

        def visit(node: Any, calls: list[Any] = calls) -> None:
            if isinstance(node, tirx.Call) and isinstance(node.op, ir.GlobalVar):
                calls.append(node)

        tirx.stmt_functor.post_order_visit(func.body, visit)
        for call in calls:
            gvar = call.op
            if gvar in annotated or gvar not in mod.functions:
                continue
            kernel = mod[gvar]
            # The host's symbolic dimension variables -> the kernel's copies of them.
            shape_vars = _shape_vars(declared)
            to_kernel = {}
            for var in shape_vars:
                for arg, kernel_param in zip(call.args, kernel.params, strict=False):
                    if isinstance(arg, tirx.Var) and arg.same_as(var):
                        to_kernel[var] = kernel_param
            bound = []
            for param in declared:
                if isinstance(param, tirx.Buffer):
                    for arg, kernel_param in zip(call.args, kernel.params, strict=False):
                        if isinstance(arg, tirx.Var) and arg.same_as(param.data):
                            param = tirx.decl_buffer(
                                [tirx.stmt_functor.substitute(d, to_kernel) for d in param.shape],
                                param.dtype,
                                param.name,
                                data=kernel_param,
                                strides=[tirx.stmt_functor.substitute(s, to_kernel) for s in param.strides],
                                elem_offset=param.elem_offset,
                            )
                            break
                elif isinstance(param, tirx.Var):
                    # A scalar: the host passes its own variable; bind the kernel's copy of it.
                    for arg, kernel_param in zip(call.args, kernel.params, strict=False):
                        if isinstance(arg, tirx.Var) and arg.same_as(param):
                            param = kernel_param
                            break
                bound.append(param)
            kernel = kernel.with_attr(abi.DECLARED_PARAMS_ATTR, bound)
            kernel = kernel.with_attr(abi.SHAPE_VARS_ATTR, [to_kernel.get(v, v) for v in shape_vars])
            if host_name is not None:
                kernel = kernel.with_attr(abi.KERNEL_NAME_ATTR, host_name)
            annotated[gvar] = kernel
    for gvar, kernel in annotated.items():
        mod[gvar] = kernel
    return mod


def _shape_vars(declared: list[Any]) -> list[Any]:
    """The variables in the declared tensors' shapes, each once, in order of first appearance
    (a dim ``M`` or one inside an expression such as ``M * 2``)."""
    from tvm import tirx

    found: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Var) and not any(node.same_as(v) for v in found):
            found.append(node)

    for param in declared:
        if isinstance(param, tirx.Buffer):
            for dim in param.shape:
                tirx.stmt_functor.post_order_visit(tirx.Evaluate(dim), visit)
    return found


#: Every tilelang pass :func:`_passes` calls, with the parameters it always passes: the plugin
#: declares them (``tilecore_tilelang_seams``) and tilecore checks them when the backend loads, so
#: a tilelang release that renames a pass or drops a parameter is a named error, not a TypeError
#: in the middle of a compile.  Parameters used only where tilelang has them are capability
#: checks (:func:`_launch_options`), not declarations.
TILELANG_SEAMS: dict[str, tuple[str, ...]] = {
    "tilelang.transform:MaterializeKernelLaunch": ("lower_thread_binding",),
    "tilelang.transform:LetInline": (),
    "tilelang.transform:AddWrapperForSingleBufStore": (),
    "tilelang.transform:LegalizeNegativeIndex": (),
    "tilelang.transform:InjectAssumes": (),
    "tilelang.transform:Simplify": (),
    "tilelang.transform:IfStmtBinding": (),
    "tilelang.transform:LowerOpaqueBlock": (),
    "tilelang.transform:AnnotateDeviceRegions": (),
    "tilelang.transform:SplitHostDevice": (),
    "tilelang.transform:MakePackedAPI": (),
    "tilelang.transform:LowerDeviceKernelLaunch": (),
    "tvm.tirx.transform:BindTarget": (),
    "tvm.tirx.transform:NarrowDataType": (),
    "tvm.tirx.transform:AnnotateEntryFunc": (),
}


def _launch_options() -> dict[str, Any]:
    """``MaterializeKernelLaunch`` options the installed tilelang knows.

    tilelang 0.1.15 added ``unsupported_annotations`` (refuse ``cluster_dims``, which has no
    meaning on a TPU core); 0.1.14 has no such parameter and keeps the annotation, which the
    codegen never reads.
    """
    from tilecore.upstream import accepts

    if accepts("tilelang.transform:MaterializeKernelLaunch", "unsupported_annotations"):
        return {"unsupported_annotations": ["cluster_dims"]}
    return {}


#: Loop variables ``MaterializeKernelLaunch`` names after the thread axes.
_THREAD_LOOP_VARS = frozenset({"tx", "ty", "tz"})


def _drop_unit_thread_loops(func: Any) -> Any:
    """Remove the one-trip ``tx``/``ty``/``tz`` loops some tilelang releases leave around the grid.

    With ``lower_thread_binding=False``, tilelang 0.1.14 keeps each thread axis as a serial loop of
    extent 1 inside the block loops (0.1.15 emits none).  They change nothing but hide the grid's
    innermost loop from pipelining and the multi-core split, so they go here, whatever the release.
    """
    from tvm import tirx

    def drop(node: Any) -> Any:
        if (
            isinstance(node, tirx.For)
            and node.loop_var.name in _THREAD_LOOP_VARS
            and isinstance(node.extent, tirx.IntImm)
            and node.extent.value == 1
            and isinstance(node.min, tirx.IntImm)
            and node.min.value == 0
        ):
            return tirx.stmt_functor.substitute(node.body, {node.loop_var: tirx.const(0, node.loop_var.dtype)})
        return None

    return func.with_body(tirx.stmt_functor.ir_transform(func.body, None, drop, ["tirx.For"]))


def _fold_infinities(func: Any) -> Any:
    """Fold ``T.infinity(dtype)`` and ``T.infinity(dtype) * c`` into float constants.

    tilelang 0.1.15's frontend writes ``-T.infinity(dtype)`` as the constant ``-inf``; 0.1.14 leaves
    the call times ``-1.0``.  The code generator recognises constants (the identity of a max
    reduction, a fill value), so both spellings become the constant, whatever the release.
    """
    from tvm import tirx

    def fold(node: Any) -> Any:
        if isinstance(node, tirx.Call) and str(getattr(node.op, "name", "")) in ("tl.infinity", "tirx.infinity"):
            return tirx.FloatImm(node.dtype, float("inf"))
        constants = isinstance(node, tirx.Mul) and isinstance(node.a, tirx.FloatImm) and isinstance(node.b, tirx.FloatImm)
        if constants and float("inf") in (abs(node.a.value), abs(node.b.value)) and 0.0 not in (node.a.value, node.b.value):
            return tirx.FloatImm(node.dtype, node.a.value * node.b.value)
        return None

    return func.with_body(tirx.stmt_functor.ir_transform(func.body, None, fold, ["tirx.Call", "tirx.Mul"]))


def _passes(mod: Any, dummy: Any) -> Any:
    import tilelang.transform as tl
    from tvm import tirx

    from tilecore.upstream import should_force_let_inline
    from tilelang_tpu.grid import mark_grid_loops
    from tilelang_tpu.thread_guards import drop_thread_guards

    mod = drop_thread_guards(mod)  # if tx < 128: <tile-level work> (thread_guards.py)
    _refuse_thread_indexing(mod)
    mod = tirx.transform.BindTarget(dummy)(mod)
    # T.Kernel grid -> serial loops over the block indices (a TPU core walks the grid).
    mod = tl.MaterializeKernelLaunch(lower_thread_binding=False, **_launch_options())(mod)
    mod = _map_prim_funcs(mod, _drop_unit_thread_loops)
    mod = _map_prim_funcs(mod, _fold_infinities)
    # Mark those loops now, while they are known for sure: tpu:cores=N splits them over cores.
    mod = mark_grid_loops(mod)
    if should_force_let_inline():
        mod = tl.LetInline()(mod)
    mod = tl.AddWrapperForSingleBufStore()(mod)
    mod = tl.LegalizeNegativeIndex()(mod)
    mod = tl.InjectAssumes()(mod)
    mod = tl.Simplify()(mod)
    mod = tl.IfStmtBinding()(mod)
    mod = tl.Simplify()(mod)
    # Deliberately absent: LayoutInference, LowerTileOp, FlattenBuffer, vectorisation
    # and the GPU-specific passes -- the codegen maps tile ops and N-d buffers itself.
    mod = tl.LowerOpaqueBlock()(mod)
    mod = _map_prim_funcs(mod, _drop_hints)
    mod = tl.Simplify()(mod)
    mod = tirx.transform.NarrowDataType(32)(mod)
    mod = _map_prim_funcs(mod, _restrict_dynamic_shared)
    mod = tirx.transform.AnnotateEntryFunc()(mod)
    mod = tl.AnnotateDeviceRegions()(mod)
    mod = tl.SplitHostDevice()(mod)
    # Before MakePackedAPI erases the host function's buffer map: record, on each
    # kernel, the user's declared parameters (SplitHostDevice sorted the kernel's
    # parameters by name and dropped the unread ones; the ABI binds by declaration).
    mod = _annotate_declared_params(mod)
    mod = tl.MakePackedAPI()(mod)
    mod = tl.Simplify()(mod)
    mod = tl.LowerDeviceKernelLaunch()(mod)
    return mod


def lower(mod: Any, tvm_target: Any) -> Any:
    """Lower a frontend ``IRModule`` for ``tvm_target`` (the tpu target).

    Returns the module with a packed host function and one device function per
    kernel; device functions keep tile-op calls and N-d buffers and carry
    ``calling_conv = DEVICE_KERNEL_LAUNCH`` and ``target = tvm_target``.
    """
    from tilecore.upstream import lower_with_host_pipeline

    return lower_with_host_pipeline(mod, tvm_target, HOST_KIND, vectorize=False, passes=_passes)
