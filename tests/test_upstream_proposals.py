"""The upstream proposals, applied: each docs/upstream/<proposal>.patch applies cleanly to tilelang
0.1.15's files on its own, and all of them together make the bridge unnecessary.

A copy of the installed tilelang with every patch applied is put first on PYTHONPATH, with a
distribution that declares tilecore in the proposed ``tilelang.plugins`` entry-point group, and
tilecore's ``.pth`` startup hook turned off.  Fresh interpreters then show, proposal by proposal,
that the bridge goes through tilelang's public registries and installs no wrapper, while a
democpu kernel still compiles, runs, profiles, reads its source and travels through a cache tier
into a second process.
"""

from __future__ import annotations

import importlib.metadata
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
UPSTREAM = ROOT / "docs" / "upstream"
#: In the order they are applied; each also applies alone (test_each_patch_applies_alone).
PATCHES = [
    UPSTREAM / f"{name}.patch"
    for name in (
        "source-getters",
        "cache-key-salt",
        "adapter-factory",
        "cache-tiers",
        "profiler-hooks",
        "stacked-jit",
        "entry-points",
        "autotune-runners",
    )
]
#: Every SEAMS row with a wrapper names one of these proposals: with all of them merged, nothing is patched.
RETIRED = [
    "AutoTuner.run",
    "JITKernel.__getitem__",
    "JITKernel._create_adapter_from_artifact",
    "JITKernel._create_adapter_from_database",
    "JITKernel.get_host_source",
    "JITKernel.get_kernel_source",
    "JITKernel.get_profiler",
    "KernelCache._generate_key",
    "KernelCache._load_kernel_from_disk",
    "KernelCache._save_kernel_to_disk",
    "Profiler.__post_init__",
    "Profiler._get_inputs",
    "Profiler._legalize_result_idx",
    "Profiler.assert_allclose",
    "Profiler.do_bench",
    "Profiler.with_default_adapter",
    "_dispatch_map.tilecore",
    "tilelang.backend.register_backend",
    "tilelang.backend.register_target_detector",
    "tilelang.backend.register_target_normalizer",
    "tilelang.jit",
    "tilelang.utils.tensor.torch_assert_close",
]


def _edited_files(patches: list[Path]) -> list[str]:
    return sorted({line.split()[1][2:] for patch in patches for line in patch.read_text().splitlines() if line.startswith("+++ ")})


def _patched_copy(dest: Path, patches: list[Path]) -> Path:
    """``dest/tilelang``: symlinks to the installed package, real copies of the files the patches edit."""
    source = Path(tilelang.__file__).parent
    edited = _edited_files(patches)
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
    for patch in patches:
        # --fuzz=0: a hunk that no longer matches exactly is a failure, not a guess.
        subprocess.run(["patch", "-p1", "--quiet", "--fuzz=0", "-d", str(dest), "-i", str(patch)], check=True)
    return package


def _declare_tilecore_plugin(site: Path) -> None:
    """What tilecore's pyproject would declare once tilelang loads the group (docs/upstream/entry-points.md)."""
    info = site / "tilecore_tilelang_plugin-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tilecore-tilelang-plugin\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[tilelang.plugins]\ntilecore = tilecore:_autoload_activate\n")


PROGRAM = (
    ADD_KERNEL
    + """
import json, os, shutil, sys
# Only `import tilelang` so far: tilecore was activated by tilelang's entry-point group.
activated_by_tilelang = "tilecore" in sys.modules and sys.modules["tilecore"]._bridge.installed() is not None
from tilelang.backend import get_backend
from tilelang.backend.module import _BACKENDS
from tilelang.backend.target import _TARGET_NORMALIZERS, _TARGET_DETECTORS
from tilelang.cache import _dispatch_map
from tilelang.cache.kernel_cache import _CACHE_KEY_SALTS, _CACHE_TIERS
from tilelang.profiler import _PROFILER_HOOKS, Profiler
from tilecore import _bridge
from tilecore._bridge import gate, seams
from tilecore._bridge.cache_tiers import add_tier, remove_tier

store = os.environ["TIER_STORE"]

class DirectoryTier:
    # A shared store in a directory: publish copies an entry there, fetch installs it atomically.
    fetched, published = [], []
    def fetch(self, key, cache_path, context):
        entry = os.path.join(store, key)
        if not os.path.isdir(entry):
            return False
        staging = os.path.join(context.staging_dir, key + ".fetch")
        shutil.copytree(entry, staging)
        os.rename(staging, cache_path)
        self.fetched.append(context.verify(cache_path))
        return True
    def publish(self, key, cache_path, context):
        shutil.copytree(cache_path, os.path.join(store, key), dirs_exist_ok=True)
        self.published.append(context.versions["backend"])

tier = DirectoryTier()
add_tier(tier)

def tilecore_objects():
    # Every SEAMS row tilecore would wrap: is the live object tilecore's?
    found = []
    for seam in seams.SEAMS:
        if not seam.patched or seam.kind == "register":
            continue
        owner = gate.resolve(seam.owner)
        value = owner.get(seam.attribute) if seam.kind == "item" else getattr(owner, seam.attribute, None)
        if str(getattr(value, "__module__", "")).startswith("tilecore.") or type(value).__module__.startswith("tilecore."):
            found.append(seam.name)
    return found

torch.manual_seed(0)
x, y = torch.randn(M, N), torch.randn(M, N)
x0, y0 = x.clone(), y.clone()
k = tilelang.compile(add, target="democpu", out_idx=[-1])
out = k(x, y)
profiler = k.get_profiler()
profiler.assert_allclose(lambda a, b: a * 2 + b, atol=1e-5, rtol=1e-5)
try:
    profiler.assert_allclose(lambda a, b: a * 2 - b, atol=1e-5, rtol=1e-5)
    wrong_reference_caught = False
except AssertionError:
    wrong_reference_caught = True
stacked = tilelang.jit(target="democpu", out_idx=[-1])(add)
try:
    stacked[(0,)]
    zero_grid_refused = False
except TypeError:
    zero_grid_refused = True
spec = get_backend("tilecore").execution_backends[0]
report = {
    "tilelang": tilelang.__file__,
    "activated_by_tilelang": activated_by_tilelang,
    "problems": _bridge.problems(),
    "retired": sorted(s.owner.split(":")[-1] + "." + s.attribute for s in _bridge.retired_seams()),
    "tilecore_objects": tilecore_objects(),
    "public": {
        "backend": "tilecore" in _BACKENDS and "tilecore" not in _dispatch_map,
        "adapter_factory": spec.adapter_factory is not None and spec.kernel_cache is not None,
        "normalizer_first": next(iter(_TARGET_NORMALIZERS)) == "tilecore",
        "detector": "tilecore" in _TARGET_DETECTORS,
        "salt": sorted(_CACHE_KEY_SALTS),
        "profiler_hooks": sorted(_PROFILER_HOOKS),
        "tiers": len(_CACHE_TIERS),
    },
    "profiler_is_tilelangs": type(profiler) is Profiler,
    "bench_ms": profiler.do_bench(n_warmup=1, n_repeat=3),
    "wrong_reference_caught": wrong_reference_caught,
    "stacked_type": type(stacked).__module__ + "." + type(stacked).__name__,
    "zero_grid_refused": zero_grid_refused,
    "errors": [float((o - (x * 2 + y)).abs().max()) for o in (out, stacked(x, y), stacked[(1,)](x, y))],
    "inputs_untouched": bool(torch.equal(x, x0) and torch.equal(y, y0)),
    "source": "add_kernel" in k.get_kernel_source(),
    "from_disk": getattr(k, "artifact", None) is None,
    "fetched": tier.fetched,
    "published": tier.published,
}
remove_tier(tier)
_bridge.uninstall()  # through the public unregister functions
report["after_uninstall"] = [
    "tilecore" in _BACKENDS, "tilecore" in _TARGET_NORMALIZERS, "tilecore" in _TARGET_DETECTORS,
    "tilecore" in _CACHE_KEY_SALTS, "tilecore" in _PROFILER_HOOKS, len(_CACHE_TIERS),
]
print("REPORT", json.dumps(report))
"""
)


@pytest.fixture(scope="module")
def patch_program() -> str:
    if shutil.which("patch") is None:
        pytest.skip("the `patch` program is not installed")
    return "patch"


def test_each_patch_applies_alone(tmp_path: Path, patch_program: str) -> None:
    source = Path(tilelang.__file__).parent.parent
    for patch in PATCHES:
        copy = tmp_path / patch.stem
        for path in _edited_files([patch]):
            (copy / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / path, copy / path)
        result = subprocess.run([patch_program, "-p1", "--fuzz=0", "-d", str(copy), "-i", str(patch)], capture_output=True, text=True)
        assert result.returncode == 0 and "offset" not in result.stdout, f"{patch.name}:\n{result.stdout}{result.stderr}"


@pytest.mark.slow
def test_patched_tilelang_needs_no_private_wrapper(tmp_path: Path, patch_program: str) -> None:
    site = tmp_path / "site"
    package = _patched_copy(site, PATCHES)
    _declare_tilecore_plugin(site)
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    (tmp_path / "store").mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")])))
    env.update(
        PYTHONDONTWRITEBYTECODE="1",
        TILECORE_PLUGINS="democpu",
        TILECORE_DISABLE_PLUGIN_AUTOLOAD="1",  # the .pth startup hook stays out: tilelang loads tilecore
        TIER_STORE=str(tmp_path / "store"),
    )
    reports = []
    # The second process has an empty local cache: the kernel comes through the cache tier.
    for cache in ("cache-1", "cache-2"):
        env["TILELANG_CACHE_DIR"] = str(tmp_path / cache)
        result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-4000:]
        reports.append(json.loads([ln for ln in result.stdout.splitlines() if ln.startswith("REPORT ")][-1][7:]))
    first, second = reports
    assert first["tilelang"].startswith(str(package)), "the subprocess must import the patched copy"
    for report in reports:
        assert report["activated_by_tilelang"] and report["problems"] == []
        assert report["retired"] == RETIRED
        assert report["tilecore_objects"] == [], "a wrapper was installed although tilelang has the public API"
        assert report["public"] == {
            "backend": True,
            "adapter_factory": True,
            "normalizer_first": True,
            "detector": True,
            "salt": ["tilecore"],
            "profiler_hooks": ["tilecore"],
            "tiers": 1,
        }
        assert report["profiler_is_tilelangs"] and report["bench_ms"] > 0 and report["wrong_reference_caught"]
        assert report["stacked_type"] == "tilelang.jit.PrimFuncJIT" and report["zero_grid_refused"]
        assert max(report["errors"]) < 1e-5 and report["inputs_untouched"] and report["source"]
        assert report["after_uninstall"] == [False, False, False, False, False, 0]
    democpu = f"tilelang-democpu=={importlib.metadata.version('tilelang-democpu')}"
    assert not first["from_disk"] and first["published"] == [democpu] and first["fetched"] == []
    assert second["from_disk"] and second["fetched"] == [True] and second["published"] == []


def test_unpatched_tilelang_retires_nothing() -> None:
    from tilecore import _bridge

    assert _bridge.retired_seams() == []
