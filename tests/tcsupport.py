"""Helpers shared by tilecore's tests (importable: tests/ is on pytest's pythonpath).

``FakeSite`` writes real distributions (a package plus a ``*.dist-info`` with
METADATA and entry_points.txt) into a directory; putting that directory on
``sys.path`` (in-process) or ``PYTHONPATH`` (subprocess) makes
``importlib.metadata`` discover their ``tilecore.backends`` entry points exactly
as it discovers pip-installed ones.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path


@dataclass
class FakeSite:
    root: Path

    def add(
        self,
        dist: str,
        version: str,
        module: str,
        source: str,
        entry: str | None = None,
        api: str | None = "1.0",
        targets: tuple[str, ...] | None = None,
        requires: tuple[str, ...] = (),
    ) -> Path:
        """Install distribution ``dist`` whose module ``module`` is the backend ``entry``.

        ``targets`` are listed in the distribution's ``tilecore.targets`` metadata
        (complete metadata); ``None`` writes none (a legacy backend).
        """
        entry = entry or module
        package = self.root / module
        package.mkdir(parents=True)
        header = f'tilecore_api_version = "{api}"\n' if api is not None else ""
        (package / "__init__.py").write_text(header + textwrap.dedent(source))
        self.add_metadata(dist, version, {entry: module}, targets={name: module for name in targets or ()}, requires=requires)
        return package

    def add_metadata(
        self,
        dist: str,
        version: str,
        backends: dict[str, str],
        targets: dict[str, str] | None = None,
        requires: tuple[str, ...] = (),
    ) -> Path:
        """A ``*.dist-info`` only: ``backends`` (entry name -> value), ``targets`` (target name -> value)
        and ``requires`` (``Requires-Dist`` lines, e.g. the tilelang range the backend was tested with)."""
        info = self.root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        requirements = "".join(f"Requires-Dist: {text}\n" for text in requires)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n{requirements}")
        text = "[tilecore.backends]\n" + "".join(f"{name} = {value}\n" for name, value in backends.items())
        if targets:
            text += "\n[tilecore.targets]\n" + "".join(f"{name} = {value}\n" for name, value in targets.items())
        (info / "entry_points.txt").write_text(text)
        (info / "RECORD").write_text("")
        return info

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.root), env.get("PYTHONPATH", "")]))
        env.update(extra)
        return env

    def run(self, code: str, **extra: str) -> subprocess.CompletedProcess[str]:
        """Run ``code`` in a fresh interpreter that sees this site."""
        # tilelang's frontend reads kernel source with inspect, so the code must live in a file.
        script = self.root.parent / f"script_{len(list(self.root.parent.glob('script_*.py')))}.py"
        script.write_text(textwrap.dedent(code))
        return subprocess.run(
            [sys.executable, str(script)],
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=300,
            cwd=self.root,
        )


#: A complete backend (target "goodt") that reuses the democpu example's stages.
GOOD_BACKEND = """
import tilecore
from tilecore import TargetSpec, TargetOption, hookimpl
from tilelang_democpu import codegen, lowering, runtime
from tilecore.kit.supply import make_tensor

__version__ = "VERSION"

@hookimpl
def tilecore_declare_targets():
    return [TargetSpec("goodt", "test backend", aliases=("goodt-alias",),
                       options=(TargetOption("opt", "level", choices=("O0", "O2"), default="O2"),))]

@hookimpl
def tilecore_setup(target):
    import shutil
    return tilecore.Toolchain("c++", "test", shutil.which("g++"), "PATH")

@hookimpl
def tilecore_lower(target, mod, tvm_target):
    return lowering.lower(mod, tvm_target)

@hookimpl
def tilecore_codegen(target, device_mod, tvm_target):
    return codegen.generate(device_mod, tvm_target)

@hookimpl
def tilecore_create_adapter(target, kernel):
    import os
    os.environ["GOODT_ADAPTER_CALLS"] = str(int(os.environ.get("GOODT_ADAPTER_CALLS", "0")) + 1)
    if kernel.library_path is not None:
        return runtime.CAdapter(kernel, runtime.Path(kernel.library_path))
    return runtime.CAdapter(kernel, runtime.build(kernel, tilecore.setup_target(target).location))

@hookimpl
def tilecore_supply_tensor(target, param, supply):
    return make_tensor(param, supply, target.device)
"""


def good_backend(version: str = "1.0") -> str:
    return GOOD_BACKEND.replace("VERSION", version)


#: A small element-wise kernel that portable CPU lowering handles.
ADD_KERNEL = """
import tilelang, tilelang.language as T, torch
M, N = 70, 90
@T.prim_func
def add(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
    with T.Kernel(T.ceildiv(M, 32), T.ceildiv(N, 32), threads=128) as (bx, by):
        a = T.alloc_fragment((32, 32), "float32")
        b = T.alloc_fragment((32, 32), "float32")
        T.copy(A[bx * 32, by * 32], a)
        T.copy(B[bx * 32, by * 32], b)
        for i, j in T.Parallel(32, 32):
            a[i, j] = a[i, j] * 2.0 + b[i, j]
        T.copy(a, C[bx * 32, by * 32])
"""
