"""A newcomer's first commands, as issue 22 reproduced them (F3-F7 and the cosmetic items).

Each test runs the real command (a subprocess of this venv) and checks what the user sees.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tcsupport import FakeSite, good_backend

from tilecore.conformance.report import shorten

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from tilecore.cli import main; sys.exit(main(sys.argv[1:]))"]


def _no_rocm() -> bool:
    return not (os.environ.get("ROCM_PATH") or shutil.which("hipcc") or Path("/opt/rocm/bin/hipcc").exists())


@pytest.mark.skipif(not _no_rocm(), reason="this machine has ROCm: the hip platform is present here")
def test_doctor_is_green_on_a_cpu_machine(tmp_path: Path) -> None:
    """F5/F4: with no ROCm, no AMD GPU and no SophGo toolchain, `tilecore doctor` exits 0 and reports
    both platforms as "not on this machine", each with its real fix printed once."""
    empty = tmp_path / "no-toolchain"
    empty.mkdir()
    env = {**os.environ, "TILECORE_PLUGINS": "hip,tpu,democpu", "TILELANG_TPU_TOOLCHAIN_DIR": str(empty)}
    env.pop("PPL_PROJECT_ROOT", None)
    human = subprocess.run([*CLI, "doctor"], env=env, capture_output=True, text=True, timeout=600, check=False)
    assert human.returncode == 0, human.stdout[-4000:] + human.stderr[-2000:]
    out = " ".join(human.stdout.split())
    assert "0 toolchain error(s); 2 target(s) not on this machine" in out, out[-1500:]
    assert "toolchain: not on this machine" in out
    assert "check with explicit options" not in out, "F4: a fix that repeats the check just run"
    assert out.count("fix: run `tilelang-tpu toolchain install`") == 1 and "Fix: run `tilelang-tpu" not in out
    assert out.count("fix: install ROCm >= 6.3") == 1
    data = json.loads(subprocess.run([*CLI, "doctor", "--json"], env=env, capture_output=True, text=True, timeout=600).stdout)
    assert data["summary"]["toolchain_errors"] == 0 and data["summary"]["not_on_this_machine"] == 2
    # Asking for the platform explicitly makes its absence an error again.
    explicit = subprocess.run([*CLI, "doctor", "--target", "hip:gfx942"], env=env, capture_output=True, text=True, timeout=600)
    assert explicit.returncode == 1 and "1 toolchain error(s)" in " ".join(explicit.stdout.split())


def test_list_json_summary_means_one_thing(tmp_path: Path) -> None:
    """`summary.targets` counts declared targets (null before loading); names are `target_names`."""
    env = {**os.environ, "TILECORE_PLUGINS": "democpu"}
    plain = json.loads(subprocess.run([*CLI, "list", "--json"], env=env, capture_output=True, text=True, timeout=300).stdout)
    loaded = json.loads(subprocess.run([*CLI, "list", "--load", "--json"], env=env, capture_output=True, text=True, timeout=300).stdout)
    assert plain["schema_version"] == loaded["schema_version"] == 2
    assert plain["summary"]["targets"] is None
    assert plain["summary"]["target_names"] == sum(len(b["metadata_targets"]) for b in plain["backends"])
    declared = [t for b in loaded["backends"] for t in b["targets"]]
    assert loaded["summary"]["targets"] == len(declared) == 1  # democpu (the others are blocked)
    assert loaded["summary"]["target_names"] == 2  # democpu, democpu-host


def test_conformance_detail_is_cut_at_a_word() -> None:
    detail = "AssertionError: the second process compiled again instead of loading /tmp/pytest-of-root/pytest-36/caches1/x"
    short = shorten(detail, 90)
    assert len(short) <= 90 and short.endswith("...")
    kept = short.removesuffix("...")
    assert detail.startswith(kept) and detail[len(kept)] == " ", short
    assert shorten("short", 90) == "short"


def test_entry_point_fix_says_to_reinstall(fake_site: FakeSite) -> None:
    """F6: a target missing from the installed metadata: the fix also says to reinstall, since a
    pyproject.toml may already list it (an editable install keeps the old entry points)."""
    source = """
from tilecore import TargetSpec, hookimpl
@hookimpl
def tilecore_declare_targets():
    return [TargetSpec("fixa", "listed"), TargetSpec("fixb", "not in the metadata")]
"""
    fake_site.add("tilelang-fixa", "1.0", "tcfake_fixa", source, entry="fixa", targets=("fixa",))
    proc = fake_site.run(
        """
        import tilecore
        try:
            tilecore.resolve_target("fixa")
        except tilecore.TilecoreError as err:
            print(" ".join(str(err).split()))
        """,
        TILECORE_PLUGINS="fixa",
    )
    assert "fixb" in proc.stdout and "reinstall it" in proc.stdout and "pip install -e ." in proc.stdout, proc.stdout + proc.stderr[-3000:]


@pytest.mark.slow
def test_conformance_p_form_under_a_cache_isolating_conftest() -> None:
    """F3: `pytest -p tilecore.conformance` from the repository (whose root conftest isolates caches
    per test) passes the disk-cache case.  The --pyargs form, and both forms from a folder holding a
    venv of the built wheels, run in the release check (tools/release.py)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tilecore.conformance",
            "--tilecore-target=democpu",
            "-k",
            "copy or disk_cache",
            "-p",
            "no:xdist",
            "-q",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0 and "disk_cache_second_process  passed" in proc.stdout, proc.stdout[-5000:] + proc.stderr[-2000:]


@pytest.mark.slow
def test_demo_prints_only_its_table(tmp_path: Path) -> None:
    """The demo's output is its table: tilelang's INFO lines do not interleave with it."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py"), "democpu"], capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("democpu ") and "max |error| vs torch 0.00e+00" in proc.stdout
    assert "INFO" not in proc.stdout + proc.stderr, proc.stderr[-2000:]


def test_doctor_fails_when_tilecore_left_a_backends_range(fake_site: FakeSite) -> None:
    """`pip install -U tilecore` past a backend's declared range only warns; doctor says it and exits 1."""
    from tilecore import __version__

    package = fake_site.add("tilelang-oldb", "0.1.0", "tcfake_oldb", good_backend(), entry="goodt", targets=("goodt", "goodt-alias"))
    metadata = package.parent / "tilelang_oldb-0.1.0.dist-info" / "METADATA"
    metadata.write_text(metadata.read_text() + "Requires-Dist: tilecore<0.2,>=0.1\n")
    proc = subprocess.run([*CLI, "doctor"], env=fake_site.env(TILECORE_PLUGINS="goodt"), capture_output=True, text=True, timeout=600)
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 1 and "installed versions: PROBLEM" in out and "0 failed" in out, out[-3000:]
    assert f"tilelang-oldb 0.1.0 requires tilecore<0.2,>=0.1, but tilecore {__version__} is installed" in out
    from tilecore.cli.requirements import problems

    assert problems(["tilelang-democpu", "tilelang-tpu", "tilecore"]) == []  # ours agree with each other


def test_toolchain_install_without_pip_says_so(tmp_path: Path) -> None:
    """`tilelang-tpu toolchain install` in a venv without pip names the missing pip, not the network."""
    code = "import sys; sys.modules['pip'] = None; from tilelang_tpu.cli import main; sys.exit(main(['toolchain', 'install']))"
    env = {**os.environ, "TILELANG_TPU_TOOLCHAIN_DIR": str(tmp_path / "toolchains")}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "has no pip" in proc.stderr and "ensurepip" in proc.stderr and "--wheel PATH" in proc.stderr
    assert "Traceback" not in proc.stderr and "network" not in proc.stderr


@pytest.mark.parametrize("name", ["acme", "averyveryverylongvendorname"])
def test_template_is_lint_clean_standalone(tmp_path: Path, name: str) -> None:
    """The generated backend passes ruff's import sorting and pyflakes in its own folder (no config of
    ours applies there), for short and long names; its description does not repeat the target name."""
    # Rendered, not `new-backend NAME`: that rightly refuses a name an installed backend has (a vendor's
    # own tilelang-acme in this venv), and this test is about the files (issue 22, F7).
    _write_backend(name, tmp_path / name)
    ruff = Path(sys.executable).with_name("ruff")
    proc = subprocess.run(
        [str(ruff), "check", "--isolated", "--select", "I,F", "."], cwd=tmp_path / name, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    target_py = (tmp_path / name / f"tilelang_{name}" / "target.py").read_text()
    assert f'description="{name}:' not in target_py


def _write_backend(name: str, destination: Path) -> None:
    """The files `tilecore new-backend NAME` writes, without its check that NAME is not installed."""
    from tilecore import template

    for relative, text in template.render(name).items():
        (destination / relative).parent.mkdir(parents=True, exist_ok=True)
        (destination / relative).write_text(text)


def _doc_block(doc: str, marker: str) -> str:
    block = doc.split(f"<!-- {marker}:start -->", 1)[1].split(f"<!-- {marker}:end -->", 1)[0].strip()
    return block.split("\n", 1)[1].rsplit("```", 1)[0]


#: The tests that failed with a vendor's `acme` (the name `--tilecore-target`'s help suggests) or the
#: guide's `minicpu` installed where the suite runs (issue 22, F7: the lint test's `new-backend acme`;
#: the guide's backend, before its tests renamed it), and the name checks of `new-backend`, which read
#: every installed backend.  With both installed, 221 tests of the 21 files that list, load or name
#: backends were run: only the first failed.
F7_TESTS = [
    "tests/test_release_newcomer.py::test_template_is_lint_clean_standalone",
    "tests/test_template.py::test_doc_minimal_backend",
    "tests/test_release_metadata.py::test_guide_minimal_backend_packages",
    "tests/test_template.py::test_name_validation",
]


@pytest.mark.slow
def test_suite_is_hermetic_to_installed_vendor_backends(tmp_path: Path) -> None:
    """F7: a vendor's `acme` from `tilecore new-backend acme` and the guide's one-module `minicpu`, both
    really pip-installed (into a folder put on PYTHONPATH, so their entry points are found exactly as
    in site-packages), and the tests that failed beside them pass."""
    site = tmp_path / "site"
    acme = tmp_path / "tilelang-acme"
    _write_backend("acme", acme)
    doc = (ROOT / "docs" / "writing-a-backend.md").read_text()
    minicpu = tmp_path / "tilelang-minicpu"
    (minicpu / "tilelang_minicpu").mkdir(parents=True)
    (minicpu / "pyproject.toml").write_text(_doc_block(doc, "minimal-pyproject"))
    (minicpu / "tilelang_minicpu" / "__init__.py").write_text(_doc_block(doc, "minimal-backend"))
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(acme), str(minicpu)]
    if importlib.util.find_spec("hatchling") is not None:
        install.insert(4, "--no-build-isolation")  # offline when the build backend is already here
    proc = subprocess.run(install, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))}
    env.pop("TILECORE_PLUGINS", None)
    env.pop("TILECORE_DISABLE_PLUGIN_AUTOLOAD", None)
    listed = subprocess.run([*CLI, "list"], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert "tilelang-acme 0.1.0" in listed.stdout and "tilelang-minicpu 0.1.0" in listed.stdout, listed.stdout + listed.stderr[-2000:]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "-rfE", *F7_TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert proc.returncode == 0 and " failed" not in proc.stdout and " passed" in proc.stdout, proc.stdout[-6000:] + proc.stderr[-2000:]
