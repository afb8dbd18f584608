"""Toolchain discovery and the `tilelang-tpu toolchain` command, on real files in temp dirs."""

from __future__ import annotations

import importlib.metadata
import json
import os
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import filelock
import pytest
from tilelang_tpu import __version__, cli, setup

from tilecore import ToolchainError


def _fake_sdk(root: Path, *, with_libs: bool = True) -> Path:
    """A PPL SDK layout with an executable ppl-compile stand-in (discovery only checks files)."""
    (root / "bin").mkdir(parents=True)
    compiler = root / "bin" / "ppl-compile"
    compiler.write_text("#!/bin/sh\nexit 0\n")
    compiler.chmod(0o755)
    (root / "inc").mkdir()
    (root / "inc" / "ppl.h").write_text("// fake\n")
    (root / "version").write_text("v9.9.9-fake\n")
    (root / "deps" / "chip").mkdir(parents=True)
    (root / "deps" / "chip" / "chip_map.json").write_text(json.dumps({"bm1690": "tpub_7_1", "bm1684x": "tpu_6_0_custom"}))
    if with_libs:
        (root / "runtime_libs").mkdir()
        for name in setup.RUNTIME_LIBRARIES["bm1690"]:
            (root / "runtime_libs" / name).write_bytes(b"")
    return root


def _envsetup(root: Path, body: str) -> Path:
    script = root / "envsetup.sh"
    script.write_text(body)
    return script


GOOD_ENVSETUP = """\
#!/bin/bash
echo "Setting up the PPL environment..."
export PPL_PROJECT_ROOT=$(pwd)
export PATH=$PPL_PROJECT_ROOT/bin:$PATH
export LD_LIBRARY_PATH=$PPL_PROJECT_ROOT/runtime_libs:$LD_LIBRARY_PATH
export PPL_RUNTIME_PATH=$PPL_PROJECT_ROOT/deps
NOT_EXPORTED=1
"""


def test_envsetup_exports_are_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sdk = _fake_sdk(tmp_path / "sdk")
    script = _envsetup(sdk, GOOD_ENVSETUP)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/old")
    exported = setup.source_envsetup(script)
    assert exported == {
        "PPL_PROJECT_ROOT": str(sdk),  # sourced with the SDK as working directory
        "PATH": f"{sdk}/bin:/usr/bin:/bin",
        "LD_LIBRARY_PATH": f"{sdk}/runtime_libs:/opt/old",
        "PPL_RUNTIME_PATH": f"{sdk}/deps",
    }
    assert "PPL_PROJECT_ROOT" not in os.environ  # nothing leaked into this process


def test_discovery_from_ppl_project_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sdk = _fake_sdk(tmp_path / "sdk")
    _envsetup(sdk, GOOD_ENVSETUP)
    monkeypatch.setenv("PPL_PROJECT_ROOT", str(sdk))
    found = setup.discover()
    assert "envsetup.sh sourced in a subprocess" in found.found_by
    assert found.ppl_compile == sdk / "bin" / "ppl-compile"
    assert found.version == "v9.9.9-fake"
    assert sdk / "runtime_libs" in found.library_dirs
    assert found.missing_libraries("bm1690") == []
    assert found.missing_libraries("bm1684x") == list(setup.RUNTIME_LIBRARIES["bm1684x"])
    assert found.chip_code("bm1684x") == "tpu_6_0_custom"  # read from the SDK's chip_map.json
    assert found.env["PPL_RUNTIME_PATH"] == f"{sdk}/deps"
    toolchain = found.as_toolchain()
    assert toolchain.version == "v9.9.9-fake" and toolchain.fingerprint == "v9.9.9-fake"
    assert toolchain.env["LD_LIBRARY_PATH"].startswith(f"{sdk}/runtime_libs")
    with pytest.raises(ToolchainError, match=r"lacks the bm1684x emulator libraries libbmlib\.so"):
        found.require_libraries("bm1684x")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("echo about to fail >&2\nexit 3\n", r"exit status 3:\nabout to fail"),
        ("export A=1\nif then fi\n", r"syntax error"),
    ],
)
def test_broken_envsetup_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, expected: str) -> None:
    sdk = _fake_sdk(tmp_path / "sdk")
    script = _envsetup(sdk, body)
    monkeypatch.setenv("PPL_PROJECT_ROOT", str(sdk))
    with pytest.raises(ToolchainError, match=expected) as info:
        setup.discover()
    message = str(info.value)
    assert str(script) in message and f"tilelang-tpu {__version__}" in message and "PPL_PROJECT_ROOT" in message


def test_relative_ppl_project_root_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PPL_PROJECT_ROOT", "sdk")
    with pytest.raises(ToolchainError, match="relative path; it must be absolute"):
        setup.discover()


def test_incomplete_sdk_is_an_error_not_a_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sdk = _fake_sdk(tmp_path / "sdk")
    (sdk / "bin" / "ppl-compile").unlink()
    monkeypatch.setenv("PPL_PROJECT_ROOT", str(sdk))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    with pytest.raises(ToolchainError, match="is incomplete: no ppl-compile"):
        setup.discover()


def test_no_toolchain_gives_the_install_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        importlib.metadata.distribution("tpu_mlir")
        pytest.skip("a tpu_mlir package is installed in this environment (discovery source 2)")
    except importlib.metadata.PackageNotFoundError:
        pass
    monkeypatch.delenv("PPL_PROJECT_ROOT", raising=False)
    monkeypatch.setenv(setup.TOOLCHAIN_DIR_ENV, str(tmp_path / "empty"))
    with pytest.raises(ToolchainError) as info:
        setup.discover()
    message = str(info.value)
    assert "no SophGo PPL toolchain found" in message
    assert "run `tilelang-tpu toolchain install`" in message
    assert f"tilelang-tpu {__version__}" in message and "$PPL_PROJECT_ROOT: not set" in message
    from tilelang_tpu.target import probe

    availability = probe()
    assert not availability and "tilelang-tpu toolchain install" in availability.reason


def _fake_wheel(path: Path, version: str = "9.9.9", extra: dict[str, bytes] | None = None) -> Path:
    ppl = "tpu_mlir/cross_toolchains/ppl_compile/"
    members = {
        f"{ppl}bin/ppl-compile": b"#!/bin/sh\nexit 0\n",
        f"{ppl}inc/ppl.h": b"// fake\n",
        f"{ppl}deps/chip/chip_map.json": b'{"bm1690": "tpub_7_1"}',
        f"{ppl}version": b"v1.2.3-fake\n",
        "tpu_mlir/lib/libtpuv7_rt.so": b"",
        "tpu_mlir/lib/third_party/libdnnl.so.3": b"",
        "tpu_mlir/lib/libunrelated_big.so": b"x" * 1000,
        "tpu_mlir/python/tools/model_deploy.py": b"print('not needed')\n",
        **(extra or {}),
    }
    wheel = path / f"tpu_mlir-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)  # no mode bits, like many wheels
    return wheel


def test_install_unpacks_only_what_is_needed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("PPL_PROJECT_ROOT", raising=False)
    monkeypatch.setenv(setup.TOOLCHAIN_DIR_ENV, str(tmp_path / "toolchains"))
    wheel = _fake_wheel(tmp_path)
    assert cli.main(["toolchain", "install", "--wheel", str(wheel)]) == 0
    package = tmp_path / "toolchains" / "9.9.9" / "tpu_mlir"
    compiler = package / "cross_toolchains" / "ppl_compile" / "bin" / "ppl-compile"
    assert compiler.stat().st_mode & stat.S_IXUSR
    assert (package / "lib" / "libtpuv7_rt.so").is_file() and (package / "lib" / "third_party" / "libdnnl.so.3").is_file()
    assert not (package / "lib" / "libunrelated_big.so").exists() and not (package / "python").exists()
    assert not [p for p in (tmp_path / "toolchains").iterdir() if p.name.startswith(".staging")]
    assert cli.main(["toolchain", "install", "--wheel", str(wheel)]) == 0  # idempotent
    assert "already installed" in capsys.readouterr().out
    try:
        importlib.metadata.distribution("tpu_mlir")
        return  # discovery source 2 would win; the install itself is checked above
    except importlib.metadata.PackageNotFoundError:
        pass
    found = setup.discover()
    assert "tilelang-tpu toolchain install" in found.found_by and found.version == "v1.2.3-fake"
    assert cli.main(["toolchain", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["found"] and info["version"] == "v1.2.3-fake" and info["chips"]["bm1690"]["chip_code"] == "tpub_7_1"


def test_install_refuses_members_outside_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(setup.TOOLCHAIN_DIR_ENV, str(tmp_path / "toolchains"))
    wheel = _fake_wheel(tmp_path, extra={"tpu_mlir/cross_toolchains/ppl_compile/inc/../../../../escape.h": b"x"})
    assert cli.main(["toolchain", "install", "--wheel", str(wheel)]) == 1
    assert not (tmp_path / "escape.h").exists() and not (tmp_path / "toolchains" / "9.9.9").exists()


def test_install_rejects_a_file_that_is_not_a_tpu_mlir_wheel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bogus = tmp_path / "other-1.0-py3-none-any.whl"
    bogus.write_bytes(b"")
    assert cli.main(["toolchain", "install", "--wheel", str(bogus)]) == 1
    assert "not a tpu_mlir-<version>-*.whl" in capsys.readouterr().err


def _fake_tpu_mlir_site(site: Path, version: str = "1.30.2") -> Path:
    """An installed tpu_mlir distribution whose Python code must never run."""
    package = site / "tpu_mlir"
    ppl = _fake_sdk(package / "cross_toolchains" / "ppl_compile", with_libs=False)
    (package / "lib").mkdir()
    for name in setup.RUNTIME_LIBRARIES["bm1684x"]:
        (package / "lib" / name).write_bytes(b"")
    (package / "__init__.py").write_text("raise RuntimeError('tpu_mlir must not be imported by tilelang-tpu')\n")
    info = site / f"tpu_mlir-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tpu_mlir\nVersion: {version}\n")
    (info / "top_level.txt").write_text("tpu_mlir\n")
    (info / "RECORD").write_text("")
    return ppl


def test_discovery_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (3) an install by our command ...
    monkeypatch.delenv("PPL_PROJECT_ROOT", raising=False)
    monkeypatch.setenv(setup.TOOLCHAIN_DIR_ENV, str(tmp_path / "toolchains"))
    assert cli.main(["toolchain", "install", "--wheel", str(_fake_wheel(tmp_path))]) == 0
    # ... is shadowed by (2) an installed tpu_mlir package, found from its metadata without importing it ...
    ppl = _fake_tpu_mlir_site(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    found = setup.discover()
    assert found.found_by.startswith("installed tpu_mlir 1.30.2 package") and found.ppl_root == ppl
    assert found.missing_libraries("bm1684x") == [] and found.env["PPL_PROJECT_ROOT"] == str(ppl)
    assert "tpu_mlir" not in sys.modules
    # ... which is shadowed by (1) an explicit PPL_PROJECT_ROOT.
    sdk = _fake_sdk(tmp_path / "sdk")
    monkeypatch.setenv("PPL_PROJECT_ROOT", str(sdk))
    found = setup.discover()
    assert found.found_by == "$PPL_PROJECT_ROOT (no envsetup.sh; used as is)" and found.ppl_root == sdk


# ----------------------------------------------------------------------------------------
# Never a toolchain from the current directory (issue 11, item 7)
# ----------------------------------------------------------------------------------------


def _hijacking_tpu_mlir(folder: Path, marker: Path) -> None:
    """A ``tpu_mlir`` in ``folder`` whose ppl-compile would record that it was executed."""
    ppl = folder / "tpu_mlir" / "cross_toolchains" / "ppl_compile"
    _fake_sdk(ppl, with_libs=False)
    (ppl / "bin" / "ppl-compile").write_text(f"#!/bin/sh\ntouch {marker}\nexit 0\n")
    info = folder / "tpu_mlir-6.6.6.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tpu_mlir\nVersion: 6.6.6\n")
    (info / "top_level.txt").write_text("tpu_mlir\n")


@pytest.mark.parametrize("kind", ["empty", "hijacking"])
def test_tpu_mlir_in_the_current_directory_is_never_the_toolchain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    workdir = tmp_path / "project"
    workdir.mkdir()
    marker = tmp_path / "executed"
    if kind == "empty":
        (workdir / "tpu_mlir").mkdir()
    else:
        _hijacking_tpu_mlir(workdir, marker)
    monkeypatch.delenv("PPL_PROJECT_ROOT", raising=False)
    monkeypatch.chdir(workdir)
    for entry in ("", ".", str(workdir)):  # how `python -c`, `python -m` and a script in the folder see it
        monkeypatch.syspath_prepend(entry)
        assert setup.tpu_mlir_package() is None or not str(setup.tpu_mlir_package()[0]).startswith(str(workdir))
    found = setup.discover()
    assert str(workdir) not in str(found.ppl_root) and "6.6.6" not in found.found_by
    assert not marker.exists()


# ----------------------------------------------------------------------------------------
# envsetup.sh hardening (issue 11, item 11)
# ----------------------------------------------------------------------------------------


def test_listing_never_runs_envsetup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tilelang_tpu.target import probe

    sdk = _fake_sdk(tmp_path / "sdk")
    marker = tmp_path / "sourced"
    _envsetup(sdk, f"touch {marker}\n" + GOOD_ENVSETUP)
    monkeypatch.setenv("PPL_PROJECT_ROOT", str(sdk))
    availability = probe()
    assert not marker.exists(), "the availability probe (tilecore list) sourced envsetup.sh"
    assert "not run for this listing" in availability.reason
    setup.find_toolchain()  # compiling and doctor do run it
    assert marker.exists()


def test_hanging_envsetup_is_killed_with_its_children_and_the_failure_is_memoised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sdk = _fake_sdk(tmp_path / "sdk")
    pids, runs = tmp_path / "pids", tmp_path / "runs"
    _envsetup(sdk, f"echo run >> {runs}\nsleep 300 &\necho $! > {pids}\nsleep 300\n")
    monkeypatch.setenv("PPL_PROJECT_ROOT", str(sdk))
    monkeypatch.setenv(setup.ENVSETUP_TIMEOUT_ENV, "1")
    for _ in range(2):  # the second caller (doctor after list, setup after the probe) does not wait again
        with pytest.raises(ToolchainError, match=r"did not finish within 1 s; it and everything it started were stopped"):
            setup.find_toolchain()
    assert runs.read_text().count("run") == 1
    child = int(pids.read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "the script's background child was left running"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_world_writable_sdk_is_warned_about(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    sdk = _fake_sdk(tmp_path / "sdk")
    _envsetup(sdk, GOOD_ENVSETUP)
    sdk.chmod(0o777)
    monkeypatch.setenv("PPL_PROJECT_ROOT", str(sdk))
    with caplog.at_level("WARNING", logger="tilelang_tpu"):
        found = setup.discover()
    assert any("world-writable" in w and str(sdk) in w for w in found.warnings)
    assert any("world-writable" in note for note in found.as_toolchain().notes)
    assert "chmod o-w" in caplog.text


# ----------------------------------------------------------------------------------------
# `toolchain install`: progress and one install at a time (issue 12)
# ----------------------------------------------------------------------------------------


def test_install_shows_progress_for_download_and_unpacking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = _fake_wheel(tmp_path)
    monkeypatch.setenv("TILELANG_TPU_PROGRESS", "1")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    fetched = cli.fetch(wheel.as_uri(), downloads)  # the direct download path, from a local file source
    assert fetched.read_bytes() == wheel.read_bytes()
    monkeypatch.setenv(setup.TOOLCHAIN_DIR_ENV, str(tmp_path / "toolchains"))
    assert cli.main(["toolchain", "install", "--wheel", str(fetched)]) == 0
    err = capsys.readouterr().err
    assert f"downloading {wheel.name}" in err and f"unpacking {wheel.name}" in err and "100%" in err


_INSTALL = "import sys; from tilelang_tpu import cli; sys.exit(cli.main(['toolchain', 'install', '--wheel', sys.argv[1]]))"


def test_a_second_install_waits_for_the_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    wheel = _fake_wheel(tmp_path)
    root = tmp_path / "toolchains"
    root.mkdir()
    monkeypatch.setenv(setup.TOOLCHAIN_DIR_ENV, str(root))
    lock = filelock.FileLock(str(root / ".install-9.9.9.lock"))
    with lock:  # this test is the first install
        second = subprocess.Popen([sys.executable, "-c", _INSTALL, str(wheel)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert second.stdout is not None
        assert "is running; waiting for it" in second.stdout.readline()
        cli._install_locked("9.9.9", wheel, force=False)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert "already installed" in out and "unpacking" not in err, "the second install unpacked again"


_TILECORE = "import sys; from tilecore.cli import main; sys.exit(main(sys.argv[1:]))"


def test_tilecore_list_and_doctor_with_a_hanging_envsetup(tmp_path: Path) -> None:
    """Before: `tilecore list` sourced envsetup.sh; a hanging one made it take 60+ s and left the
    script's child running; doctor paid the timeout again."""
    sdk = _fake_sdk(tmp_path / "sdk")
    runs, pids = tmp_path / "runs", tmp_path / "pids"
    _envsetup(sdk, f"echo run >> {runs}\nsleep 300 &\necho $! > {pids}\nsleep 300\n")
    env = {**os.environ, "PPL_PROJECT_ROOT": str(sdk), setup.ENVSETUP_TIMEOUT_ENV: "2"}
    listing = subprocess.run([sys.executable, "-c", _TILECORE, "list"], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert "tpu" in listing.stdout, listing.stdout + listing.stderr
    assert not runs.exists(), "tilecore list executed envsetup.sh"
    doctor = subprocess.run(
        [sys.executable, "-c", _TILECORE, "doctor", "--target", "tpu"], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert "did not finish within 2 s" in doctor.stdout + doctor.stderr, doctor.stdout + doctor.stderr
    assert runs.read_text().count("run") == 1, "the failure was not memoised: doctor ran the script twice"
    child = int(pids.read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "the script's background child was left running (orphan)"
