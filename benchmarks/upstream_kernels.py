"""Upstream's own kernels as referee: run tile-ai/tilelang's example and test kernels,
unchanged, on tilelang's ``c`` target and on ``tpu``, each compared with torch.

    .venv/bin/python benchmarks/upstream_kernels.py /path/to/tilelang-checkout
    .venv/bin/python benchmarks/upstream_kernels.py CHECKOUT --only gemm --targets tpu

The kernels are named in ``benchmarks/upstream_kernels.json`` (file, function, small sizes,
the torch reference to build -- names and parameters only; no upstream code is copied into
this project).  Each upstream module is imported from the checkout; its ``@tilelang.jit``
function is called the way upstream's own ``main`` calls it, with only the JIT target changed
(and, on ``c``, loops kept scalar: tilelang's C codegen cannot compile its own vectorised
``float4`` code).  Prints per kernel: c ok/refused/WRONG/crash, tpu ok/refused/WRONG/crash,
and totals (runs on both, c only, tpu only).  Inputs are checked to be left untouched.

Manifest entry fields: ``name``, ``file``, ``function``; ``tensors`` ({name: [shape, dtype,
init]}, init one of randn/rand/ones/zeros/randint:LO:HI/arange); ``args`` (positional call
arguments: tensor names, or ``{"value": v}``); ``kwargs``; ``style`` (``eager``: the call runs
the kernel and returns its outputs; ``lazy``: the call returns a kernel, run on ``call``, the
outputs being the returned tensors and then the tensors named in ``outputs``);
``reference`` ({"fn": name in REFERENCES, ...its parameters}, or {"expr": a torch expression
over the tensors ``t``}); ``tol``.  ``style`` ``prim_func``: the call returns a PrimFunc (an
upstream test's builder), compiled with ``out_idx`` and run on ``call``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

MANIFEST = Path(__file__).with_name("upstream_kernels.json")
C_PASS_CONFIGS = {"tirx.disable_vectorize": True}


def _attention(t: dict[str, torch.Tensor], q: str, k: str, v: str, layout: str = "bhsd", causal: bool = False) -> list[torch.Tensor]:
    Q, K, V = (t[n].float() for n in (q, k, v))
    if layout == "bshd":
        Q, K, V = (x.transpose(1, 2) for x in (Q, K, V))
    if K.shape[1] != Q.shape[1]:  # grouped-query: repeat the kv heads
        rep = Q.shape[1] // K.shape[1]
        K, V = K.repeat_interleave(rep, 1), V.repeat_interleave(rep, 1)
    out = F.scaled_dot_product_attention(Q, K, V, is_causal=causal)
    if layout == "bshd":
        out = out.transpose(1, 2)
    return [out]


def _matmul(
    t: dict[str, torch.Tensor], a: str, b: str, trans_a: bool = False, trans_b: bool = False, out_dtype: str = ""
) -> list[torch.Tensor]:
    A, B = t[a].float(), t[b].float()
    A = A.t() if trans_a else A
    B = B.t() if trans_b else B
    out = A @ B
    return [out.to(getattr(torch, out_dtype)) if out_dtype else out]


REFERENCES: dict[str, Any] = {
    "add": lambda t, a, b: [t[a].float() + t[b].float()],
    "matmul": _matmul,
    "gemv": lambda t, a, b: [t[b].float() @ t[a].float()],
    "rmsnorm": lambda t, x, eps=1e-12: [t[x].float() * torch.rsqrt(t[x].float().pow(2).mean(-1, keepdim=True) + eps)],
    "layernorm": lambda t, x, w, b, eps=1e-5: [F.layer_norm(t[x].float(), t[x].shape[-1:], t[w].float(), t[b].float(), eps)],
    "softmax": lambda t, x: [torch.softmax(t[x].float(), -1)],
    "attention": _attention,
    "topk": lambda t, x, k: [torch.topk(t[x].float(), k, -1).values, torch.topk(t[x].float(), k, -1).indices.int()],
    "cumsum": lambda t, x, dim=-1, reverse=False: [t[x].float().flip(dim).cumsum(dim).flip(dim) if reverse else t[x].float().cumsum(dim)],
    "reduce": lambda t, x, op, dim=-1: [getattr(t[x].float(), op)(dim) if op != "max" else t[x].float().amax(dim)],
    "transpose": lambda t, x: [t[x].t()],
    "copy": lambda t, x: [t[x]],
    "conv2d_nhwc": lambda t, x, w, stride=1, padding=0, dilation=1: [
        F.conv2d(
            t[x].float().permute(0, 3, 1, 2), t[w].float().permute(3, 2, 0, 1), stride=stride, padding=padding, dilation=dilation
        ).permute(0, 2, 3, 1)
    ],
}


def _make(spec: list[Any], gen: torch.Generator) -> torch.Tensor:
    shape, dtype, init = spec[0], getattr(torch, spec[1]), spec[2] if len(spec) > 2 else "randn"
    if init.startswith("randint"):
        _, lo, hi = init.split(":")
        return torch.randint(int(lo), int(hi), shape, generator=gen).to(dtype)
    if init == "arange":
        return torch.arange(int(torch.tensor(shape).prod())).reshape(shape).to(dtype)
    if init in ("ones", "zeros"):
        return getattr(torch, init)(shape, dtype=dtype)
    base = torch.rand(shape, generator=gen) if init == "rand" else torch.randn(shape, generator=gen)
    return base.to(dtype)


def _load(checkout: Path, rel: str) -> Any:
    path = checkout / rel
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(f"upstream_{path.stem}_{abs(hash(rel))}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(path.parent))


def _classify(err: BaseException, target: str) -> tuple[str, str]:
    from tilelang_tpu.codegen import TpuCodegenError

    text = str(err).strip().splitlines()
    line = f"{type(err).__name__}: {text[0] if text else ''}"[:200]
    if isinstance(err, TpuCodegenError):
        return "refused", err.construct[:200]
    if target == "c" and "Compilation Failed" not in str(err):
        return "refused", line
    return "crash", line


def run_one(entry: dict[str, Any], checkout: Path, target: str) -> tuple[str, str]:
    """(status, detail) of one manifest kernel on one target."""
    try:
        module = _load(checkout, entry["file"])
        impl = getattr(module, entry["function"])
        impl = getattr(impl, "jit_impl", impl)  # @autotune: the config is given, so no tuning
    except Exception as err:  # an upstream module this tilelang cannot import
        return "load-failed", f"{type(err).__name__}: {str(err).strip()[:160]}"
    gen = torch.Generator().manual_seed(0)
    tensors = {n: _make(s, gen) for n, s in entry.get("tensors", {}).items()}
    before = {n: t.clone() for n, t in tensors.items() if n not in entry.get("outputs", [])}
    args = [tensors[a] if isinstance(a, str) else a["value"] for a in entry.get("args", [])]
    if hasattr(impl, "_kernel_cache"):  # @tilelang.jit: only its target changes
        impl.target = target
        impl._kernel_cache.clear()
    if target == "c" and hasattr(impl, "pass_configs"):
        impl.pass_configs = {**(impl.pass_configs or {}), **C_PASS_CONFIGS}
    try:
        result = impl(*args, **entry.get("kwargs", {}))
        if entry.get("style", "eager") == "prim_func":  # a builder returning a PrimFunc
            import tilelang

            configs = C_PASS_CONFIGS if target == "c" else None
            result = tilelang.compile(result, target=target, out_idx=entry.get("out_idx"), pass_configs=configs)
        if entry.get("style", "eager") in ("lazy", "prim_func"):
            result = result(*[tensors[n] for n in entry["call"]])
    except Exception as err:  # classified
        return _classify(err, target)
    outs = list(result) if isinstance(result, (tuple, list)) else ([result] if result is not None else [])
    outs += [tensors[n] for n in entry.get("outputs", [])]
    for name, original in before.items():
        if not torch.equal(original, tensors[name]):
            return "WRONG", f"the kernel wrote its input {name}"
    ref = dict(entry["reference"])
    if "expr" in ref:  # a torch expression over the tensors ``t`` (this project's own reference)
        value = eval(ref["expr"], {"torch": torch, "F": F, "t": tensors})  # the committed manifest
        expected = list(value) if isinstance(value, (tuple, list)) else [value]
    else:
        expected = REFERENCES[ref.pop("fn")](tensors, **ref)
    if len(outs) != len(expected):
        return "WRONG", f"{len(outs)} outputs, the reference has {len(expected)}"
    tol = entry.get("tol", 1e-2)
    for k, (got, exp) in enumerate(zip(outs, expected, strict=False)):
        try:
            torch.testing.assert_close(got.float(), exp.float(), rtol=tol, atol=tol)
        except AssertionError as err:
            return "WRONG", f"output {k}: " + str(err).strip().splitlines()[0][:160]
    return "ok", ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", type=Path, help="a tile-ai/tilelang checkout (its examples/ and testing/python/)")
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--only", help="run the kernels whose name contains this")
    parser.add_argument("--targets", default="c,tpu")
    parser.add_argument("--verbose", action="store_true", help="print tracebacks of crashes")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    # tilelang's C adapter leaves its sources and libraries in the temp dir: keep them in one we remove.
    scratch = tempfile.TemporaryDirectory(prefix="tilecore-upstream-kernels-")
    tempfile.tempdir = scratch.name
    entries = [e for e in json.loads(args.manifest.read_text()) if not args.only or args.only in e["name"]]
    targets = args.targets.split(",")
    rows: list[tuple[str, dict[str, tuple[str, str]]]] = []
    for entry in entries:
        outcome = {}
        for target in targets:
            try:
                outcome[target] = run_one(entry, args.checkout, target)
            except Exception:  # a bug in this script's handling: shown, not hidden
                outcome[target] = ("crash", traceback.format_exc().strip().splitlines()[-1][:200])
        rows.append((entry["name"], outcome))
        print(f"{entry['name']:<40} " + "  ".join(f"{t}={outcome[t][0]:<8}" for t in targets), flush=True)
        for t in targets:
            if outcome[t][0] != "ok":
                print(f"    {t}: {outcome[t][1]}")
    print(f"\n{len(rows)} kernels")
    for t in targets:
        counts: dict[str, int] = {}
        for _, o in rows:
            counts[o[t][0]] = counts.get(o[t][0], 0) + 1
        print(f"  {t}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if set(targets) == {"c", "tpu"}:
        both = sum(1 for _, o in rows if o["c"][0] == "ok" and o["tpu"][0] == "ok")
        c_only = sum(1 for _, o in rows if o["c"][0] == "ok" and o["tpu"][0] != "ok")
        tpu_only = sum(1 for _, o in rows if o["c"][0] != "ok" and o["tpu"][0] == "ok")
        print(f"  runs on both: {both}, c only: {c_only}, tpu only: {tpu_only}")
    wrong = [n for n, o in rows if any(v[0] == "WRONG" for v in o.values())]
    print(f"  WRONG: {len(wrong)} {wrong if wrong else ''}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
