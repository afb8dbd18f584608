"""Build and check the five distributions the way a maintainer does before an upload.

``python tools/release.py version``  prints the family version (all five distributions share it).
``python tools/release.py dist``     builds an sdist and a wheel of every distribution into one folder
                                     with ``python -m build`` (``make dist``).
``python tools/release.py check``    the release check (``make release-check``, part of ``make test``):

1. ``twine check --strict`` on every sdist and wheel, and ``check-wheel-contents`` on every wheel;
2. each wheel is built again from its sdist, and the two file lists must be equal;
3. a fresh venv gets torch (``--torch``, ``--torch-index``) and then the wheels, by file, from the
   dist folder alone; their dependencies come from the package index;
4. from a folder outside the repository and with ``python -I`` (no source tree on ``sys.path``), a
   democpu kernel and a tpu kernel run on random data and are compared with torch;
5. the conformance suite runs in its ``-p`` and ``--pyargs`` forms from the folder holding the venv, under a
   conftest that isolates caches per test (F3 of issue 22);
6. the tests shipped in the plugin sdists run from the unpacked sdists against the installed wheels.

Everything temporary lives in one private folder that is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Every distribution: (name, project folder, file holding ``__version__``).
DISTRIBUTIONS: tuple[tuple[str, str, str], ...] = (
    ("tilecore", ".", "tilecore/_version.py"),
    ("tilelang-tpu", "plugins/tilelang_tpu", "plugins/tilelang_tpu/tilelang_tpu/__init__.py"),
    ("tilelang-cuda", "plugins/tilelang_cuda", "plugins/tilelang_cuda/tilelang_cuda/__init__.py"),
    ("tilelang-hip", "plugins/tilelang_hip", "plugins/tilelang_hip/tilelang_hip/__init__.py"),
    ("tilelang-democpu", "examples/democpu", "examples/democpu/tilelang_democpu/__init__.py"),
)

#: Test files of the plugin sdists run by the check: quick ones that need neither a GPU nor the emulator.
SDIST_TESTS: dict[str, list[str]] = {
    "tilelang-cuda": ["tests/test_cuda_target.py"],
    "tilelang-hip": ["tests/test_hip_target.py", "tests/test_hip_setup.py"],
    "tilelang-tpu": ["tests/test_tpu_target.py"],
}

_VERSION = re.compile(r'^__version__ = "([^"]+)"$', re.MULTILINE)

#: The kernels run in the fresh venv: an elementwise add on tiles that do not divide the shape.
KERNEL_SCRIPT = """
import sys
import tilelang
import tilelang.language as T
import torch

import tilecore

for module in (tilecore, tilelang):
    assert "site-packages" in module.__file__, f"{module.__name__} imported from {module.__file__}, not the venv"


def add(M, N, block_M, block_N, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a = T.alloc_fragment((block_M, block_N), dtype)
            b = T.alloc_fragment((block_M, block_N), dtype)
            c = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(A[by * block_M, bx * block_N], a)
            T.copy(B[by * block_M, bx * block_N], b)
            for i, j in T.Parallel(block_M, block_N):
                c[i, j] = a[i, j] + b[i, j]
            T.copy(c, C[by * block_M, bx * block_N])

    return main


target = sys.argv[1]
torch.manual_seed(0)
kernel = tilelang.compile(add(65, 100, 32, 64), target=target, out_idx=[-1])
a, b = torch.randn(65, 100), torch.randn(65, 100)
a0, b0 = a.clone(), b.clone()
c = kernel(a, b)
torch.testing.assert_close(c, a + b, rtol=0, atol=0)
assert torch.equal(a, a0) and torch.equal(b, b0), "the kernel changed its inputs"
print(f"{target}: add 65x100 (tiles 32x64) equals torch; tilecore {tilecore.__version__} from {tilecore.__file__}")
"""


#: A project's conftest that isolates caches per test, as the repository's does (issue 22, F3).
PROJECT_CONFTEST = """
from tilecore.kit.testing import tilecore_isolated_caches  # noqa: F401  (autouse: fresh caches per test)
"""
#: The conformance cases run in both forms: declaration, a kernel, and the disk-cache second process.
CONFORMANCE_CASES = "declaration or copy or disk_cache"


def family_version() -> str:
    """The one version of all five distributions; refuses when any differs."""
    versions = {}
    for name, _, version_file in DISTRIBUTIONS:
        match = _VERSION.search((ROOT / version_file).read_text())
        if match is None:
            raise SystemExit(f'{version_file}: no `__version__ = "..."` line')
        versions[name] = match.group(1)
    if len(set(versions.values())) != 1:
        raise SystemExit(f"the five distributions must share one version, found {versions}")
    return next(iter(versions.values()))


def run(command: Sequence[str | Path], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run ``command``; print and return its output; exit with it on failure."""
    shown = " ".join(str(part) for part in command)
    print(f"$ {shown}", flush=True)
    proc = subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        print(output[-8000:])
        raise SystemExit(f"release check failed: `{shown}` exited {proc.returncode}")
    return output


def build(project: Path, out: Path, *kinds: str) -> None:
    run([sys.executable, "-m", "build", *kinds, "--outdir", out, project])


def dist(out: Path) -> list[Path]:
    """An sdist and a wheel of every distribution in ``out`` (emptied first)."""
    version = family_version()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for _, folder, _ in DISTRIBUTIONS:
        build(ROOT / folder, out, "--sdist", "--wheel")
    files = sorted(out.iterdir())
    for name, _, _ in DISTRIBUTIONS:
        stem = f"{name.replace('-', '_')}-{version}"
        expected = {f"{stem}.tar.gz", f"{stem}-py3-none-any.whl"}
        missing = expected - {f.name for f in files}
        if missing:
            raise SystemExit(f"make dist did not produce {sorted(missing)}")
    for path in files:
        print(f"{path.name}  ({path.stat().st_size} bytes)")
    return files


def wheel_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return sorted(archive.namelist())


def sdist_files(sdist: Path) -> list[str]:
    with tarfile.open(sdist) as archive:
        return sorted(member.name.split("/", 1)[1] for member in archive.getmembers() if member.isfile())


def unpack_sdist(sdist: Path, into: Path) -> Path:
    with tarfile.open(sdist) as archive:
        archive.extractall(into, filter="data")
    return into / sdist.name.removesuffix(".tar.gz")


def check(folder: Path, torch_requirement: str, torch_index: str | None, work: Path) -> None:
    version = family_version()
    sdists = sorted(folder.glob("*.tar.gz"))
    wheels = sorted(folder.glob("*.whl"))
    if len(sdists) != len(DISTRIBUTIONS) or len(wheels) != len(DISTRIBUTIONS):
        raise SystemExit(f"{folder} must hold one sdist and one wheel of each of {len(DISTRIBUTIONS)} distributions (make dist)")
    bin_dir = Path(sys.executable).parent

    print("== contents")
    for path in [*sdists, *wheels]:
        names = sdist_files(path) if path.suffix == ".gz" else wheel_files(path)
        print(f"{path.name}: {len(names)} files: {' '.join(names)}")

    print("== twine check --strict, check-wheel-contents")
    print(run([bin_dir / "twine", "check", "--strict", *sdists, *wheels]).strip())
    print(run([bin_dir / "check-wheel-contents", *wheels]).strip())

    print("== each wheel rebuilt from its sdist has the same files")
    for sdist in sdists:
        stem = sdist.name.removesuffix(".tar.gz")
        tree = unpack_sdist(sdist, work / "sdists")
        rebuilt = work / "rebuilt"
        build(tree, rebuilt, "--wheel")
        ours = folder / f"{stem}-py3-none-any.whl"
        again = rebuilt / ours.name
        if wheel_files(ours) != wheel_files(again):
            diff = set(wheel_files(ours)) ^ set(wheel_files(again))
            raise SystemExit(f"{ours.name} differs from the wheel built from {sdist.name}: {sorted(diff)}")
        print(f"{ours.name}: {len(wheel_files(ours))} files, the same from {sdist.name}")

    print("== a fresh venv with the wheels alone")
    venv = work / "venv"
    run([sys.executable, "-m", "venv", venv])
    python = venv / "bin" / "python"
    torch_args = [torch_requirement] + (["--index-url", torch_index] if torch_index else [])
    run([python, "-m", "pip", "install", "-q", *torch_args])
    started = time.perf_counter()
    run([python, "-m", "pip", "install", "-q", *wheels, "pytest>=8"])
    print(f"installed {len(wheels)} wheels and their dependencies in {time.perf_counter() - started:.0f} s")
    outside = work / "elsewhere"
    outside.mkdir()
    # The SophGo toolchain `tilelang-tpu toolchain install` keeps in the user's cache (make setup installed
    # it): found before the caches below are redirected, so the fresh venv's install command is a no-op.
    where = "from tilelang_tpu.setup import install_root; print(install_root())"
    toolchains = run([python, "-I", "-c", where], cwd=work).strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TILECORE_", "TILELANG_"))}
    env["TILELANG_TPU_TOOLCHAIN_DIR"] = toolchains
    env["TILELANG_CACHE_DIR"] = str(work / "tilelang-cache")
    env["TILECORE_CACHE_DIR"] = str(work / "tilecore-cache")
    env["TMPDIR"] = str(work)
    listed = run([venv / "bin" / "tilecore", "list", "--load"], cwd=outside, env=env)
    print(listed.strip())
    for dist_name, *_ in DISTRIBUTIONS[1:]:
        if f"{dist_name} {version}" not in listed:
            raise SystemExit(f"`tilecore list --load` in the fresh venv does not show {dist_name} {version}")
    script = outside / "kernels.py"
    script.write_text(KERNEL_SCRIPT)
    run([venv / "bin" / "tilelang-tpu", "toolchain", "install"], cwd=outside, env=env)
    for target in ("democpu", "tpu"):
        print(run([python, "-I", script, target], cwd=outside, env=env).strip().splitlines()[-1])

    print("== the conformance suite, -p and --pyargs forms, from a folder with a cache-isolating conftest")
    # The venv lies inside the folder, so pytest meets the conftest walking up from the case files.
    (work / "conftest.py").write_text(PROJECT_CONFTEST)
    (work / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    for form in (["-p", "tilecore.conformance"], ["--pyargs", "tilecore.conformance"]):
        command = [python, "-I", "-m", "pytest", *form, "--tilecore-target=democpu", "-k", CONFORMANCE_CASES, "-q"]
        output = run(command, cwd=work, env=env)
        print(f"{' '.join(form)}: {output.strip().splitlines()[-1]}")

    print("== the plugin sdists' own tests, from the unpacked sdists")
    for name, tests in SDIST_TESTS.items():
        tree = work / "sdists" / f"{name.replace('-', '_')}-{version}"
        output = run([python, "-I", "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=tree, env=env)
        print(f"{name}: {output.strip().splitlines()[-1]}")
    print("release check: all passed")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/release.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the family version")
    dist_parser = sub.add_parser("dist", help="build every sdist and wheel into one folder")
    dist_parser.add_argument("--out", type=Path, default=ROOT / "dist")
    check_parser = sub.add_parser("check", help="the release check of a folder built by `dist`")
    check_parser.add_argument("--dist", type=Path, default=ROOT / "dist")
    check_parser.add_argument("--torch", default="torch==2.13.0", help="torch requirement for the fresh venv")
    check_parser.add_argument("--torch-index", default=None, help="index URL for torch (PyTorch's CPU index, say)")
    args = parser.parse_args(argv)
    if args.command == "version":
        print(family_version())
    elif args.command == "dist":
        dist(args.out.resolve())
    else:
        with tempfile.TemporaryDirectory(prefix="tilecore-release-") as work:
            check(args.dist.resolve(), args.torch, args.torch_index or None, Path(work))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
