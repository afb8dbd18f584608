"""The ``tilelang-tpu`` command: ``toolchain install`` and ``toolchain info``.

``toolchain install`` asks pip where SophGo's ``tpu_mlir`` wheel is (``pip
install --dry-run --report``, so pip's index settings apply;
``--no-deps --ignore-requires-python``: the wheel's metadata pins Python 3.10,
and none of its Python code is used), downloads it into a private temporary
directory with a progress bar (``pip download`` does it when pip cannot name
the URL), unpacks only what compiling PPL and running the emulators need (see
:data:`KEEP_PREFIXES` and :data:`KEEP_LIBRARIES`, about 183 MiB of the 906 MiB
package; with a progress bar too) into a staging folder next to the
destination, and publishes it with one rename.  One install per version runs
at a time (a file lock); a second one waits and then finds the toolchain
installed.  Running it again is a no-op.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import filelock

from tilecore import ToolchainError
from tilecore.kit.paths import CacheDirectoryError, cache_write_error, private_tempdir, publish_dir
from tilecore.kit.tools import run_tool
from tilelang_tpu import __version__
from tilelang_tpu.setup import (
    INSTALL_COMMAND,
    RUNTIME_LIBRARIES,
    TOOLCHAIN_DIR_ENV,
    TOOLCHAIN_WHEEL_VERSION,
    find_toolchain,
    from_install,
    install_root,
)

PACKAGE = "tpu_mlir"
_PPL = f"{PACKAGE}/cross_toolchains/ppl_compile/"
#: Wheel members kept: the compiler, its headers, chip/runtime deps and its version file.
KEEP_PREFIXES = (f"{_PPL}bin/", f"{_PPL}inc/", f"{_PPL}deps/")
KEEP_FILES = (f"{_PPL}version",)
#: Runtime and emulator libraries (in tpu_mlir/lib) for every supported chip, plus the
#: emulator's own oneDNN/OpenMP (Debian's libdnnl is an incompatible 2.x).
KEEP_LIBRARIES = (
    *sorted({lib for libs in RUNTIME_LIBRARIES.values() for lib in libs}),
    "third_party/libdnnl.so.3",
    "third_party/libgomp.so.1",
    "third_party/libomp.so.5",
)
MANIFEST = "tilelang-tpu-toolchain.json"
_WHEEL_NAME = re.compile(r"^tpu_mlir-(?P<version>[^-]+)-.*\.whl$")


def _wanted(name: str) -> bool:
    if name.endswith("/"):
        return False
    if name.startswith(KEEP_PREFIXES) or name in KEEP_FILES:
        return True
    return name.startswith(f"{PACKAGE}/lib/") and name.removeprefix(f"{PACKAGE}/lib/") in KEEP_LIBRARIES


def _safe_member(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise ToolchainError(f"refusing wheel member {name!r}: it would unpack outside the toolchain folder")
    return path


def _progress(total: int, description: str, unit: str = "B") -> Any:
    """A tqdm bar on stderr (bytes scaled to KB/MB/GB); quiet when stderr is not a terminal
    unless ``TILELANG_TPU_PROGRESS=1``."""
    from tqdm import tqdm  # type: ignore[import-untyped]

    forced = os.environ.get("TILELANG_TPU_PROGRESS") == "1"
    return tqdm(
        total=total or None, desc=description, unit=unit, unit_scale=unit == "B", unit_divisor=1024 if unit == "B" else 1000,
        disable=False if forced else None, file=sys.stderr, mininterval=0.2, leave=True,
    )  # fmt: skip


def extract(wheel: Path, staging: Path) -> tuple[int, int]:
    """Unpack the kept members of ``wheel`` into ``staging`` (with a progress bar); returns (files, bytes)."""
    count = total = 0
    with zipfile.ZipFile(wheel) as archive:
        members = [info for info in archive.infolist() if _wanted(info.filename)]
        with _progress(sum(m.file_size for m in members), f"unpacking {wheel.name}") as bar:
            for info in members:
                target = staging / _safe_member(info.filename)
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as source, open(target, "wb") as sink:
                    while chunk := source.read(1 << 20):
                        sink.write(chunk)
                        bar.update(len(chunk))
                mode = (info.external_attr >> 16) & 0o777
                if mode:
                    target.chmod(mode | stat.S_IRUSR)
                count += 1
                total += info.file_size
    # Wheels often carry no mode bits: make the compiler and scripts executable explicitly.
    bin_dir = staging / _PPL / "bin"
    if not (bin_dir / "ppl-compile").is_file():
        raise ToolchainError(f"{wheel.name} has no {_PPL}bin/ppl-compile; it is not a tpu_mlir wheel this plugin can use")
    for entry in bin_dir.iterdir():
        entry.chmod(entry.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return count, total


def _pip(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "pip", *arguments, "--disable-pip-version-check"]


def resolve_wheel_url(version: str) -> str | None:
    """The URL pip would download ``tpu_mlir==version`` from (pip's own index settings apply),
    or ``None`` if pip cannot say without downloading (then pip downloads it itself)."""
    command = _pip("install", "--dry-run", "--quiet", "--report", "-", "--no-deps", "--ignore-requires-python",
                   "--only-binary=:all:", "--ignore-installed", f"{PACKAGE}=={version}")  # fmt: skip
    result = run_tool(command)
    if not result.ok:
        return None
    try:
        report = json.loads(result.stdout)
        return str(report["install"][0]["download_info"]["url"])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def fetch(url: str, into: Path) -> Path:
    """Download ``url`` (http(s) or file) into ``into`` with a progress bar; returns the file."""
    name = PurePosixPath(urllib.parse.urlparse(url).path).name
    if not _WHEEL_NAME.match(name):
        raise ToolchainError(f"{url} does not name a tpu_mlir wheel")
    target = into / name
    with urllib.request.urlopen(url, timeout=60) as response, open(target, "wb") as sink:
        length = int(response.headers.get("Content-Length") or 0)
        with _progress(length, f"downloading {name}") as bar:
            while chunk := response.read(1 << 20):
                sink.write(chunk)
                bar.update(len(chunk))
    return target


def _download(version: str, into: Path) -> Path:
    if importlib.util.find_spec("pip") is None:  # a venv made without pip (uv, --without-pip): not a network problem
        raise ToolchainError(
            f"this Python ({sys.executable}) has no pip, which `{INSTALL_COMMAND}` uses to find and download {PACKAGE}=={version}.",
            fix=f"install pip into it (`{sys.executable} -m ensurepip`), or download the {PACKAGE}=={version} wheel "
            f"yourself and run `{INSTALL_COMMAND} --wheel PATH`",
        )
    url = resolve_wheel_url(version)
    if url is not None:
        try:
            return fetch(url, into)
        except (OSError, urllib.error.URLError) as err:
            print(f"direct download of {url} failed ({err}); letting pip download it", file=sys.stderr)
    command = _pip("download", "--no-deps", "--ignore-requires-python", "--only-binary=:all:", f"{PACKAGE}=={version}", "-d", str(into))
    print(f"downloading {PACKAGE}=={version} with pip (about 312 MB) ...", flush=True)
    result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise ToolchainError(
            f"`{' '.join(command[2:])}` failed with exit status {result.returncode} (see pip's output above). "
            f"Check network access to PyPI, or download the wheel yourself and run `{INSTALL_COMMAND} --wheel PATH`."
        )
    wheels = sorted(into.glob("tpu_mlir-*.whl"))
    if not wheels:
        raise ToolchainError(f"pip reported success but left no tpu_mlir wheel in {into}")
    return wheels[0]


#: How long a second `toolchain install` waits for a running one before giving up (seconds).
INSTALL_LOCK_TIMEOUT_S = 3600.0


def install(version: str = TOOLCHAIN_WHEEL_VERSION, wheel: Path | None = None, force: bool = False) -> Path:
    """Install the toolchain; returns the published ``tpu_mlir`` folder.

    One install per version at a time: a second concurrent install waits on a
    file lock and then finds the toolchain the first one published (nothing is
    downloaded twice).  An install folder that cannot be written (read-only, full,
    under a file) raises :class:`~tilecore.kit.paths.CacheDirectoryError` naming it
    and :data:`~tilelang_tpu.setup.TOOLCHAIN_DIR_ENV`.
    """
    try:
        return _install(version, wheel, force)
    except OSError as err:
        error = cache_write_error(err, install_root(), TOOLCHAIN_DIR_ENV)
        if error is None:
            raise
        raise error from err


def _install(version: str, wheel: Path | None, force: bool) -> Path:
    if wheel is not None:
        match = _WHEEL_NAME.match(wheel.name)
        if not wheel.is_file() or match is None:
            raise ToolchainError(f"--wheel {wheel}: not a tpu_mlir-<version>-*.whl file")
        version = match["version"]
    install_root().mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = filelock.FileLock(str(install_root() / f".install-{version}.lock"))
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        print(f"another `{INSTALL_COMMAND}` of tpu_mlir {version} is running; waiting for it (lock {lock.lock_file}) ...", flush=True)
        try:
            lock.acquire(timeout=INSTALL_LOCK_TIMEOUT_S)
        except filelock.Timeout:
            raise ToolchainError(
                f"another `{INSTALL_COMMAND}` held {lock.lock_file} for more than {INSTALL_LOCK_TIMEOUT_S:.0f} s. "
                "If none is running, delete that file and retry."
            ) from None
    try:
        return _install_locked(version, wheel, force)
    finally:
        lock.release()


def _install_locked(version: str, wheel: Path | None, force: bool) -> Path:
    destination = install_root() / version
    package = destination / PACKAGE
    if package.is_dir() and not force:
        from_install(package)  # raises if an earlier install is incomplete
        print(f"tpu_mlir {version} toolchain already installed in {destination}")
        return package
    started = time.perf_counter()
    with private_tempdir("tilelang-tpu-download-") as download:
        source = wheel if wheel is not None else _download(version, download)
        with tempfile.TemporaryDirectory(prefix=f".staging-{version}-", dir=install_root(), ignore_cleanup_errors=True) as name:
            staging = Path(name)
            count, total = extract(source, staging)
            manifest = {
                "tpu_mlir": version,
                "wheel": source.name,
                "installed_by": f"tilelang-tpu {__version__}",
                "files": count,
                "bytes": total,
            }
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
            from_install(staging / PACKAGE)  # validate before publishing
            if force and destination.exists():
                shutil.rmtree(destination)
            publish_dir(staging, destination)
    print(
        f"installed tpu_mlir {version} toolchain: {count} files, {total / 2**20:.0f} MiB in {destination} ({time.perf_counter() - started:.1f} s)"
    )
    return package


def info(as_json: bool) -> int:
    try:
        toolchain = find_toolchain()
    except ToolchainError as err:
        if as_json:
            print(json.dumps({"found": False, "error": str(err)}, indent=2))
        else:
            print(f"no toolchain: {err}")
        return 1
    chips = {
        chip: {"chip_code": toolchain.chip_code(chip), "missing_libraries": toolchain.missing_libraries(chip)} for chip in RUNTIME_LIBRARIES
    }
    data = {
        "found": True,
        "found_by": toolchain.found_by,
        "version": toolchain.version,
        "ppl_root": str(toolchain.ppl_root),
        "ppl_compile": str(toolchain.ppl_compile),
        "library_dirs": [str(d) for d in toolchain.library_dirs],
        "chips": chips,
        "env": dict(toolchain.env),
        "install_root": str(install_root()),
        "warnings": list(toolchain.warnings),
    }
    if as_json:
        print(json.dumps(data, indent=2))
        return 0
    print(f"PPL toolchain {toolchain.version}")
    print(f"  found by:     {toolchain.found_by}")
    print(f"  ppl-compile:  {toolchain.ppl_compile}")
    print(f"  libraries:    {', '.join(str(d) for d in toolchain.library_dirs) or '<none>'}")
    for chip, facts in chips.items():
        state = "ready" if not facts["missing_libraries"] else "missing " + ", ".join(facts["missing_libraries"])
        print(f"  {chip:8s}      --chip {facts['chip_code']}, emulator {state}")
    for warning in toolchain.warnings:
        print(f"  WARNING: {warning}")
    for name, value in toolchain.env.items():
        print(f"  env {name}={value}")
    return 0


def constructs() -> int:
    """``tilelang-tpu constructs``: the construct table from the installed package (a wheel ships no docs/)."""
    from tilelang_tpu.codegen.doc_table import markdown_table
    from tilelang_tpu.codegen.table import supported_tile_ops_hint

    print(f"tilelang-tpu {__version__}: TileLang constructs and the PPL the tpu code generator emits for them.")
    print("A kernel using a construct marked refused fails to compile with a message naming it and the fix.\n")
    print(markdown_table(), end="")
    print(f"\n{supported_tile_ops_hint()}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tilelang-tpu", description=f"tilelang-tpu {__version__}: SophGo TPU backend for TileLang")
    commands = parser.add_subparsers(dest="command", required=True)
    toolchain = commands.add_parser("toolchain", help="install or show the SophGo PPL toolchain")
    actions = toolchain.add_subparsers(dest="action", required=True)
    install_parser = actions.add_parser(
        "install", help=f"fetch tpu_mlir from PyPI and unpack what compiling and emulation need into {install_root()}"
    )
    install_parser.add_argument("--version", default=TOOLCHAIN_WHEEL_VERSION, help=f"tpu_mlir version (default {TOOLCHAIN_WHEEL_VERSION})")
    install_parser.add_argument("--wheel", type=Path, help="use an already downloaded tpu_mlir wheel instead of pip download")
    install_parser.add_argument("--force", action="store_true", help="reinstall even if present")
    info_parser = actions.add_parser("info", help="show which toolchain tilelang-tpu uses and how it was found")
    info_parser.add_argument("--json", action="store_true", help="machine-readable output")
    commands.add_parser(
        "constructs",
        help="print the TileLang constructs the tpu code generator supports, what it emits for each, "
        "and what to write instead of a refused one",
    )
    args = parser.parse_args(argv)
    if args.command == "constructs":
        return constructs()
    try:
        if args.action == "install":
            install(args.version, args.wheel, args.force)
            return 0
        return info(args.json)
    except (ToolchainError, CacheDirectoryError) as err:
        print(f"tilelang-tpu: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
