"""Compile and run one differential program on one target, and classify the outcome.

Outcomes per target:

* ``match`` -- ran, the output equals torch's (exactly for integers, within the dtype's
  rounding for floats), every input and the unused parameter left untouched;
* ``refused`` -- compilation stopped with an error that names the construct (for tpu a
  ``TpuCodegenError``, whose ``construct`` is recorded; for c an error raised by tilelang's
  lowering before the C compiler runs);
* ``WRONG`` -- ran and produced a different result (or wrote an input): the worst bug;
* ``crash`` -- anything else (the C compiler or ppl-compile failing, an error while running).

The program's source is compiled through :mod:`linecache` (TileLang's parser reads the
source of the function it parses), so nothing is written to disk.
"""

from __future__ import annotations

import functools
import linecache
import re
import tempfile
import traceback
from dataclasses import dataclass
from itertools import count
from typing import Any

import torch

from .program import FLOATS, INTS, TOLERANCE, TORCH, Program, _global_shape, reference, source

TARGETS = ("c", "tpu")
#: tilelang 0.1.15's C codegen vectorises T.Parallel loops into ``float4`` expressions its own
#: header cannot compile (``operator>`` on vec_type); the differential runs keep loops scalar.
C_PASS_CONFIGS = {"tirx.disable_vectorize": True}
_ids = count()


@dataclass(frozen=True)
class Outcome:
    """The result of one program on one target."""

    status: str  # match | refused | WRONG | crash | invalid (TileLang's front end rejects it) | invalid (TileLang's front end rejects it)
    detail: str = ""  # the refused construct, the mismatch, or the error's first line


def build(prog: Program) -> Any:
    """The program's prim_func, parsed from its printed source."""
    text = source(prog)
    filename = f"<tilelang-differential-{next(_ids)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    try:
        namespace: dict[str, Any] = {}
        exec(compile(text, filename, "exec"), namespace)
        return namespace["build"]()
    finally:
        linecache.cache.pop(filename, None)


def make_inputs(prog: Program, seed: int) -> dict[str, torch.Tensor]:
    """Random inputs on an exact grid (floats: multiples of 1/4 in [-4, 4]), the output
    pre-filled with garbage (an element the kernel fails to write shows up) and the
    unused parameter."""
    gen = torch.Generator().manual_seed(seed)
    tensors: dict[str, torch.Tensor] = {}
    for x in prog.inputs:
        shape = _global_shape(x, prog.M, prog.N)
        if x.dtype in FLOATS:
            t = torch.randint(-16, 17, shape, generator=gen).float() / 4
        else:
            hi = 20 if x.dtype == "int8" else 1000
            t = torch.randint(-hi, hi + 1, shape, generator=gen)
        tensors[x.name] = t.to(TORCH[x.dtype])
    out = torch.randint(-100, 100, prog.out_shape, generator=gen).to(TORCH[prog.out_dtype])
    tensors["Out"] = out
    tensors["Unused"] = torch.randn(prog.M, prog.N, generator=gen)
    return tensors


def compile_for(prog: Program, target: str) -> Any:
    import tilelang

    if target != "c":
        return tilelang.compile(build(prog), target=target)
    # tilelang's own C adapter writes its source and library with tempfile (delete=False) and never
    # removes them: compile under a private directory that is removed when the process exits.
    saved = tempfile.tempdir
    tempfile.tempdir = _c_scratch()
    try:
        return tilelang.compile(build(prog), target=target, pass_configs=C_PASS_CONFIGS)
    finally:
        tempfile.tempdir = saved


@functools.cache
def _c_scratch() -> str:
    scratch = tempfile.TemporaryDirectory(prefix="tilecore-diff-c-")  # removed at exit (its finaliser)
    _SCRATCH.append(scratch)
    return scratch.name


_SCRATCH: list[tempfile.TemporaryDirectory[str]] = []


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]


def construct_of(err: BaseException) -> str | None:
    """The construct a refusal names (``None`` when the error names none)."""
    construct = getattr(err, "construct", None)
    if isinstance(construct, str) and construct:
        return construct
    return None


def normalise(construct: str) -> str:
    """A construct with its program-specific details (names, numbers) blanked, for ranking."""
    text = re.sub(r"\b[A-Za-z_]+\d*_t\b|\bX\d\b", "BUF", construct)
    text = re.sub(r"-?\d+(\.\d+)?", "N", text)
    return text[:160]


def compare(prog: Program, got: torch.Tensor, expected: torch.Tensor, scale: float) -> str:
    """Empty when ``got`` matches; else a short description of the first mismatch."""
    if prog.out_dtype in INTS and prog.mode in ("parallel", "store"):
        bad = got != expected
        tol = None
    else:
        g, e = got.double(), expected.double()
        dt = prog.out_dtype if prog.out_dtype in FLOATS else "float32"
        if prog.mode in ("reduce", "serial") and prog.out_dtype in INTS and prog.reduce != "abssum":
            bad = g != e
            tol = None
        else:
            tol = TOLERANCE[dt] * max(1.0, scale)
            both_nan = g.isnan() & e.isnan()
            bad = ((g - e).abs() > tol + TOLERANCE[dt] * e.abs()) & ~both_nan
            bad |= g.isnan() != e.isnan()
    if not bool(bad.any()):
        return ""
    idx = tuple(int(v) for v in bad.nonzero()[0])
    return f"{int(bad.sum())}/{bad.numel()} elements differ; first at {idx}: expected {expected[idx].item()!r}, got {got[idx].item()!r}" + (
        f" (tolerance {tol:.3g})" if tol is not None else ""
    )


def run_on(prog: Program, target: str, seed: int = 0) -> Outcome:
    """Compile ``prog`` for ``target``, run it on random inputs, compare with torch."""
    from tilelang_tpu.codegen import TpuCodegenError

    try:
        kernel = compile_for(prog, target)
    except TpuCodegenError as err:
        return Outcome("refused", err.construct)
    except Exception as err:  # classified below, not hidden
        text = str(err)
        if "[Tilelang Semantic Check]" in text:  # TileLang itself rejects it, for every target
            return Outcome("invalid", _first_line(err))
        if target == "c" and "Compilation Failed" not in text and "g++" not in text:
            return Outcome("refused", _first_line(err))
        return Outcome("crash", _first_line(err))
    tensors = make_inputs(prog, seed)
    before = {k: v.clone() for k, v in tensors.items() if k != "Out"}
    expected, scale = reference(prog, tensors)
    names = [x.name for x in prog.inputs] + ["Out", "Unused"]
    order = prog.order or tuple(range(len(names)))
    try:
        kernel(*[tensors[names[k]] for k in order])
    except Exception as err:
        return Outcome("crash", "at run: " + _first_line(err) + " | " + traceback.format_exc(limit=1).splitlines()[-1][:120])
    for name, original in before.items():
        if not torch.equal(original, tensors[name]):
            return Outcome("WRONG", f"the kernel wrote its input {name}")
    diff = compare(prog, tensors["Out"], expected, scale)
    return Outcome("WRONG", diff) if diff else Outcome("match")
