"""tilelang's Profiler for tilecore targets: supply, timing and checks routed to the backend.

Upstream's profiler knows only its own devices (tensor supply, the "event"
timer, a hard-coded device synchronisation in ``assert_allclose``).  ``JITKernel.get_profiler``
is wrapped to return :class:`TilecoreProfiler` (built by :func:`profiler_class`)
for every kernel whose target a tilecore backend declares, delegated targets
included; other kernels get upstream's profiler unchanged.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilecore._bridge.convert import tensor_params
from tilecore._bridge.tvm_targets import NAME, owned_target
from tilecore.kit.timing import wall_clock_bench

if TYPE_CHECKING:
    from tilecore._registry import Registry
    from tilecore.targets import ResolvedTarget


def supply_tensor(registry: Registry, target: ResolvedTarget, param: Any, supply: str) -> Any:
    """An input for a tilelang ``KernelParam``: the backend's ``tilecore_supply_tensor``, else the core's."""
    from tilecore.kit.supply import make_tensor

    tparam = tensor_params([param], None)[0]
    tensor = registry.call(target, "tilecore_supply_tensor", param=tparam, supply=supply)
    return make_tensor(tparam, supply, target.device) if tensor is None else tensor


def bench(
    registry: Registry, target: ResolvedTarget, call: Callable[[], Any], *, quantiles: list[float] | None, return_mode: str, **timing: Any
) -> float | list[float]:
    """``do_bench``'s result: the target's ``tilecore_bench`` hook, else :func:`wall_clock_bench`, reduced like tilelang's.

    ``timing``: ``do_bench``'s ``warmup``, ``rep``, ``n_warmup``, ``n_repeat`` and ``backend``.
    """
    samples = registry.call(target, "tilecore_bench", fn=call, **timing)
    if samples is None:
        samples = wall_clock_bench(call, **{key: value for key, value in timing.items() if key != "backend"})
    return reduce_samples(samples, return_mode, quantiles) if isinstance(samples, list) else samples


def register_hooks(registry: Registry) -> Callable[[], None]:
    """The public path (tilelang with ``register_profiler_hooks``, docs/upstream/profiler-hooks.md):
    supply and timing of every tilecore target, delegated ones included, go to its backend."""
    from tilelang.profiler import ProfilerHooks, register_profiler_hooks, unregister_profiler_hooks

    def hooks_for(tvm_target: Any) -> Any:
        target = owned_target(registry, tvm_target)
        if target is None:
            return None
        return ProfilerHooks(
            supply=lambda param, supply_type: supply_tensor(registry, target, param, supply_type.name.lower()),
            bench=lambda call, **timing: bench(registry, target, call, **timing),
            # Results are compared through torch, which waits for the tensors' device itself.
            synchronize=lambda: None,
        )

    register_profiler_hooks(NAME, hooks_for, override=True)
    return lambda: unregister_profiler_hooks(NAME)


@functools.lru_cache(maxsize=1)
def profiler_class() -> type[Any]:
    """``TilecoreProfiler``: a subclass of ``tilelang.profiler.Profiler`` (made once, on first use)."""
    from tilelang.profiler import Profiler

    from tilecore._launch import as_list

    class TilecoreProfiler(Profiler):  # type: ignore[misc]  # tilelang ships no type information
        """tilelang's Profiler with supply, timing and checks routed to the target's backend."""

        tilecore_target: ResolvedTarget
        tilecore_registry: Registry
        result_idx: Any  # a field of upstream's Profiler dataclass

        def __post_init__(self) -> None:
            self.result_idx = self._legalize_result_idx(self.result_idx)
            supply = self.supply_type.name.lower()
            target, registry = self.tilecore_target, self.tilecore_registry
            self.supply = lambda param: supply_tensor(registry, target, param, supply)

        def assert_allclose(
            self,
            reference_program: Callable[..., Any],
            input_tensors: list[Any] | None = None,
            atol: float = 1e-2,
            rtol: float = 1e-2,
            max_mismatched_ratio: float = 0.01,
        ) -> None:
            from tilelang.utils.tensor import torch_assert_close

            ins = self._get_inputs() if input_tensors is None else input_tensors
            ref_outs = as_list(reference_program(*ins))
            lib_outs = as_list(self.func(*ins))
            if len(lib_outs) != len(ref_outs):
                raise AssertionError(f"kernel returned {len(lib_outs)} outputs, reference returned {len(ref_outs)}")
            for lhs, rhs in zip(lib_outs, ref_outs, strict=True):
                if lhs is None or rhs is None:
                    continue
                torch_assert_close(
                    lhs.cpu(),
                    rhs.to(lhs.dtype).cpu(),
                    rtol=rtol,
                    atol=atol,
                    max_mismatched_ratio=max_mismatched_ratio,
                    base_name="tilelang",
                    ref_name="ref",
                )

        def do_bench(
            self,
            func: Callable[..., Any] | None = None,
            warmup: float = 25,
            rep: float = 100,
            n_warmup: int = 0,
            n_repeat: int = 0,
            input_tensors: list[Any] | None = None,
            backend: str = "event",
            quantiles: list[float] | None = None,
            return_mode: str = "mean",
            dynamic_symbolic_constraints: dict[str, int] | None = None,
            device: Any = None,
            early_stop_baseline: float | None = None,
        ) -> float | list[float]:
            bench_target = func if func is not None else self.adapter
            ins = self._get_inputs(dynamic_symbolic_constraints=dynamic_symbolic_constraints) if input_tensors is None else input_tensors
            call = functools.partial(bench_target, *ins)
            timing = {"warmup": warmup, "rep": rep, "n_warmup": n_warmup, "n_repeat": n_repeat, "backend": backend}
            return bench(self.tilecore_registry, self.tilecore_target, call, quantiles=quantiles, return_mode=return_mode, **timing)

    return TilecoreProfiler


def wrap_get_profiler(registry: Registry, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def get_profiler(self: Any, tensor_supply_type: Any = None) -> Any:
        from tilelang.profiler import TensorSupplyType

        supply = TensorSupplyType.Auto if tensor_supply_type is None else tensor_supply_type
        target = owned_target(registry, self.target)
        if target is None:
            return original(self, supply)
        cls = profiler_class()
        profiler: Any = object.__new__(cls)
        profiler.tilecore_target = target
        profiler.tilecore_registry = registry
        profiler.__init__(self.params, self.out_idx, supply)
        return profiler.with_default_adapter(self.adapter)

    return get_profiler


def reduce_samples(samples: list[float], return_mode: str = "mean", quantiles: list[float] | None = None) -> float | list[float]:
    """Reduce per-call timings like tilelang's ``do_bench`` does."""
    if quantiles is not None:
        ordered = sorted(samples)
        return [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles]
    reducers: dict[str, Callable[[list[float]], float]] = {
        "mean": statistics.fmean,
        "median": statistics.median,
        "min": min,
        "max": max,
    }
    if return_mode not in reducers:
        raise ValueError(f"return_mode must be one of {', '.join(reducers)}, got {return_mode!r}")
    return reducers[return_mode](samples)
