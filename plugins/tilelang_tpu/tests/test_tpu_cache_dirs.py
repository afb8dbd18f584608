"""The tpu backend's directories that cannot be written: the error names the directory, the
environment variable that moves it and the fix (issue 19, item 11).

* kernels (the artifact store under ``TILECORE_CACHE_DIR``), on a real tpu compile;
* the toolchain install folder (``TILELANG_TPU_TOOLCHAIN_DIR``), on ``tilelang-tpu toolchain install``;
* an explicit emulator scratch folder (``TPU_SCALAER_EMULATOR_WORKDIR``).

"Under a regular file" fails for root too (chmod does not stop root's writes); a real read-only
file system is a tmpfs mounted read-only in a private mount namespace (``unshare --mount``,
skipped where that is not allowed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from tilelang_tpu import emulator, setup

COMPILE = textwrap.dedent(
    """
    import tilelang, torch
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((70, 90), "float32"), C: T.Tensor((70, 90), "float32")):
        with T.Kernel(T.ceildiv(90, 64), T.ceildiv(70, 32), threads=1) as (bx, by):
            a = T.alloc_shared((32, 64), "float32")
            T.copy(A[by * 32, bx * 64], a)
            for i, j in T.Parallel(32, 64):
                a[i, j] = a[i, j] * 2.0
            T.copy(a, C[by * 32, bx * 64])

    tilelang.compile(main, target="tpu", out_idx=[-1])
    """
)


def _can_unshare() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True).returncode == 0


def _run(command: list[str], env: dict[str, str], cwd: Path, mount_ro: Path | None = None) -> str:
    """The last line of stderr of ``command``, which must fail (after mounting ``mount_ro`` read-only)."""
    if mount_ro is not None:
        script = f'set -e\nmount -t tmpfs -o size=1m,ro tmpfs {mount_ro}\nexec "$@"\n'
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *command]
    proc = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0, proc.stdout[-2000:]
    return proc.stderr.strip().splitlines()[-1]


def _assert_named(error: str, directory: Path, variable: str) -> None:
    assert str(directory) in error and variable in error, error
    assert f"set {variable} to a directory you can write to" in error, error
    assert not any(advice in error for advice in ("report it to", "upgrade")), error


def test_kernel_store_under_a_file(toolchain: setup.TpuToolchain, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env = {**os.environ, "TILECORE_CACHE_DIR": str(blocker / "cache"), "TILELANG_CACHE_DIR": str(tmp_path / "tilelang"),
           setup.TOOLCHAIN_DIR_ENV: str(setup.install_root())}  # fmt: skip
    script = tmp_path / "compile.py"  # a file: tilelang reads the kernel's source
    script.write_text(COMPILE)
    error = _run([sys.executable, str(script)], env, tmp_path)
    assert "CacheDirectoryError" in error, error
    _assert_named(error, blocker / "cache", "TILECORE_CACHE_DIR")


def _install(tmp_path: Path, root: Path, mount_ro: Path | None = None) -> str:
    wheel = tmp_path / "tpu_mlir-1.0-py3-none-any.whl"  # never opened: the install folder fails first
    wheel.write_bytes(b"")
    env = {**os.environ, setup.TOOLCHAIN_DIR_ENV: str(root)}
    command = [sys.executable, "-m", "tilelang_tpu.cli", "toolchain", "install", "--wheel", str(wheel)]
    return _run(command, env, tmp_path, mount_ro)


def test_toolchain_folder_under_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    error = _install(tmp_path, blocker / "toolchain")
    assert error.startswith("tilelang-tpu: error: cache directory"), error
    _assert_named(error, blocker / "toolchain", setup.TOOLCHAIN_DIR_ENV)


@pytest.mark.skipif(not _can_unshare(), reason="needs `unshare --mount` (root with CAP_SYS_ADMIN) for a real read-only file system")
def test_read_only_toolchain_folder(tmp_path: Path) -> None:
    mount = tmp_path / "ro"
    mount.mkdir()
    error = _install(tmp_path, mount / "toolchain", mount_ro=mount)
    _assert_named(error, mount / "toolchain", setup.TOOLCHAIN_DIR_ENV)
    assert "Read-only file system" in error, error


def test_emulator_scratch_folder_under_a_file(tmp_path: Path) -> None:
    short = Path(tempfile.mkdtemp(prefix="tcd-", dir="/tmp"))  # socket paths must stay short
    try:
        blocker = short / "f"
        blocker.write_text("not a directory")
        env = {**os.environ, emulator.WORKDIR_ENV: str(blocker / "w")}
        error = _run([sys.executable, "-c", "from tilelang_tpu import emulator; emulator.ensure_workdir()"], env, tmp_path)
    finally:
        shutil.rmtree(short)
    assert "CacheDirectoryError" in error, error
    _assert_named(error, blocker / "w", emulator.WORKDIR_ENV)
