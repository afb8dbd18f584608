"""The tilelang bridge: the ONLY tilecore module that touches tilelang internals.

It connects the registry to an unmodified tilelang through upstream's public
registries first:

* ``register_target_normalizer("tilecore", ...)`` maps declared targets to TVM
  targets (backend-owned ones to ``ext_dev`` with keys ``["tilecore", name]``,
  delegated ones to the upstream kind the backend names);
* ``register_target_detector("tilecore", ...)`` takes part in ``target="auto"``;
* ``register_backend(BackendModule("tilecore", ...))`` owns ``ext_dev`` targets
  keyed ``tilecore`` with a ``PassPipeline`` and ``DeviceCodegen`` that call the
  owning backend's hooks, and one execution backend named ``tilecore``.

and wraps only the points that have no registry in tilelang 0.1.14-0.1.15 (see
docs/architecture.md for the list and why).  Every wrapper falls through to the
original for kernels whose target no tilecore backend owns.  Activation checks
that every seam exists first and refuses, with one clear message, rather than
half-patching an unknown tilelang.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from tilecore.errors import TargetOptionError, TilecoreError
from tilecore.kernel import CompiledKernel, TensorParam, output_indices
from tilecore.launch import Launcher, as_list
from tilecore.registry import Registry
from tilecore.supply import reduce_samples, wall_clock_bench
from tilecore.targets import ResolvedTarget

logger = logging.getLogger("tilecore")

EXECUTION_BACKEND = "tilecore"
TVM_KEY = "tilecore"
SUPPORTED_TILELANG = ((0, 1, 14), (0, 1, 16))  # [min, max)

_lock = threading.Lock()
_installed: Registry | None = None


class BridgeError(TilecoreError):
    """tilelang is not a version whose internals this bridge knows."""


# ----------------------------------------------------------------------------------------
# Version gate
# ----------------------------------------------------------------------------------------


def _parse_version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def check_tilelang() -> None:
    """Refuse unknown tilelang versions and missing seams before patching anything."""
    import tilelang

    version = getattr(tilelang, "__version__", "0")
    low, high = SUPPORTED_TILELANG
    if not low <= _parse_version(version) < high:
        raise BridgeError(
            f"tilecore supports tilelang >={'.'.join(map(str, low))},<{'.'.join(map(str, high))}; found tilelang {version}. "
            f"Install a supported tilelang (pip install 'tilelang>=0.1.15,<0.1.16') or a tilecore release made for {version}."
        )
    from tilelang.cache import _dispatch_map  # noqa: F401
    from tilelang.cache.kernel_cache import KernelCache
    from tilelang.jit.kernel import JITKernel

    expected = {
        JITKernel: ("_create_adapter_from_artifact", "_create_adapter_from_database", "get_profiler", "get_kernel_source", "get_host_source"),
        KernelCache: ("_generate_key", "_load_kernel_from_disk", "_save_kernel_to_disk", "_get_cache_path", "_get_staging_root",
                      "_is_complete_cache_dir", "_verify_cache_dir_integrity", "_get_cache_root"),
    }
    for owner, names in expected.items():
        for name in names:
            if not callable(getattr(owner, name, None)):
                raise BridgeError(f"tilelang {version} has no {owner.__name__}.{name}; this tilecore cannot bridge it. Reinstall tilelang 0.1.15.")
    params = inspect.signature(JITKernel._create_adapter_from_database).parameters
    if "kernel_lib_path" not in params or "device_kernel_source" not in params:
        raise BridgeError(f"tilelang {version} changed JITKernel._create_adapter_from_database; this tilecore cannot bridge it.")


# ----------------------------------------------------------------------------------------
# Targets <-> TVM targets
# ----------------------------------------------------------------------------------------


def builtin_kinds() -> tuple[str, ...]:
    """TVM target kinds tilelang compiles by itself (never claimed by an unknown-target error)."""
    from tvm.target import Target

    return tuple(Target.list_kinds())


def tvm_config(target: ResolvedTarget, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The TVM target config for a resolved target."""
    if target.spec.upstream is not None:
        config = target.spec.upstream.tvm_config(target.options)
        for key, value in (extra or {}).items():
            if key in config and str(config[key]) != str(value):
                raise TargetOptionError(
                    f"target {target} ({target.owner}): TVM attribute {key}={value!r} contradicts {key}={config[key]!r} "
                    f"derived from the target's options; give one of them."
                )
            config[key] = value
        return config
    first = next(iter(target.options.values()), target.name)
    return {
        "kind": "ext_dev",
        "keys": [TVM_KEY, target.name],
        "model": first,
        # libs holds free strings; they land in str(target) and so in tilelang's cache key.
        "libs": [f"tilecore.backend={target.backend}", f"tilecore.dist={target.distribution}=={target.version}"]
        + [f"{k}={v}" for k, v in target.options.items()],
    }


def resolve_tvm(registry: Registry, tvm_target: Any) -> ResolvedTarget | None:
    """The declared target behind a TVM target, or ``None`` if tilecore does not own it."""
    kind = tvm_target.kind.name
    if kind == "ext_dev":
        keys = list(tvm_target.keys)
        if TVM_KEY not in keys or len(keys) < 2:
            return None
        name = keys[keys.index(TVM_KEY) + 1]
        options = {}
        for lib in tvm_target.attrs.get("libs", ()):
            key, _, value = str(lib).partition("=")
            if not key.startswith("tilecore."):
                options[key] = value
        return registry.resolve({"kind": name, **options})
    owner = registry.find_upstream(kind)
    if owner is None:
        return None
    _backend, spec = owner
    raw = {opt.name: str(tvm_target.attrs[opt.name]) for opt in spec.options if opt.name in tvm_target.attrs}
    if spec.upstream is not None and spec.upstream.options_from_attrs is not None:
        raw.update(spec.upstream.options_from_attrs(tvm_target.attrs))
    return registry.resolve({"kind": spec.name, **raw})


def _normalizer(registry: Registry) -> Callable[[Any], Any]:
    def normalize(target: Any) -> Any:
        if not isinstance(target, (str, Mapping)) or target == "auto":
            return None
        if isinstance(target, str) and len(target.split()) > 1:
            return None  # TVM's own string syntax ("<kind> -attr=value"): tilelang parses it
        resolved = registry.resolve(target)
        if resolved is None:
            return None
        from tvm.target import Target

        # Setup is not run here: normalising also serves source-only uses (tilelang.lower) that
        # need no toolchain.  It runs before compiling: in the cache key (delegated and owned
        # targets) and in the owned-target pipeline.
        config = tvm_config(resolved, registry.upstream_extra(target))
        try:
            return Target(config)
        except Exception as err:  # TVM's message names neither the target nor the backend
            raise TargetOptionError(f"target {target!r} ({resolved.owner}): TVM refused the target config {config}: {err}") from err

    return normalize


def _detector(registry: Registry) -> Callable[[], Any]:
    def detect() -> Any:
        resolved = registry.select_auto()
        if resolved is None:
            return None
        from tvm.target import Target

        return Target(tvm_config(resolved))

    return detect


# ----------------------------------------------------------------------------------------
# Lowering and codegen through hooks (BackendModule "tilecore")
# ----------------------------------------------------------------------------------------


def lower_with_host_pipeline(
    mod: Any,
    tvm_target: Any,
    host_kind: str = "c",
    vectorize: bool = False,
    passes: Callable[[Any, Any], Any] | None = None,
) -> Any:
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
    return lowered


def _source_module(source: str, fmt: str) -> Any:
    import tvm_ffi

    return tvm_ffi.get_global_func("runtime.SourceModuleCreate")(source, fmt)


def _backend_module(registry: Registry) -> Any:
    from tilelang.backend import BackendModule, DeviceCodegen, ExecutionBackendSpec, PassPipeline
    from tilelang.backend.host_codegen import STANDARD_HOST_CODEGENS

    def owned(tvm_target: Any) -> ResolvedTarget:
        resolved = resolve_tvm(registry, tvm_target)
        if resolved is None:
            raise TilecoreError(f"tilecore does not own target {tvm_target}")
        return resolved

    def lower(mod: Any, tvm_target: Any) -> Any:
        target = owned(tvm_target)
        registry.setup(target)
        lowered = registry.call(target, "tilecore_lower", mod=mod, tvm_target=tvm_target)
        if lowered is None:
            raise TilecoreError(
                f"target {target} ({target.owner}) has no tilecore_lower hook implementation. "
                f"The backend must implement it, or declare the target with upstream=tilecore.Upstream(kind)."
            )
        return lowered

    def codegen(mod: Any, tvm_target: Any) -> Any:
        target = owned(tvm_target)
        source = registry.call(target, "tilecore_codegen", device_mod=mod, tvm_target=tvm_target)
        if not isinstance(source, str):
            raise TilecoreError(
                f"target {target} ({target.owner}): tilecore_codegen returned {type(source).__name__}; it must return the kernel source text."
            )
        return _source_module(source, target.name)

    def supports(tvm_target: Any) -> bool:
        return TVM_KEY in list(tvm_target.keys)

    return BackendModule(
        name=EXECUTION_BACKEND,
        target_kinds=("ext_dev",),
        supports_target=supports,
        pipelines={"ext_dev": PassPipeline("ext_dev", lower)},
        device_codegens={"ext_dev": DeviceCodegen("ext_dev", build=codegen, build_without_compile=codegen)},
        host_codegens=STANDARD_HOST_CODEGENS,
        execution_backends=(ExecutionBackendSpec(EXECUTION_BACKEND, supports_target=supports),),
    )


# ----------------------------------------------------------------------------------------
# Adapter, disk cache, profiler
# ----------------------------------------------------------------------------------------


def tensor_params(params: list[Any], func: Any) -> tuple[TensorParam, ...]:
    """tilelang KernelParams -> tilecore TensorParams (names from the PrimFunc when known)."""
    names: list[str] = []
    if func is not None and hasattr(func, "buffer_map"):
        names = [str(func.buffer_map[var].name) if var in func.buffer_map else str(var.name) for var in func.params]
    result = []
    for index, param in enumerate(params):
        shape = tuple(str(d.name) if hasattr(d, "name") else int(d) for d in param.shape)
        name = names[index] if index < len(names) else f"arg{index}"
        result.append(TensorParam(name, param.torch_dtype(), shape))
    return tuple(result)


class TilecoreAdapter:
    """What JITKernel holds as ``adapter`` for backend-owned targets.

    It has the attributes tilelang's JIT and disk cache read from adapters:
    ``func``, ``params``, ``result_idx``, ``libpath``, and the source getters.
    """

    def __init__(self, kernel: CompiledKernel, launcher: Launcher, params: list[Any], host_source: str) -> None:
        self.kernel = kernel
        self.launcher = launcher
        self.func = launcher
        self.params = params
        self.result_idx = list(kernel.out_idx)
        self.libpath = getattr(launcher.adapter, "library_path", None)
        self.kernel_global_source = kernel.source
        self._host_source = host_source

    def __call__(self, *args: Any) -> Any:
        return self.launcher(*args)

    def get_kernel_source(self, kernel_only: bool = True) -> str:
        return self.kernel.source

    def get_host_source(self) -> str:
        return self._host_source or getattr(self.launcher.adapter, "host_source", "") or ""


def _make_adapter(registry: Registry, target: ResolvedTarget, kernel: CompiledKernel, params: list[Any], host_source: str) -> TilecoreAdapter:
    adapter = registry.call(target, "tilecore_create_adapter", kernel=kernel)
    if adapter is None:
        raise TilecoreError(f"target {target} ({target.owner}) has no tilecore_create_adapter hook implementation.")
    return TilecoreAdapter(kernel, Launcher(kernel, adapter), params, host_source)


def _read_cached_text(source: Any) -> str:
    """Text of tilelang's ``CachedTextSource`` (inline text or a file path) or of a plain string."""
    if source is None or isinstance(source, str):
        return source or ""
    if getattr(source, "text", None) is not None:
        return source.text
    path = getattr(source, "path", None)
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    return ""


def _kernel_name(func: Any) -> str:
    attrs = getattr(func, "attrs", None)
    if attrs is not None and "global_symbol" in attrs:
        return str(attrs["global_symbol"])
    return "main"


def _cache_class() -> type:
    from tilelang.cache.kernel_cache import KernelCache

    class TilecoreKernelCache(KernelCache):
        """Disk-cache layout of backend-owned kernels: source, params and the adapter's library."""

        execution_backend = EXECUTION_BACKEND
        device_kernel_path = "device_kernel.src"
        host_kernel_path = "host_kernel.src"
        kernel_lib_path = "kernel_lib.bin"

        def _save_so_cubin_to_disk(self, kernel: Any, cache_path: str, verbose: bool = False) -> None:
            src = getattr(kernel.adapter, "libpath", None)
            data = KernelCache._load_binary(src) if src else b""
            KernelCache._safe_write_file(os.path.join(cache_path, self.kernel_lib_path), "wb", lambda f: f.write(data))

    return TilecoreKernelCache


def _owned_target(registry: Registry, kernel: Any) -> ResolvedTarget | None:
    """The tilecore target of a JITKernel, or ``None`` (upstream-only target)."""
    try:
        return resolve_tvm(registry, kernel.target)
    except TilecoreError:
        return None


def _profiler_class() -> type:
    from tilelang.profiler import Profiler

    class TilecoreProfiler(Profiler):
        """tilelang's Profiler with supply, timing and checks routed to the target's backend."""

        tilecore_target: ResolvedTarget
        tilecore_registry: Registry

        def __post_init__(self) -> None:
            self.result_idx = self._legalize_result_idx(self.result_idx)
            supply = self.supply_type.name.lower()
            target, registry = self.tilecore_target, self.tilecore_registry

            def make(param: Any) -> Any:
                tparam = tensor_params([param], None)[0]
                tensor = registry.call(target, "tilecore_supply_tensor", param=tparam, supply=supply)
                if tensor is None:
                    from tilecore.supply import make_tensor

                    tensor = make_tensor(tparam, supply, target.device)
                return tensor

            self.supply = make

        def assert_allclose(self, reference_program: Callable, input_tensors: list | None = None, atol: float = 1e-2, rtol: float = 1e-2, max_mismatched_ratio: float = 0.01) -> None:
            from tilelang.utils.tensor import torch_assert_close

            ins = self._get_inputs() if input_tensors is None else input_tensors
            ref_outs = as_list(reference_program(*ins))
            lib_outs = as_list(self.func(*ins))
            if len(lib_outs) != len(ref_outs):
                raise AssertionError(f"kernel returned {len(lib_outs)} outputs, reference returned {len(ref_outs)}")
            for lhs, rhs in zip(lib_outs, ref_outs, strict=True):
                if lhs is None or rhs is None:
                    continue
                torch_assert_close(lhs.cpu(), rhs.to(lhs.dtype).cpu(), rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio, base_name="tilelang", ref_name="ref")

        def do_bench(self, func: Callable | None = None, warmup: float = 25, rep: float = 100, n_warmup: int = 0, n_repeat: int = 0, input_tensors: list | None = None, backend: str = "event", quantiles: list[float] | None = None, return_mode: str = "mean", dynamic_symbolic_constraints: dict | None = None, device: Any = None, early_stop_baseline: float | None = None) -> Any:
            target, registry = self.tilecore_target, self.tilecore_registry
            bench_target = func if func is not None else self.adapter
            if input_tensors is not None:
                ins = input_tensors
            else:
                ins = self._get_inputs(dynamic_symbolic_constraints=dynamic_symbolic_constraints)
            call = functools.partial(bench_target, *ins)
            result = registry.call(target, "tilecore_bench", fn=call, warmup=warmup, rep=rep, n_warmup=n_warmup, n_repeat=n_repeat, backend=backend)
            if result is None:
                result = wall_clock_bench(call, warmup=warmup, rep=rep, n_warmup=n_warmup, n_repeat=n_repeat)
            if isinstance(result, list):
                return reduce_samples(result, return_mode, quantiles)
            return result

    return TilecoreProfiler


# ----------------------------------------------------------------------------------------
# The stacked @tilelang.jit(...) over @T.prim_func form and grid launch syntax
# ----------------------------------------------------------------------------------------


class PrimFuncKernel:
    """``@tilelang.jit(...)`` applied directly to a ``@T.prim_func``: compiles on first use."""

    def __init__(self, prim_func: Any, compile_args: Mapping[str, Any]) -> None:
        self.prim_func = prim_func
        self._compile_args = {k: v for k, v in compile_args.items() if k != "debug_root_path" and v is not None}
        self._kernel: Any = None
        self._lock = threading.Lock()
        functools.update_wrapper(self, prim_func, assigned=("__doc__",), updated=())

    def compile(self) -> Any:
        if self._kernel is None:
            with self._lock:
                if self._kernel is None:
                    import tilelang

                    self._kernel = tilelang.compile(self.prim_func, **self._compile_args)
        return self._kernel

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.compile()(*args, **kwargs)

    def __getitem__(self, grid: Any) -> Any:
        return self.compile()[grid]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("prim_func",):
            raise AttributeError(name)
        return getattr(self.compile(), name)

    def __repr__(self) -> str:
        return f"<tilecore PrimFuncKernel {_kernel_name(self.prim_func)} {self._compile_args}>"


def _grid_getitem(self: Any, grid: Any) -> Callable[..., Any]:
    """``kernel[grid](*args)``: the launch grid is fixed by ``T.Kernel``; the subscript
    is accepted for the Triton-style call form and validated, then ignored."""
    dims = grid if isinstance(grid, tuple) else (grid,)
    if not dims or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise TypeError(f"kernel[grid]: grid must be a positive int or a tuple of positive ints, got {grid!r}")
    return self


def _wrap_jit(original: Callable[..., Any]) -> Callable[..., Any]:
    from tvm.tirx import PrimFunc

    @functools.wraps(original)
    def jit(func: Any = None, **compile_args: Any) -> Any:
        if isinstance(func, PrimFunc):
            return PrimFuncKernel(func, compile_args)
        if func is not None:
            return original(func, **compile_args)
        decorate = original(**compile_args)

        def decorator(inner: Any) -> Any:
            if isinstance(inner, PrimFunc):
                return PrimFuncKernel(inner, compile_args)
            return decorate(inner)

        return decorator

    jit.__tilecore_original__ = original  # type: ignore[attr-defined]
    return jit


# ----------------------------------------------------------------------------------------
# Installation
# ----------------------------------------------------------------------------------------


def installed() -> Registry | None:
    return _installed


def install(registry: Registry) -> None:
    """Connect ``registry`` to tilelang.  Idempotent; refuses unknown tilelang versions."""
    global _installed
    with _lock:
        if _installed is not None:
            if _installed is not registry:
                raise TilecoreError("tilecore is already bridged to tilelang with another registry")
            return
        check_tilelang()
        _install(registry)
        _installed = registry


def _install(registry: Registry) -> None:
    import tilelang
    from tilelang import cache as tl_cache
    from tilelang.backend import register_backend, register_target_detector, register_target_normalizer
    from tilelang.cache.kernel_cache import KernelCache
    from tilelang.jit.kernel import JITKernel

    registry._builtin_kinds = builtin_kinds
    register_target_normalizer("tilecore", _normalizer(registry), override=True)
    register_target_detector("tilecore", _detector(registry), override=True)
    register_backend(_backend_module(registry))
    tl_cache._dispatch_map[EXECUTION_BACKEND] = _cache_class()()
    profiler_cls = _profiler_class()

    original_artifact = JITKernel._create_adapter_from_artifact
    original_database = JITKernel._create_adapter_from_database
    original_profiler = JITKernel.get_profiler
    original_kernel_source = JITKernel.get_kernel_source
    original_host_source = JITKernel.get_host_source
    original_key = KernelCache._generate_key

    @functools.wraps(original_artifact)
    def create_adapter_from_artifact(self: Any, tilelang_func: Any, out_idx: Any, artifact: Any, pass_configs: Any, compile_metadata: Any) -> Any:
        if self.execution_backend != EXECUTION_BACKEND:
            return original_artifact(self, tilelang_func, out_idx, artifact, pass_configs, compile_metadata)
        target = resolve_tvm(registry, self.target)
        assert target is not None
        params = tensor_params(artifact.params, tilelang_func)
        kernel = CompiledKernel(
            name=_kernel_name(tilelang_func),
            source=artifact.kernel_source,
            params=params,
            out_idx=output_indices(out_idx, len(params)),
            target=target,
            device_mod=artifact.device_mod,
        )
        return _make_adapter(registry, target, kernel, artifact.params, str(artifact.host_mod))

    @functools.wraps(original_database)
    def create_adapter_from_database(self: Any, params: Any, result_idx: Any, target: Any, func_or_mod: Any, host_kernel_source: Any, device_kernel_source: Any, kernel_lib_path: str, pass_configs: Any = None, compile_flags: Any = None) -> Any:
        if self.execution_backend != EXECUTION_BACKEND:
            return original_database(self, params, result_idx, target, func_or_mod, host_kernel_source, device_kernel_source, kernel_lib_path, pass_configs, compile_flags)
        resolved = resolve_tvm(registry, self.target)
        assert resolved is not None
        registry.setup(resolved)
        tparams = tensor_params(params, func_or_mod)
        library = kernel_lib_path if kernel_lib_path and os.path.getsize(kernel_lib_path) > 0 else None
        kernel = CompiledKernel(
            name=_kernel_name(func_or_mod),
            source=_read_cached_text(device_kernel_source),
            params=tparams,
            out_idx=output_indices(result_idx, len(tparams)),
            target=resolved,
            library_path=library,
        )
        return _make_adapter(registry, resolved, kernel, params, _read_cached_text(host_kernel_source))

    @functools.wraps(original_profiler)
    def get_profiler(self: Any, tensor_supply_type: Any = None) -> Any:
        from tilelang.profiler import TensorSupplyType

        supply = TensorSupplyType.Auto if tensor_supply_type is None else tensor_supply_type
        target = _owned_target(registry, self)
        if target is None:
            return original_profiler(self, supply)
        profiler = profiler_cls.__new__(profiler_cls)
        profiler.tilecore_target = target
        profiler.tilecore_registry = registry
        profiler.__init__(self.params, self.out_idx, supply)
        return profiler.with_default_adapter(self.adapter)

    @functools.wraps(original_kernel_source)
    def get_kernel_source(self: Any, kernel_only: bool = True) -> str:
        if self.execution_backend == EXECUTION_BACKEND:
            return self.adapter.get_kernel_source(kernel_only=kernel_only)
        return original_kernel_source(self, kernel_only)

    @functools.wraps(original_host_source)
    def get_host_source(self: Any) -> str:
        if self.execution_backend == EXECUTION_BACKEND:
            return self.adapter.get_host_source()
        return original_host_source(self)

    @functools.wraps(original_key)
    def generate_key(self: Any, *args: Any, **kwargs: Any) -> str:
        key = original_key(self, *args, **kwargs)
        salt = cache_salt(registry, kwargs.get("target"))
        if salt is None:
            return key
        return hashlib.sha256(f"{key}|{salt}".encode()).hexdigest()

    JITKernel._create_adapter_from_artifact = create_adapter_from_artifact
    JITKernel._create_adapter_from_database = create_adapter_from_database
    JITKernel.get_profiler = get_profiler
    JITKernel.get_kernel_source = get_kernel_source
    JITKernel.get_host_source = get_host_source
    JITKernel.__getitem__ = _grid_getitem
    KernelCache._generate_key = generate_key
    _hook_remote_tier(registry, KernelCache)
    tilelang.jit = _wrap_jit(tilelang.jit)


# ----------------------------------------------------------------------------------------
# Remote cache tier (tilecore.remote): the two KernelCache wrappers that connect it.
# All logic lives in tilecore.remote; these only translate tilelang's cache layout.
# ----------------------------------------------------------------------------------------


def _cache_versions(registry: Registry, tvm_target: Any) -> dict[str, str]:
    """Producer identity a remote entry must match (tilecore's own version is added by tilecore.remote)."""
    import tilelang

    try:
        target = resolve_tvm(registry, tvm_target)
    except TilecoreError:
        target = None
    backend = f"{target.distribution}=={target.version}" if target is not None else "tilelang"
    return {"tilelang": str(tilelang.__version__), "backend": backend}


def _hook_remote_tier(registry: Registry, KernelCache: Any) -> None:
    """Local miss -> ``remote.lookup_into`` before tilelang's disk load; a freshly saved
    entry -> ``remote.publish_async``.  Both are no-ops unless a remote cache is configured."""
    from tilecore import remote

    original_load = KernelCache._load_kernel_from_disk
    original_save = KernelCache._save_kernel_to_disk

    @functools.wraps(original_load)
    def load_kernel_from_disk(self: Any, key: str, backend_context: Any, *args: Any, **kwargs: Any) -> Any:
        if remote.enabled():
            entry = self._get_cache_path(key)
            if not os.path.isdir(entry):
                remote.lookup_into(entry, key, _cache_versions(registry, backend_context.target), staging_dir=self._get_staging_root())
        return original_load(self, key, backend_context, *args, **kwargs)

    @functools.wraps(original_save)
    def save_kernel_to_disk(self: Any, key: str, kernel: Any, *args: Any, **kwargs: Any) -> Any:
        result = original_save(self, key, kernel, *args, **kwargs)
        if remote.enabled():
            entry = self._get_cache_path(key)
            if self._is_complete_cache_dir(entry):
                remote.publish_async(entry, key, _cache_versions(registry, kernel.target), verify=self._verify_cache_dir_integrity)
        return result

    KernelCache._load_kernel_from_disk = load_kernel_from_disk
    KernelCache._save_kernel_to_disk = save_kernel_to_disk


def local_cache_dir() -> str:
    """The directory holding tilelang's kernel-cache entries (one sub-directory per key)."""
    from tilelang.cache.kernel_cache import KernelCache

    return str(KernelCache._get_cache_root())


def cache_salt(registry: Registry, tvm_target: Any) -> str | None:
    """Backend identity mixed into tilelang's cache key: distribution, version and toolchain fingerprint."""
    if tvm_target is None or isinstance(tvm_target, str):
        return None
    try:
        target = resolve_tvm(registry, tvm_target)
    except TilecoreError:
        return None
    if target is None:
        return None
    toolchain = registry.setup(target)
    fingerprint = toolchain.fingerprint if toolchain is not None else ""
    return f"tilecore:{target.distribution}=={target.version};{target};{fingerprint}"


def c_source(device_mod: Any, tvm_target: Any) -> str:
    """Run tilelang's C device codegen (``target.build.tilelang_c``) and return its text."""
    import tvm_ffi

    return tvm_ffi.get_global_func("target.build.tilelang_c")(device_mod, tvm_target).inspect_source()


def template_include_dir() -> str:
    from tilelang.env import TILELANG_TEMPLATE_PATH

    return os.path.normpath(TILELANG_TEMPLATE_PATH)
