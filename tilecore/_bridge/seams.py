"""Every tilelang name tilecore depends on, in one declarative table.

A :class:`Seam` names an owner (``"module"`` or ``"module:Class"``), an attribute,
what tilecore does with it and why.  The gate (:mod:`tilecore._bridge.gate`)
checks every row before anything is patched; :mod:`tilecore._bridge.patches`
applies the rows that have a ``wrapper`` and reverts exactly those.  Rows
without a wrapper are names tilecore only reads or calls; they are checked so a
tilelang release that renames one fails at activation with one message instead
of in the middle of a compile.

Wrappers are given as ``"module:function"`` inside :mod:`tilecore._bridge`, so
this table imports nothing.  ``proposal`` names the note in docs/upstream/ that
describes the public tilelang API which would retire the row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SeamKind = Literal["attribute", "item", "register", "global"]

#: The public API each note of docs/upstream/ adds, which retires that note's rows (``Seam.retired_by``).
RETIRED_BY = {
    "adapter-factory.md": "tilelang.backend:ExecutionBackendSpec.adapter_factory",
    "source-getters.md": "tilelang.jit.kernel:ADAPTER_SOURCE_GETTERS",
    "cache-key-salt.md": "tilelang.cache.kernel_cache:register_cache_key_salt",
    "cache-tiers.md": "tilelang.cache.kernel_cache:register_cache_tier",
    "profiler-hooks.md": "tilelang.profiler:register_profiler_hooks",
    "autotune-runners.md": "tilelang.autotuner.tuner:register_autotune_runner",
}


@dataclass(frozen=True, slots=True)
class Seam:
    """One tilelang name tilecore patches, registers into, reads or calls.

    ``kind``:

    * ``"attribute"``: ``owner.attribute``; with a wrapper, replaced by
      ``wrapper(registry, original)`` and restored on uninstall.  ``adds``: tilelang
      does not define it (the gate requires it to be absent).
    * ``"item"``: ``owner[attribute]`` of a dict; with a wrapper, set to
      ``wrapper(registry, previous)`` and restored (or removed) on uninstall.
    * ``"register"``: a public registration function ``owner.attribute``;
      ``wrapper(registry)`` calls it, and uninstall restores the private
      ``tables`` it writes to (tilelang has no ``unregister``).
    * ``"global"``: a TVM global function called by name (``attribute``).

    ``params``: parameter names the wrapper or the caller relies on.

    ``retired_by``: the public tilelang API (``"module:name"``) that replaces the
    row once tilelang has it; unless given, a ``register`` row's ``unregister_...``
    function, else the API its ``proposal`` adds (:data:`RETIRED_BY`).  When the gate finds it, the
    private name is neither checked nor patched; ``public_wrapper``
    (``"module:function"``, called with the registry, returning an undo
    function) registers through the public API instead, if anything must be
    registered at all.  A ``register`` row without one runs its wrapper (the
    registration function is public already) and is undone by its
    ``unregister_...`` function.
    """

    owner: str
    attribute: str
    why: str
    wrapper: str | None = None
    kind: SeamKind = "attribute"
    params: tuple[str, ...] = ()
    adds: bool = False
    tables: tuple[str, ...] = ()
    proposal: str = ""
    retired_by: str = ""
    public_wrapper: str | None = None

    def __post_init__(self) -> None:
        if not self.retired_by:  # derived: a registration's unregister function, else its proposal's API
            retired_by = f"{self.owner}:un{self.attribute}" if self.kind == "register" else RETIRED_BY.get(self.proposal, "")
            object.__setattr__(self, "retired_by", retired_by)

    @property
    def name(self) -> str:
        if self.kind == "global":
            return f"TVM global {self.attribute!r}"
        if self.kind == "item":
            return f"{self.owner}[{self.attribute!r}]"
        return f"{self.owner}.{self.attribute}"

    @property
    def patched(self) -> bool:
        return self.wrapper is not None


_JIT = "tilelang.jit.kernel:JITKernel"
_CACHE = "tilelang.cache.kernel_cache:KernelCache"
_PROFILER = "tilelang.profiler:Profiler"
_TUNER = "tilelang.autotuner.tuner:AutoTuner"

SEAMS: tuple[Seam, ...] = (
    # -- public registries ---------------------------------------------------------------
    Seam(
        "tilelang.backend",
        "register_target_normalizer",
        "declared target names -> TVM targets",
        wrapper="tvm_targets:register_normalizer",
        kind="register",
        tables=("tilelang.backend.target:_TARGET_NORMALIZERS",),
        proposal="entry-points.md",
        public_wrapper="tvm_targets:register_normalizer_public",
    ),
    Seam(
        "tilelang.backend",
        "register_target_detector",
        'target="auto" among declared targets',
        wrapper="tvm_targets:register_detector",
        kind="register",
        tables=("tilelang.backend.target:_TARGET_DETECTORS",),
        proposal="entry-points.md",
    ),
    Seam(
        "tilelang.backend",
        "register_backend",
        "lowering and device codegen of backend-owned targets through hooks",
        wrapper="backend_module:register",
        kind="register",
        tables=("tilelang.backend.module:_BACKENDS", "tilelang.backend.module:_TARGET_KIND_INDEX"),
        proposal="entry-points.md",
    ),
    Seam("tilelang.backend", "BackendModule", "the backend manifest tilecore registers"),
    Seam("tilelang.backend", "PassPipeline", "lowering hook of the manifest"),
    Seam("tilelang.backend", "DeviceCodegen", "device codegen hook of the manifest"),
    Seam("tilelang.backend", "ExecutionBackendSpec", "the 'tilecore' execution backend of the manifest"),
    Seam("tilelang.backend.host_codegen", "STANDARD_HOST_CODEGENS", "host codegen of backend-owned targets"),
    Seam("tvm_ffi", "runtime.SourceModuleCreate", "device codegen must return a runtime.Module holding the source", kind="global"),
    # -- execution backend: adapters -----------------------------------------------------
    Seam(
        "tilelang.cache:_dispatch_map",
        "tilecore",
        "an unknown execution backend has no cache layout and is refused before compiling",
        wrapper="kernel_cache:kernel_cache",
        kind="item",
        proposal="adapter-factory.md",
    ),
    Seam(
        _JIT,
        "_create_adapter_from_artifact",
        "hard-coded if-chain over tilelang's own adapters after a compile",
        wrapper="jit_kernel:wrap_create_adapter_from_artifact",
        params=("tilelang_func", "out_idx", "artifact", "pass_configs", "compile_metadata"),
        proposal="adapter-factory.md",
    ),
    Seam(
        _JIT,
        "_create_adapter_from_database",
        "the same if-chain on a disk-cache hit (else every hit is deleted and recompiled)",
        wrapper="jit_kernel:wrap_create_adapter_from_database",
        params=("params", "result_idx", "target", "func_or_mod", "host_kernel_source", "device_kernel_source", "kernel_lib_path"),
        proposal="adapter-factory.md",
    ),
    Seam(
        _JIT,
        "get_kernel_source",
        "allow-list of adapter names; a disk-loaded kernel has no artifact",
        wrapper="jit_kernel:wrap_get_kernel_source",
        params=("kernel_only",),
        proposal="source-getters.md",
    ),
    Seam(_JIT, "get_host_source", "allow-list of adapter names", wrapper="jit_kernel:wrap_get_host_source", proposal="source-getters.md"),
    # -- disk cache ------------------------------------------------------------------------
    Seam(
        _CACHE,
        "_generate_key",
        "the key has no field for the backend's identity and toolchain",
        wrapper="cache_key:wrap_generate_key",
        proposal="cache-key-salt.md",
        public_wrapper="cache_key:register_salt",
    ),
    Seam(
        _CACHE,
        "_load_kernel_from_disk",
        "further cache tiers on a local miss",
        wrapper="cache_tiers:wrap_load_kernel_from_disk",
        params=("key",),
        proposal="cache-tiers.md",
        public_wrapper="cache_tiers:register_tiers",
    ),
    Seam(
        _CACHE,
        "_save_kernel_to_disk",
        "further cache tiers after a local save",
        wrapper="cache_tiers:wrap_save_kernel_to_disk",
        params=("key", "kernel"),
        proposal="cache-tiers.md",
    ),
    Seam(_CACHE, "_get_cache_path", "directory of a key's entry (for cache tiers)", params=("key",)),
    Seam(_CACHE, "_get_staging_root", "where cache tiers stage an entry before renaming it into place"),
    Seam(_CACHE, "_get_cache_root", "the entries' directory, for `tilecore cache` on the local tier"),
    Seam(_CACHE, "_is_complete_cache_dir", "a tier publishes only complete entries", params=("cache_path",)),
    Seam(_CACHE, "_verify_cache_dir_integrity", "a tier publishes only entries that pass tilelang's own check", params=("cache_path",)),
    Seam(_CACHE, "_save_so_cubin_to_disk", "overridden by the tilecore cache layout", params=("kernel", "cache_path")),
    Seam(_CACHE, "_load_binary", "reads the adapter's library when saving an entry", params=("path",)),
    Seam(_CACHE, "_safe_write_file", "writes the library into the entry atomically", params=("path", "mode", "operation")),
    Seam(
        _CACHE,
        "_set_adapter_cache_path",
        "overridden: the adapter learns its entry, removed if the kernel faults",
        params=("kernel", "cache_path"),
    ),
    Seam("tilelang:env", "TILELANG_CACHE_DIR", "named when tilelang's cache cannot be written (kernel_cache:cache_dir_error)"),
    Seam(_CACHE, "_memory_cache", "in-memory entries: a kernel that faulted is removed (kernel_cache:evict_faulted_kernel)"),
    Seam(_CACHE, "_lock", "guards _memory_cache"),
    # -- profiler --------------------------------------------------------------------------
    Seam(
        _JIT,
        "get_profiler",
        "upstream tensor supply and timers know only tilelang's own devices",
        wrapper="profiler:wrap_get_profiler",
        params=("tensor_supply_type",),
        proposal="profiler-hooks.md",
        public_wrapper="profiler:register_hooks",
    ),
    Seam(_PROFILER, "__post_init__", "overridden: tensor supply from the backend", proposal="profiler-hooks.md"),
    Seam(_PROFILER, "_legalize_result_idx", "called by the overriding __post_init__", params=("result_idx",), proposal="profiler-hooks.md"),
    Seam(
        _PROFILER,
        "_get_inputs",
        "inputs for assert_allclose and do_bench",
        params=("dynamic_symbolic_constraints",),
        proposal="profiler-hooks.md",
    ),
    Seam(_PROFILER, "with_default_adapter", "binds the kernel's adapter", params=("adapter",), proposal="profiler-hooks.md"),
    Seam(
        _PROFILER,
        "assert_allclose",
        "overridden: no calls into upstream's device synchronisation",
        params=("reference_program", "input_tensors", "atol", "rtol"),
        proposal="profiler-hooks.md",
    ),
    Seam(
        _PROFILER,
        "do_bench",
        "overridden: the backend's timer",
        params=("func", "warmup", "rep", "n_warmup", "n_repeat", "input_tensors", "backend", "quantiles", "return_mode"),
        proposal="profiler-hooks.md",
    ),
    Seam("tilelang.profiler", "TensorSupplyType", "supply kinds of get_profiler"),
    Seam(
        "tilelang.utils.tensor",
        "torch_assert_close",
        "the comparison assert_allclose uses",
        params=("rtol", "atol", "max_mismatched_ratio", "base_name", "ref_name"),
        proposal="profiler-hooks.md",
    ),
    # -- call forms (every target) -----------------------------------------------------------
    Seam(
        "tilelang",
        "jit",
        "the stacked @tilelang.jit over @T.prim_func form raises TypeError",
        wrapper="call_forms:wrap_jit",
        proposal="stacked-jit.md",
        retired_by="tilelang.jit:PrimFuncJIT",
    ),
    Seam(
        _JIT,
        "__getitem__",
        "kernel[grid](...) call form",
        wrapper="call_forms:add_grid_getitem",
        adds=True,
        proposal="stacked-jit.md",
        retired_by=f"{_JIT}.__getitem__",
    ),
    # -- autotuning (tilecore.executor) ------------------------------------------------------
    Seam(
        _TUNER,
        "run",
        "the sweep runs in a thread pool of this process; an executor (a Ray cluster) may run it instead",
        wrapper="tuner:wrap_run",
        params=("warmup", "rep", "timeout", "use_pipeline", "enable_grouped_compile", "benchmark_multi_gpu"),
        proposal="autotune-runners.md",
        public_wrapper="tuner:register_public",
    ),
    Seam(_TUNER, "_ensure_jit_functions", "the elaborate function of a sweep (decorator mode sets it)"),
    Seam(_TUNER, "_merge_pass_configs_into_compile_args", "a config's compile arguments", params=("per_config_pass_configs",)),
    Seam(
        _TUNER,
        "_benchmark_target",
        "check and timing of one candidate on a worker, as tilelang's tuner does it",
        params=("jit_kernel", "warmup", "rep", "early_stop_factor", "benchmark_state"),
    ),
    Seam("tilelang.autotuner.tuner", "_BenchmarkWorkerState", "the benchmark state _benchmark_target takes"),
    Seam("tilelang.autotuner.tuner", "_PASS_CONFIGS_KEY", "how a config's pass_configs reach the elaborate function"),
    Seam("tilelang.autotuner.tuner", "_RESERVED_CONFIG_KEYS", "config keys that are not kernel parameters"),
    Seam("tilelang.autotuner.param", "AutotuneResult", "the result object a sweep returns"),
    # -- helpers backends reuse (tilecore.upstream) -----------------------------------------
    Seam("tilelang.cpu.pipeline", "CPUPassPipelineBody", "portable lowering of lower_with_host_pipeline", proposal="helpers.md"),
    Seam("tvm_ffi", "target.build.tilelang_c", "C device codegen of c_source", kind="global", proposal="helpers.md"),
    Seam("tilelang.env", "TILELANG_TEMPLATE_PATH", "tl_templates headers of template_include_dir", proposal="helpers.md"),
    Seam(
        "tilelang.backend.target",
        "determine_target",
        "target resolution as tilelang.compile does it",
        params=("target", "return_object"),
        proposal="helpers.md",
    ),
    Seam(
        "tilelang.backend.pass_pipeline.pipeline_utils",
        "should_force_let_inline",
        "LetInline policy for backends' own pass lists",
        proposal="helpers.md",
    ),
)
