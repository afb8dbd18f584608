"""One supported tilelang range: defined once (tilecore._version), used by every pyproject and the gate."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tilecore._version import TILELANG_REQUIREMENT, version_in_range

ROOT = Path(__file__).resolve().parents[1]


def _root_conftest() -> types.ModuleType:
    """The repository's conftest.py as a module (it is pytest's, not importable by name)."""
    spec = importlib.util.spec_from_file_location("tilecore_root_conftest", ROOT / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


thin_grid = _root_conftest().thin_grid
PYPROJECTS = sorted(p for p in ROOT.rglob("pyproject.toml") if ".venv" not in p.parts and "build" not in p.parts)


def test_supported_range_is_one_series() -> None:
    spec = SpecifierSet(TILELANG_REQUIREMENT)
    assert "0.1.15" in spec and "0.1.15.post1" in spec
    assert "0.1.14" in spec and "0.1.13" not in spec and "0.1.16" not in spec  # the two releases CI tests


#: Plain releases around the bounds, and the forms the quick check leaves to packaging.
VERSIONS = [
    "0.1.14",
    "0.1.15",
    "0.1.15.0",
    "0.1.15.0.0",
    "0.1.15.9",
    "0.1.16",
    "0.1.16.0",
    "0.1",
    "0.1.0",
    "0",
    "0.2",
    "1.0",
    "00.01.15",
    "0.1.015",
    "0.1.15rc1",
    "0.1.16rc1",
    "0.1.16.dev0",
    "0.1.15.post1",
    "0.1.15.dev3",
    "0.1.14.post9",
    "0.1.15+cu128",
    "0.1.16+local",
    "1.2.3",
    "1.2.2.9",
    "1.3.0",
    "1.2.99",
]


@pytest.mark.parametrize("requirement", [TILELANG_REQUIREMENT, ">=0.1,<0.2", ">=1.2.3,<1.3", "~=0.1.15", "==0.1.15"])
def test_the_quick_version_check_agrees_with_packaging(requirement: str) -> None:
    """The activation-time check without ``packaging`` (plain releases) answers as ``packaging`` does."""
    spec = SpecifierSet(requirement)
    for version in VERSIONS:
        expected = spec.contains(version.split("+")[0], prereleases=True)
        assert version_in_range(version, requirement) is expected, (requirement, version)


def _requirements(path: Path) -> list[Requirement]:
    project = tomllib.loads(path.read_text())["project"]
    texts = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        texts.extend(extra)
    return [Requirement(text) for text in texts if "{{" not in text]


def test_every_pyproject_uses_the_supported_range() -> None:
    assert len(PYPROJECTS) >= 5, PYPROJECTS  # tilecore, three plugins, democpu
    naming = {}
    for path in PYPROJECTS:
        for requirement in _requirements(path):
            if requirement.name == "tilelang":
                naming[path.relative_to(ROOT).as_posix()] = requirement.specifier
    assert "pyproject.toml" in naming, "tilecore itself must require tilelang"
    wrong = {path: str(spec) for path, spec in naming.items() if spec != SpecifierSet(TILELANG_REQUIREMENT)}
    assert not wrong, f"pyprojects whose tilelang range differs from {TILELANG_REQUIREMENT}: {wrong}"


def test_no_other_range_is_written_in_code_or_docs() -> None:
    """Messages and docs quote the range through TILELANG_REQUIREMENT, never a copy."""
    pattern = re.compile(r"tilelang\s*(?:>=|<|\[)\s*0\.\d+\.\d+")
    offenders = []
    for path in [*ROOT.glob("tilecore/**/*.py"), *ROOT.glob("plugins/*/tilelang_*/**/*.py"), *ROOT.glob("examples/democpu/**/*.py")]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line) and "TILELANG_REQUIREMENT = " not in line:
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, offenders


def test_the_window_skips_only_files_tilelang_is_not_on_the_path_of() -> None:
    """`make test-tilelang-window` leaves out WINDOW_SAME (docs/tilelang-releases.md, "What the window runs"):
    each listed file exists, is named in that section, and runs no TileLang program of its own (hand-written
    PPL, workers, locks, toolchain files), except the soak, whose kernels are the conformance suite's add,
    which the window runs on tpu and democpu."""
    makefile = (ROOT / "Makefile").read_text()
    tests_dir = re.search(r"^TPU_TESTS\s*:=\s*(\S+)", makefile, re.MULTILINE)
    listed = re.search(r"^WINDOW_SAME \?=((?:.*\\\n)*.*)$", makefile, re.MULTILINE)
    assert tests_dir and listed
    files = [f.replace("$(TPU_TESTS)", tests_dir.group(1)) for f in listed.group(1).replace("\\\n", " ").split()]
    assert len(files) == 5, files
    section = (ROOT / "docs" / "tilelang-releases.md").read_text().split("## What the window runs", 1)[1].split("\n## ", 1)[0]
    uses_tilelang = re.compile(r"^\s*(import tilelang\b|from tilelang\b)|tilelang\.(compile|jit)\b|@T\.prim_func", re.MULTILINE)
    for file in files:
        path = ROOT / file
        assert path.is_file(), file
        assert f"`{path.name}`" in section, f"{path.name} is left out of the window but not explained in docs/tilelang-releases.md"
        if path.name != "test_tpu_soak.py":
            assert not uses_tilelang.search(path.read_text()), f"{file} compiles TileLang: it belongs in the window"
    assert "--pyargs tilecore.conformance --tilecore-target=tpu" in makefile.split("test-tilelang-window:", 1)[1]


def test_thin_grid_keeps_each_functions_ends_and_spreads_the_rest() -> None:
    """`--max-cases-per-test=K` (the window): at most K cases of a function, always its first and last."""
    grid = [f"t.py::test_a[{n}]" for n in (1, 63, 64, 65, 128)]
    ids = ["t.py::test_plain", *grid, "t.py::test_b[x]", "t.py::test_b[y]"]
    assert thin_grid(ids, 0) == ids
    assert thin_grid(ids, 3) == ["t.py::test_plain", grid[0], grid[2], grid[4], "t.py::test_b[x]", "t.py::test_b[y]"]
    assert thin_grid(ids, 2) == ["t.py::test_plain", grid[0], grid[4], "t.py::test_b[x]", "t.py::test_b[y]"]
    assert thin_grid(ids, 1) == ["t.py::test_plain", grid[0], "t.py::test_b[x]"]
    for most in range(1, 7):
        kept = thin_grid(ids, most)
        assert len([i for i in kept if "test_a[" in i]) == min(most, len(grid))
        assert kept == [i for i in ids if i in kept]  # collection order


def test_the_window_thins_only_parametrised_grids_and_says_why() -> None:
    """The window passes WINDOW_CASES to the hook, and the docs give the measurement behind it."""
    makefile = (ROOT / "Makefile").read_text()
    cases = re.search(r"^WINDOW_CASES \?= (\d+)$", makefile, re.MULTILINE)
    assert cases and "--max-cases-per-test=$(WINDOW_CASES)" in makefile.split("test-tilelang-window:", 1)[1]
    section = (ROOT / "docs" / "tilelang-releases.md").read_text().split("## What the window runs", 1)[1].split("\n## ", 1)[0]
    assert "WINDOW_CASES" in section and f"at most {cases.group(1)} cases" in section
    # The hook itself, on a real grid of the tpu suite: what pytest keeps is what thin_grid keeps.
    target = "plugins/tilelang_tpu/tests/test_tpu_select_generality.py"

    def collected(*options: str) -> list[str]:
        command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *options, target]
        out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout
        return [line for line in out.splitlines() if "::" in line]

    everything = collected()
    assert len(everything) > 3 * int(cases.group(1))
    assert collected(f"--max-cases-per-test={cases.group(1)}") == thin_grid(everything, int(cases.group(1)))
