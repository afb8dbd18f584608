"""The upstream proposals, applied: docs/upstream/tilelang-0.1.15-public-seams.patch is applied to
a copy of the installed tilelang (in a temp dir on PYTHONPATH) and a fresh interpreter shows that
the bridge then switches the affected rows of SEAMS to tilelang's public API and patches nothing
there, while a backend-owned target still compiles, runs, and reads its source after a disk-cache
load in a second process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tcsupport import ADD_KERNEL

tilelang = pytest.importorskip("tilelang")

ROOT = Path(__file__).resolve().parents[1]
PATCH = ROOT / "docs" / "upstream" / "tilelang-0.1.15-public-seams.patch"
RETIRED = ["JITKernel.get_host_source", "JITKernel.get_kernel_source", "KernelCache._generate_key"]


def _patched_copy(dest: Path) -> Path:
    """``dest/tilelang``: symlinks to the installed package, real copies of the files the patch edits."""
    source = Path(tilelang.__file__).parent
    edited = [line.split()[1][2:] for line in PATCH.read_text().splitlines() if line.startswith("+++ ")]
    package = dest / "tilelang"
    package.mkdir(parents=True)
    for entry in source.iterdir():
        if entry.name == "__pycache__":
            continue
        if any(path.split("/")[1] == entry.name for path in edited) and entry.is_dir():
            (package / entry.name).mkdir()
            for child in entry.iterdir():
                if child.name != "__pycache__":
                    (package / entry.name / child.name).symlink_to(child)
        else:
            (package / entry.name).symlink_to(entry)
    for path in edited:
        target = dest / path
        target.unlink()
        shutil.copyfile(source.parent / path, target)
    subprocess.run(["patch", "-p1", "--quiet", "-d", str(dest), "-i", str(PATCH)], check=True)
    return package


PROGRAM = (
    ADD_KERNEL
    + """
import json, sys
from tilelang.cache.kernel_cache import KernelCache, _CACHE_KEY_SALTS
from tilelang.jit.kernel import JITKernel
from tilecore import _bridge
x, y = torch.randn(M, N), torch.randn(M, N)
k = tilelang.compile(add, target="democpu", out_idx=[-1])
print("REPORT", json.dumps({
    "tilelang": tilelang.__file__,
    "installed": _bridge.installed() is not None,
    "problems": _bridge.problems(),
    "retired": sorted(s.owner.split(":")[-1] + "." + s.attribute for s in _bridge.retired_seams()),
    "originals": [JITKernel.get_kernel_source.__module__, JITKernel.get_host_source.__module__,
                  KernelCache._generate_key.__module__, hasattr(KernelCache._generate_key, "__wrapped__")],
    "salts": sorted(_CACHE_KEY_SALTS),
    "err": float((k(x, y) - (x * 2 + y)).abs().max()),
    "source": "add_kernel" in k.get_kernel_source(),
    "from_disk": getattr(k, "artifact", None) is None,
}))
"""
)


@pytest.mark.slow
def test_patched_tilelang_needs_no_private_wrapper_for_the_proposed_apis(tmp_path: Path) -> None:
    if shutil.which("patch") is None:
        pytest.skip("the `patch` program is not installed")
    site = tmp_path / "site"
    package = _patched_copy(site)
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")])))
    env.update(PYTHONDONTWRITEBYTECODE="1", TILELANG_CACHE_DIR=str(tmp_path / "cache"), TILECORE_PLUGINS="democpu")
    reports = []
    for _ in range(2):  # the second process loads the kernel from tilelang's disk cache
        result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-4000:]
        reports.append(json.loads([ln for ln in result.stdout.splitlines() if ln.startswith("REPORT ")][-1][7:]))
    first, second = reports
    assert first["tilelang"].startswith(str(package)), "the subprocess must import the patched copy"
    assert first["installed"] and first["problems"] == []
    assert first["retired"] == RETIRED
    # The retired rows are tilelang's own functions: nothing wrapped them; the salt went through the public registry.
    assert first["originals"] == ["tilelang.jit.kernel", "tilelang.jit.kernel", "tilelang.cache.kernel_cache", False]
    assert first["salts"] == ["tilecore"]
    for report in reports:
        assert report["err"] < 1e-5 and report["source"]
    assert second["from_disk"] and not first["from_disk"]


def test_unpatched_tilelang_retires_nothing() -> None:
    from tilecore import _bridge

    assert _bridge.retired_seams() == []
