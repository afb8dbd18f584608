"""End to end through unmodified tilelang: every scenario runs in a fresh interpreter,
exactly as a user's program would (autoload via the installed startup hook)."""

from __future__ import annotations

import json

from tcsupport import ADD_KERNEL, good_backend


def check(result) -> str:
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-4000:]}"
    return result.stdout


def test_democpu_all_user_forms(fake_site) -> None:
    out = check(
        fake_site.run(
            ADD_KERNEL
            + """
import json, sys
from tilelang.profiler import TensorSupplyType
assert "tilecore" in sys.modules, "autoload should have activated tilecore"
x, y = torch.randn(M, N), torch.randn(M, N)
ref = x * 2 + y
report = {}

# 1. tilelang.compile + plain call + grid call
k = tilelang.compile(add, target="democpu", out_idx=[-1])
report["compile"] = (k(x, y) - ref).abs().max().item()
report["grid"] = (k[(1,)](x, y) - ref).abs().max().item()

# 2. stacked decorator over @T.prim_func (the design notes' form)
stacked = tilelang.jit(target="democpu:O0", out_idx=[-1])(add)
report["stacked"] = (stacked[(1,)](x, y) - ref).abs().max().item()

# 3. factory form returning a prim_func
@tilelang.jit(target={"kind": "democpu", "opt": "O2"}, out_idx=[-1])
def factory(M, N):
    @T.prim_func
    def scale(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, 16), threads=32) as bx:
            a = T.alloc_fragment((16, N), "float32")
            T.copy(A[bx * 16, 0], a)
            for i, j in T.Parallel(16, N):
                a[i, j] = a[i, j] * 3.0
            T.copy(a, B[bx * 16, 0])
    return scale
report["factory"] = (factory(33, 20)(x[:33, :20].contiguous()) - 3 * x[:33, :20]).abs().max().item()

# 4. all-parameter call writes into a provided output
out = torch.zeros(M, N)
k(x, y, out)
report["inplace"] = (out - ref).abs().max().item()

# 5. profiler: supply on the target's device for every kind, timing, allclose
profiler = k.get_profiler()
report["profiler"] = type(profiler).__name__
report["bench_ms"] = profiler.do_bench(n_warmup=2, n_repeat=5)
profiler.assert_allclose(lambda a, b: a * 2 + b)
supplies = {}
for kind in TensorSupplyType:
    ins = k.get_profiler(kind)._get_inputs()
    supplies[kind.name] = [str(t.device) for t in ins] + [float(ins[0].float().abs().max())]
report["supplies"] = supplies
report["source"] = "add_kernel" in k.get_kernel_source()
print(json.dumps(report))
"""
        )
    )
    report = json.loads(out.strip().splitlines()[-1])
    for key in ("compile", "grid", "stacked", "factory", "inplace"):
        assert report[key] < 1e-5, (key, report)
    assert report["profiler"] == "TilecoreProfiler" and report["bench_ms"] > 0 and report["source"]
    assert report["supplies"]["Zero"][-1] == 0.0 and report["supplies"]["One"][-1] == 1.0
    assert all(v[0] == "cpu" for v in report["supplies"].values())


def test_bad_inputs_give_named_errors(fake_site) -> None:
    out = check(
        fake_site.run(
            ADD_KERNEL
            + """
import tilecore
k = tilelang.compile(add, target="democpu", out_idx=[-1])
x = torch.randn(M, N)
cases = {
    "dtype": lambda: k(x.double(), x.double()),
    "shape": lambda: k(torch.randn(M, N + 1), torch.randn(M, N + 1)),
    "count": lambda: k(x),
    "meta": lambda: k(x.to("meta"), x.to("meta")),
    "option": lambda: tilelang.compile(add, target="democpu:O7"),
    "unknown": lambda: tilelang.compile(add, target="acme-npu"),
}
for name, fn in cases.items():
    try:
        fn()
        print(name, "NO ERROR")
    except tilecore.TilecoreError as err:
        print(name, type(err).__name__, "|", err)
"""
        )
    )
    lines = dict(
        line.split(" ", 1)
        for line in out.strip().splitlines()
        if line.split(" ", 1)[0] in {"dtype", "shape", "count", "meta", "option", "unknown"}
    )
    assert "KernelArgumentError" in lines["dtype"] and "expected torch.float32" in lines["dtype"]
    assert "KernelArgumentError" in lines["shape"] and "(70, 91)" in lines["shape"]
    assert "takes 2 input tensors" in lines["count"]
    assert "is on device meta" in lines["meta"]
    assert "O0, O1, O2, O3" in lines["option"] and "tilelang-democpu" in lines["option"]
    assert "UnknownTargetError" in lines["unknown"] and "'acme-npu'" in lines["unknown"] and "democpu (tilelang-democpu" in lines["unknown"]


BROKEN_USE = """
from tilecore import TargetSpec, hookimpl
from tilelang_democpu import lowering
@hookimpl
def tilecore_declare_targets():
    return [TargetSpec("hookt", "codegen raises")]
@hookimpl
def tilecore_lower(target, mod, tvm_target):
    return lowering.lower(mod, tvm_target)
@hookimpl
def tilecore_codegen(target, device_mod, tvm_target):
    raise NotImplementedError("T.atomic_add is not supported by this backend")
"""


def test_broken_backends_do_not_break_tilelang_or_other_targets(fake_site) -> None:
    fake_site.add(
        "tilelang-broken", "0.9", "tcfake_broken", "raise ImportError('libvendor.so: cannot open shared object file')\n", entry="brokent"
    )
    fake_site.add("tilelang-hookraise", "1.1", "tcfake_hookraise", BROKEN_USE, entry="hookt")
    fake_site.add("tilelang-good", "1.0", "tcfake_good", good_backend(), entry="goodt")
    out = check(
        fake_site.run(
            ADD_KERNEL
            + """
import tilecore
x, y = torch.randn(M, N), torch.randn(M, N)
for target in ("goodt", "democpu", "c"):
    k = tilelang.compile(add, target=target, out_idx=[-1])
    print(target, "ok", (k(x, y) - (x * 2 + y)).abs().max().item() < 1e-5)
for target in ("brokent", "hookt"):
    try:
        tilelang.compile(add, target=target, out_idx=[-1])
        print(target, "NO ERROR")
    except tilecore.BackendLoadError as err:
        print(target, "error", type(err.__cause__).__name__, "|", err)
"""
        )
    )
    assert "goodt ok True" in out and "democpu ok True" in out and "c ok True" in out
    assert "brokent error ImportError | target 'brokent' is provided by backend 'brokent' (tilelang-broken 0.9)" in out
    assert "hookt error NotImplementedError" in out and "tilelang-hookraise 1.1" in out and "T.atomic_add" in out


def test_autoload_off_and_explicit_activation(fake_site) -> None:
    code = (
        ADD_KERNEL
        + """
import sys
print("active-after-import-tilelang", "tilecore" in sys.modules)
try:
    tilelang.compile(add, target="democpu", out_idx=[-1])
    print("compiled-before-import-tilecore")
except Exception as err:
    print("upstream-refused", type(err).__name__)
import tilecore
x, y = torch.randn(M, N), torch.randn(M, N)
k = tilelang.compile(add, target="democpu", out_idx=[-1])
print("explicit", (k(x, y) - (x * 2 + y)).abs().max().item() < 1e-5)
"""
    )
    out = check(fake_site.run(code, TILECORE_DISABLE_PLUGIN_AUTOLOAD="1", TILECORE_PLUGINS="democpu"))
    assert "active-after-import-tilelang False" in out
    assert "upstream-refused" in out
    assert "explicit True" in out


def test_startup_hook_does_not_import_tilelang(fake_site) -> None:
    out = check(
        fake_site.run("import sys; print(sorted(m for m in ('tilelang', 'tilecore', 'torch', '_tilecore_autoload') if m in sys.modules))")
    )
    assert out.strip() == "['_tilecore_autoload']"


def test_import_tilecore_is_cheap_and_activates_on_the_next_import_tilelang(fake_site) -> None:
    """``import tilecore`` imports neither tilelang nor torch, yet a later ``import tilelang``
    activates it, also with the startup hook disabled."""
    code = (
        """
import sys
import tilecore
print("after-import-tilecore", sorted(m for m in ("tilelang", "torch", "tvm") if m in sys.modules))
# A backend reading a tilelang name before anything imported tilelang: the gate's import of
# tilelang activates tilecore, whose activation runs the gate again (it once deadlocked here).
from tilecore.upstream import internal
print("internal", bool(internal("tilelang.env:TILELANG_TEMPLATE_PATH")))
"""
        + ADD_KERNEL
        + """
from tilecore import _bridge
print("active", _bridge.installed() is tilecore.get_registry())
# Activation needs neither packaging (plain versions are compared without it), filelock, platformdirs nor the remote store.
print("deferred", sorted(m for m in ("packaging.specifiers", "filelock", "platformdirs", "tilecore.remote") if m in sys.modules))
x, y = torch.randn(M, N), torch.randn(M, N)
k = tilelang.compile(add, target="democpu", out_idx=[-1])
print("ok", (k(x, y) - (x * 2 + y)).abs().max().item() < 1e-5)
"""
    )
    for autoload_off in ("", "1"):
        out = check(fake_site.run(code, TILECORE_DISABLE_PLUGIN_AUTOLOAD=autoload_off, TILECORE_PLUGINS="democpu"))
        assert "after-import-tilecore []" in out, out
        assert "internal True" in out and "active True" in out and "ok True" in out and "deferred []" in out, out
