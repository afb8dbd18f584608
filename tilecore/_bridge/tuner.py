"""tilelang's autotuner handed to another executor: ``AutoTuner.run`` behind a registration point.

``AutoTuner.run`` compiles every config in a thread pool of this process and benchmarks in
its threads.  The wrapper gives each registered :class:`TuneRunner` (:func:`add_runner`) a
:class:`TuneJob` first; a runner that takes the job returns tilelang's ``AutotuneResult``,
and with no runner (or none taking it) the original runs unchanged.  This module knows no
executor: activation registers the one ``TILECORE_EXECUTOR`` names, and
``tilecore.executor.configure`` its own.

A job exposes the sweep as data that crosses a process boundary: each candidate is the
elaborated PrimFunc with its compile arguments, pickled (bytes that unpickle after
``import tilelang``, which puts tilelang's vendored ``tvm`` on the path); the profile
arguments are cloudpickled (``ref_prog`` / ``supply_prog`` are user code).  The worker side
is :func:`compile_candidate` and :func:`benchmark_candidate`; the best kernel is then loaded
on the driver by :meth:`TuneJob.finish` through the ordinary compile path, so it is a cache
hit when a worker published it.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import pickle
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tilecore.errors import ToolchainError

if TYPE_CHECKING:
    from tilecore._registry import Registry


class TuneRunner(Protocol):
    """Something that may run an autotuning sweep instead of tilelang's thread pool."""

    def run(self, job: TuneJob) -> Any | None:
        """tilelang's ``AutotuneResult`` for ``job``, or ``None`` to leave it to the next runner / tilelang."""
        ...


_runners: list[TuneRunner] = []
_runners_lock = threading.Lock()


def add_runner(runner: TuneRunner, first: bool = False) -> None:
    """Offer every autotuning sweep to ``runner`` (``first``: before the runners already added)."""
    with _runners_lock:
        if runner in _runners:
            _runners.remove(runner)
        _runners.insert(0 if first else len(_runners), runner)


def remove_runner(runner: TuneRunner) -> None:
    with _runners_lock:
        if runner in _runners:
            _runners.remove(runner)


@dataclass(frozen=True)
class Candidate:
    """One config of a sweep as data: ``program`` = pickled ``(PrimFunc, CompileArgs)``."""

    index: int
    config: dict[str, Any]
    program: bytes
    digest: str  # sha256 of the candidate's TIR (script with metadata) and compile arguments


class TuneJob:
    """One call of ``AutoTuner.run``: the tuner, its arguments and the original method."""

    def __init__(self, registry: Registry, tuner: Any, local: Callable[[], Any], options: dict[str, Any]) -> None:
        self._registry, self._tuner, self._local = registry, tuner, local
        #: ``run``'s arguments by name, defaults applied (``warmup``, ``rep``, ``timeout``, ...).
        self.options = options
        self._candidates: list[Candidate] | None = None
        self._programs: dict[int, tuple[Any, Any]] = {}

    # -- the local path ---------------------------------------------------------------------
    def run_local(self) -> Any:
        """tilelang's own sweep (the thread pool of this process)."""
        return self._local()

    # -- what the job is --------------------------------------------------------------------
    @property
    def target(self) -> str:
        """The target as the user named it when tilecore owns it (``democpu``), else TVM's text."""
        tvm_target = self._tuner.compile_args.target
        from tilecore._bridge.tvm_targets import resolve_tvm

        try:
            resolved = resolve_tvm(self._registry, tvm_target)
        except Exception:
            resolved = None
        return str(resolved) if resolved is not None else str(getattr(tvm_target, "kind", tvm_target))

    @property
    def target_name(self) -> str:
        """The target's name without options (for placement resources)."""
        return self.target.split(":", 1)[0].split(" ", 1)[0]

    def why_local(self) -> str | None:
        """Why this sweep must run in tilelang's own pool, or ``None`` when it can be shipped."""
        opts, profile = self.options, self._tuner.profile_args
        if opts.get("enable_grouped_compile") or opts.get("benchmark_multi_gpu"):
            return "grouped compilation and multi-GPU benchmarking run only in tilelang's own tuner"
        if profile.manual_check_prog is not None:
            return "manual_check_prog is not supported by the executor"
        if self._tuner.compile_args.execution_backend == "torch":
            return "the torch execution backend keeps no cache entry to share"
        if self._tunables_given():
            return "the tunable parameters were given by the caller (no sweep)"
        return None

    def _tunables_given(self) -> bool:
        """tilelang's own shortcut in ``run``: tunable parameters passed explicitly compile directly."""
        if self._tuner._kernel_parameters is None:
            return False
        configs = self._configs()
        if not configs:
            return False
        key_args, key_kwargs = self._tuner._kernel_parameters
        names = list((self._tuner._function_parameters or {}).keys())
        tunable = [k for k in configs[0] if k not in _reserved_keys()]
        return any(k in configs[0] for k, _ in key_kwargs) or any(k in names and names.index(k) < len(key_args) for k in tunable)

    def _configs(self) -> list[dict[str, Any]]:
        configs = self._tuner.configs
        if callable(configs):
            kernel_args, kernel_kwargs = self._tuner._kernel_parameters
            configs = self._tuner.configs = configs(*kernel_args, **dict(kernel_kwargs))
        return [dict(config) for config in configs]

    # -- the sweep as data ------------------------------------------------------------------
    def candidates(self) -> list[Candidate]:
        """Every config elaborated here (on the driver) into a shippable candidate."""
        if self._candidates is not None:
            return self._candidates
        from tilelang.autotuner.tuner import _PASS_CONFIGS_KEY as pass_key

        _, elaborate = self._tuner._ensure_jit_functions()
        parameters = inspect.signature(self._tuner.fn).parameters
        found: list[Candidate] = []
        for index, config in enumerate(self._configs()):
            unused = set(config) - set(parameters) - _reserved_keys()
            if unused:
                raise ValueError(f"Unused keys in config: {unused}")
            kwargs = {name: config[name] for name in parameters if name in config}
            per_config = config.get("pass_configs")
            prim_func = elaborate(**kwargs, **{pass_key: per_config})
            compile_args = self._tuner._merge_pass_configs_into_compile_args(per_config)
            self._programs[index] = (prim_func, compile_args)
            text = prim_func.script(show_meta=True)
            digest = hashlib.sha256(f"{text}\n{hash(compile_args)}".encode()).hexdigest()
            found.append(Candidate(index, config, pickle.dumps((prim_func, compile_args)), digest))
        self._candidates = found
        return found

    def profile(self) -> bytes:
        """The profile arguments (``ref_prog`` and ``supply_prog`` included), cloudpickled."""
        import importlib

        cloudpickle: Any = importlib.import_module("cloudpickle")  # tilelang's dependency; untyped
        return bytes(cloudpickle.dumps(self._tuner.profile_args))

    def identity(self) -> dict[str, Any]:
        """Everything that decides the sweep's result, for the tuning record's key."""
        import tilelang

        from tilecore._bridge.cache_key import cache_salt

        profile = self._tuner.profile_args
        return {
            "tilelang": str(tilelang.__version__),
            "backend": cache_salt(self._registry, self._tuner.compile_args.target) or str(self._tuner.compile_args.target),
            "candidates": [[json.dumps(c.config, sort_keys=True, default=str), c.digest] for c in self.candidates()],
            "warmup": self.options.get("warmup"),
            "rep": self.options.get("rep"),
            "check": {
                "skip": bool(profile.skip_check),
                "rtol": profile.rtol,
                "atol": profile.atol,
                "max_mismatched_ratio": profile.max_mismatched_ratio,
                "supply_type": str(profile.supply_type),
                "backend": str(profile.backend),
                "ref_prog": code_fingerprint(profile.ref_prog),
                "supply_prog": code_fingerprint(profile.supply_prog),
            },
        }

    # -- the result ---------------------------------------------------------------------------
    def finish(self, index: int, latency: float, ref_latency: float | None = None) -> Any:
        """tilelang's ``AutotuneResult`` for candidate ``index``, its kernel loaded here (a cache hit
        when a worker published it)."""
        from tilelang.autotuner.param import AutotuneResult

        self.candidates()
        prim_func, compile_args = self._programs[index]
        config = self._configs()[index]
        kernel = compile_args.compile_program(prim_func)
        kernel = kernel.update_tuner_result(latency=latency, config=config, ref_latency=ref_latency)
        return AutotuneResult(
            latency=latency,
            config=config,
            ref_latency=ref_latency,
            libcode=kernel.get_kernel_source(),
            func=kernel.prim_func,
            kernel=kernel,
        )


def _reserved_keys() -> set[str]:
    from tilelang.autotuner.tuner import _RESERVED_CONFIG_KEYS

    return set(_RESERVED_CONFIG_KEYS)


def code_fingerprint(fn: Any) -> str | None:
    """A stable fingerprint of a user callback (its code, constants and defaults), or ``None``."""
    if fn is None:
        return None
    code = getattr(fn, "__code__", None)
    if code is None:
        return f"{type(fn).__module__}.{type(fn).__qualname__}"

    def walk(c: Any) -> str:
        consts = [walk(k) if inspect.iscode(k) else repr(k) for k in c.co_consts]
        return f"{c.co_code.hex()}|{consts}|{c.co_names}|{c.co_varnames}"

    defaults = repr(getattr(fn, "__defaults__", None))
    return hashlib.sha256(f"{walk(code)}|{defaults}".encode()).hexdigest()


def wrap_run(registry: Registry, original: Callable[..., Any]) -> Callable[..., Any]:
    """``AutoTuner.run``: offered to the registered runners first; unchanged with none."""

    @functools.wraps(original)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _runners:
            return original(self, *args, **kwargs)
        bound = inspect.signature(original).bind(self, *args, **kwargs)
        bound.apply_defaults()
        options = {k: v for k, v in bound.arguments.items() if k != "self"}
        return offer(TuneJob(registry, self, lambda: original(self, *args, **kwargs), options))

    return run


def offer(job: TuneJob) -> Any:
    """The first registered runner's result for ``job``, else tilelang's own sweep."""
    for runner in tuple(_runners):  # a snapshot: a runner may add or remove runners
        result = runner.run(job)
        if result is not None:
            return result
    return job.run_local()


def register_public(registry: Registry) -> Callable[[], None]:
    """The public path (tilelang with ``register_autotune_runner``, docs/upstream/autotune-runners.md)."""
    from tilelang.autotuner.tuner import register_autotune_runner, unregister_autotune_runner

    def runner(tuner: Any, options: dict[str, Any], local: Callable[[], Any]) -> Any:
        return offer(TuneJob(registry, tuner, local, dict(options))) if _runners else None

    register_autotune_runner(runner)
    return lambda: unregister_autotune_runner(runner)


# -- the worker side ----------------------------------------------------------------------------
def toolchain_error(err: BaseException) -> ToolchainError | None:
    """The :class:`ToolchainError` behind ``err`` (tilelang may wrap it), or ``None``."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, ToolchainError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def compile_candidate(program: bytes) -> Any:
    """Compile a candidate through ``tilelang.compile`` (its cache tiers publish the entry)."""
    import tilelang  # noqa: F401 - puts tilelang's vendored tvm on the path before unpickling

    prim_func, compile_args = pickle.loads(program)
    return compile_args.compile_program(prim_func)


def benchmark_candidate(program: bytes, profile: bytes, warmup: int, rep: int) -> tuple[float, float | None]:
    """Load a candidate (a cache hit once compiled), check it and time it as tilelang's tuner does.

    Returns ``(latency, ref_latency)``; a failed check raises, as it does in tilelang's tuner."""
    from tilelang.autotuner.tuner import AutoTuner, _BenchmarkWorkerState

    kernel = compile_candidate(program)
    tuner = AutoTuner(None, [])
    tuner.profile_args = pickle.loads(profile)
    latency, ref_latency = tuner._benchmark_target(kernel, warmup, rep, 1.0, _BenchmarkWorkerState())
    return float(latency), None if ref_latency is None else float(ref_latency)
