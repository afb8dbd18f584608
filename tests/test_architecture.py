"""The layers of docs/architecture.md are the import-linter contracts of ``.importlinter``, and they bite.

``lint-imports`` (run by ``make test``) passes on the tree; planted in a copy of the package, an
upward import (a helper importing the registry) and an import circle (in the contract) each break
the contracts they should.  The picture in the docs lists the same layers as the ``layers``
contract, and every contract is named in the docs, so neither can drift.
"""

from __future__ import annotations

import ast
import configparser
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".importlinter"
DOC = ROOT / "docs" / "architecture.md"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

needs_linter = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (make setup installs it)")


def _contracts() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(CONFIG)
    return parser


def _layer_rows(text: str) -> list[str]:
    return [" | ".join(part.strip() for part in line.split("|")) for line in text.strip().splitlines() if line.strip()]


def _lint(cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """lint-imports' exit status and its report with whitespace collapsed (it wraps long lines)."""
    result = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True, text=True, env=env, timeout=300)
    return result.returncode, " ".join((result.stdout + result.stderr).split())


def test_the_picture_lists_the_layers_contract() -> None:
    doc = DOC.read_text()
    block = doc.split("<!-- layers:", 1)[1].split("<!-- /layers -->", 1)[0]
    drawn = [re.split(r"\s{2,}", line.strip(" │"), maxsplit=1)[0] for line in block.splitlines() if line.startswith(" │")]
    assert drawn == _layer_rows(_contracts()["importlinter:contract:layers"]["layers"])
    assert _contracts()["importlinter:contract:layers"]["containers"].strip() == "tilecore"


def test_every_contract_is_described_in_the_docs() -> None:
    doc = DOC.read_text()
    names = [section.split(":")[-1] for section in _contracts().sections() if section.startswith("importlinter:contract:")]
    assert len(names) >= 7
    for name in names:
        assert f"| `{name}` |" in doc, f"docs/architecture.md does not describe contract {name!r}"


def test_every_core_module_states_its_concept() -> None:
    for path in sorted((ROOT / "tilecore").rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstring = ast.get_docstring(tree)
        assert docstring and len(docstring.split()) >= 5, f"{path.relative_to(ROOT)} has no opening docstring stating its concept"


@needs_linter
def test_lint_imports_keeps_every_contract() -> None:
    status, report = _lint(ROOT)
    assert status == 0, report
    assert "0 broken" in report


def _planted(tmp_path: Path, module: str, line: str) -> tuple[int, str]:
    """lint-imports on a copy of tilecore whose ``module`` (a path under tilecore/) gets ``line``."""
    copy = tmp_path / "tree"
    shutil.copytree(ROOT / "tilecore", copy / "tilecore", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(CONFIG, copy / ".importlinter")
    target = copy / "tilecore" / module
    source = target.read_text()
    anchor = "from __future__ import annotations\n"
    assert anchor in source
    target.write_text(source.replace(anchor, anchor + "\n" + line + "\n", 1))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(copy), os.environ.get("PYTHONPATH", "")]))
    return _lint(copy, env)


@needs_linter
def test_a_planted_upward_import_fails(tmp_path: Path) -> None:
    status, report = _planted(tmp_path, "kit/paths.py", "import tilecore._registry.registry  # noqa: F401  planted")
    assert status != 0
    assert "tilecore layers: features over machinery over helpers over the contract BROKEN" in report
    assert "the helpers import only the contract BROKEN" in report
    assert "tilecore.kit.paths -> tilecore._registry.registry" in report


@needs_linter
def test_a_planted_circle_fails(tmp_path: Path) -> None:
    status, report = _planted(tmp_path, "errors.py", "import tilecore.targets  # noqa: F401  planted")
    assert status != 0
    assert "no import circles among siblings BROKEN" in report
    assert "tilecore.errors -> tilecore.targets" in report
