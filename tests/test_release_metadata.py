"""What a release needs from the five distributions' metadata and docs (RELEASING.md).

One family version in lockstep; the same LICENSE, Project-URLs, build-backend pin and Python floor
everywhere; a declared dependency for every third-party import; package-page READMEs that work on the
package index; install hints that name only our own distributions and say how to install before the
first upload; no user-facing message pointing at a docs/ file a wheel does not ship.  The build and
install checks themselves (twine, check-wheel-contents, a fresh venv) are tools/release.py.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tilecore._version import PROJECT_URL, __version__, docs_url

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import release  # noqa: E402  (tools/release.py: the list of distributions and the family version)

PROJECTS = {name: ROOT / folder for name, folder, _ in release.DISTRIBUTIONS}
PACKAGES = {
    "tilecore": ROOT / "tilecore",
    "tilelang-tpu": ROOT / "plugins/tilelang_tpu/tilelang_tpu",
    "tilelang-cuda": ROOT / "plugins/tilelang_cuda/tilelang_cuda",
    "tilelang-hip": ROOT / "plugins/tilelang_hip/tilelang_hip",
    "tilelang-democpu": ROOT / "examples/democpu/tilelang_democpu",
}
#: Import name -> the distribution that provides it.
PROVIDERS = {
    "tilelang": "tilelang",
    "tvm": "tilelang",  # tilelang ships its own tvm package
    "tvm_ffi": "apache-tvm-ffi",
    "torch": "torch",
    "pluggy": "pluggy",
    "packaging": "packaging",
    "filelock": "filelock",
    "platformdirs": "platformdirs",
    "tqdm": "tqdm",
    "redis": "redis",
    "ray": "ray",
    "pytest": "pytest",
    "tilecore": "tilecore",
}
#: Imports that are optional at run time, each guarded where it is imported.
OPTIONAL = {
    "tilecore": {"redis", "ray", "pytest"},  # extras [remote], [ray] / the conformance suite, run under pytest
    "tilelang-tpu": {"torch_tpu"},  # SophGo's card runtime, only with a card (devices.py)
}
#: tilelang-* distributions on the package index that are forks replacing tilelang itself.
FORKS = {"tilelang-rocm", "tilelang-ascend", "tilelang-paddle", "tilelang-mlir-ascend"}
BUILD_REQUIRES = ["hatchling>=1.27,<1.28"]


def pyproject(name: str) -> dict:  # type: ignore[type-arg]
    return tomllib.loads((PROJECTS[name] / "pyproject.toml").read_text())


def test_family_version_in_lockstep() -> None:
    """One version everywhere: each package's __version__, its installed metadata, the tilecore
    range every backend declares, the template's range, and the newest CHANGELOG release."""
    assert release.family_version() == __version__
    version = Version(__version__)
    series = f"tilecore>={version.major}.{version.minor},<{version.major}.{version.minor + 1}"
    for name, _, version_file in release.DISTRIBUTIONS:
        meta = pyproject(name)
        assert "version" not in meta["project"] and meta["project"]["dynamic"] == ["version"], name
        assert (PROJECTS[name] / meta["tool"]["hatch"]["version"]["path"]).resolve() == (ROOT / version_file).resolve(), name
        # The installed metadata (make installs editable) must match: else a reinstall is missing.
        assert importlib.metadata.version(name) == __version__, f"{name}: installed metadata is stale; rerun make"
        if name != "tilecore":
            (requirement,) = [r for r in meta["project"]["dependencies"] if r.startswith("tilecore")]
            assert str(Requirement(requirement).specifier) == str(Requirement(series).specifier), (name, requirement)
    from tilecore.template import tilecore_requirement

    assert tilecore_requirement() == series
    released = re.findall(r"^## \[(\d[^\]]*)\]", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert released[0] == __version__, f"CHANGELOG.md's newest release is {released[0]}, not {__version__}"


@pytest.mark.parametrize("name", list(PROJECTS))
def test_license_urls_classifiers_python(name: str) -> None:
    meta = pyproject(name)
    project = meta["project"]
    assert meta["build-system"]["requires"] == BUILD_REQUIRES
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert (PROJECTS[name] / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    assert sorted(project["urls"]) == ["Changelog", "Documentation", "Issues", "Source"]
    assert all(url.startswith(PROJECT_URL) for url in project["urls"].values()), project["urls"]
    # Requires-Python claims exactly the versions CI tests (3.11: .ci/run), listed as classifiers too.
    floor = project["requires-python"].removeprefix(">=")
    tested = [c.rsplit(" :: ", 1)[1] for c in project["classifiers"] if re.match(r"Programming Language :: Python :: 3\.\d+$", c)]
    assert project["requires-python"] == ">=3.11" and tested == [floor], (project["requires-python"], tested)
    assert "Typing :: Typed" in project["classifiers"] and project["authors"] and project["maintainers"]


def test_tool_targets_are_the_python_floor() -> None:
    """ruff's target-version and mypy's python_version are Requires-Python's floor (3.11), not an older one."""
    meta = pyproject("tilecore")
    floor = meta["project"]["requires-python"].removeprefix(">=")
    assert meta["tool"]["ruff"]["target-version"] == "py" + floor.replace(".", "")
    assert meta["tool"]["mypy"]["python_version"] == floor
    for name in PROJECTS:  # the plugins' pyprojects inherit the root's tool settings: none of their own
        assert name == "tilecore" or not {"ruff", "mypy"} & set(pyproject(name).get("tool", {})), name


#: Files that may name the project's public address (pyprojects, package pages, docs, code, CI).
_URL_FILES = ("*.md", "*.toml", "*.py", "*.tmpl", "*.yml")


def test_project_urls_are_one_canonical_set() -> None:
    """All five distributions carry the same four Project-URLs under PROJECT_URL (Documentation: a page that
    exists), and every address of the project written anywhere in the repository is PROJECT_URL, so the
    one string RELEASING.md says to confirm before the first tag is the only one to change."""
    pages = set()
    for name in PROJECTS:
        urls = pyproject(name)["project"]["urls"]
        assert urls["Source"] == PROJECT_URL, (name, urls)
        assert urls["Changelog"] == f"{PROJECT_URL}/blob/main/CHANGELOG.md" and urls["Issues"] == f"{PROJECT_URL}/issues", (name, urls)
        page = urls["Documentation"].removeprefix(f"{PROJECT_URL}/blob/main/")
        assert page.startswith("docs/") and (ROOT / page).is_file(), (name, urls["Documentation"])
        pages.add(page)
    assert len(pages) == len(PROJECTS), "each distribution's Documentation is its own page"
    project = re.compile(r"https?://(?:www\.)?github\.com/([\w.-]+/[\w.-]*tilecore[\w.-]*)", re.IGNORECASE)
    canonical = PROJECT_URL.removeprefix("https://github.com/")
    seen = 0
    for pattern in _URL_FILES:
        for path in ROOT.rglob(pattern):
            if {".venv", "build", "dist", ".git"} & set(path.parts) or any(p.startswith(".venv-") for p in path.parts):
                continue
            for found in project.findall(path.read_text(errors="replace")):
                assert found.removesuffix(".git") == canonical, f"{path.relative_to(ROOT)} names {found}, not {PROJECT_URL}"
                seen += 1
    assert seen >= 20, seen  # the pyprojects alone name it 20 times
    assert PROJECT_URL in (ROOT / "RELEASING.md").read_text() and PROJECT_URL.startswith("https://github.com/")


def _third_party_imports(package: Path) -> set[str]:
    names = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    local = {package.name, "_tilecore_conformance", "_tilecore_autoload"}
    return {n for n in names if n not in sys.stdlib_module_names and n not in local and n != "__future__"}


@pytest.mark.parametrize("name", list(PROJECTS))
def test_every_import_is_a_declared_dependency(name: str) -> None:
    project = pyproject(name)["project"]
    declared = {Requirement(r).name for r in project["dependencies"]}
    extras = {Requirement(r).name for group in project.get("optional-dependencies", {}).values() for r in group}
    for module in sorted(_third_party_imports(PACKAGES[name])):
        if module in OPTIONAL.get(name, set()):
            assert module not in PROVIDERS or PROVIDERS[module] in extras | declared or module == "pytest", (name, module)
            continue
        assert module in PROVIDERS, f"{name} imports {module!r}: add its distribution to PROVIDERS and to the dependencies"
        assert PROVIDERS[module] in declared, f"{name} imports {module!r} but does not depend on {PROVIDERS[module]!r}"
    for requirement in map(Requirement, project["dependencies"]):
        if requirement.name == "torch":
            assert any(spec.operator == "<" for spec in requirement.specifier), f"{name}: torch needs an upper bound"


def _links(markdown: str) -> list[str]:
    return re.findall(r"\]\(([^)]+)\)", markdown)


@pytest.mark.parametrize("name", list(PROJECTS))
def test_package_page_readme_works_on_the_index(name: str) -> None:
    """The long description: absolute links only, no make targets, and a pip install line that also
    says how to install before the packages are on the index."""
    readme = PROJECTS[name] / pyproject(name)["project"]["readme"]
    text = readme.read_text()
    assert text.startswith(f"# {name}\n")
    relative = [link for link in _links(text) if not link.startswith("https://")]
    assert relative == [], f"{readme}: links that break on the package page: {relative}"
    assert not re.search(r"`make (demo|test)`", text), f"{readme} tells a package user to run make"
    assert f"pip install {name}" in text or f"pip install tilecore {name}" in text or name == "tilecore"
    assert "--find-links dist" in text, f"{readme}: say how to install from built wheels until the first upload"


def test_install_hints_name_only_our_plugins() -> None:
    """known_targets.json maps target names to our own distributions (never a fork such as
    tilelang-rocm), and each has a source folder for the before-the-index hint."""
    data = json.loads((ROOT / "tilecore" / "known_targets.json").read_text())
    for kind, dist in data["distributions"].items():
        assert dist in PROJECTS and dist not in FORKS, (kind, dist)
        source = ROOT / data["sources"][dist]
        assert source.resolve() == PROJECTS[dist].resolve(), (dist, source)


def test_unknown_target_hint_says_how_to_install_without_the_index() -> None:
    from tilecore._registry import Registry, messages

    message = str(messages.unknown_target(Registry(), "nvidia"))
    assert "pip install tilelang-cuda" in message
    assert "pip install ./plugins/tilelang_cuda" in message and PROJECT_URL in message
    assert "pip install --find-links dist tilelang-cuda" in message
    assert not any(fork in message for fork in FORKS)


def _string_constants(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]


def test_no_message_points_at_a_repository_only_docs_file() -> None:
    """A wheel ships no docs/: messages and help texts name a URL or a command instead."""
    found = []
    for package in PACKAGES.values():
        for path in sorted(package.rglob("*.py")) + sorted(package.rglob("*.tmpl")):
            if path.suffix == ".tmpl":
                lines = [(i + 1, line) for i, line in enumerate(path.read_text().splitlines()) if not line.lstrip().startswith("#")]
            else:
                lines = _string_constants(path)
            for lineno, text in lines:
                if re.search(r"(?<![/\w])docs/[\w-]+", text) and "://" not in text:
                    found.append(f"{path.relative_to(ROOT)}:{lineno}: {text.strip()[:100]}")
    assert found == [], "\n".join(found)
    assert docs_url("user-guide.md") == f"{PROJECT_URL}/blob/v{__version__}/docs/user-guide.md"


#: Markdown files a newcomer reads, and the phrase that must accompany each `pip install tilelang-*`.
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "backends").glob("*.md")),
    *sorted((ROOT / "examples").rglob("*.py")),
]


def test_docs_pip_install_of_our_packages_says_how_before_the_index() -> None:
    """Until the first upload, each `pip install tilecore|tilelang-*` in the docs is followed (within
    a few lines) by the clone or built-wheels way, or points at the section that gives it."""
    ours = "|".join(re.escape(name) for name in PROJECTS)
    missing = []
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.search(rf"pip install (-U )?(tilecore )?'?({ours})\b", line):
                window = "\n".join(lines[max(0, i - 3) : i + 8])
                if not re.search(r"--find-links|\./plugins/|\./examples/|before the first upload|make dist", window, re.IGNORECASE):
                    missing.append(f"{doc.relative_to(ROOT)}:{i + 1}: {line.strip()}")
    assert missing == [], "\n".join(missing)


def test_tpu_constructs_command_prints_the_table() -> None:
    """A wheel user gets the construct table (and what to write instead of a refused construct)."""
    from tilelang_tpu.codegen.doc_table import markdown_table

    proc = subprocess.run(
        [sys.executable, "-m", "tilelang_tpu.cli", "constructs"], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert markdown_table() in proc.stdout and "T.gemm" in proc.stdout


def _doc_block(doc: str, marker: str) -> str:
    block = doc.split(f"<!-- {marker}:start -->", 1)[1].split(f"<!-- {marker}:end -->", 1)[0].strip()
    return block.split("\n", 1)[1].rsplit("```", 1)[0]


@pytest.mark.slow
def test_guide_minimal_backend_packages(tmp_path: Path) -> None:
    """F8: the guide's §6 pyproject and module build and install as they are, and the installed
    backend declares its target (found through the entry points the snippet writes)."""
    doc = (ROOT / "docs" / "writing-a-backend.md").read_text()
    # Renamed throughout, so a reader's own minicpu installed in this venv cannot clash (issue 22, F7).
    project = tmp_path / "tilelang-tcguidemini"
    (project / "tilelang_tcguidemini").mkdir(parents=True)
    (project / "pyproject.toml").write_text(_doc_block(doc, "minimal-pyproject").replace("minicpu", "tcguidemini"))
    (project / "tilelang_tcguidemini" / "__init__.py").write_text(_doc_block(doc, "minimal-backend").replace("minicpu", "tcguidemini"))
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(project)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    code = "import tilecore; r = tilecore.resolve_target('tcguidemini'); print(r.distribution, r.spec.name)"
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, check=False)
    assert run.returncode == 0 and run.stdout.split() == ["tilelang-tcguidemini", "tcguidemini"], run.stdout + run.stderr[-3000:]
