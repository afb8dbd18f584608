"""Pieces of tilelang's internals that backends reuse (exposed as :mod:`tilecore.upstream`).

Each looks up tilelang names listed in :data:`tilecore._bridge.seams.SEAMS`, so the
gate checks them together with the patched seams.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tvm.ir import IRModule
    from tvm.target import Target

#: TVM global of tilelang's C device codegen.
C_CODEGEN_GLOBAL = "target.build.tilelang_c"


def lower_with_host_pipeline(
    mod: IRModule,
    tvm_target: Target,
    host_kind: str = "c",
    vectorize: bool = False,
    passes: Callable[[IRModule, Target], IRModule] | None = None,
) -> IRModule:
    """Run tilelang's CPU pass pipeline (or ``passes(mod, dummy_target)``, a backend's own
    pass list) under a dummy ``host_kind`` target, then mark the kernel functions as
    device functions of ``tvm_target``.

    This is the standard lowering for a backend whose tile ops are expressed
    with upstream's portable (CPU) lowering and whose codegen walks the
    resulting loops: the host/device split then treats the kernels as device
    code for the backend's target.
    """
    from tilelang.cpu.pipeline import CPUPassPipelineBody
    from tvm import tirx, transform
    from tvm.ir import CallingConv
    from tvm.target import Target

    host = Target(host_kind)
    dummy = Target(host_kind, host)
    current = transform.PassContext.current()
    config = dict(current.config)
    if not vectorize:
        # Vector types (float4, ...) are a CPU codegen detail a device codegen rarely wants,
        # and the C codegen cannot express every vectorised op (max, casts) anyway.
        config["tirx.disable_vectorize"] = True
    with transform.PassContext(opt_level=current.opt_level, config=config, instruments=list(current.instruments)), dummy:
        lowered = (passes or CPUPassPipelineBody)(mod, dummy)
    updated = {}
    for gvar, func in lowered.functions.items():
        if not isinstance(func, tirx.PrimFunc) or func.attrs is None:
            continue
        attrs = func.attrs
        is_packed = "calling_conv" in attrs and attrs["calling_conv"] == CallingConv.C_PACKED_FUNC
        if "target" in attrs and attrs["target"].kind.name == host_kind and not is_packed:
            func = func.with_attr("calling_conv", CallingConv.DEVICE_KERNEL_LAUNCH)
            updated[gvar] = func.with_attr("target", Target(tvm_target, host))
    for gvar, func in updated.items():
        lowered[gvar] = func
    return bind_kernel_params_in_declared_order(lowered)


def bind_kernel_params_in_declared_order(mod: Any) -> Any:
    """Make each device kernel take the host function's tensors in declared order.

    tilelang's SplitHostDevice gives a kernel its own parameter list: the data
    pointers its body uses, *sorted by name*, without the unused ones.  A backend
    runtime calls the kernel with the tensors the user declared, in declared order;
    this rewrites every kernel called from a packed host function to take exactly
    those pointers (unused ones included) and the host call to pass them.  The
    host's data variables are traced to their argument index through MakePackedAPI's
    ``tvm_struct_get(args, i, ...)`` bindings.  Kernels whose host has non-tensor
    parameters are left as they are.
    """
    from tvm import ir, tirx

    rewritten: dict[Any, Any] = {}
    for hvar, host in list(mod.functions.items()):
        if not isinstance(host, tirx.PrimFunc) or len(host.params) < 2:
            continue
        args_var = host.params[1]
        values: dict[Any, Any] = {}

        def record(node: Any, values: dict[Any, Any] = values) -> None:
            if isinstance(node, (getattr(tirx, "Bind", ()), getattr(tirx, "LetStmt", ()))):
                bound: Any = node  # tvm is untyped; the isinstance above would narrow it to object
                values[bound.var] = bound.value

        tirx.stmt_functor.post_order_visit(host.body, record)

        def struct_get(value: Any, base: Any, field: int | None) -> Any:
            found: list[Any] = []

            def visit(node: Any) -> None:
                is_get = isinstance(node, tirx.Call) and getattr(node.op, "name", "") == "tirx.tvm_struct_get"
                if is_get and node.args[0].same_as(base) and (field is None or int(node.args[2]) == field):
                    found.append(node)

            tirx.stmt_functor.post_order_visit(tirx.Evaluate(value), visit)
            return found[0] if found else None

        index_of: dict[Any, int] = {}
        for var, value in values.items():
            if "handle" not in str(var.dtype) and not isinstance(var.type_annotation, ir.PointerType):
                continue
            handle_get = None
            for handle in values:
                handle_get = struct_get(value, handle, 1)  # kArrData of a DLTensor handle
                if handle_get is not None:
                    arg_get = struct_get(values[handle], args_var, None)
                    if arg_get is not None:
                        index_of[var] = int(arg_get.args[1])
                    break
        count = 1 + max(index_of.values(), default=-1)
        by_index = {i: v for v, i in index_of.items()}
        if not by_index or sorted(by_index) != list(range(count)):
            continue
        calls: list[Any] = []
        tirx.stmt_functor.post_order_visit(
            host.body, lambda n, calls=calls: calls.append(n) if isinstance(n, tirx.Call) and isinstance(n.op, ir.GlobalVar) else None
        )
        for call in calls:
            kernel = mod.functions.get(call.op)
            if call.op in rewritten or not isinstance(kernel, tirx.PrimFunc):
                continue
            if len(call.args) != len(kernel.params) or not all(isinstance(a, tirx.Var) and a in index_of for a in call.args):
                continue
            slot = {index_of[a]: p for a, p in zip(call.args, kernel.params, strict=True)}
            # An unused slot takes the host's own data variable (the declared buffer's).
            params = [slot[i] if i in slot else by_index[i] for i in range(count)]
            rewritten[call.op] = (
                tirx.PrimFunc(params, kernel.body, kernel.ret_type, kernel.buffer_map, kernel.attrs),
                [by_index[i] for i in range(count)],
            )
        if not rewritten:
            continue

        def recall(node: Any) -> Any:
            if isinstance(node.op, ir.GlobalVar) and node.op in rewritten:
                return tirx.Call(node.dtype, node.op, rewritten[node.op][1])
            return None

        mod[hvar] = host.with_body(tirx.stmt_functor.ir_transform(host.body, None, recall, ["tirx.Call"]))
    for gvar, (kernel, _) in rewritten.items():
        mod[gvar] = kernel
    return mod


def c_source(device_mod: IRModule, tvm_target: Target) -> str:
    """Run tilelang's C device codegen (``target.build.tilelang_c``) and return its text."""
    import tvm_ffi

    return str(tvm_ffi.get_global_func(C_CODEGEN_GLOBAL)(device_mod, tvm_target).inspect_source())


def template_include_dir() -> str:
    """Directory holding tilelang's ``tl_templates`` headers."""
    from tilelang.env import TILELANG_TEMPLATE_PATH

    return os.path.normpath(str(TILELANG_TEMPLATE_PATH))


def should_force_let_inline() -> bool:
    """Whether tilelang's pipelines inline every ``let`` (its ``LetInline`` pass policy)."""
    from tilelang.backend.pass_pipeline.pipeline_utils import should_force_let_inline as policy

    return bool(policy())


def determine_target(target: object) -> Target:
    """The TVM target ``tilelang.compile(..., target=target)`` would use (registered normalizers included)."""
    from tilelang.backend.target import determine_target as determine

    return determine(target, return_object=True)


def internal(path: str) -> Any:
    """A tilelang name (``"module:attribute"``) a backend needs that has no public home yet.

    The name is the backend's, not the core's: a backend that delegates to one of
    tilelang's device kinds reads that kind's own constants.  A tilelang release that
    moves the name fails here with one :class:`~tilecore._bridge.gate.BridgeError`
    naming it and the supported range, instead of an ``ImportError`` deep in a setup.
    """
    from tilecore._bridge.gate import BridgeError, resolve, tilelang_version
    from tilecore._version import TILELANG_REQUIREMENT

    module, separator, attribute = path.partition(":")
    if not (module == "tilelang" or module.startswith("tilelang.")) or not separator or not attribute:
        raise ValueError(f"internal() takes 'tilelang.<module>:<attribute>', got {path!r}")
    try:
        return resolve(path)
    except (ImportError, AttributeError) as err:
        raise BridgeError(
            f"tilelang {tilelang_version()} has no {path} ({type(err).__name__}: {err}), which the backend relies on. "
            f"Install a supported tilelang (pip install 'tilelang{TILELANG_REQUIREMENT}')."
        ) from err
