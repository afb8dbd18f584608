"""tilelang's disk cache with tilecore: backend identity in the key, corruption, concurrency.

Each process reports how the goodt adapter was created: ``library_path`` set
means tilelang served the kernel from its disk cache; ``None`` means it compiled.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tcsupport import ADD_KERNEL, FakeSite, good_backend

REPORT = ADD_KERNEL + '''
x, y = torch.randn(M, N), torch.randn(M, N)
k = tilelang.compile(add, target="goodt", out_idx=[-1])
ok = (k(x, y) - (x * 2 + y)).abs().max().item() < 1e-5
print("RESULT", "hit" if k.adapter.kernel.library_path else "compiled", ok)
'''


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
