"""tilelang's disk cache with tilecore: backend identity in the key, corruption, concurrency.

Each process reports how the goodt adapter was created: ``library_path`` set
means tilelang served the kernel from its disk cache; ``None`` means it compiled.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tcsupport import ADD_KERNEL, FakeSite, good_backend

REPORT = (
    ADD_KERNEL
    + """
x, y = torch.randn(M, N), torch.randn(M, N)
k = tilelang.compile(add, target="goodt", out_idx=[-1])
ok = (k(x, y) - (x * 2 + y)).abs().max().item() < 1e-5
print("RESULT", "hit" if k.adapter.kernel.library_path else "compiled", ok)
"""
)


def outcome(site: FakeSite, cache: Path) -> str:
    result = site.run(REPORT, TILELANG_CACHE_DIR=str(cache))
    assert result.returncode == 0, result.stderr[-3000:]
    line = [ln for ln in result.stdout.splitlines() if ln.startswith("RESULT")][-1]
    assert line.endswith("True"), line
    return line.split()[1]


def entries(cache: Path) -> list[Path]:
    return [p for p in cache.glob("*/*/kernels/*") if p.is_dir()]


def test_second_process_hits_and_new_backend_version_misses(tmp_path: Path) -> None:
    cache = tmp_path / "tlcache"
    v1 = FakeSite(tmp_path / "v1" / "site")
    v1.root.mkdir(parents=True)
    v1.add("tilelang-good", "1.0", "tcfake_goodv", good_backend("1.0"), entry="goodt")
    v2 = FakeSite(tmp_path / "v2" / "site")
    v2.root.mkdir(parents=True)
    v2.add("tilelang-good", "2.0", "tcfake_goodv", good_backend("2.0"), entry="goodt")

    assert outcome(v1, cache) == "compiled"
    assert outcome(v1, cache) == "hit"
    assert outcome(v2, cache) == "compiled", "a new backend version must never be served an old binary"
    assert len(entries(cache)) == 2


def test_corrupted_entry_is_rebuilt(fake_site: FakeSite, tmp_path: Path) -> None:
    cache = tmp_path / "tlcache"
    fake_site.add("tilelang-good", "1.0", "tcfake_goodc", good_backend(), entry="goodt")
    assert outcome(fake_site, cache) == "compiled"
    (entry,) = entries(cache)
    library = entry / "kernel_lib.bin"
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, different content: only the hash can tell
    library.write_bytes(bytes(data))
    assert outcome(fake_site, cache) == "compiled"
    assert outcome(fake_site, cache) == "hit"


def test_concurrent_compiles_leave_one_valid_entry(fake_site: FakeSite, tmp_path: Path) -> None:
    cache = tmp_path / "tlcache"
    fake_site.add("tilelang-good", "1.0", "tcfake_goodp", good_backend(), entry="goodt")
    script = tmp_path / "compile_worker.py"
    script.write_text(REPORT)
    env = fake_site.env(TILELANG_CACHE_DIR=str(cache))
    procs = [
        subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        for _ in range(3)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err[-3000:]
        assert "RESULT" in out and out.strip().endswith("True")
    assert len(entries(cache)) == 1
    staging = [p for p in cache.glob("*/*/.staging/*")]
    assert staging == [], staging
    assert outcome(fake_site, cache) == "hit"
    assert os.listdir(entries(cache)[0])


# ----------------------------------------------------------------------------------------
# Backend-owned build products (tilecore.kit.artifacts): verified at every reuse
# ----------------------------------------------------------------------------------------

DEMOCPU = (
    ADD_KERNEL
    + """
import json
x, y = torch.randn(M, N), torch.randn(M, N)
k = tilelang.compile(add, target="democpu", out_idx=[-1])
error = (k(x, y) - (x * 2 + y)).abs().max().item()
print("RESULT " + json.dumps({"hit": k.adapter.kernel.library_path is not None, "error": error, "library": k.adapter.launcher.adapter.library_path}))
"""
)


def _democpu(tmp_path: Path) -> dict:
    import json

    script = tmp_path / "democpu_add.py"
    script.write_text(DEMOCPU)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr[-3000:]}"
    line = [ln for ln in result.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line.removeprefix("RESULT "))


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if how == "truncated" else bytes(len(data)))


def _retag_tilelang_manifest(entry: Path) -> None:
    """Make tilelang's manifest vouch for whatever its entry now holds (as a copy taken from
    a damaged backend cache would have been vouched for)."""
    import hashlib
    import json

    manifest = entry / "manifest.json"
    data = json.loads(manifest.read_text())
    for name in data["files"]:
        content = (entry / name).read_bytes()
        data["files"][name] = {"size": len(content), "sha256": hashlib.sha256(content).hexdigest()}
    manifest.write_text(json.dumps(data))


def test_damaged_backend_library_is_rebuilt_not_loaded(tmp_path: Path) -> None:
    """Before tilecore.kit.artifacts: a truncated library gave SIGBUS on every compile, a zero-filled
    one "invalid ELF header", until deleted by hand; a damaged copy in tilelang's cache was served."""
    backend_cache = Path(os.environ["TILECORE_CACHE_DIR"]) / "democpu" / "kernels"
    tilelang_cache = Path(os.environ["TILELANG_CACHE_DIR"])
    first = _democpu(tmp_path)
    assert not first["hit"] and first["error"] < 1e-5
    library = Path(first["library"])
    assert library.parent.parent == backend_cache
    good = library.read_bytes()

    # 1. The backend's library is damaged and tilelang's cache is gone (upgrade, cache clear).
    _damage(library, "truncated")
    shutil.rmtree(tilelang_cache)
    second = _democpu(tmp_path)
    assert not second["hit"] and second["error"] < 1e-5
    rebuilt = Path(second["library"]).read_bytes()
    assert len(rebuilt) == len(good)

    # 2. tilelang's entry holds a damaged copy that its own manifest vouches for.
    (copy,) = tilelang_cache.glob("*/*/kernels/*/kernel_lib.bin")
    _damage(copy, "zero-filled")
    _retag_tilelang_manifest(copy.parent)
    third = _democpu(tmp_path)
    assert third["hit"] and third["error"] < 1e-5, "the verified library runs, never tilelang's copy"
    assert copy.read_bytes() == rebuilt, "the copy inside tilelang's cache entry is repaired"
